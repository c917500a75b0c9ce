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
from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .._progress import progress_for, user_history
from ..solvers.sdp import (
    OPTIMAL,
    UNBOUNDED,
    SparseRows,
    SymOp,
    distance_rows,
    graph_trace_bound,
    mm_step_method,
    solve_low_rank_sdp,
)
from ..solvers.sdp._kernels import adjoint_sparse
from .analysis import short, try_analyze
from .base import Match, Route, RouteMismatch, RouteResult
from .registry import register_route

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
#: while the start-up is ~0.5 s idle. Known losses, all by the start-up in a cold process:
#: max-cut G(n, 0.1) at n = 50-100 (3.7-4.2 s vs SCS 0.7-2.6 s at load 15), mcp100 (2.1 s vs
#: SCS 1.3 s), theta at n = 50 (3.8 s vs 1.4 s), infp / infd (n = 30: 2.3 s, the first-budget
#: run, vs SCS 0.25 s).
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
#: A Farkas vector ``z`` (``A^*(z)`` PSD on the feasible face, ``b^T z < 0``) is accepted with
#: ``lambda_min(A^*(z)) >= -FARKAS_EIG_TOL ||A^*(z)||_F`` (no trace bound known) and
#: ``b^T z <= -FARKAS_MARGIN ||b|| ||z||`` (both scaled to ``||A^*(z)||_F = 1``; farkas_check).
FARKAS_EIG_TOL = 1e-12
FARKAS_MARGIN = 1e-9
#: The recession-direction problem (``max <C, D>`` s.t. ``A(D) = 0``, ``tr D <= 1``) is solved to
#: this tolerance; a ray is accepted with ``sgn <C, D> >= RAY_GAIN ||C||_F``.
RAY_TOL = 1e-7
RAY_GAIN = 1e-6


@dataclass
class LRData:
    """What the recognizer extracts (user's sense; the solver handles min / max)."""

    K: cp.Variable
    n: int
    C: SymOp
    offset: float
    sense: str
    A: SparseRows
    b: np.ndarray
    centered: bool
    trace_bound: float | None
    implied_trace_bound: float | None
    rows: list[tuple[cp.Constraint, slice]] = field(default_factory=list)
    centering_cons: list[cp.Constraint] = field(default_factory=list)
    trace_con: tuple[cp.Constraint, float] | None = None
    psd_con: cp.Constraint | None = None


def _coo_rows(A: Any, n: int, shift: int) -> tuple[np.ndarray, ...]:
    """Rows (shifted), entries ``(i, j)`` and values of a sparse ``(k, n^2)`` coefficient block
    (column-major vec: entry ``K[i, j]`` is column ``i + j n``)."""
    co = sp.coo_array(A)
    return co.row.astype(np.int64) + shift, co.col % n, co.col // n, co.data


def recognize_low_rank_sdp(problem: cp.Problem) -> LRData:
    """Extract the low-rank SDP data of ``problem`` from its normalized description
    (:func:`specopt.reductions.analysis.analyze`; parameters bound to their current values), or
    raise :class:`RouteMismatch` saying why in one short sentence."""
    desc, why = try_analyze(problem)
    if desc is None:
        raise RouteMismatch(why)
    cached = desc.__dict__.get("_low_rank_sdp")  # explain, then solve: read once per description
    if isinstance(cached, RouteMismatch):
        raise RouteMismatch(str(cached))
    if cached is not None:
        return cached
    try:
        data = _read_description(desc, problem)
    except RouteMismatch as exc:
        desc.__dict__["_low_rank_sdp"] = exc
        raise
    desc.__dict__["_low_rank_sdp"] = data
    return data


