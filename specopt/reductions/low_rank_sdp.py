r"""Route "low_rank_sdp": one PSD matrix, sparse equality rows, Burer-Monteiro engine.

Recognized form (one square variable ``K``, declared ``symmetric=True`` or ``PSD=True``)::

    maximize / minimize   <C, K> + const        (cp.trace(K), cp.trace(C @ K), sums of entries)
    subject to            K >> 0                (or K declared PSD=True)
                          affine equalities in K (K[I, J] == v, K[I, I] + K[J, J] - 2 K[I, J] == d2,
                                                  any sparse linear functional of K)
                          cp.sum(K) == 0  or  K @ ones == 0      (centering, handled as Y^T 1 = 0)
                          cp.trace(K) <= t      (optional)

The recognizer (:func:`recognize_low_rank_sdp`, takes the problem) reads the normalized
description of :mod:`specopt.reductions.analysis` (parameters bound to their current values,
cached across a sweep): the objective's affine part gives ``C``, the equality rows' sparse affine
maps give the COO rows (never a dense ``m x n^2`` array), ``is_centering`` the centering rows
(``sum(K) == 0`` and ``K @ ones == 0`` alike; their map is built from the tree, not extracted by
CVXPY) and ``trace_scale`` the trace bound. Solved by
:func:`specopt.solvers.sdp.solve_low_rank_sdp` (certificate there). A bound on
``tr K`` for the certificate comes from the trace constraint, from fixed diagonal entries, or,
with centering, from edge-distance rows that connect all nodes (:func:`graph_trace_bound`).

Options (``specopt.solve(prob, route="low_rank_sdp", ...)``): ``tol`` (1e-5), ``rank``,
``max_rank``, ``max_iters``, ``inner_max_iters``, ``time_limit``, ``seed``, ``inner``,
``dense_threshold``, ``sigma_max``, ``warm_start`` (a previous ``extra["factor"]`` /
``extra["y"]`` pair as a tuple ``(Y, y)``), ``facial_reduction`` (False; True: restrict ``K`` to
the face exposed by fixed-distance cliques, :mod:`specopt.solvers.sdp.facial`, with the
bound made valid for the original problem; measured no faster on swiss roll / S-curve, see
docs/routes/low_rank_sdp.md).

Through ``route="auto"`` (from ``PAYS_OFF_MIN_N`` to ``PAYS_OFF_ANY_M_N``) the solve is a race
on a budget (:func:`race_plan`): the side with the smaller predicted time (the engine or the
conic route on the user's problem, :func:`predicted_seconds`) runs first and is stopped after
the other side's predicted time; then the other side. A conic leg counts only when the gate
backs its ``optimal`` / ``infeasible`` / ``unbounded``; the user's ``time_limit`` caps every
leg; the legs (side, budget, seconds, status, why) are in ``extra["legs"]`` (the certificate's
extra) and, verbose, one line each.
A route named by the user runs the engine (with the small-n Clarabel hand-over of
:func:`rescue_plan`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np

from .._progress import user_history
from ..solvers._status import SolverStatus
from ..solvers.sdp import OPTIMAL, UNBOUNDED, distance_rows, solve_low_rank_sdp
from ._low_rank_duals import route_duals
from ._low_rank_read import LRData, recognize_low_rank_sdp
from ._low_rank_status import decide_status
from .base import Match, Route, RouteResult, RunContext
from .registry import get_route, register_route

_ROUTE_OPTS = ("tol", "rank", "max_rank", "max_iters", "inner_max_iters", "time_limit", "seed",
               "inner", "dense_threshold", "sigma0", "eig_k", "sigma_max", "method")

#: ``route="auto"``'s rule (:func:`pays_off_rule`; n the side of K, m the rows). Measured with
#: benchmarks/low_rank_auto.py (one CVXPY model per family and size, each backend in its own
#: process, load 13-18 on 2 cores; JSON benchmarks/results/low_rank_auto.json), engine = the
#: first solve of the process (numba's one-off start-up, ~3.5 s at that load, ~0.5 s idle,
#: included), warm = after one small solve; times in s:
#:
#: ========== ===== ===== ====== ========== =========
#: family      n     m    engine   warm      Clarabel / SCS
#: maxcut      20    20    3.7     0.13      0.21 / 0.15
#: maxcut      50    50    4.2     0.19      3.1 / 0.67
#: maxcut      100   100   4.0     0.43      > 30 / 2.6
#: maxcut      150   150   6.0      -          - / 7.1   (an earlier, stopped run, load ~13)
#: theta       20    ~40   3.5     0.23      0.28 / 0.18
#: theta       50    ~250  3.8     0.47      3.0 / 1.4
#: theta       100   ~990  7.9     5.0       > 30 / 3.8
#: completion  20    40    3.2     0.21      0.18 / 0.52
#: completion  50    250   5.3     0.43      5.1 / 3.4
#: completion  100   1000  6.6     2.5       > 30 / 2.4
#: sde         20    ~80   4.7     0.36      0.23 / 1.5
#: sde         50    ~200  3.7     0.75      5.7 (inaccurate) / > 30
#: ========== ===== ===== ====== ========== =========
#:
#: (SDE n = 30, swiss roll seed 0: the engine ends uncertified after 31 s where Clarabel takes
#: 3.1 s and SCS > 60 s: a degenerate instance; the rule keeps it on the engine, since the
#: conic default there, SCS from n = 24, is slower still.)
#: SDPLIB (benchmarks/sdplib.py, same conditions): qap6 (n = 37, m = 229) cold engine 5.5 s
#: certified vs SCS > 70 s (Clarabel 1.1 s, inaccurate); qap8 (n = 65, m = 529 = 8.1 n) engine
#: 21.8 s certified vs SCS > 70 s (Clarabel fails); gpp100 (diagonal rows plus one dense row)
#: engine 1.95 s certified vs SCS 20 s "optimal" 4.4e-4 off the published value, Clarabel > 70 s.
#: Below ``PAYS_OFF_MIN_N`` (= 24, where the conic default turns from Clarabel to SCS) conic:
#: Clarabel takes 0.18-0.28 s at n = 20. Above ``PAYS_OFF_ANY_M_N`` the engine alone (the
#: generic solvers cannot run: Clarabel's dense KKT, SCS's eigendecompositions). In between no
#: shape rule separates the two sides: SCS's time follows the conditioning, not (n, m) (random
#: theta / completion at n = 200 with ~0.1 n^2 rows: SCS 5.4 / 1.7 s vs the engine 51 / 29 s;
#: SDPLIB theta4-6 with the same shape: SCS > 300 s vs the engine 14-79 s; completion at
#: n = 70-80: SCS 0.3-0.5 s vs 0.7-1.0 s; qap6 / qap8: SCS > 70 s). So ``auto`` runs a race on
#: a budget there (:func:`race_plan`): the side with the smaller predicted time first, stopped
#: after the other side's predicted time (:func:`predicted_seconds`), then the other side.
PAYS_OFF_MIN_N = 24
PAYS_OFF_ANY_M_N = 300

#: The cost model behind the race (seconds, wall, one thread, load 3-10 on 2 cores). Engine
#: (the sparse-row interior point at these sizes): ``a + b (n/100)^3 + c (m/1000)^2 +
#: d (m/1000)^3``, plus ``ENGINE_STARTUP`` in a process without numba loaded: fitted on fresh
#: processes of benchmarks/low_rank_auto.py --race (theta / completion at n = 30-200, max-cut at
#: n = 30-300; results/low_rank_auto_race_{theta_completion,maxcut}.json): within 0.5-1.6x of
#: theta, completion and max-cut from n = 100 (max-cut n = 300, m = 300: 1.0-1.1 s with the
#: start-up, where a first fit on theta / completion alone, n^3 coefficient 0.52, predicted 17 s
#: and sent it to SCS: 6.5-10.5 s). SCS: ``a + b (n/100)^2``, about the median of the conic route
#: on the same runs (0.6-21 s at one shape: a typical time, not a bound; the race's hand-over
#: covers the rest).
ENGINE_COST = (0.1, 0.04, 1.6, 0.02)
CONIC_COST = (0.3, 1.0)
#: The engine's one-off start-up in a process that has not loaded numba yet, when the problem
#: is above the NumPy twins' size (``specopt.solvers.sdp._solve.JIT_FREE_MAX_N`` / ``_NNZ``):
#: max-cut at n = 200-300 takes 1.0-1.3 s in a fresh process (load ~9) against 0.04 s warm at
#: n = 100 (one fresh process at load 3.4 took 6.3 s wall, 2.6 s CPU: a cold disk cache).
ENGINE_STARTUP = 1.0
#: The smallest budget of a race's first leg (CVXPY's compile of the conic side and the
#: engine's set-up take ~0.1-0.3 s at n = 50-100).
MIN_BUDGET = 0.5


def predicted_seconds(n: int, m: int, cold: bool = False) -> tuple[float, float]:
    """``(engine, conic)``: the cost model's typical times (``ENGINE_COST``, ``CONIC_COST``)
    for an ``n x n`` matrix with ``m`` rows; ``cold``: the engine's start-up included
    (``ENGINE_STARTUP``)."""
    a, b, c, d = ENGINE_COST
    engine = a + b * (n / 100) ** 3 + c * (m / 1000) ** 2 + d * (m / 1000) ** 3
    engine += ENGINE_STARTUP if cold else 0.0
    return engine, CONIC_COST[0] + CONIC_COST[1] * (n / 100) ** 2


#: The iterated-SDP route's ``inner="auto"`` uses the engine from this matrix side (each step the
#: sparse-row interior point while ``n <= MM_IP_MAX_N``, :mod:`specopt.solvers.sdp._solve`;
#: ``inner="low_rank"`` forces it,
#: ``"conic"`` never). Measured (user-written MVE, digits k = 5 / spokes k = 3, inner="auto"
#: conic backend vs the engine, same run, load 3-8, whole iterated solves): n = 16: Clarabel
#: 2.1 / 1.0 s vs engine 3.7 / 1.7 s; n = 26 (SCS: the default backend from n = 24, where
#: Clarabel's dense KKT side n(n+1)/2 passes 300): SCS 3.2 / 17.1 s vs 3.7 / 2.6 s; n = 41: SCS
#: 10.3 s vs 2.7 s (digits). So the engine takes over where SCS would (n = 24): no cliff there.
ITERATED_MIN_N: int | None = 24

#: Status checks (infeasible / unbounded) when the engine ends uncertified. Up to
#: ``FIRST_BUDGET_MAX_N`` the engine first runs at most ``FIRST_BUDGET`` seconds: a feasible
#: problem of that size is certified well within it (the interior point: 0.01-0.3 s at n <= 60,
#: SDE / theta / max-cut, load ~6), an infeasible one does not stall for minutes (SDPLIB infp1/2,
#: infd1/2, n = 30: 24-200 s before); then the checks; then, undecided, the rest of the time.
FIRST_BUDGET = 2.0
FIRST_BUDGET_MAX_N = 60
#: Up to this side, a problem the engine has not certified within ``FIRST_BUDGET`` (and the
#: status checks did not decide) is handed to Clarabel on the user's problem before the engine
#: goes on; its result is kept when Clarabel reports ``optimal`` (the gate checks it as any
#: other). Measured (benchmarks/low_rank_auto.py, sde family, load ~13): the degenerate swiss
#: roll at n = 30 (seed 0, a nearly rigid k-NN graph: the rows pin K down, the value moves 0.5 %
#: at a 1e-6 residual) ran the engine 52 s to ``optimal_inaccurate`` where Clarabel certifies
#: in 0.9-1.8 s; Clarabel at n = 24-30 takes 0.26-0.9 s, at n = 50 4.2 s and inaccurate.
CLARABEL_RESCUE_MAX_N = 40


def engine_cold(n: int, nnz: int) -> bool:
    """Whether the engine would pay numba's start-up now (not loaded yet, the problem above the
    NumPy twins' size)."""
    from ..solvers._jit import numba_loaded
    from ..solvers.sdp._solve import JIT_FREE_MAX_N, JIT_FREE_MAX_NNZ

    return not (n <= JIT_FREE_MAX_N and nnz <= JIT_FREE_MAX_NNZ) and not numba_loaded()


