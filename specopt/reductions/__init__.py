"""Routes: structure recognition, data extraction and result mapping for each method.

Importing this package imports every route module listed in ``ROUTE_MODULES``; each module
registers its route. To add a route, write ``specopt/reductions/<name>.py`` and add its name here.
"""

from __future__ import annotations

import importlib

from .base import Match, Route, RouteMismatch, RouteResult
from .registry import get_route, register_route, route_names, routes_in_order

ROUTE_MODULES: tuple[str, ...] = (
    "conic",
    "iterated_sdp",
    "bregman",
    "matrix_generation",
    "dual_cd",
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