def _read_description(desc: Any, problem: cp.Problem) -> LRData:
    variables = desc.variables
    if len(variables) != 1:
        raise RouteMismatch(
            f"the problem has {len(variables)} variables; the low-rank route needs exactly one "
            "square PSD matrix variable"
        )
    K = variables[0]
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        hint = ""
        if cp.normNuc in problem.objective.atoms():
            # a nuclear-norm completion: its PSD embedding is this route's form
            hint = ("; for nuclear-norm completion use specopt.learn.NuclearNormCompletion "
                    "(solver='LOW_RANK' solves it with this route's engine on the PSD "
                    "embedding of the matrix)")
        raise RouteMismatch(f"variable {K.name()} is not a square matrix{hint}")
    attrs = K.attributes
    if not (attrs.get("symmetric") or attrs.get("PSD")):
        raise RouteMismatch(f"{K.name()} must be declared symmetric=True or PSD=True")
    if K.is_complex():
        raise RouteMismatch("complex variables are not supported")
    n = K.shape[0]
    if desc.terms:
        raise RouteMismatch(f"the objective is not linear in {K.name()} "
                            f"(term {short(desc.terms[0].expr)})")
    if problem.objective.expr.size != 1:
        raise RouteMismatch("the objective must be a scalar")
    if desc.affine.factored:
        raise RouteMismatch("the objective has row_quad_forms terms (not one matrix C)")
    co = sp.coo_array(desc.affine.coef(K))
    ci, cj = co.col % n, co.col // n  # column-major vec
    if co.nnz > n * n // 4:
        D = np.zeros((n, n))
        np.add.at(D, (ci, cj), co.data)
        C = SymOp(n, dense=D)
    else:
        C = SymOp(n, sparse=sp.coo_array((co.data, (ci, cj)), shape=(n, n)).tocsr())
    psd = bool(attrs.get("PSD"))
    psd_con = None
    centering: list[cp.Constraint] = []
    rows_r, rows_i, rows_j, rows_v, bs = [], [], [], [], []
    rowmap: list[tuple[cp.Constraint, slice]] = []
    trace_con, trace_t = None, None
    m = 0
    for info in desc.constraints:
        con, amap = info.con, info.map
        if info.kind == "psd":
            if info.var is not None and info.var.id == K.id:
                psd, psd_con = True, con
                continue
            raise RouteMismatch(f"PSD constraint {short(con)} is not on {K.name()} itself")
        if info.kind in ("eq", "le", "ge") and amap is not None and amap.factored:
            raise RouteMismatch(f"constraint {short(con)} has row_quad_forms rows")
        if info.kind == "eq" and amap is not None:
            if info.is_centering(K):
                centering.append(con)
                continue
            r, i, j, v = _coo_rows(amap.coef(K), n, m)
            rows_r.append(r)
            rows_i.append(i)
            rows_j.append(j)
            rows_v.append(v)
            bs.append(-amap.offset)
            rowmap.append((con, slice(m, m + amap.size)))
            m += amap.size
            continue
        if info.kind in ("le", "ge") and amap is not None:
            a = info.trace_scale(K)
            if (a > 0 and info.kind == "le") or (a < 0 and info.kind == "ge"):
                t = -float(amap.offset[0]) / a
                if t < 0:
                    raise RouteMismatch(f"trace bound {t:g} < 0: infeasible with K PSD")
                trace_con = (con, abs(a))
                trace_t = t if trace_t is None else min(trace_t, t)
                continue
            raise RouteMismatch(
                f"inequality {short(con)} is not a trace bound tr(K) <= t; the low-rank route "
                "takes equality rows, centering and one trace bound"
            )
        if info.kind == "nonaffine":
            raise RouteMismatch(f"constraint {short(con)} is not affine in {K.name()}")
        raise RouteMismatch(f"constraint {short(con)} ({type(con).__name__}) is not supported")
    if not psd:
        raise RouteMismatch(f"no PSD constraint on {K.name()} (K >> 0 or PSD=True)")
    A = SparseRows(
        np.concatenate(rows_r) if rows_r else np.zeros(0, dtype=np.int64),
        np.concatenate(rows_i) if rows_i else np.zeros(0, dtype=np.int64),
        np.concatenate(rows_j) if rows_j else np.zeros(0, dtype=np.int64),
        np.concatenate(rows_v) if rows_v else np.zeros(0),
        m, n,
    )
    b = np.concatenate(bs) if bs else np.zeros(0)
    implied = _implied_trace_bound(A, b, bool(centering))
    return LRData(K=K, n=n, C=C, offset=float(desc.constant),
                  sense="max" if desc.sense < 0 else "min", A=A, b=b,
                  centered=bool(centering), trace_bound=trace_t, implied_trace_bound=implied,
                  rows=rowmap, centering_cons=centering, trace_con=trace_con, psd_con=psd_con)


