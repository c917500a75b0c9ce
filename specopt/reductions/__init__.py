"""Routes: structure recognition, data extraction and result mapping for each method.

Importing this package imports every module of this package that is not infrastructure
(``INFRASTRUCTURE``); each such module defines a route and registers it with
:func:`register_route`. Adding a route is therefore one module: ``specopt/reductions/<name>.py``.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import Match, Route, RouteMismatch, RouteResult
from .registry import get_route, register_route, route_names, routes_in_order

INFRASTRUCTURE = frozenset({"base", "registry", "canonicalize", "analysis", "conic_size"})

ROUTE_MODULES: tuple[str, ...] = tuple(
    sorted(
        info.name
        for info in pkgutil.iter_modules(__path__)
        if not info.name.startswith("_") and info.name not in INFRASTRUCTURE
    )
)

for _module in ROUTE_MODULES:
    importlib.import_module(f"{__name__}.{_module}")

__all__ = [
    "Match",
    "Route",
    "RouteMismatch",
    "RouteResult",
    "get_route",
    "register_route",
    "route_names",
    "routes_in_order",
]