def pays_off_rule(n: int, m: int, centered: bool, cold: bool = False) -> tuple[bool, str]:
    """``route="auto"``'s choice for an ``n x n`` matrix with ``m`` rows (thresholds and their
    measurements above; ``centered`` counts as one more row): ``(pays off, why)``; from
    ``PAYS_OFF_MIN_N`` to ``PAYS_OFF_ANY_M_N`` the route runs the race of :func:`race_plan`."""
    m_eff = m + int(centered)
    if n < PAYS_OFF_MIN_N:
        return False, (f"n = {n} < {PAYS_OFF_MIN_N}: Clarabel takes a fraction of a second here "
                       "(the engine's numba start-up alone 0.5-4 s)")
    if n > PAYS_OFF_ANY_M_N:
        return True, (f"n = {n} > {PAYS_OFF_ANY_M_N}: beyond what Clarabel / SCS hold in "
                      "reasonable time")
    return True, "race: " + race_plan(n, m_eff, None, cold)[0].why


@dataclass(frozen=True)
class Leg:
    """One leg of a solve: ``side`` "engine" or a conic backend ("SCS", "CLARABEL") on the
    user's problem, run for at most ``budget`` seconds (None: the rest of the user's time);
    ``why`` for the verbose line and the result's record; ``opts`` extra options of that leg's
    solver (tests cap iterations with them); ``after_budget_only``: a conic leg run only when
    the engine leg before it was stopped by its budget (not when it ended on its own)."""

    side: str
    budget: float | None
    why: str
    opts: dict = field(default_factory=dict)
    after_budget_only: bool = False