def _implied_trace_bound(A: SparseRows, b: np.ndarray, centered: bool) -> float | None:
    """``tr K <= T`` implied by the rows: fixed diagonal, or connected distance rows + centering."""
    n = A.n
    single = np.bincount(A.rows, minlength=A.m) == 1 if A.m else np.zeros(0, bool)
    if A.m:
        ks = np.flatnonzero(single[A.rows] & (A.ii == A.jj) & (A.vals != 0))
        if ks.size:
            diag = np.full(n, np.nan)
            diag[A.ii[ks]] = b[A.rows[ks]] / A.vals[ks]
            if not np.isnan(diag).any():
                return float(np.sum(diag))
    if centered and A.m:
        pairs, d2 = distance_rows(A, b)
        if len(pairs):
            return graph_trace_bound(n, pairs, d2)
    return None


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

    def recognize(self, problem: cp.Problem) -> Match:
        try:
            data = recognize_low_rank_sdp(problem)
        except RouteMismatch as exc:
            return Match.no(str(exc))
        parts = [f"{data.A.m} sparse rows"]
        if data.centered:
            parts.append("centering")
        if data.trace_bound is not None:
            parts.append("trace bound")
        return Match(True, f"one {data.n} x {data.n} PSD matrix, linear objective, "
                           f"{', '.join(parts)}: low-rank factorization K = Y Y^T", data)

    def pays_off(self, problem: cp.Problem, match: Match) -> tuple[bool, str]:
        d: LRData = match.data
        return pays_off_rule(d.n, d.A.m, d.centered)

    def solve(self, problem: cp.Problem, match: Match, *, solver: str | None = None,
              verbose: bool = False, **opts: Any) -> RouteResult:
        match = self.ensure_match(problem, match)
        d: LRData = match.data
        kw = {k: opts.pop(k) for k in _ROUTE_OPTS if k in opts}
        warm = opts.pop("warm_start", None)
        face = _face(d, opts.pop("facial_reduction", False))
        if opts:
            raise TypeError(f"unknown option(s) for route 'low_rank_sdp': {', '.join(opts)}")
        if warm is not None and not isinstance(warm, bool):
            kw["Y0"], kw["y0"] = warm[0], warm[1]

        def user(v: float) -> float:  # the solver's objective -> the user's
            return v + d.offset

        cb = progress_for(verbose, self.name, match.reason, unit="iter", transform=user)
        t0 = time.perf_counter()
        # the trace of every step (interior point and factored), in the user's objective, with
        # time stamps: the certificate's history (the solver's own is kept under its keys)
        trace: dict[str, list[float]] = {"step": [], "time": [], "objective": [], "gap": [],
                                         "violation": []}

        def record(it: int, objective: float, gap: float | None = None,
                   violation: float | None = None, **extra: Any) -> None:
            for key, v in zip(trace, (it, time.perf_counter() - t0, user(objective), gap,
                                      violation), strict=True):
                trace[key].append(math.nan if v is None else float(v))
            if cb is not None:
                cb(it, objective=objective, gap=gap, violation=violation, **extra)

        limit = kw.get("time_limit")

        def time_left() -> float | None:
            return None if limit is None else limit - (time.perf_counter() - t0)

        def engine(time_limit: float | None) -> Any:
            return solve_low_rank_sdp(
                d.C, d.A, d.b, sense=d.sense, trace_bound=d.trace_bound,
                implied_trace_bound=d.implied_trace_bound, centered=d.centered, face=face,
                callback=record, **dict(kw, time_limit=time_limit))

        def status_of(res: Any) -> RouteResult | None:  # infeasible / unbounded, when proven
            decided = _decide_status(d, res, kw, time_left(), getattr(cb, "log", None))
            if decided is not None:
                decided.solve_time = time.perf_counter() - t0
            return decided

        # small n: a first run on a short budget, then (uncertified) the status checks, then
        # the rest of the time (see FIRST_BUDGET)
        budgeted = d.n <= FIRST_BUDGET_MAX_N and (limit is None or limit > FIRST_BUDGET)
        res = engine(FIRST_BUDGET if budgeted else limit)
        if res.status not in (OPTIMAL, UNBOUNDED) and face is None:
            if (decided := status_of(res)) is not None:
                return decided
            left = time_left()
            if budgeted and res.solve_time >= 0.9 * FIRST_BUDGET and (left is None or left > 0):
                res = engine(left)
                res.solve_time = time.perf_counter() - t0
                # the longer run's multipliers
                if res.status not in (OPTIMAL, UNBOUNDED) and (
                        decided := status_of(res)) is not None:
                    return decided
        history = {f"engine_{k}": v for k, v in user_history(res.history, user).items()}
        history.update(trace)
        if res.status == UNBOUNDED:  # a recession ray and a feasible point (solver docstring)
            return RouteResult(status=cp.UNBOUNDED, primal={},
                               objective=np.inf if d.sense == "max" else -np.inf,
                               backend="low_rank_sdp", solve_time=res.solve_time,
                               history=history,
                               extra={"ray": res.ray, "engine_status": res.status})
        Kval = res.Y @ res.Y.T
        status = cp.OPTIMAL if res.status == OPTIMAL else cp.OPTIMAL_INACCURATE
        if trace["objective"] and res.objective + d.offset != trace["objective"][-1]:
            # the returned (polished / best) point ends the trace
            for key, v in zip(trace, (res.iterations, res.solve_time, res.objective + d.offset,
                                      res.gap, res.primal_residual), strict=True):
                trace[key].append(math.nan if v is None else float(v))
        return RouteResult(
            status=status,
            primal={d.K.id: Kval},
            objective=res.objective + d.offset,
            backend="low_rank_sdp",
            dual=self._duals(d, res),
            bound=None if res.bound is None else res.bound + d.offset,
            gap=res.gap,
            iterations=res.iterations,
            setup_time=0.0,
            solve_time=res.solve_time,
            history=history,
            extra={"rank": res.rank, "lambda_min": res.lambda_min,
                   "primal_residual": res.primal_residual, "factor": res.Y, "y": res.y,
                   "inner_iterations": res.inner_iterations, "rank_growths": res.rank_growths,
                   "trace_bound_used": res.trace_bound_used, "engine_status": res.status,
                   "face_dim": None if face is None else face.dim},
        )

    @staticmethod
    def _duals(d: LRData, res) -> dict[int, Any]:
        return route_duals(d, res.y, res.mu, res.lambda_min)


