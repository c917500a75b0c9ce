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

from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

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
from .analysis import short, try_analyze
from .base import Match, Route, RouteMismatch, RouteResult
from .registry import register_route

_ROUTE_OPTS = ("tol", "rank", "max_rank", "max_iters", "inner_max_iters", "time_limit", "seed",
               "inner", "dense_threshold", "sigma0", "eig_k", "sigma_max", "method")

#: ``route="auto"`` picks the low-rank engine for ``n >= PAYS_OFF_MIN_N`` (side of K).
#: Measured (SDE CVXPY models, specopt.solve route="low_rank_sdp" vs route="conic", same run,
#: load ~6; scratch of benchmarks/low_rank_sdp.py): with the sparse-row interior point the engine
#: is faster from the smallest sizes: N = 16: 0.014-0.045 s vs Clarabel 0.028-0.11 s; N = 24-48:
#: 0.02-0.23 s vs SCS 0.08-37 s (digits, hubs-and-spokes, swiss roll). Below 20 both take
#: milliseconds and Clarabel's answers are certified as they are.
PAYS_OFF_MIN_N = 20
#: The iterated-SDP route's ``inner="auto"`` uses the engine from this matrix side (each step the
#: cold sparse-row interior point while ``n <= MM_IP_MAX_N``; ``inner="low_rank"`` forces it,
#: ``"conic"`` never). Measured (user-written MVE, digits k = 5 / spokes k = 3, inner="auto"
#: conic backend vs the engine, same run, load 3-8, whole iterated solves): n = 16: Clarabel
#: 2.1 / 1.0 s vs engine 3.7 / 1.7 s; n = 26 (SCS: the default backend from n = 24, where
#: Clarabel's dense KKT side n(n+1)/2 passes 300): SCS 3.2 / 17.1 s vs 3.7 / 2.6 s; n = 41: SCS
#: 10.3 s vs 2.7 s (digits). So the engine takes over where SCS would (n = 24): no cliff there.
ITERATED_MIN_N: int | None = 24


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
        raise RouteMismatch(f"variable {K.name()} is not a square matrix")
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
        n = match.data.n
        if n >= PAYS_OFF_MIN_N:
            return True, f"n = {n} >= {PAYS_OFF_MIN_N} (measured crossover vs Clarabel/SCS)"
        return False, f"n = {n} < {PAYS_OFF_MIN_N}: the conic solvers are as fast here"

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
        res = solve_low_rank_sdp(d.C, d.A, d.b, sense=d.sense, trace_bound=d.trace_bound,
                                 implied_trace_bound=d.implied_trace_bound, centered=d.centered,
                                 face=face, verbose=verbose, objective_offset=d.offset, **kw)
        if res.status == UNBOUNDED:  # a recession ray and a feasible point (solver docstring)
            return RouteResult(status=cp.UNBOUNDED, primal={},
                               objective=np.inf if d.sense == "max" else -np.inf,
                               backend="low_rank_sdp", solve_time=res.solve_time,
                               history=res.history,
                               extra={"ray": res.ray, "engine_status": res.status})
        Kval = res.Y @ res.Y.T
        status = cp.OPTIMAL if res.status == OPTIMAL else cp.OPTIMAL_INACCURATE
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
            history=res.history,
            extra={"rank": res.rank, "lambda_min": res.lambda_min,
                   "primal_residual": res.primal_residual, "factor": res.Y, "y": res.y,
                   "inner_iterations": res.inner_iterations, "rank_growths": res.rank_growths,
                   "trace_bound_used": res.trace_bound_used, "engine_status": res.status,
                   "face_dim": None if face is None else face.dim},
        )

    @staticmethod
    def _duals(d: LRData, res) -> dict[int, Any]:
        # CVXPY's convention: Lagrangian f0 + sum y_eq^T (lhs - rhs) for minimize; for
        # maximize the duals of -f0. Our y: <C, K> - y^T (A(K) - b) (min), sign-flipped for max.
        dual: dict[int, Any] = {}
        s = -1.0 if d.sense == "min" else 1.0
        for con, sl in d.rows:
            val = s * res.y[sl]
            dual[con.id] = val.reshape(con.shape, order="F") if con.shape else float(val[0])
        return dual


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