def race_plan(n: int, m: int, solver: str | None, cold: bool = False) -> list[Leg]:
    """``auto``'s legs for ``PAYS_OFF_MIN_N <= n <= PAYS_OFF_ANY_M_N``: the side with the smaller
    predicted time (:func:`predicted_seconds`) first, for at most the other side's predicted
    time (so a first leg that stalls costs at most about what the other side would have taken:
    at most ~2x the faster side when the model is right); then the other side. After an engine
    first leg the conic side gets twice its predicted time (Clarabel, up to
    ``CLARABEL_RESCUE_MAX_N``, an interior point, runs to its end), then the engine the rest.
    ``solver``: the conic backend the user named (else Clarabel up to
    ``CLARABEL_RESCUE_MAX_N``, SCS above); ``cold``: the engine's start-up counted
    (:func:`engine_cold`). An engine first leg gets at least twice its own predicted time (the
    model is within 0.5-1.6x of the measured times)."""
    engine_s, conic_s = predicted_seconds(n, m, cold)
    conic = (solver or ("CLARABEL" if n <= CLARABEL_RESCUE_MAX_N else "SCS")).upper()
    pred = f"predicted engine {engine_s:.2g} s, {conic} {conic_s:.2g} s at n = {n}, m = {m}"
    if conic_s < engine_s:
        return [Leg(conic, max(MIN_BUDGET, engine_s),
                    f"{conic} first for at most the engine's predicted time ({pred})"),
                Leg("engine", None, f"{conic} uncertified within its budget: the engine")]
    return [Leg("engine", max(FIRST_BUDGET, conic_s, 2 * engine_s),
                f"the engine first for at most {conic}'s predicted time ({pred})"),
            Leg(conic, None if conic == "CLARABEL" else max(FIRST_BUDGET, 2 * conic_s),
                f"engine uncertified within its budget: {conic}"),
            Leg("engine", None, f"{conic} uncertified: the engine for the rest of the time")]