#: The PSD dual matrix (and the centering duals, which need it) is formed densely and projected
#: onto the PSD cone up to this side (one dense ``eigh``, measured at load 14: 0.27 s at n = 500,
#: 2.0 s at n = 1000, 12 s at n = 2000); above, ``None`` (the solve would pay more than the
#: engine's own time on max-cut at n = 2000).
PSD_DUAL_MAX_N = 1000


def route_duals(d: LRData, y: np.ndarray, mu: float,
                lambda_min: float | None = None) -> dict[int, Any]:
    """CVXPY's dual values (``constraint.dual_value``) for the constraints the route read.

    CVXPY's convention: the Lagrangian ``f0 + nu^T (lhs - rhs) + lam (g) - <Z, K>`` for
    minimize, the duals of ``-f0`` for maximize. The engine's ``y`` gives the equality rows
    ``nu = -y`` (min) / ``y`` (max); its trace multiplier ``mu`` gives ``trace(K) <= t``
    (``mu / a`` for the spelling ``a tr K <= a t``); stationarity then gives the PSD dual
    ``Z = C - A^*(y) + mu I`` (min), ``A^*(y) - C + mu I`` (max). With centering the slack is PSD
    only on ``1^perp``: the centering duals move ``Z`` there: ``K 1 == 0`` (vector ``u``):
    ``Z + (u 1^T + 1 u^T) / 2 = P Z P``, ``P = I - 11^T / n``; ``sum(K) == 0`` (scalar ``w``):
    ``Z + w 11^T`` with the smallest ``w = 2^k ||Z||_F / n`` (``k < 10``) that leaves
    ``lambda_min`` within rounding of ``P Z P``'s (the scalar spelling's multiplier need not
    exist: ``K 1 = 0`` follows from ``1^T K 1 = 0`` only through ``K`` PSD). ``Z`` is finally
    projected onto the PSD cone (eigenvalues clipped at 0; at a certified point the clipped part
    is of the order of the certificate's tolerance; skipped, with its ``eigh``, when the engine's
    ``lambda_min`` of that slack is already >= 0).
    Constraints that repeat a centering condition get zero duals.
    """
    dual: dict[int, Any] = {}
    s = -1.0 if d.sense == "min" else 1.0
    y = np.asarray(y, dtype=float)
    for con, sl in d.rows:
        val = s * y[sl]
        dual[con.id] = val.reshape(con.shape, order="F") if con.shape else float(val[0])
    mu = float(mu or 0.0)
    if d.trace_con is not None:
        dual[d.trace_con[0].id] = mu / d.trace_con[1]
    n = d.n
    if n > PSD_DUAL_MAX_N:
        return dual
    Z = s * (adjoint_sparse(d.A, y).toarray() if d.A.m else np.zeros((n, n)))
    Z -= s * d.C.to_dense()
    Z[np.diag_indices(n)] += mu
    Z = 0.5 * (Z + Z.T)
    for k, con in enumerate(d.centering_cons):
        c = _centering_scale(con, d.K)
        if k > 0 or c == 0:
            dual[con.id] = np.zeros(con.shape) if con.shape else 0.0
            continue
        if con.size == 1:  # sum(K) == 0: Z + c w 11^T
            Q = _complement_basis(n)
            target = float(np.linalg.eigvalsh(Q.T @ Z @ Q)[0]) if n > 1 else 0.0
            w = max(float(np.linalg.norm(Z)), 1e-300) / n
            for _ in range(10):  # no finite w may exist (degenerate): then the projection
                if float(np.linalg.eigvalsh(Z + w * np.ones((n, n)))[0]) >= (
                        target - 1e-10 * max(1.0, abs(target))):
                    break
                w *= 2.0
            Z = Z + w * np.ones((n, n))
            dual[con.id] = w / c
        else:  # K @ 1 == 0 (or 1 @ K): Z + c (u 1^T + 1 u^T) / 2 = P Z P
            z1 = Z.sum(axis=1)
            u = -2.0 * z1 / n + (float(z1.sum()) / n**2)
            P = np.eye(n) - np.full((n, n), 1.0 / n)
            Z = P @ Z @ P
            dual[con.id] = (u / c).reshape(con.shape)
    if d.psd_con is not None:
        scalar_centering = any(c.size == 1 for c in d.centering_cons[:1])
        if lambda_min is not None and lambda_min >= 0 and not scalar_centering:
            dual[d.psd_con.id] = Z  # PSD as it is (on 1^perp and along 1 with centering)
        else:
            lam, V = np.linalg.eigh(0.5 * (Z + Z.T))
            dual[d.psd_con.id] = (V * np.maximum(lam, 0.0)) @ V.T
    return dual


