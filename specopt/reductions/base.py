"""The contract every route implements.

A route is one module in ``specopt/reductions`` that defines a :class:`Route` subclass and
registers an instance with :func:`specopt.reductions.registry.register_route`. ``solve.py`` asks
each registered route to :meth:`Route.recognize` the problem; a match carries the extracted data,
a miss carries the reason (shown by ``specopt.explain``).

:meth:`Route.solve` is shared (as CVXPY's ``Solver.solve``: apply -> solve -> invert): the match,
one option check, the progress printer, then ``invert(run(data))``. A route declares
``OPTIONS``, ``UNIT`` and ``STATUS_MAP`` and writes :meth:`Route.run` (its solver on the
extracted data) and :meth:`Route.invert` (the solver's result as a :class:`RouteResult` on the
user's problem); infeasible / unbounded results come from :meth:`RouteResult.no_point`.

Rules: a route never mutates the user's problem (``solve.py`` writes the result through
``Problem.unpack``); it raises :class:`RouteMismatch` when asked to solve something it does not
recognize, and ``cvxpy.error.SolverError`` when its numerical method fails.
"""

from __future__ import annotations

import abc
import dataclasses
import difflib
import math
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import cvxpy as cp

from .._progress import progress_for, user_history
from ..certificate import relative_gap
from ..validate import check_options

if TYPE_CHECKING:
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


#: A check the route measured itself: ``(passed, measured, tolerance)`` (``gate.Check``).
CheckTriple = tuple[bool, float | None, float | None]


@dataclass
class RouteResult:
    """What a route hands back to ``solve.py``; values in the user's objective sense.

    ``primal`` maps every ``Variable.id`` of the problem to its value; ``dual`` maps
    ``Constraint.id`` to dual values where the route knows them. ``bound`` is a proven bound on
    the optimum (lower when minimizing, upper when maximizing) or None.

    The gate (``specopt.gate.verify``) reads the route's own evidence from the typed fields:
    ``converged`` (the method's stopping test passed), ``inner_accurate`` (every inner solve the
    claim rests on was accurate), ``stationarity`` and ``dual_check`` (checks the route
    measured, ``(passed, measured, tolerance)``) and ``status_check`` (the proof of an
    infeasible / unbounded status: ``(name, passed, measured, tolerance)``); None where the
    route has no such evidence. The objects of such a proof, which the gate re-derives on the
    user's problem (``specopt.gate_claims``): ``farkas`` (an ``infeasible`` claim's multipliers
    by constraint id, CVXPY's dual convention) and ``ray`` (an ``unbounded`` claim's feasible
    point and improving direction, each by variable id). ``extra`` holds route-specific data
    for display only.
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
    converged: bool | None = None
    inner_accurate: bool | None = None
    stationarity: CheckTriple | None = None
    dual_check: CheckTriple | None = None
    status_check: tuple[str, bool, float, float] | None = None
    farkas: dict[int, Any] | None = None
    ray: tuple[dict[int, Any], dict[int, Any]] | None = None

    @classmethod
    def no_point(cls, status: str, sense: int, backend: str = "", **fields: Any) -> RouteResult:
        """An infeasible / unbounded result: no point, no duals, no bound; the objective is
        CVXPY's ``+inf`` / ``-inf`` for it (``sense`` +1 minimize, -1 maximize)."""
        infeasible = status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE)
        fields.update(primal={}, dual={}, bound=None, gap=None)
        return cls(status=status, objective=(sense if infeasible else -sense) * math.inf,
                   backend=backend, **fields)

    def without_point(self, status: str, sense: int) -> RouteResult:
        """This result reclassified infeasible / unbounded (:meth:`no_point`, the rest kept)."""
        kept = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("status", "objective", "primal", "dual", "bound", "gap")}
        return RouteResult.no_point(status, sense, **kept)

    def certificate_extra(self) -> dict[str, Any]:
        """``extra`` plus the route's evidence under the names the certificate shows
        (``converged``, ``inner_solves_accurate``, ``stationarity``, ``dual_check``,
        ``status_check``) where the route gave it."""
        typed = {"converged": self.converged, "inner_solves_accurate": self.inner_accurate,
                 "stationarity": self.stationarity, "dual_check": self.dual_check,
                 "status_check": self.status_check}
        return {**{k: v for k, v in typed.items() if v is not None}, **self.extra}


@dataclass(frozen=True)
class RunContext:
    """What :meth:`Route.run` and :meth:`Route.invert` see besides the route's data: the
    user's problem (read only), the match, the backend asked for, the progress callback (None
    unless verbose) and the start time of the solve."""

    problem: cp.Problem
    match: Match
    solver: str | None
    verbose: Any
    callback: Callable | None
    t0: float

    @property
    def data(self) -> Any:
        return self.match.data

    def elapsed(self) -> float:
        """Seconds since the solve started."""
        return time.perf_counter() - self.t0

    def log(self, message: str) -> None:
        """A ``(specopt) <time>: message`` line on the progress printer, if there is one."""
        say = getattr(self.callback, "log", None)
        if say is not None:
            say(message)


