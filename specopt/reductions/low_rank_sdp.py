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
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
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
#: So: below ``PAYS_OFF_MIN_N`` (= 24, where the conic default turns from Clarabel to SCS)
#: conic: Clarabel takes 0.18-0.28 s at n = 20, the engine 0.13-0.36 s warm and 3-5 s in a
#: process that has not loaded numba yet. From 24 to ``PAYS_OFF_ANY_M_N`` the engine while the
#: interior point's ``O(m^3)`` Schur complement stays small (``m <= PAYS_OFF_ROWS_PER_N * n``:
#: theta at n = 100 with m = 9.9 n loses to SCS even warm, 5.0 vs 3.8 s, completion at 10 n
#: ties, 2.5 vs 2.4 s; qap6 / qap8 with 6.2 n / 8.1 n win, > 70 s on SCS); above, always (the
#: generic solvers cannot run: Clarabel's dense KKT, SCS's eigendecompositions). The one-off
#: numba start-up is not a criterion: SCS's time is unbounded from n = 24 (SDE > 30 s from
#: n = 30, qap6 / qap8 > 70 s, mcp124-1 63 s on the conic route, gpp100 20 s and 4.4e-4 off)
#: while the start-up is ~0.5 s idle. Since then small solves skip numba altogether (NumPy twins,
#: ``specopt.solvers.sdp._solve.JIT_FREE_MAX_N``): from the first solve the engine is at least
#: as fast as the conic route at n = 24-50 on all four families (results/low_rank_auto_coldstart
#: .json). The remaining loss: completion at n = 70-80 with 8 rows per n (engine 0.7-1.0 s vs
#: SCS 0.3-0.5 s; results/low_rank_auto_rows.json), which no rows-per-n rule separates from
#: qap6 / qap8 (6.2 n / 8.1 n rows, SCS > 70 s).
PAYS_OFF_MIN_N = 24
PAYS_OFF_ROWS_PER_N = 9
PAYS_OFF_ANY_M_N = 300
#: The iterated-SDP route's ``inner="auto"`` uses the engine from this matrix side (each step the
#: cold sparse-row interior point while ``n <= MM_IP_MAX_N``; ``inner="low_rank"`` forces it,
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


def pays_off_rule(n: int, m: int, centered: bool) -> tuple[bool, str]:
    """``route="auto"``'s choice for an ``n x n`` matrix with ``m`` rows (thresholds and their
    measurements above; ``centered`` counts as one more row): ``(pays off, why)``."""
    m_eff = m + int(centered)
    if n < PAYS_OFF_MIN_N:
        return False, (f"n = {n} < {PAYS_OFF_MIN_N}: Clarabel takes a fraction of a second here "
                       "(the engine's numba start-up alone 0.5-4 s)")
    if n > PAYS_OFF_ANY_M_N:
        return True, (f"n = {n} > {PAYS_OFF_ANY_M_N}: beyond what Clarabel / SCS hold in "
                      "reasonable time")
    if m_eff > PAYS_OFF_ROWS_PER_N * n:
        return False, (f"{m_eff} rows > {PAYS_OFF_ROWS_PER_N} n at n = {n}: the interior "
                       "point's O(m^3) steps lose to SCS (measured)")
    return True, f"n = {n}, m = {m_eff} (measured crossover vs Clarabel / SCS)"


