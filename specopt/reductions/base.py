"""The contract every route implements.

A route is one module in ``specopt/reductions`` that defines a :class:`Route` subclass and
registers an instance with :func:`specopt.reductions.registry.register_route`. ``solve.py`` asks
each registered route to :meth:`Route.recognize` the problem; a match carries the extracted data,
a miss carries the reason (shown by ``specopt.explain``).

Rules: a route never mutates the user's problem (``solve.py`` writes the result through
``Problem.unpack``); it raises :class:`RouteMismatch` when asked to solve something it does not
recognize, and ``cvxpy.error.SolverError`` when its numerical method fails.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import cvxpy as cp
    import numpy as np


class RouteMismatch(ValueError):
    """The problem does not have the structure the requested route needs."""


@dataclass
class Match:
    """Answer of :meth:`Route.recognize`.

    ``ok`` says whether the route applies; ``reason`` says why (or why not) in words a user can
    act on; ``data`` is whatever the route extracted for its solver.
    """

    ok: bool
    reason: str
    data: Any = None

    @classmethod
    def no(cls, reason: str) -> Match:
        return cls(False, reason)


@dataclass
class RouteResult:
    """What a route hands back to ``solve.py``; values in the user's objective sense.

    ``primal`` maps every ``Variable.id`` of the problem to its value; ``dual`` maps
    ``Constraint.id`` to dual values where the route knows them. ``bound`` is a proven bound on
    the optimum (lower when minimizing, upper when maximizing) or None.
    """

    status: str
    primal: dict[int, np.ndarray]
    objective: float | None
    backend: str
    dual: dict[int, Any] = field(default_factory=dict)
    bound: float | None = None
    gap: float | None = None
    iterations: int | None = None
    setup_time: float | None = None
    solve_time: float | None = None
    history: dict[str, list[float]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


class Route(abc.ABC):
    """A way of solving a class of problems.

    Class attributes: ``name`` (what ``route=`` takes), ``is_global`` (False for routes that only
    find stationary points of non-convex problems) and ``priority`` (lower is asked first by
    ``route="auto"``; the conic route is the fallback and is asked last).
    """

    name: ClassVar[str]
    is_global: ClassVar[bool] = True
    priority: ClassVar[int] = 50
    #: whether the route can solve problems whose data are Dask arrays without computing them
    #: into memory (``row_quad_forms`` with a ``dask.array`` V); the others refuse them
    accepts_dask: ClassVar[bool] = False

    @abc.abstractmethod
    def recognize(self, problem: cp.Problem) -> Match:
        """Decide whether ``problem`` has this route's structure; extract its data if so."""

    def pays_off(self, problem: cp.Problem, match: Match) -> tuple[bool, str]:
        """Whether ``route="auto"`` should pick this route for a recognized problem.

        Returns ``(decision, reason)``; the threshold behind it comes from a benchmark and is
        documented next to the code that implements it.
        """
        return True, "structure matches"

    def ensure_match(self, problem: cp.Problem, match: Match | None) -> Match:
        """``match`` when it is a positive one, else recognize ``problem`` again; raises
        :class:`RouteMismatch` (with the reason) when the route does not apply."""
        if match is not None and match.ok:
            return match
        match = self.recognize(problem)
        if not match.ok:
            raise RouteMismatch(f"route {self.name!r} does not apply: {match.reason}")
        return match

    @abc.abstractmethod
    def solve(
        self,
        problem: cp.Problem,
        match: Match,
        *,
        solver: str | None = None,
        verbose: bool = False,
        **opts: Any,
    ) -> RouteResult:
        """Solve a recognized problem. Must not modify ``problem``."""