class Route(abc.ABC):
    """A way of solving a class of problems.

    Class attributes: ``name`` (what ``route=`` takes), ``is_global`` (False for routes that only
    find stationary points of non-convex problems) and ``priority`` (lower is asked first by
    ``route="auto"``; the conic route is the fallback and is asked last).

    :meth:`solve` is the same for every route (as CVXPY's ``Solver.solve``): match, option
    check, progress printer, then ``invert(run(data))``. A route declares ``OPTIONS`` (the option
    names it takes), ``UNIT`` (what one line of the progress table is; None: no specopt printer)
    and ``STATUS_MAP`` (its solver's statuses -> CVXPY's, :meth:`map_status`), and writes
    :meth:`run` (call the solver) and :meth:`invert` (map its result to a
    :class:`RouteResult`).
    """

    name: ClassVar[str]
    is_global: ClassVar[bool] = True
    priority: ClassVar[int] = 50
    #: whether the route can solve problems whose data are Dask arrays without computing them
    #: into memory (``row_quad_forms`` with a ``dask.array`` V); the others refuse them
    accepts_dask: ClassVar[bool] = False
    #: the option names the route takes (``specopt.solve(prob, route=..., **opts)``)
    OPTIONS: ClassVar[tuple[str, ...]] = ()
    #: True when options the route does not know go on to its inner solver (a conic backend):
    #: then only names close to one of ``OPTIONS`` are errors (``max_iter`` for ``max_iters``
    #: must not become a backend setting); ``INNER_OPTIONS`` are named in that error as well
    PASSES_OPTIONS: ClassVar[bool] = False
    INNER_OPTIONS: ClassVar[tuple[str, ...]] = ()
    #: what one line of the progress table counts ("iter", "round", "MM step"); None: the
    #: route prints no table of its own
    UNIT: ClassVar[str | None] = "iteration"
    #: the solver's statuses -> CVXPY statuses; any other ends as ``optimal_inaccurate`` (a
    #: point the gate checks)
    STATUS_MAP: ClassVar[Mapping[str, str]] = {}

    def recognize(self, problem: cp.Problem) -> Match:
        """Decide whether ``problem`` has this route's structure; extract its data if so.

        By default :meth:`extract` reads the data (a :class:`RouteMismatch` is the miss and
        its reason) and :meth:`describe` says what matched; routes that decide otherwise
        override this method."""
        try:
            data = self.extract(problem)
        except RouteMismatch as exc:
            return Match.no(str(exc))
        return Match(True, self.describe(data), data)

    def extract(self, problem: cp.Problem) -> Any:
        """The route's data of ``problem``; raises :class:`RouteMismatch` saying why not."""
        raise NotImplementedError(f"route {self.name!r} has no extract()")

    def describe(self, data: Any) -> str:
        """What matched, in words (the reason of a positive :class:`Match`)."""
        return "structure matches"

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

    def solve(
        self,
        problem: cp.Problem,
        match: Match | None,
        *,
        solver: str | None = None,
        verbose: bool = False,
        **opts: Any,
    ) -> RouteResult:
        """Solve a recognized problem (apply -> run -> invert). Must not modify ``problem``."""
        match = self.ensure_match(problem, match)
        solver = self.resolve_solver(problem, solver)
        self.check_options(problem, solver, opts)
        callback = None
        if self.UNIT is not None:
            callback = progress_for(verbose, self.name, match.reason, unit=self.UNIT,
                                    transform=self.to_user(match.data))
        ctx = RunContext(problem, match, solver, verbose, callback, time.perf_counter())
        return self.invert(self.run(match.data, ctx, **opts), ctx)

    def run(self, data: Any, ctx: RunContext, **opts: Any) -> Any:
        """Run the route's solver on the extracted ``data``; returns the solver's result."""
        raise NotImplementedError(f"route {self.name!r} has no run()")

    def invert(self, raw: Any, ctx: RunContext) -> RouteResult:
        """Map the solver's result to the user's problem (values, duals, status, bound)."""
        raise NotImplementedError(f"route {self.name!r} has no invert()")

    def resolve_solver(self, problem: cp.Problem, solver: str | None) -> str | None:
        """The ``solver=`` the solve uses (the conic route picks its default backend here);
        by default the one asked for, None included."""
        return solver

    def to_user(self, data: Any) -> Callable[[float], float] | None:
        """The map from the solver's objective values to the user's (the progress printer and
        the history); None: the identity."""
        return None

    def primal_dual_result(self, res: Any, ctx: RunContext, status: str,
                           **fields: Any) -> RouteResult:
        """The result of a solver that reports a primal value ``res.primal`` and a dual bound
        ``res.dual`` (in its own form, with ``res.iterations`` and ``res.history``): both and
        the history in the user's terms (:meth:`to_user`), the gap of the pair
        (``certificate.relative_gap``), the route's name as backend; ``fields`` the rest
        (``primal``, ``dual``, ``solve_time``, ``extra``, ...)."""
        user = self.to_user(ctx.data)
        objective, bound = (user(res.primal), user(res.dual)) if user else (res.primal, res.dual)
        return RouteResult(status=status, objective=objective, bound=bound,
                           gap=relative_gap(objective, bound), backend=self.name,
                           iterations=res.iterations,
                           history=user_history(res.history, user), **fields)

    def map_status(self, solver_status: str) -> str:
        """The CVXPY status of a solver status (``STATUS_MAP``)."""
        return self.STATUS_MAP.get(solver_status, cp.OPTIMAL_INACCURATE)

    def known_options(self, problem: cp.Problem, solver: str | None
                      ) -> tuple[Collection[str] | None, str]:
        """The option names a solve takes (None: not checked here) and how errors name the
        route."""
        return (*self.OPTIONS, *self.INNER_OPTIONS), f"route {self.name!r}"

    def check_options(self, problem: cp.Problem, solver: str | None,
                      opts: Mapping[str, Any]) -> None:
        """Unknown options are a ``ValueError`` naming the known ones (``validate``)."""
        known, where = self.known_options(problem, solver)
        if known is None:
            return
        given = list(opts)
        if self.PASSES_OPTIONS:
            given = [k for k in given if k not in self.OPTIONS
                     and difflib.get_close_matches(k, self.OPTIONS, n=1, cutoff=0.8)]
        check_options(self.name, given, known, where=where)