def rescue_plan(n: int, solver: str | None, limit: float | None) -> list[Leg]:
    """The legs of ``route="low_rank_sdp"`` named by the user: the engine; up to
    ``FIRST_BUDGET_MAX_N`` first for ``FIRST_BUDGET`` seconds (then the status checks), up to
    ``CLARABEL_RESCUE_MAX_N`` (no backend named) Clarabel when that budget passed, then the
    engine for the rest of the time."""
    if n > FIRST_BUDGET_MAX_N or (limit is not None and limit <= FIRST_BUDGET):
        return [Leg("engine", None, "the engine")]
    legs = [Leg("engine", FIRST_BUDGET, f"the engine first for {FIRST_BUDGET:g} s at n = {n}")]
    if n <= CLARABEL_RESCUE_MAX_N and solver is None:
        legs.append(Leg("CLARABEL", None, f"engine uncertified after {FIRST_BUDGET:g} s at "
                        f"n = {n}: Clarabel on the problem", after_budget_only=True))
    return [*legs, Leg("engine", None, "the engine for the rest of the time")]


class LRMatch(Match):
    """The route's match; ``race`` is set by ``auto`` (:meth:`LowRankSDPRoute.pays_off`) when
    the route is to race the conic side (:func:`race_plan`); a route named by the user does
    not race."""

    race: bool = False


