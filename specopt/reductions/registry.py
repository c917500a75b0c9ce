"""The route registry: adding a route is one module that calls :func:`register_route`."""

from __future__ import annotations

from .base import Route

_ROUTES: dict[str, Route] = {}


def register_route(route: Route) -> Route:
    """Register a route instance under ``route.name`` (idempotent: re-registering replaces)."""
    _ROUTES[route.name] = route
    return route


def get_route(name: str) -> Route:
    try:
        return _ROUTES[name]
    except KeyError:
        known = ", ".join(sorted(_ROUTES)) or "none"
        raise ValueError(f"unknown route {name!r}; known routes: {known}, or 'auto'") from None


def routes_in_order() -> list[Route]:
    """Routes in the order ``route="auto"`` asks them (priority, then name); conic is last."""
    return sorted(_ROUTES.values(), key=lambda r: (r.priority, r.name))


def route_names() -> list[str]:
    return [r.name for r in routes_in_order()]