def _centering_scale(con: cp.Constraint, K: cp.Variable) -> float:
    """``c`` of a centering constraint ``c (K 1) == 0`` / ``c sum(K) == 0`` (its one
    coefficient, see ``ConstraintInfo.is_centering``)."""
    from .analysis import affine_maps

    expr = con.args[0] - con.args[1]
    coef = sp.coo_array(affine_maps([expr], [K])[0].coef(K))
    return float(coef.data[0]) if coef.nnz else 0.0


def _complement_basis(n: int) -> np.ndarray:
    """Orthonormal basis (n x (n - 1)) of ``1^perp``: the Householder reflection of ``e_1`` onto
    ``1 / sqrt(n)``, without its first column."""
    v = np.full(n, 1.0 / math.sqrt(n))
    v[0] -= 1.0
    nv = float(v @ v)
    H = np.eye(n) - (2.0 / nv) * np.outer(v, v) if nv > 0 else np.eye(n)
    return H[:, 1:]


def farkas_check(d: LRData, z: np.ndarray) -> tuple[bool, float, float]:
    """Whether ``z`` proves ``{K PSD : A(K) = b [, 1^T K 1 = 0] [, tr K <= t]}`` empty:
    ``(passed, lambda_min, b^T z)`` with ``z`` scaled to ``||A^*(z)||_F = 1``.

    For every feasible ``K``: ``b^T z = <A^*(z), K> >= lambda_min tr K`` (with centering
    ``K = Q Q^T K Q Q^T``, ``Q`` a basis of ``1^perp``, so ``lambda_min`` is that of
    ``Q^T A^*(z) Q``). Hence ``b^T z + T max(0, -lambda_min) < 0`` contradicts feasibility for a
    bound ``tr K <= T`` (the trace constraint or the bound implied by the rows); without one
    ``lambda_min >= -FARKAS_EIG_TOL`` (rounding) and ``b^T z < 0`` is required.
    """
    S = adjoint_sparse(d.A, np.asarray(z, float)).toarray()
    nrm = float(np.linalg.norm(S))
    if not nrm > 0 or not np.all(np.isfinite(S)):
        return False, math.nan, math.nan
    S /= nrm
    btz = float(d.b @ z) / nrm
    if d.centered:
        Q = _complement_basis(d.n)
        S = Q.T @ S @ Q
    lam = float(np.linalg.eigvalsh(S)[0]) if S.size else 0.0
    margin = FARKAS_MARGIN * float(np.linalg.norm(d.b)) * float(np.linalg.norm(z)) / nrm
    T = d.trace_bound if d.trace_bound is not None else d.implied_trace_bound
    if T is not None:
        ok = btz + T * max(0.0, -lam) < -margin
    else:
        ok = lam >= -FARKAS_EIG_TOL and btz < -margin
    return bool(ok), lam, btz