class LowRankSDPRoute(Route):
    """Burer-Monteiro augmented Lagrangian for one PSD matrix with sparse rows (global)."""

    name = "low_rank_sdp"
    is_global = True
    #: asked before matrix generation (30), which also reads a pure SDP with a trace row as an
    #: LP over the spectraplex and takes it from n = 100 with 2000 rows: random theta at
    #: n = 150 (2211 rows) ran > 90 s there against SCS 5 s and the engine 13 s (load ~4,
    #: benchmarks/low_rank_auto.py --race); problems with LP variables (PSDBoost's slacks), where
    #: matrix generation was measured, are not of this route's form
    priority = 25

    def extract(self, problem: cp.Problem) -> LRData:
        return recognize_low_rank_sdp(problem)

    def describe(self, data: LRData) -> str:
        parts = [f"{data.A.m} sparse rows"]
        if data.centered:
            parts.append("centering")
        if data.trace_bound is not None:
            parts.append("trace bound")
        return (f"one {data.n} x {data.n} PSD matrix, linear objective, "
                f"{', '.join(parts)}: low-rank factorization K = Y Y^T")

    def recognize(self, problem: cp.Problem) -> LRMatch:
        match = super().recognize(problem)
        return LRMatch(match.ok, match.reason, match.data)

    def pays_off(self, problem: cp.Problem, match: Match) -> tuple[bool, str]:
        d: LRData = match.data
        pays, why = pays_off_rule(d.n, d.A.m, d.centered, engine_cold(d.n, d.A.rows.size))
        if pays and d.n <= PAYS_OFF_ANY_M_N and isinstance(match, LRMatch):
            match.race = True  # auto picked the route: race the conic side (race_plan)
        return pays, why

    OPTIONS = (*_ROUTE_OPTS, "warm_start", "facial_reduction")
    UNIT = "iter"
    STATUS_MAP = {SolverStatus.OPTIMAL: cp.OPTIMAL, SolverStatus.UNBOUNDED: cp.UNBOUNDED}

    def to_user(self, data: LRData) -> Callable[[float], float]:
        def user(v: float) -> float:  # the solver's objective -> the user's
            return v + data.offset

        return user

    def run(self, d: LRData, ctx: RunContext, *, warm_start: Any = None,
            facial_reduction: bool = False, **kw: Any) -> LROutcome:
        """The legs of the solve (:class:`Leg`): through ``auto`` the race of
        :func:`race_plan`, else :func:`rescue_plan`; one leg with a face or a warm start. A leg
        that certifies ends the solve; an engine leg that ends uncertified gets the status
        checks (``decide_status``: infeasible / unbounded); every leg's time is capped by what
        is left of the user's ``time_limit``. The legs are recorded in the result's ``extra``."""
        face = _face(d, facial_reduction)
        warm = warm_start is not None and not isinstance(warm_start, bool)
        if warm:
            kw["Y0"], kw["y0"] = warm_start[0], warm_start[1]
        trace = StepTrace(ctx.t0, self.to_user(d), ctx.callback)
        limit = kw.get("time_limit")
        if face is not None or warm:
            legs = [Leg("engine", None, "the engine (a face or a warm start given)")]
        elif getattr(ctx.match, "race", False):
            legs = race_plan(d.n, d.A.m + int(d.centered), ctx.solver,
                             engine_cold(d.n, d.A.rows.size))
        else:
            legs = rescue_plan(d.n, ctx.solver, limit)
        return _Legs(self, d, ctx, kw, face, trace).run(legs, limit)

    def invert(self, out: LROutcome, ctx: RunContext) -> RouteResult:
        if out.decided is not None:
            out.decided.extra["legs"] = out.legs
            return out.decided
        d: LRData = ctx.data
        res = out.res
        status = self.map_status(res.status)
        if status == cp.UNBOUNDED:  # a recession ray and a feasible point (solver docstring)
            return RouteResult.no_point(
                status, -1 if d.sense == "max" else 1, backend="low_rank_sdp",
                solve_time=res.solve_time, history=_history(res, out.trace, self.to_user(d)),
                ray=_ray_proof(d, res), extra={"ray": res.ray, "engine_status": res.status,
                                               "legs": out.legs})
        out.trace.end_at(res, d.offset)  # the returned (polished / best) point ends the trace
        return RouteResult(
            status=status,
            primal={d.K.id: res.Y @ res.Y.T},
            objective=res.objective + d.offset,
            backend="low_rank_sdp",
            dual=self._duals(d, res, out.face),
            bound=None if res.bound is None else res.bound + d.offset,
            gap=res.gap,
            iterations=res.iterations,
            setup_time=0.0,
            solve_time=res.solve_time,
            history=_history(res, out.trace, self.to_user(d)),
            extra={"rank": res.rank, "lambda_min": res.lambda_min,
                   "primal_residual": res.primal_residual, "factor": res.Y, "y": res.y,
                   "inner_iterations": res.inner_iterations, "rank_growths": res.rank_growths,
                   "trace_bound_used": res.trace_bound_used, "engine_status": res.status,
                   "face_dim": None if out.face is None else out.face.dim, "legs": out.legs},
        )

    @staticmethod
    def _duals(d: LRData, res, face: Any = None) -> dict[int, Any]:
        # on a face the engine's lambda_min is the reduced slack's, no bound on the full one
        return route_duals(d, res.y, res.mu, None if face is not None else res.lambda_min)


