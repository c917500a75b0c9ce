"""The low-rank SDP route's reader: one PSD matrix ``K``, a linear objective, sparse equality
rows, centering and a trace bound, read from the normalized description
(:mod:`specopt.reductions.analysis`) into :class:`LRData` (the rows in COO form, never a dense
``m x n^2`` array). The form is in :mod:`specopt.reductions.low_rank_sdp`'s docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..solvers.sdp import SparseRows, SymOp, distance_rows, graph_trace_bound
from .analysis import short, try_analyze
from .base import RouteMismatch


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
    #: rows read from inequalities (as ``A_r(K) <= b_r``), a bool mask; None: all equalities
    ineq: np.ndarray | None = None


def _coo_rows(A: Any, n: int, shift: int) -> tuple[np.ndarray, ...]:
    """Rows (shifted), entries ``(i, j)`` and values of a sparse ``(k, n^2)`` coefficient block
    (column-major vec: entry ``K[i, j]`` is column ``i + j n``)."""
    co = sp.coo_array(A)
    return co.row.astype(np.int64) + shift, co.col % n, co.col // n, co.data


def recognize_low_rank_sdp(problem: cp.Problem, symmetry_constraint: bool = False,
                           inequalities: bool = False) -> LRData:
    """Extract the low-rank SDP data of ``problem`` from its normalized description
    (:func:`specopt.reductions.analysis.analyze`; parameters bound to their current values), or
    raise :class:`RouteMismatch` saying why in one short sentence.

    ``symmetry_constraint``: a square variable without the symmetric / PSD attribute is taken
    when a constraint says ``K == K.T`` (the engine's ``K`` meets it exactly, so that
    constraint is not a row). The iterated-SDP route's steps use it; the low-rank route does
    not, since its conic leg solves the problem as written, where Clarabel fails on that form
    (an S-curve SDE, N = 30: 22 s uncertified on the engine against 3.4 s on the conic
    route).

    ``inequalities``: affine inequalities other than a trace bound are rows ``A_r(K) <= b_r``
    (``>=`` rows negated; ``LRData.ineq``) instead of a mismatch, for the iterated-SDP route's
    steps (the engine's interior point takes them with slacks; the implied trace bound is read
    off the equality rows only)."""
    desc, why = try_analyze(problem)
    if desc is None:
        raise RouteMismatch(why)
    key = "_low_rank_sdp" + ("_sym" if symmetry_constraint else "") + (
        "_ineq" if inequalities else "")
    cached = desc.__dict__.get(key)  # explain, then solve: read once per description
    if isinstance(cached, RouteMismatch):
        raise RouteMismatch(str(cached))
    if cached is not None:
        return cached
    try:
        data = _read_description(desc, problem, symmetry_constraint, inequalities)
    except RouteMismatch as exc:
        desc.__dict__[key] = exc
        raise
    desc.__dict__[key] = data
    return data


def _read_description(desc: Any, problem: cp.Problem, symmetry_constraint: bool,
                      inequalities: bool = False) -> LRData:
    K, symmetry = _matrix_variable(desc, problem, symmetry_constraint)
    C = _objective_matrix(desc, problem, K, symmetrize=symmetry is not None)
    rows = _RowReader(K, inequalities)
    # the engine's K is symmetric: the constraints saying K == K.T are not rows
    skip = {id(c) for c in symmetry or ()}
    for info in desc.constraints:
        if id(info.con) not in skip:
            rows.read(info)
    if not (rows.psd_con is not None or K.attributes.get("PSD")):
        raise RouteMismatch(f"no PSD constraint on {K.name()} (K >> 0 or PSD=True)")
    A, b = rows.sparse_rows()
    centered = bool(rows.centering)
    ineq = np.concatenate(rows.le) if rows.le and np.any(np.concatenate(rows.le)) else None
    return LRData(K=K, n=K.shape[0], C=C, offset=float(desc.constant),
                  sense="max" if desc.sense < 0 else "min", A=A, b=b, centered=centered,
                  trace_bound=rows.trace_t,
                  implied_trace_bound=_implied_trace_bound(A, b, centered, ineq),
                  rows=rows.rowmap, centering_cons=rows.centering, trace_con=rows.trace_con,
                  psd_con=rows.psd_con, ineq=ineq)


def _matrix_variable(desc: Any, problem: cp.Problem,
                     symmetry_constraint: bool = False) -> tuple[cp.Variable, Any]:
    """The one variable: square, real, declared symmetric or PSD, or (``symmetry_constraint``)
    made symmetric by constraints ``K == K.T`` (in any spelling whose rows are ``a (K_ij -
    K_ji) = 0``, one constraint or one per pair), returned as the second item (a tuple; None
    for a declared one)."""
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
    if K.is_complex():
        raise RouteMismatch("complex variables are not supported")
    attrs = K.attributes
    if attrs.get("symmetric") or attrs.get("PSD"):
        return K, None
    symmetry = _symmetry_constraint(desc, K) if symmetry_constraint else None
    if symmetry is None:
        raise RouteMismatch(f"{K.name()} must be declared symmetric=True or PSD=True")
    return K, symmetry


def _symmetry_constraint(desc: Any, K: cp.Variable) -> tuple[cp.Constraint, ...] | None:
    """The equality constraints that say ``K == K.T``: one that does by itself (any spelling),
    or several whose rows each equate one pair (``K[i, j] == K[j, i]`` in a loop, a triangle's
    entries as one vector) and that together cover every pair; None otherwise."""
    n = K.shape[0]
    parts: list[cp.Constraint] = []
    covered: set[int] = set()
    for info in desc.constraints:
        amap = info.map
        if (info.kind != "eq" or amap is None or amap.factored or np.any(amap.offset)):
            continue
        pairs = symmetry_pairs(amap.coef(K), n)
        if pairs is None:
            continue
        if len(pairs) == n * (n - 1) // 2:
            return (info.con,)
        parts.append(info.con)
        covered.update(pairs.tolist())
    return tuple(parts) if parts and len(covered) == n * (n - 1) // 2 else None


def symmetry_pairs(A: Any, n: int) -> np.ndarray | None:
    """The pairs ``i < j`` (as ``i n + j``, unique) of a coefficient block ``A`` (column-major
    vec of ``K``, any number of rows) whose every nonzero row is ``a (K_ij - K_ji)`` with ``i !=
    j``; None when a row is anything else, or no row is."""
    A = sp.csr_array(A)
    if A.ndim != 2 or A.shape[1] != n * n:
        return None
    A.sum_duplicates()
    A.eliminate_zeros()
    counts = np.diff(A.indptr)
    if not A.nnz or np.any((counts != 0) & (counts != 2)):
        return None
    cols, vals = A.indices.reshape(-1, 2), A.data.reshape(-1, 2)
    ia, ja, ib, jb = cols[:, 0] % n, cols[:, 0] // n, cols[:, 1] % n, cols[:, 1] // n
    if not (np.all(ia == jb) and np.all(ja == ib) and np.all(ia != ja)
            and np.allclose(vals[:, 0], -vals[:, 1])):
        return None
    return np.unique(np.minimum(ia, ja) * n + np.maximum(ia, ja))


def _objective_matrix(desc: Any, problem: cp.Problem, K: cp.Variable,
                      symmetrize: bool = False) -> SymOp:
    """``C`` of the linear objective ``<C, K> + const`` (dense when over a quarter full);
    ``symmetrize``: ``(C + C^T) / 2``, the same objective on symmetric ``K`` (a square variable
    made symmetric by a constraint may carry a non-symmetric ``C``)."""
    n = K.shape[0]
    if desc.terms:
        raise RouteMismatch(f"the objective is not linear in {K.name()} "
                            f"(term {short(desc.terms[0].expr)})")
    if problem.objective.expr.size != 1:
        raise RouteMismatch("the objective must be a scalar")
    if desc.affine.factored:
        raise RouteMismatch("the objective has row_quad_forms terms (not one matrix C)")
    co = sp.coo_array(desc.affine.coef(K))
    ci, cj, data = co.col % n, co.col // n, co.data  # column-major vec
    if symmetrize:
        ci, cj, data = np.r_[ci, cj], np.r_[cj, ci], 0.5 * np.r_[data, data]
    if co.nnz > n * n // 4:
        D = np.zeros((n, n))
        np.add.at(D, (ci, cj), data)
        return SymOp(n, dense=D)
    return SymOp(n, sparse=sp.coo_array((data, (ci, cj)), shape=(n, n)).tocsr())


class _RowReader:
    """Reads the constraints one by one: ``K >> 0``, equality rows (COO), centering rows and
    trace bounds ``tr K <= t`` (the tightest kept); anything else is a RouteMismatch."""

    def __init__(self, K: cp.Variable, inequalities: bool = False) -> None:
        self.K, self.n = K, K.shape[0]
        self.inequalities = inequalities
        self.le: list[np.ndarray] = []  # per block of rows: which are inequalities
        self.psd_con: cp.Constraint | None = None
        self.centering: list[cp.Constraint] = []
        self.coo: list[tuple[np.ndarray, ...]] = []
        self.bs: list[np.ndarray] = []
        self.rowmap: list[tuple[cp.Constraint, slice]] = []
        self.trace_con: tuple[cp.Constraint, float] | None = None
        self.trace_t: float | None = None
        self.m = 0

    def read(self, info: Any) -> None:
        con, amap, K = info.con, info.map, self.K
        if info.kind == "psd":
            if info.var is not None and info.var.id == K.id:
                self.psd_con = con
                return
            raise RouteMismatch(f"PSD constraint {short(con)} is not on {K.name()} itself")
        if info.kind in ("eq", "le", "ge") and amap is not None and amap.factored:
            raise RouteMismatch(f"constraint {short(con)} has row_quad_forms rows")
        if info.kind == "eq" and amap is not None:
            self._equality(info)
            return
        if info.kind in ("le", "ge") and amap is not None:
            a = info.trace_scale(self.K)
            upper = (a > 0 and info.kind == "le") or (a < 0 and info.kind == "ge")
            if self.inequalities and not upper:  # (a trace lower bound is a row too)
                self._inequality(info)
            else:
                self._trace_bound(info)
            return
        if info.kind == "nonaffine":
            raise RouteMismatch(f"constraint {short(con)} is not affine in {K.name()}")
        raise RouteMismatch(f"constraint {short(con)} ({type(con).__name__}) is not supported")

    def _equality(self, info: Any) -> None:
        con, amap = info.con, info.map
        if info.is_centering(self.K):
            self.centering.append(con)
            return
        self._rows(con, amap.coef(self.K), -amap.offset, False)

    def _inequality(self, info: Any) -> None:
        """``a(K) + c <= 0`` (``>=``: negated) as rows ``a(K) <= -c``."""
        sign = 1.0 if info.kind == "le" else -1.0
        amap = info.map
        self._rows(info.con, sign * amap.coef(self.K), -sign * amap.offset, True)

    def _rows(self, con: cp.Constraint, coef: Any, b: np.ndarray, le: bool) -> None:
        size = coef.shape[0]
        self.coo.append(_coo_rows(coef, self.n, self.m))
        self.bs.append(np.asarray(b, dtype=float).ravel())
        self.le.append(np.full(size, le))
        self.rowmap.append((con, slice(self.m, self.m + size)))
        self.m += size

    def _trace_bound(self, info: Any) -> None:
        con, amap = info.con, info.map
        a = info.trace_scale(self.K)
        if not ((a > 0 and info.kind == "le") or (a < 0 and info.kind == "ge")):
            raise RouteMismatch(
                f"inequality {short(con)} is not a trace bound tr(K) <= t; the low-rank route "
                "takes equality rows, centering and one trace bound"
            )
        t = -float(amap.offset[0]) / a
        if t < 0:
            raise RouteMismatch(f"trace bound {t:g} < 0: infeasible with K PSD")
        self.trace_con = (con, abs(a))
        self.trace_t = t if self.trace_t is None else min(self.trace_t, t)

    def sparse_rows(self) -> tuple[SparseRows, np.ndarray]:
        """The equality rows ``A(K) = b``."""
        def cat(k: int, dtype: Any) -> np.ndarray:
            return (np.concatenate([c[k] for c in self.coo]) if self.coo
                    else np.zeros(0, dtype=dtype))

        A = SparseRows(cat(0, np.int64), cat(1, np.int64), cat(2, np.int64), cat(3, float),
                       self.m, self.n)
        return A, np.concatenate(self.bs) if self.bs else np.zeros(0)


def _implied_trace_bound(A: SparseRows, b: np.ndarray, centered: bool,
                         ineq: np.ndarray | None = None) -> float | None:
    """``tr K <= T`` implied by the rows: fixed diagonal, or connected distance rows + centering
    (equality rows only)."""
    if ineq is not None:
        A, b = A.subset(~ineq), b[~ineq]
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