def ray_check(d: LRData, D: np.ndarray) -> tuple[bool, float, float]:
    """Whether the PSD matrix ``D`` is a recession direction along which the objective improves:
    ``(passed, ||A(D)||_inf / tr D, gain)``, ``gain = sgn <C, D> / (||C||_F tr D)`` (``sgn`` +1
    when maximizing). Accepted with ``||A(D)|| <= RAY_TOL * 10 max_r ||A_r||`` (centering:
    ``|1^T D 1| / n`` alike), no trace bound, and ``gain >= RAY_GAIN``."""
    tr = float(np.trace(D))
    if d.trace_bound is not None or d.implied_trace_bound is not None or not tr > 0:
        return False, math.nan, math.nan
    M = sp.coo_array((d.A.vals, (d.A.rows, d.A.ii * d.n + d.A.jj)), shape=(d.A.m, d.n * d.n))
    res = np.abs(M.tocsr() @ D.ravel()) / tr if d.A.m else np.zeros(0)
    viol = float(np.max(res, initial=0.0))
    if d.centered:
        viol = max(viol, abs(float(D.sum())) / (d.n * tr))
    sgn = 1.0 if d.sense == "max" else -1.0
    cn = d.C.fro_norm()
    gain = sgn * float(np.sum(d.C.to_dense() * D)) / (max(cn, 1e-300) * tr)
    anorm = float(np.max(d.A.row_norms(), initial=1.0))
    ok = viol <= RAY_TOL * 10 * anorm and gain >= RAY_GAIN
    return bool(ok), viol, gain


def _decide_status(d: LRData, res: Any, kw: dict, left: float | None,
                   say: Any = None) -> RouteResult | None:
    """``infeasible`` (a Farkas vector from the engine's diverging multipliers) or ``unbounded``
    (a certified recession direction and a feasible point) when the engine ended uncertified;
    None when neither is proven. ``say(message)`` (the progress printer's log) reports the
    checks."""
    sgn = 1.0 if d.sense == "max" else -1.0  # engine's y: A^*(y) - C PSD (max), C - A^*(y) (min)
    if d.A.m and res.y is not None and np.any(res.y):
        z = sgn * np.asarray(res.y, float)
        ok, lam, btz = farkas_check(d, z)
        if say is not None:
            say(f"Farkas check on the multipliers: lambda_min {lam:.3g}, b^T z {btz:.3g} -> "
                f"{'infeasible' if ok else 'not proven'}")
        if ok:
            return RouteResult(status=cp.INFEASIBLE, primal={},
                               objective=-np.inf if d.sense == "max" else np.inf,
                               backend="low_rank_sdp", solve_time=res.solve_time,
                               history=res.history,
                               extra={"farkas": z, "farkas_lambda_min": lam, "farkas_btz": btz,
                                      "engine_status": res.status,
                                      "status_check": ("farkas", ok, btz, 0.0)})
    if (d.trace_bound is not None or d.implied_trace_bound is not None
            or res.primal_residual > kw.get("tol", 1e-5)):
        return None  # no ray possible, or no feasible point shown
    if left is not None and left <= 0:
        return None
    ray = solve_low_rank_sdp(d.C, d.A, np.zeros(d.A.m), sense=d.sense, trace_bound=1.0,
                             centered=d.centered, tol=RAY_TOL, time_limit=left,
                             seed=kw.get("seed", 0))
    if ray.status != OPTIMAL:
        return None
    D = ray.Y @ ray.Y.T
    ok, viol, gain = ray_check(d, D)
    if say is not None:
        say(f"recession direction: |A(D)| {viol:.3g}, gain {gain:.3g} -> "
            f"{'unbounded' if ok else 'not proven'}")
    if not ok:
        return None
    return RouteResult(status=cp.UNBOUNDED, primal={},
                       objective=np.inf if d.sense == "max" else -np.inf,
                       backend="low_rank_sdp", solve_time=res.solve_time, history=res.history,
                       extra={"ray": ray.Y, "ray_violation": viol, "ray_gain": gain,
                              "primal_residual": res.primal_residual,
                              "engine_status": res.status,
                              "status_check": ("recession_ray", ok, viol, RAY_TOL * 10)})


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