class StepTrace:
    """The trace of every engine step (interior point and factored), in the user's objective,
    with time stamps since ``t0``: the certificate's history. Called as the engine's callback;
    passes each call on to the progress printer ``callback``."""

    KEYS = ("step", "time", "objective", "gap", "violation")

    def __init__(self, t0: float, user: Callable[[float], float],
                 callback: Callable | None) -> None:
        self.t0, self.user, self.callback = t0, user, callback
        self.series: dict[str, list[float]] = {k: [] for k in self.KEYS}

    def _append(self, *values: float | None) -> None:
        for key, v in zip(self.KEYS, values, strict=True):
            self.series[key].append(math.nan if v is None else float(v))

    def __call__(self, it: int, objective: float, gap: float | None = None,
                 violation: float | None = None, **extra: Any) -> None:
        self._append(it, time.perf_counter() - self.t0, self.user(objective), gap, violation)
        if self.callback is not None:
            self.callback(it, objective=objective, gap=gap, violation=violation, **extra)

    def end_at(self, res: Any, offset: float) -> None:
        """Append the returned point when it is not the last step (polished / best)."""
        obj = self.series["objective"]
        if obj and res.objective + offset != obj[-1]:
            self._append(res.iterations, res.solve_time, res.objective + offset, res.gap,
                         res.primal_residual)