class LowRankSDPRoute(Route):
    """Burer-Monteiro augmented Lagrangian for one PSD matrix with sparse rows (global)."""

    name = "low_rank_sdp"
    is_global = True
    priority = 35

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

    def pays_off(self, problem: cp.Problem, match: Match) -> tuple[bool, str]:
        d: LRData = match.data
        return pays_off_rule(d.n, d.A.m, d.centered)

    OPTIONS = (*_ROUTE_OPTS, "warm_start", "facial_reduction")
    UNIT = "iter"
    STATUS_MAP = {SolverStatus.OPTIMAL: cp.OPTIMAL, SolverStatus.UNBOUNDED: cp.UNBOUNDED}

    def to_user(self, data: LRData) -> Callable[[float], float]:
        def user(v: float) -> float:  # the solver's objective -> the user's
            return v + data.offset

        return user

    def run(self, d: LRData, ctx: RunContext, *, warm_start: Any = None,
            facial_reduction: bool = False, **kw: Any) -> LROutcome:
        """The engine; when it ends uncertified, the status checks (``decide_status``): for
        small n first on a short budget, then (undecided) Clarabel up to
        ``CLARABEL_RESCUE_MAX_N``, then the engine for the rest of the time (FIRST_BUDGET)."""
        face = _face(d, facial_reduction)
        if warm_start is not None and not isinstance(warm_start, bool):
            kw["Y0"], kw["y0"] = warm_start[0], warm_start[1]
        trace = StepTrace(ctx.t0, self.to_user(d), ctx.callback)
        limit = kw.get("time_limit")

        def time_left() -> float | None:
            return None if limit is None else limit - ctx.elapsed()

        def engine(time_limit: float | None) -> Any:
            return solve_low_rank_sdp(
                d.C, d.A, d.b, sense=d.sense, trace_bound=d.trace_bound,
                implied_trace_bound=d.implied_trace_bound, centered=d.centered, face=face,
                callback=trace, **dict(kw, time_limit=time_limit))

        def status_of(res: Any) -> RouteResult | None:  # infeasible / unbounded, when proven
            if res.status in (OPTIMAL, UNBOUNDED) or face is not None:
                return None
            decided = decide_status(d, res, kw, time_left(), ctx.log)
            if decided is not None:
                decided.solve_time = ctx.elapsed()
            return decided

        budgeted = d.n <= FIRST_BUDGET_MAX_N and (limit is None or limit > FIRST_BUDGET)
        res = engine(FIRST_BUDGET if budgeted else limit)
        decided = status_of(res)
        if decided is None and res.status not in (OPTIMAL, UNBOUNDED) and face is None:
            left = time_left()
            if budgeted and res.solve_time >= 0.9 * FIRST_BUDGET and (left is None or left > 0):
                rescued = _clarabel_rescue(d, ctx, left)
                if rescued is not None:
                    return LROutcome(res, rescued, trace, face)
                res = engine(time_left())
                res.solve_time = ctx.elapsed()
                decided = status_of(res)  # the longer run's multipliers
        return LROutcome(res, decided, trace, face)

    def invert(self, out: LROutcome, ctx: RunContext) -> RouteResult:
        if out.decided is not None:
            return out.decided
        d: LRData = ctx.data
        res = out.res
        status = self.map_status(res.status)
        if status == cp.UNBOUNDED:  # a recession ray and a feasible point (solver docstring)
            return RouteResult.no_point(
                status, -1 if d.sense == "max" else 1, backend="low_rank_sdp",
                solve_time=res.solve_time, history=_history(res, out.trace, self.to_user(d)),
                ray=_ray_proof(d, res), extra={"ray": res.ray, "engine_status": res.status})
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
                   "face_dim": None if out.face is None else out.face.dim},
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
    """How the route's engine run ended: its last result, a result decided otherwise (the
    infeasible / unbounded result the status checks proved, or Clarabel's optimal one on a
    small problem the engine did not certify; or None), the step trace and the face used."""

    res: Any
    decided: RouteResult | None
    trace: StepTrace
    face: Any


def _clarabel_rescue(d: LRData, ctx: RunContext, left: float | None) -> RouteResult | None:
    """Clarabel's ``optimal`` result on the user's problem (``CLARABEL_RESCUE_MAX_N``), or None
    (larger, a backend asked for, Clarabel not optimal or failing)."""
    if d.n > CLARABEL_RESCUE_MAX_N or ctx.solver is not None:
        return None
    ctx.log(f"engine uncertified after {FIRST_BUDGET:g} s at n = {d.n}: Clarabel on the problem")
    opts = {} if left is None else {"time_limit": max(left, 1.0)}
    try:
        out = get_route("conic").solve(ctx.problem, None, solver="CLARABEL", **opts)
    except cp.error.SolverError:
        return None
    if out.status != cp.OPTIMAL:
        return None
    out.extra["rescued_from"] = "low_rank_sdp (uncertified after the first budget)"
    out.solve_time = ctx.elapsed()
    return out


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