# --------------------------------------------------------------------------------------------
# Inner solver for the iterated-SDP route (MVE-type linearized steps)
# --------------------------------------------------------------------------------------------
def _substitute_parameters(expr: Any, values: dict[int, Any]) -> Any:
    if isinstance(expr, cp.Parameter) and expr.id in values:
        return values[expr.id]
    args = getattr(expr, "args", [])
    if not args:
        return expr
    return expr.copy([_substitute_parameters(a, values) for a in args])


def low_rank_subproblem(surr: Any, *, required: bool, min_n: int | None = None,
                        **opts: Any):
    """``run(B) -> point`` solving the iterated-SDP route's linearized step with the low-rank
    engine (each step the cold interior point in its size range, else the factored method
    warm-started from the previous step: ``method``, as :func:`low_rank_mm`); None when it does
    not apply or, without ``required``, when ``n < min_n`` (default ``ITERATED_MIN_N``); with
    ``required``, a :class:`RouteMismatch` saying why it does not apply.

    Applies when the subproblem (``surr.problem``, one linearized term with parameter ``B``) is,
    for fixed ``B``, of this route's form: ``C(B) = C_0 + s B`` is read from two extractions
    (``B = 0`` and ``B = I``).
    """
    try:
        if len(surr.nodes) != 1:
            raise RouteMismatch("the low-rank inner solver takes one linearized spectral term")
        node = surr.nodes[0]
        n = node.K.shape[0]
        min_n = ITERATED_MIN_N if min_n is None else min_n  # None: the measured default
        if not required and (min_n is None or n < min_n):
            return None
        prob = surr.problem

        def linear_problem(B: np.ndarray) -> cp.Problem:
            obj = _substitute_parameters(prob.objective.expr,
                                         {node.B.id: cp.Constant(B.ravel(order="F"))})
            sense = cp.Minimize if isinstance(prob.objective, cp.Minimize) else cp.Maximize
            return cp.Problem(sense(obj), prob.constraints)

        d0 = recognize_low_rank_sdp(linear_problem(np.zeros((n, n))))
        d1 = recognize_low_rank_sdp(linear_problem(np.eye(n)))
    except RouteMismatch:
        if required:
            raise
        return None
    C0 = d0.C.to_dense()
    s = float(np.trace(d1.C.to_dense() - C0)) / n
    user_id = next(uid for uid, fv in surr.var_map.items() if fv.id == d0.K.id)
    state: dict[str, Any] = {"Y": None, "y": None, "sigma": None, "results": []}
    tol = float(opts.pop("tol", 1e-6))
    # each step: the cold interior point in its size range, else the factored method
    # warm-started from the previous step (as low_rank_mm)
    step_method = mm_step_method(opts.pop("method", "auto"), n, d0.A.m)
    # factored iterations per step after an uncertified interior point / warm: as low_rank_mm
    opts.setdefault("max_iters", 5 if step_method == "ip" else 40)

    def run(Bs: list[np.ndarray]) -> dict[str, Any]:
        B = 0.5 * (Bs[0] + Bs[0].T)
        warm = step_method == "bm" and state["Y"] is not None
        res = solve_low_rank_sdp(
            SymOp(n, dense=C0 + s * B), d0.A, d0.b, sense=d0.sense, centered=d0.centered,
            trace_bound=d0.trace_bound, implied_trace_bound=d0.implied_trace_bound,
            Y0=state["Y"] if warm else None, y0=state["y"] if warm else None,
            sigma0=min(state["sigma"], 1e2) if warm else None, tol=tol, method=step_method,
            **opts)
        state.update(Y=res.Y, y=res.y, sigma=res.sigma)
        state["results"].append(res)
        Kv = res.Y @ res.Y.T
        d0.K.value = Kv
        value = float(np.asarray(surr.true_objective.value))
        return {"primal": {user_id: Kv}, "K": [Kv], "objective": surr.sense * value, "dual": {},
                "status": cp.OPTIMAL if res.status == OPTIMAL else cp.OPTIMAL_INACCURATE,
                "low_rank": res}

    run.state = state  # type: ignore[attr-defined]
    return run