@dataclass(frozen=True)
class LROutcome:
    """How the route's legs ended: the last engine result (None when no engine leg ran), a
    result decided otherwise (the infeasible / unbounded result the status checks proved, a
    conic leg's certified result, or a conic leg's uncertified one when no engine leg ran; or
    None), the step trace, the face used and the record of the legs (``extra["legs"]``)."""

    res: Any
    decided: RouteResult | None
    trace: StepTrace
    face: Any
    legs: list[dict] = field(default_factory=list)


#: A conic backend's time-limit option.
_TIME_OPTION = {"SCS": "time_limit_secs", "CLARABEL": "time_limit"}


class _Legs:
    """Runs a route's :class:`Leg` list on one problem (:meth:`LowRankSDPRoute.run`)."""

    def __init__(self, route: LowRankSDPRoute, d: LRData, ctx: RunContext, kw: dict,
                 face: Any, trace: StepTrace) -> None:
        self.route, self.d, self.ctx, self.kw, self.face, self.trace = (
            route, d, ctx, kw, face, trace)
        self.record: list[dict] = []

    def run(self, legs: list[Leg], limit: float | None) -> LROutcome:
        ctx = self.ctx
        res = decided = fallback = None
        engine_done = stopped_by_budget = False  # an engine leg ended on its own / on budget
        for i, leg in enumerate(legs):
            left = None if limit is None else limit - ctx.elapsed()
            if i and left is not None and left <= 0:
                break
            if leg.side == "engine" and engine_done:
                continue  # the engine ended on its own: running it again gives the same
            if leg.side != "engine" and leg.after_budget_only and not stopped_by_budget:
                continue
            cap = leg.budget if left is None else (
                left if leg.budget is None else min(leg.budget, left))
            announce = (f"leg {len(self.record) + 1}: {leg.why}"
                        + ("" if cap is None else f"; at most {cap:.3g} s"))
            if len(legs) > 1 and self.record:
                ctx.log(announce)  # a hand-over; the first leg is announced only if one follows
            t0 = ctx.elapsed()
            if leg.side == "engine":
                res = self._engine(cap, leg.opts)
                certified = res.status in (OPTIMAL, UNBOUNDED)
                status = res.status
                if not certified:
                    decided = self._status_of(res, limit)
                    stopped_by_budget = cap is not None and res.solve_time >= 0.9 * cap
                    engine_done = not stopped_by_budget
                if len(self.record) or i + 1 < len(legs):
                    res.solve_time = ctx.elapsed()
            else:
                out, status = self._conic(leg.side, cap, leg.opts)
                certified = status == "certified"
                if certified:
                    decided = out
                elif out is not None:
                    fallback = out
            self.record.append({"leg": leg.side, "budget": cap, "seconds": ctx.elapsed() - t0,
                                "status": str(status), "why": leg.why})
            if certified or decided is not None:
                break
            if len(legs) > 1:
                if len(self.record) == 1:
                    ctx.log(announce)  # the first leg, now that it hands over (a table of
                    # iterations that certifies stays uninterrupted, as in CVXPY's output)
                ctx.log(f"{leg.side} ended uncertified ({status}) after "
                        f"{ctx.elapsed() - t0:.3g} s")
        if decided is None and res is None:  # the user's time ran out in a conic leg
            if fallback is not None:
                decided = fallback  # its uncertified result (the gate judges it)
            else:  # it failed: the engine's point at once, uncertified and saying so
                res = self._engine(1e-9, {})
                self.record.append({"leg": "engine", "budget": 0.0, "seconds": 0.0,
                                    "status": str(res.status), "why": "no time left"})
        if decided is not None:
            decided.solve_time = ctx.elapsed()
        return LROutcome(res, decided, self.trace, self.face, self.record)

    def _engine(self, time_limit: float | None, opts: dict) -> Any:
        d = self.d
        return solve_low_rank_sdp(
            d.C, d.A, d.b, sense=d.sense, trace_bound=d.trace_bound,
            implied_trace_bound=d.implied_trace_bound, centered=d.centered, face=self.face,
            callback=self.trace, **dict(self.kw, time_limit=time_limit, **opts))

    def _status_of(self, res: Any, limit: float | None) -> RouteResult | None:
        """Infeasible / unbounded, when proven (``decide_status``), else None."""
        if self.face is not None:
            return None
        left = None if limit is None else limit - self.ctx.elapsed()
        return decide_status(self.d, res, self.kw, left, self.ctx.log)

    def _conic(self, backend: str, cap: float | None, opts: dict
               ) -> tuple[RouteResult | None, str]:
        """The conic route on the user's problem with ``backend``, for at most ``cap``
        seconds: ``(result, "certified")`` when the gate (``specopt.gate.verify``, as for the
        conic route) backs ``optimal``, ``infeasible`` or ``unbounded`` (SDPLIB infp1: Clarabel
        says unbounded in 0.3 s, the engine's own checks took 34 s after it), else the result
        (None when the backend failed) and why not."""
        from .. import gate

        ctx = self.ctx
        opts = dict(opts)
        if cap is not None and backend in _TIME_OPTION:
            opts[_TIME_OPTION[backend]] = max(cap, 0.05)
        try:
            out = get_route("conic").solve(ctx.problem, None, solver=backend, **opts)
        except cp.error.SolverError as exc:
            return None, f"failed: {str(exc)[:80]}"
        if out.status in cp.settings.ERROR:
            return None, f"failed: {out.status}"
        verdict = gate.verify(ctx.problem, out, is_global=True, conic=True)
        decided = (cp.OPTIMAL, cp.INFEASIBLE, cp.UNBOUNDED)
        if verdict.status in decided and not verdict.failed:  # as the conic route's own claims
            return dataclasses.replace(out, status=verdict.status), "certified"
        return out, verdict.status


