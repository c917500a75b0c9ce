r"""Route "matrix_generation": LPs over the spectraplex by column generation.

Recognized form (one symmetric matrix variable X, any number of plain LP variables z)::

    maximize / minimize   <C, X> + c^T z + const
    subject to            X >> 0   (or X declared PSD=True)
                          trace(X) == t   or   trace(X) <= t      (t > 0 constant)
                          affine (in)equalities in X and z    (<A_r, X> + g_r^T z  <=, ==, >= b_r)

Coefficients on X are read with ``affine_coefficients``; every ``row_quad_forms(V, X)`` node is
first replaced by a placeholder vector so that its rows stay factored: the constraint matrices are
``A_r = sum_k M[r, k] v_k v_k^T`` (``FactoredOperator``), never the |S| x n^2 matrix. What is left
on X (``cp.trace(A @ X)``, ``X[i, j]``, ...) goes into a sparse ``DenseOperator``.

Solved by :func:`specopt.solvers.mg.solve_spectraplex_lp`. Certificate: the
Lagrangian bound ``t lambda_max(C - A^*(y)) + ...`` (valid every round) and the relative gap to the
master value; status OPTIMAL only when the gap is <= ``tol``. Duals: row multipliers of the
user's constraints (CVXPY sign convention), ``mu I - H`` for ``X >> 0``, ``mu`` for the trace
constraint. The factored solution is in ``extra["theta"], extra["U"]``.

Options: ``tol`` (1e-6), ``max_iters``, ``time_limit``, ``master`` ("psd", default, or "lp"),
``max_rank`` (30), ``row_selection`` (500), ``row_band`` (1e-3 here; 1e-2 in the solver),
``max_join`` (0.5 here: at most half the working set's size of violated rows join per round;
inf in the solver),
``resolve_rows`` (False), ``full_space`` (150 here: for n up to it the master becomes the SDP on
the working rows once X uses >= n/16 directions at gap <= 1e-2; 0 in the solver), ``pricing``
("eig"; or "gradient"), ``columns_per_round`` (5), ``smoothing`` (0.5), ``cuts`` ("auto":
hinge rows in the 1-slack cut master of ``specopt.solvers.mg.cuts`` from 5000 of them or with
Dask data; True / False),
``prune_after``, ``max_columns``, ``dense_threshold`` (see the solver's docstring).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .._progress import user_history
from ..solvers._status import SolverStatus
from ..solvers.mg import (
    DenseOperator,
    FactoredOperator,
    MasterInfeasible,
    SpectraplexLP,
    StackedOperator,
    SymOperator,
    UnboundedProblem,
    phase_one,
    solve_spectraplex_lp,
    sum_operators,
)
from ..solvers.mg.dask_rows import DaskRowOperator, is_dask_array
from ..validate import check_finite
from ._dask_hinge import dask_hinge_data, run_dask_hinge
from .analysis import AffineMap, HingeTerm, short, try_analyze, zero_map
from .base import Match, Route, RouteMismatch, RouteResult, RunContext
from .registry import register_route

_ROUTE_OPTS = (
    "tol", "max_iters", "time_limit", "master", "max_rank", "columns_per_round", "smoothing",
    "prune_after", "max_columns", "dense_threshold", "row_selection", "row_band", "max_join",
    "resolve_rows", "warm_start", "full_space", "pricing", "cuts",
)

#: The route's ``full_space`` (the solver's default is 0, never): for ``n`` up to this the PSD
#: master switches to the whole space once X uses >= n/16 directions at gap <= 1e-2 (issue 22).
#: A k = n block is k(k+1)/2 = 11325 svec entries at n = 150; the row-space interior point's
#: cost grows with the rows, not with that number, but its dense k x k work as n^3 per step.
FULL_SPACE_N = 150

#: ``route="auto"`` picks matrix generation when ``n >= PAYS_OFF_MIN_N``, there are at least
#: ``PAYS_OFF_MIN_ROWS`` constraint rows and the stacked data ``|rows| * n^2`` (what the conic
#: form stores densely) is at least ``PAYS_OFF_MIN_DATA``. From the WORST case over the benchmark
#: families (``benchmarks/matrix_generation.py --family``: PSDBoost triplets varying C, classes,
#: noise, feature scales, nn/random triplets, mean dimension; certified 1e-4 vs SCS, same run,
#: fixed costs included; docs/routes/matrix_generation.md), with the interior-point master:
#: D=100/|S|=2000 (2e7): faster than SCS on all 6 members, median 22.8x, worst 1.9x (rank-16
#: member); D=50/|S|=2000 (5e6): median ~14x but two rank-21 members (42% of n) 0.82x and
#: 0.76x; D=24/|S|=550: worst 0.5x. So from n = 100 and 2000 rows on.
PAYS_OFF_MIN_N = 100
PAYS_OFF_MIN_ROWS = 2000
PAYS_OFF_MIN_DATA = 2e7


def _operator_arrays(op) -> list:
    """The in-memory arrays an operator is built from (Dask-backed parts are checked lazily, in
    their passes over the data: ``specopt.solvers.mg.dask_rows``)."""
    if hasattr(op, "ops"):
        return [a for o in op.ops for a in _operator_arrays(o)]
    return [getattr(op, k) for k in ("V", "M", "A") if isinstance(getattr(op, k, None), (
        np.ndarray, sp.sparray, sp.spmatrix))]


def _check_data(data: MGData) -> None:
    """NaN / inf in the extracted data: a ValueError naming the variable or constraint, before
    any solve (HiGHS loops on a NaN cost)."""
    lp = data.lp
    for v in data.zvars:
        sl = data.zslices[v.id]
        check_finite(f"the objective's coefficients of variable {v.name()!r}", lp.c[sl])
        check_finite(f"the bounds of variable {v.name()!r}", lp.zlb[sl], allow_inf=True)
        check_finite(f"the bounds of variable {v.name()!r}", lp.zub[sl], allow_inf=True)
    for a in _operator_arrays(lp.C):
        check_finite(f"the objective's coefficients of {data.X.name()!r}", a)
    G = sp.csr_array(lp.G)
    row_bad = np.zeros(G.shape[0], dtype=bool)
    row_bad[np.repeat(np.arange(G.shape[0]), np.diff(G.indptr))[~np.isfinite(G.data)]] = True
    # a NaN side, a side at +inf from below / -inf from above (no point meets it), a NaN or
    # infinite coefficient
    wrong = (lp.lb == np.inf) | (lp.ub == -np.inf)
    bad = np.isnan(lp.lb) | np.isnan(lp.ub) | wrong | row_bad
    for con, sl, _ in data.rows if bad.any() else ():  # name the first bad constraint
        if bad[sl].any():
            where = f"constraint {short(con)!r}"
            check_finite(f"the right-hand side of {where}", lp.lb[sl], allow_inf=True)
            check_finite(f"the right-hand side of {where}", lp.ub[sl], allow_inf=True)
            if wrong[sl].any():
                raise ValueError(f"the right-hand side of {where} is infinite on its binding "
                                 "side (no point can satisfy it)")
            raise ValueError(f"the coefficients of {where} contain NaN or infinite entries")
    if bad.any():
        raise ValueError("the constraint data contain NaN or infinite entries")
    for a in _operator_arrays(lp.A):
        check_finite("the constraint coefficients of " + repr(data.X.name()), a)
    check_finite("the constant term of the objective", np.array([lp.offset]))


@dataclass
class MGData:
    """What the recognizer extracts: the solver's problem ``lp`` (max sense) and the mapping
    back to the user's variables and constraints."""

    X: cp.Variable
    zvars: list[cp.Variable]
    zslices: dict[int, slice]
    lp: SpectraplexLP
    sense: float  # +1 maximize, -1 minimize (solver always maximizes sense * objective)
    rows: list[tuple[cp.Constraint, slice, float]] = field(default_factory=list)  # sign
    bound_rows: list[tuple[cp.Constraint, np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=list
    )
    trace_con: tuple[cp.Constraint, float] | None = None
    psd_con: cp.Constraint | None = None
    n_factored: int = 0
    #: one hinge over Dask rows read directly (specopt.reductions._dask_hinge): the cut
    #: master's problem with its per-row state on the workers, no per-row LP arrays
    hinge: Any = None


def _parts(amap: AffineMap, X: cp.Variable, zvars: list[cp.Variable], label: str):
    """``(Xcoef csr (rows, n^2), [(Mj, Vj)], Gz csr (rows, p), offset)`` of an affine map."""
    for vid, fs in amap.factored.items():
        if vid != X.id and fs:
            raise RouteMismatch(f"{label}: row_quad_forms of a variable other than X")
    Xc = amap.coef(X)
    fac = list(amap.factored.get(X.id, []))
    if zvars:
        Gz = sp.hstack([amap.coef(v) for v in zvars], format="csr")
    else:
        Gz = sp.csr_array((amap.size, 0))
    return sp.csr_array(Xc), fac, sp.csr_array(Gz), np.asarray(amap.offset, dtype=float).ravel()


def _lift_hinges(desc, sense: float):
    """Hinge terms ``sum_i w_i max(g_i, 0)`` -> slack ``t >= 0``, rows ``g - t <= 0`` and the
    objective ``w^T t`` (valid when the hinge is concave in the maximized objective)."""
    lifted, obj = [], zero_map(1)
    for t in desc.terms:
        if not isinstance(t, HingeTerm):
            raise RouteMismatch(
                f"objective term {t.label} is not affine in X and the LP variables (hinge sums "
                "are lifted to slack rows; other non-linear terms are not)"
            )
        if np.any(sense * np.asarray(t.weights) > 0):
            raise RouteMismatch(f"the hinge term {t.label} has the wrong sign (it is not concave "
                                "in the maximized objective)")
    for slack, rows, w in desc.hinge_slack_rows():
        lifted.append((slack, rows))
        obj = obj + AffineMap(1, {slack.id: sp.csr_array(w.reshape(1, -1))}, {}, np.zeros(1))
    return lifted, obj


def _is_trace_row(Xc, Gz, n) -> float:
    """Scale a if the row is ``a * trace(X)`` only, else 0."""
    if Xc.shape[0] != 1 or Gz.nnz:
        return 0.0
    row = Xc.toarray().ravel()
    diag = np.arange(n) * (n + 1)
    a = row[diag[0]]
    if a == 0:
        return 0.0
    target = np.zeros(n * n)
    target[diag] = a
    return float(a) if np.allclose(row, target, rtol=0, atol=1e-12 * abs(a)) else 0.0


def extract(problem: cp.Problem) -> MGData:
    """Recognize the spectraplex-LP form (module docstring); RouteMismatch says what is wrong."""
    desc, why = try_analyze(problem)
    if desc is None:
        raise RouteMismatch(why)
    X, psd_con, zvars = _variables(desc, problem)
    direct = dask_hinge_data(desc, problem, X, psd_con, zvars, sys.modules[__name__])
    if direct is not None:
        return direct
    n = X.shape[0]
    # objective: affine part plus hinge sums lifted to slack rows
    sense = -float(desc.sense)  # +1 maximize, -1 minimize
    lifted, lift_obj = _lift_hinges(desc, sense)
    zvars = zvars + [t for t, _ in lifted]
    zslices, zlb, zub = _lp_bounds(zvars)
    oX, ofac, oG, _ = _parts(desc.affine + lift_obj, X, zvars, "the objective")
    # constraints: find the trace bound (an equality if there is one, else the tightest <=)
    items = [(info.con, info.map, info.kind) for info in desc.affine_constraints()]
    items += [(None, g, "le") for _, g in lifted]
    parsed = [(con, *_parts(amap, X, zvars, short(con) if con is not None else "a hinge row"),
               kind) for con, amap, kind in items]
    trace_val, trace_eq, trace_con, pending = _trace_bound(parsed, n)
    rows = _RowSet(zlb, zub)
    for item in pending:
        rows.add(*item)
    if np.any(zlb > zub):
        raise RouteMismatch("the bounds on an LP variable are inconsistent (infeasible)")
    A, n_fac = _build_operator(rows.Xrows, rows.facs, rows.m, n)
    C, _ = _build_operator([sense * oX], [(0, 1, [(sense * Mj, Vj) for Mj, Vj in ofac])], 1, n)
    G = sp.vstack(rows.Grows, format="csr") if rows.Grows else sp.csr_array((0, zlb.size))
    lp = SpectraplexLP(
        A=A, C=C, G=sp.csr_array(G), c=sense * oG.toarray().ravel(),
        lb=np.concatenate(rows.lbs) if rows.lbs else np.zeros(0),
        ub=np.concatenate(rows.ubs) if rows.ubs else np.zeros(0), zlb=zlb, zub=zub,
        trace=float(trace_val), trace_eq=trace_eq, offset=sense * float(desc.constant),
    )
    return MGData(
        X=X, zvars=zvars, zslices=zslices, lp=lp, sense=sense, rows=rows.rows,
        bound_rows=rows.bound_rows, trace_con=trace_con, psd_con=psd_con, n_factored=n_fac,
    )


def _variables(desc: Any, problem: cp.Problem
               ) -> tuple[cp.Variable, cp.Constraint | None, list[cp.Variable]]:
    """The one PSD matrix variable X, its PSD constraint (or None: declared PSD) and the plain
    LP variables; RouteMismatch for cones, a second PSD variable, attributes."""
    for info in desc.constraints:
        if info.kind in ("cone", "nonaffine", "unreadable"):
            what = {"cone": f"a {type(info.con).__name__} cone", "nonaffine": "non-affine",
                    "unreadable": "not readable as real affine rows"}[info.kind]
            raise RouteMismatch(
                f"constraint {info.label} is {what}; only X >> 0, a trace bound and affine "
                "constraints are allowed"
            )
    psd_infos = desc.psd_constraints()
    for info in psd_infos:
        if info.var is None or info.var.ndim != 2:
            raise RouteMismatch(
                f"PSD constraint {info.label} is not of the form X >> 0 on a variable (a second "
                "PSD constraint)"
            )
    cands = desc.psd_variables()
    psd_cons = [info.con for info in psd_infos]
    if not cands:
        raise RouteMismatch("no PSD matrix variable (need X >> 0 or Variable(..., PSD=True))")
    if len(cands) > 1 or len(psd_cons) > 1:
        raise RouteMismatch(
            f"{max(len(cands), len(psd_cons))} PSD matrix variables/constraints; the route "
            "handles one (a second PSD variable)"
        )
    X = cands[0]
    if X.ndim != 2 or X.shape[0] != X.shape[1]:
        raise RouteMismatch("the PSD variable must be a square matrix")
    if not (X.attributes.get("PSD") or X.attributes.get("symmetric")):
        raise RouteMismatch("declare X symmetric=True (or PSD=True) so that X >> 0 means PSD")
    zvars = [v for v in problem.variables() if v.id != X.id]
    for v in zvars:
        bad = [a for a in ("PSD", "NSD", "symmetric", "hermitian", "diag", "boolean", "integer",
                           "complex", "imag", "bounds", "sparsity") if v.attributes.get(a)]
        if bad:
            what = "a second PSD variable" if {"PSD", "NSD"} & set(bad) else f"attribute {bad[0]}"
            raise RouteMismatch(f"variable {v.name()} has {what}; other variables must be plain "
                                "(or nonneg/nonpos) LP variables")
    return X, psd_cons[0] if psd_cons else None, zvars


def _lp_bounds(zvars: list[cp.Variable]) -> tuple[dict[int, slice], np.ndarray, np.ndarray]:
    """Each LP variable's slice of the stacked z and the sign bounds its attributes give."""
    zslices: dict[int, slice] = {}
    p = 0
    for v in zvars:
        zslices[v.id] = slice(p, p + v.size)
        p += v.size
    zlb, zub = np.full(p, -np.inf), np.full(p, np.inf)
    for v in zvars:
        if v.attributes.get("nonneg") or v.attributes.get("pos"):
            zlb[zslices[v.id]] = 0.0
        if v.attributes.get("nonpos") or v.attributes.get("neg"):
            zub[zslices[v.id]] = 0.0
    return zslices, zlb, zub


def _trace_bound(parsed: list, n: int) -> tuple[float, bool, tuple, list]:
    """The trace bound among the parsed constraints (an equality if there is one, else the
    tightest ``<=``): ``(t, is equality, (constraint, scale), the other constraints)``."""
    traces = []
    for i, (con, Xc, fac, Gz, off, kind) in enumerate(parsed):
        a = _is_trace_row(Xc, Gz, n) if not fac else 0.0
        if a and con is not None and (kind == "eq" or (kind == "le") == (a > 0)):
            traces.append((kind != "eq", -off[0] / a, a, i))
    if not traces:
        raise RouteMismatch("no trace bound on X (need trace(X) == t or trace(X) <= t)")
    _, trace_val, a, idx = min(traces)
    if not trace_val > 0:
        raise RouteMismatch(f"the trace bound must be positive, got {trace_val:g}")
    return trace_val, parsed[idx][-1] == "eq", (parsed[idx][0], a), parsed[:idx] + parsed[idx + 1:]


class _RowSet:
    """The constraint rows for the solver (X part, factored part, LP part, sides) and the
    user-row mapping; rows on a single LP variable without X become bounds of that variable
    (``zlb`` / ``zub``, updated in place)."""

    def __init__(self, zlb: np.ndarray, zub: np.ndarray) -> None:
        self.zlb, self.zub = zlb, zub
        self.Xrows: list = []
        self.facs: list = []
        self.Grows: list = []
        self.lbs: list = []
        self.ubs: list = []
        self.rows: list = []
        self.bound_rows: list = []
        self.m = 0

    def add(self, con: Any, Xc: Any, fac: list, Gz: Any, off: np.ndarray, kind: str) -> None:
        k = Xc.shape[0]
        if con is not None and not fac and Xc.nnz == 0 and Gz.nnz == k and k > 0 \
                and self._as_bounds(con, Gz, off, kind):
            return
        self.Xrows.append(Xc)
        self.facs.append((self.m, k, fac))
        self.Grows.append(Gz)
        self.lbs.append(-off if kind in ("eq", "ge") else np.full(k, -np.inf))
        self.ubs.append(-off if kind in ("eq", "le") else np.full(k, np.inf))
        if con is not None:
            self.rows.append((con, slice(self.m, self.m + k), -1.0 if kind == "ge" else 1.0))
        self.m += k

    def _as_bounds(self, con: Any, Gz: Any, off: np.ndarray, kind: str) -> bool:
        """Record rows with one LP variable each as bounds; False when they are not."""
        Gc = Gz.tocoo()
        if np.unique(Gc.row).size != Gz.shape[0]:
            return False
        order = np.argsort(Gc.row)
        cols, vals = Gc.col[order], Gc.data[order]
        bnd = -off / vals
        if kind == "eq":
            lo, hi = bnd, bnd
        else:
            upper = (vals > 0) == (kind == "le")
            lo = np.where(upper, -np.inf, bnd)
            hi = np.where(upper, bnd, np.inf)
        np.maximum.at(self.zlb, cols, lo)
        np.minimum.at(self.zub, cols, hi)
        self.bound_rows.append((con, cols, vals, np.where(np.isfinite(lo), -1.0, 1.0)))
        return True


def _build_operator(Xrows, facs, m, n) -> tuple[SymOperator, int]:
    """Sum of a factored part (all row_quad_forms) and a sparse dense part (the rest)."""
    if any(is_dask_array(Vj) for _, _, fac in facs for _, Vj in fac):
        return _build_dask_operator(Xrows, facs, n)
    Vs, blocks = [], []
    K = 0
    for start, _k, fac in facs:
        for Mj, Vj in fac:
            Mj = sp.coo_array(Mj)
            blocks.append((Mj.row + start, Mj.col + K, Mj.data))
            Vs.append(Vj)
            K += Vj.shape[0]
    ops = []
    if Vs:
        r = np.concatenate([b[0] for b in blocks])
        c = np.concatenate([b[1] for b in blocks])
        d = np.concatenate([b[2] for b in blocks])
        ops.append(FactoredOperator(np.vstack(Vs), sp.csr_array((d, (r, c)), shape=(m, K))))
    Xall = sp.vstack(Xrows, format="csr") if Xrows else sp.csr_array((m, n * n))
    if Xall.nnz:
        ops.append(DenseOperator(Xall, n))
    elif not ops:  # no term in X at all: the zero operator (factored, costs nothing)
        ops.append(FactoredOperator(np.zeros((0, n)), sp.csr_array((m, 0))))
    return sum_operators(ops), K


def _build_dask_operator(Xrows, facs, n) -> tuple[SymOperator, int]:
    """Constraints with a Dask-backed ``row_quad_forms`` become :class:`DaskRowOperator` rows
    (``A_r = sum_j s_j[r] v_{j,r} v_{j,r}^T``: row r of each V in row r of the constraint);
    the other constraints keep the in-memory operators. Stacked in constraint order."""
    ops, K = [], 0
    for Xc, (_start, k, fac) in zip(Xrows, facs, strict=True):
        K += sum(Vj.shape[0] for _, Vj in fac)
        if not any(is_dask_array(Vj) for _, Vj in fac):
            ops.append(_build_operator([Xc], [(0, k, fac)], k, n)[0])
            continue
        if Xc.nnz:
            raise RouteMismatch(
                "a constraint with a Dask-backed row_quad_forms may only have row_quad_forms "
                "terms in X (and LP variables); write the other terms in X as separate "
                "constraints"
            )
        terms = []
        for Mj, Vj in fac:
            Mj = sp.csr_array(Mj)
            d = Mj.diagonal() if Mj.shape[0] == Mj.shape[1] else None
            if (Mj.shape != (k, Vj.shape[0]) or d is None
                    or np.count_nonzero(d) != Mj.count_nonzero()):
                raise RouteMismatch(
                    "with a Dask array V, row_quad_forms(V, X) must enter its constraint row "
                    "by row (row r of V in row r, e.g. row_quad_forms(P, X) - "
                    "row_quad_forms(Q, X) >= rho - xi), not summed, indexed or in the "
                    "objective"
                )
            terms.append((d, Vj))
        try:
            ops.append(DaskRowOperator(terms))
        except ValueError as exc:
            raise RouteMismatch(str(exc)) from exc
    return (ops[0] if len(ops) == 1 else StackedOperator(ops)), K


def _dask_backed(op) -> bool:
    return isinstance(op, DaskRowOperator) or any(
        _dask_backed(o) for o in getattr(op, "ops", [])
    )


class MatrixGenerationRoute(Route):
    """Column generation over the spectraplex (module docstring)."""

    name = "matrix_generation"
    is_global = True
    priority = 30
    accepts_dask = True  # Dask-backed row_quad_forms: the data side runs on the cluster

    def extract(self, problem: cp.Problem) -> MGData:
        return extract(problem)

    def describe(self, data: MGData) -> str:
        lp = data.lp
        m = lp.A.m
        kind = "==" if lp.trace_eq else "<="
        form = f"{data.n_factored} factored rank-one terms" if data.n_factored else "dense data"
        return (f"LP over the spectraplex: X {lp.n}x{lp.n} with trace {kind} {lp.trace:g}, "
                f"{m} constraint rows, {lp.G.shape[1]} LP variables ({form})")

    def pays_off(self, problem: cp.Problem, match: Match) -> tuple[bool, str]:
        data: MGData = match.data
        lp = data.lp
        if _dask_backed(lp.A):
            return True, "Dask-backed data: the only route that keeps them distributed"
        size = float(lp.A.m) * lp.n * lp.n
        m = lp.A.m
        if lp.n >= PAYS_OFF_MIN_N and m >= PAYS_OFF_MIN_ROWS and size >= PAYS_OFF_MIN_DATA:
            return True, (f"n={lp.n}, {m} rows, rows*n^2={size:.2g}: faster than the conic "
                          "route on every member of the benchmark families at this size")
        return False, (f"n={lp.n}, {m} rows, rows*n^2={size:.2g}: small; matrix generation "
                       f"is only picked from n >= {PAYS_OFF_MIN_N} and {PAYS_OFF_MIN_ROWS} rows "
                       f"and rows*n^2 >= {PAYS_OFF_MIN_DATA:.0e} (worst case of the measured "
                       "families: below, the conic route was faster on some instance, e.g. a "
                       "high-rank one)")

    OPTIONS = _ROUTE_OPTS
    UNIT = "round"
    STATUS_MAP = {SolverStatus.OPTIMAL: cp.OPTIMAL, SolverStatus.INFEASIBLE: cp.INFEASIBLE,
                  SolverStatus.UNBOUNDED: cp.UNBOUNDED}

    def to_user(self, data: MGData) -> Callable[[float], float]:
        def user(v: float) -> float:  # the solver's maximization form -> the user's objective
            return data.sense * v

        return user

    def run(self, data: MGData, ctx: RunContext, **opts: Any) -> MGOutcome:
        _check_data(data)
        # row_band 1e-3 (solver default 1e-2): more idle hinge rows leave the early masters; on the
        # rank-16 / rank-19 family members at D = 100, |S| = 2000: 22.0 -> 16.6 and 46.7 -> 34.3 s
        # CPU (issue 22); a low-rank member 0.9 -> 1.9 s
        # max_join 0.5: at most half the working set's size joins per round (the most violated
        # rows); the early masters stay small while the subspace is wrong: member 11 (rank 19)
        # 22.1 -> 11.2 s CPU, member 4 9.6 -> 6.6, low-rank members 0 / 2 1.8 -> 1.2 / 2.2 -> 0.9
        # full_space 150: once X uses >= n/16 directions at gap <= 1e-2, the master becomes the
        # SDP on the working rows (P = I, exact rows): the worst family member 7 (rank 10, 171
        # rounds of a tailing bound) 22-23 -> 4-5 s CPU, 13 rounds (issue 22)
        kw = {"master": "psd", "max_rank": 30, "smoothing": 0.5, "row_band": 1e-3,
              "max_join": 0.5, "full_space": FULL_SPACE_N, **opts}

        lp = data.lp
        if data.hinge is not None:  # one hinge over Dask rows: the cut master directly
            return MGOutcome(*run_dask_hinge(data, ctx.callback, kw), _backend(kw))

        def solve(kw):
            return solve_spectraplex_lp(
                lp.A, lp.C, lp.G, lp.c, lp.lb, lp.ub, lp.zlb, lp.zub,
                trace=lp.trace, trace_eq=lp.trace_eq, offset=lp.offset,
                callback=ctx.callback, **kw,
            )

        try:
            try:
                res = solve(kw)
            except (MasterInfeasible, RuntimeError, np.linalg.LinAlgError):
                if kw.get("master") != "psd":
                    raise
                # the PSD-block master restricts X to a subspace: its infeasibility proves
                # nothing, and Clarabel can stall on it (badly scaled data). The LP master has
                # a phase 1 (artificial variables) that decides feasibility.
                kw = {**kw, "master": "lp"}
                res = solve(kw)
        except UnboundedProblem:
            return MGOutcome(SolverStatus.UNBOUNDED, None, _backend(kw))
        except (RuntimeError, np.linalg.LinAlgError) as exc:
            raise cp.error.SolverError(f"matrix generation failed: {exc}") from exc
        return MGOutcome(_phase_one_status(data, res, kw), res, _backend(kw))

    def invert(self, out: MGOutcome, ctx: RunContext) -> RouteResult:
        data: MGData = ctx.data
        status = self.map_status(out.status)
        res = out.res
        if status in (cp.INFEASIBLE, cp.UNBOUNDED):
            more = {} if res is None else {"iterations": res.iterations, "history": res.history}
            return RouteResult.no_point(status, -int(data.sense), backend=out.backend,
                                        solve_time=ctx.elapsed(), **more)
        user = self.to_user(data)
        Xv = 0.5 * (res.X + res.X.T)
        primal = {data.X.id: Xv}
        for v in data.zvars:
            primal[v.id] = res.z[data.zslices[v.id]].reshape(v.shape, order="F")
        return RouteResult(
            status=status,
            primal=primal,
            objective=user(res.objective),
            backend=out.backend,
            dual=self._duals(data, res),
            bound=user(res.bound),
            gap=res.gap,
            iterations=res.iterations,
            solve_time=ctx.elapsed(),
            history=user_history(res.history, user),
            # numerical rank (eigenvalues above 1e-6 of the largest: interior-point masters leave
            # tiny weights on unused directions)
            extra={"theta": res.theta, "U": res.U,
                   "rank": int((res.theta > 1e-6 * res.theta.max(initial=0.0)).sum()),
                   "solver_status": res.status, "n_columns": res.n_columns},
        )

    @staticmethod
    def _duals(data: MGData, res) -> dict[int, Any]:
        dual: dict[int, Any] = {}
        lp = data.lp
        y = res.y
        for con, sl, sign in data.rows:
            val = sign * y[sl]
            dual[con.id] = val.reshape(con.shape, order="F") if con.shape else float(val[0])
        if data.bound_rows and lp.G.shape[1]:
            d = lp.c - lp.G.T @ y
            for con, cols, vals, side in data.bound_rows:
                # reduced cost of the bounded variable, on the side this constraint bounds
                lam = np.maximum(side * d[cols], 0.0) / np.abs(vals)
                dual[con.id] = lam.reshape(con.shape, order="F") if con.shape else float(lam[0])
        con, a = data.trace_con
        dual[con.id] = float(res.mu / a) if con.shape == () else np.full(con.shape, res.mu / a)
        if data.psd_con is not None:
            H = getattr(res, "H", None)  # the direct hinge path keeps y on the workers
            if H is None:
                H = lp.full.adjoint_dense(np.append(1.0, -y))
            dual[data.psd_con.id] = res.mu * np.eye(lp.n) - H
        return dual


@dataclass(frozen=True)
class MGOutcome:
    """How the route's solve ended: the status (the solver's, or infeasible by phase 1, or
    unbounded), the solver's result (None when unbounded) and the engine's name."""

    status: str
    res: Any
    backend: str


def _phase_one_status(data: MGData, res: Any, kw: dict) -> str:
    """The solver's status, or ``infeasible`` when a PSD-master solve did not converge and the
    LP master's phase 1 proves the constraints empty (the PSD-block / cut masters have no
    phase 1; a checked Farkas certificate, at every size)."""
    lp = data.lp
    if res.status in (SolverStatus.OPTIMAL, SolverStatus.INFEASIBLE) or kw.get("master") != "psd":
        return res.status
    if phase_one(lp.A, lp.G, lp.lb, lp.ub, lp.zlb, lp.zub, lp.trace,
                 lp.trace_eq, dense=lp.A.n <= 300, time_limit=kw.get("time_limit", np.inf)):
        return SolverStatus.INFEASIBLE
    return res.status


def _backend(kw: dict) -> str:
    return "clarabel-psd-block+eigen" if kw.get("master") == "psd" else "highs+eigen"


register_route(MatrixGenerationRoute())