def _history(res: Any, trace: StepTrace, user: Callable[[float], float]) -> dict[str, list]:
    """The engine's own history (``engine_`` keys, user's objective) and the step trace."""
    history = {f"engine_{k}": v for k, v in user_history(res.history, user).items()}
    history.update(trace.series)
    return history


def _ray_proof(d: LRData, res: Any) -> tuple[dict, dict] | None:
    """The engine's feasible point and recession direction ``v v^T`` for the gate
    (``RouteResult.ray``), or None without them."""
    if res.ray is None or res.Y is None:
        return None
    v = np.asarray(res.ray, dtype=float).reshape(d.n, -1)
    return {d.K.id: res.Y @ res.Y.T}, {d.K.id: v @ v.T}


def _face(d: LRData, flag: Any) -> Any:
    """The clique face (:func:`specopt.solvers.sdp.facial.clique_face`) when asked for and
    the problem has edge-distance rows, centering and a trace bound for the certificate."""
    if flag not in (True, False):
        raise ValueError(f"facial_reduction must be True or False, got {flag!r}")
    if not flag or not d.centered or d.A.m == 0:
        return None
    if d.implied_trace_bound is None and d.trace_bound is None:
        return None
    from ..solvers.sdp.facial import clique_face

    pairs, d2 = distance_rows(d.A, d.b)
    return clique_face(d.n, pairs, d2, centered=True) if len(pairs) else None


register_route(LowRankSDPRoute())
