"""Problem data of the SDP engine: rows in COO form, the objective operator, trace bounds implied
by distance rows, the result type, and the problem in solver units. No CVXPY here."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, dijkstra

from ._kernels import PairForm

OPTIMAL = "optimal"
INACCURATE = "inaccurate"
UNBOUNDED = "unbounded"


# Data
# --------------------------------------------------------------------------------------------
@dataclass
class SparseRows:
    """``A(K)_r = sum_{k: rows[k] = r} vals[k] * K[ii[k], jj[k]]`` for ``r < m`` (COO form).

    ``K`` is symmetric, so ``(i, j)`` and ``(j, i)`` entries are interchangeable.
    """

    rows: np.ndarray
    ii: np.ndarray
    jj: np.ndarray
    vals: np.ndarray
    m: int
    n: int

    def __post_init__(self) -> None:
        self.rows = np.ascontiguousarray(self.rows, dtype=np.int64)
        self.ii = np.ascontiguousarray(self.ii, dtype=np.int64)
        self.jj = np.ascontiguousarray(self.jj, dtype=np.int64)
        self.vals = np.ascontiguousarray(self.vals, dtype=float)
        k = self.rows.size
        if not (self.ii.size == self.jj.size == self.vals.size == k):
            raise ValueError("rows, ii, jj, vals must have the same length")
        if k and (self.rows.min() < 0 or self.rows.max() >= self.m):
            raise ValueError(f"row indices must be in [0, {self.m})")
        if k and (min(self.ii.min(), self.jj.min()) < 0 or max(self.ii.max(), self.jj.max())
                  >= self.n):
            raise ValueError(f"entry indices must be in [0, {self.n})")
        if not np.all(np.isfinite(self.vals)):
            raise ValueError("row coefficients must be finite")

    @classmethod
    def from_pairs(cls, pairs: np.ndarray, n: int) -> SparseRows:
        """Distance rows ``K_ii + K_jj - 2 K_ij`` for each pair ``(i, j)``."""
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        m = len(pairs)
        i, j = pairs[:, 0], pairs[:, 1]
        return cls(np.repeat(np.arange(m), 3), np.c_[i, j, i].ravel(), np.c_[i, j, j].ravel(),
                   np.tile([1.0, 1.0, -2.0], m), m, n)

    @classmethod
    def from_entries(cls, ii: np.ndarray, jj: np.ndarray, n: int) -> SparseRows:
        """Entry rows ``K[ii[r], jj[r]]``."""
        ii = np.asarray(ii, dtype=np.int64).ravel()
        m = ii.size
        return cls(np.arange(m), ii, np.asarray(jj, dtype=np.int64).ravel(), np.ones(m), m, n)

    @functools.cached_property
    def pairs(self) -> PairForm:
        """The rows grouped by matrix entry (the factored method's kernels), built once."""
        return PairForm(self.rows, self.ii, self.jj, self.vals, self.m, self.n)

    def row_norms(self) -> np.ndarray:
        """Frobenius norms of the symmetrized row matrices ``(A_r + A_r^T) / 2``."""
        M = sp.coo_array((0.5 * self.vals, (self.rows, self.ii * self.n + self.jj)),
                         shape=(self.m, self.n * self.n)).tocsr()
        M = M + sp.coo_array((0.5 * self.vals, (self.rows, self.jj * self.n + self.ii)),
                             shape=(self.m, self.n * self.n)).tocsr()
        M.sum_duplicates()
        return np.sqrt(np.asarray(M.multiply(M).sum(axis=1)).ravel())

    def subset(self, keep: np.ndarray) -> SparseRows:
        """The rows where the bool mask ``keep`` is True, renumbered in order."""
        keep = np.asarray(keep, dtype=bool)
        index = np.cumsum(keep) - 1
        on = keep[self.rows]
        return SparseRows(index[self.rows[on]], self.ii[on], self.jj[on], self.vals[on],
                          int(keep.sum()), self.n)

    def scaled(self, row_scale: np.ndarray) -> SparseRows:
        return SparseRows(self.rows, self.ii, self.jj, self.vals * row_scale[self.rows],
                          self.m, self.n)


class SymOp:
    """A symmetric ``n x n`` matrix ``sparse + U diag(w) U^T + dense`` (any part optional)."""

    def __init__(self, n: int, sparse: Any = None, U: np.ndarray | None = None,
                 w: np.ndarray | None = None, dense: np.ndarray | None = None) -> None:
        self.n = int(n)
        self.sparse = None
        if sparse is not None:
            S = sp.csr_array(sparse, dtype=float)
            if S.shape != (n, n):
                raise ValueError(f"sparse part must be {n} x {n}, got {S.shape}")
            self.sparse = sp.csr_array(0.5 * (S + S.T))
        self.U = None if U is None else np.ascontiguousarray(
            np.asarray(U, dtype=float).reshape(n, -1))
        self.w = None if U is None else np.asarray(w, dtype=float).ravel()
        if self.U is not None and self.w.size != self.U.shape[1]:
            raise ValueError("U and w sizes differ")
        self.dense = None
        if dense is not None:
            D = np.asarray(dense, dtype=float)
            if D.shape != (n, n):
                raise ValueError(f"dense part must be {n} x {n}, got {D.shape}")
            self.dense = 0.5 * (D + D.T)
        for part in (self.sparse.data if self.sparse is not None else None, self.U, self.w,
                     self.dense):
            if part is not None and not np.all(np.isfinite(part)):
                raise ValueError("the objective matrix C must be finite")

    @classmethod
    def identity(cls, n: int, scale: float = 1.0) -> SymOp:
        return cls(n, sparse=sp.identity(n, format="csr") * scale)

    def matmat(self, X: np.ndarray) -> np.ndarray:
        out = np.zeros_like(X)
        if self.sparse is not None:
            out += self.sparse @ X
        if self.U is not None:
            out += self.U @ (self.w[:, None] * (self.U.T @ X)) if X.ndim == 2 else self.U @ (
                self.w * (self.U.T @ X))
        if self.dense is not None:
            out += self.dense @ X
        return out

    def scaled(self, s: float) -> SymOp:
        return SymOp(self.n, None if self.sparse is None else self.sparse * s, self.U,
                     None if self.w is None else self.w * s,
                     None if self.dense is None else self.dense * s)

    def fro_norm(self) -> float:
        """``||C||_F`` (exact; O(nnz + n k^2 + n^2 for the dense part))."""
        tot = 0.0
        if self.sparse is not None:
            tot += float(np.sum(self.sparse.data ** 2))
        if self.U is not None:
            G = self.U.T @ self.U
            tot += float(np.sum((self.w[:, None] * G) * (G * self.w[None, :])))
            if self.sparse is not None:
                tot += 2.0 * float(np.sum((self.sparse @ self.U) * self.U * self.w))
        if self.dense is not None:
            tot += float(np.sum(self.dense ** 2))
            if self.sparse is not None:
                tot += 2.0 * float(self.sparse.multiply(self.dense).sum())
            if self.U is not None:
                tot += 2.0 * float(np.sum((self.dense @ self.U) * self.U * self.w))
        return math.sqrt(max(tot, 0.0))

    def to_dense(self) -> np.ndarray:
        return self.matmat(np.eye(self.n))

    def negative_margin(self) -> float | None:
        """``c > 0`` with ``C <= -c I`` when that is read off the parts (a diagonal sparse part
        with every diagonal entry ``<= -c``, a low-rank part with ``w <= 0``, no dense part);
        else None. (``max tr K`` in the engine's ``min`` form: ``C = -I``.)"""
        if self.dense is not None or self.sparse is None or (
                self.w is not None and np.any(self.w > 0)):
            return None
        S = sp.coo_array(self.sparse)
        if np.any((S.row != S.col) & (S.data != 0)):
            return None
        d = np.zeros(self.n)
        np.add.at(d, S.row, S.data)
        c = -float(np.max(d)) if d.size else 0.0
        return c if c > 0 else None

    def norm2_bound(self) -> float:
        """Upper bound on ``||C||_2``: row-sum norm, ``max|w| ||U||_2^2``, ``||D||_F``."""
        tot = 0.0
        if self.sparse is not None:
            tot += float(np.max(abs(self.sparse).sum(axis=1), initial=0.0))
        if self.U is not None and self.U.size:
            tot += float(np.max(np.abs(self.w))) * float(np.linalg.norm(self.U, 2)) ** 2
        if self.dense is not None:
            tot += float(np.linalg.norm(self.dense))
        return tot


# --------------------------------------------------------------------------------------------
# Trace bounds implied by the rows
# --------------------------------------------------------------------------------------------
def distance_rows(A: SparseRows, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the form ``a (K_ii + K_jj - 2 K_ij) = b_r`` (any split of the off-diagonal part).

    Returns ``(pairs, d2)``: the pairs ``(i, j)`` and the squared distances ``b_r / a``.
    """
    if A.rows.size == 0:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0)
    order = np.argsort(A.rows, kind="stable")
    rows, ii, jj, vals = A.rows[order], A.ii[order], A.jj[order], A.vals[order]
    counts = np.bincount(rows, minlength=A.m)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    pairs, d2 = [], []
    for r in np.flatnonzero((counts >= 3) & (counts <= 4)):
        s = slice(starts[r], starts[r] + counts[r])
        i_, j_, v_ = ii[s], jj[s], vals[s]
        diag = i_ == j_
        if diag.sum() != 2:
            continue
        p, q = i_[diag]
        if p == q or not np.isclose(v_[diag][0], v_[diag][1]):
            continue
        a = v_[diag][0]
        off = ~diag
        if not np.all(((i_[off] == p) & (j_[off] == q)) | ((i_[off] == q) & (j_[off] == p))):
            continue
        if a <= 0 or not np.isclose(v_[off].sum(), -2 * a):
            continue
        pairs.append((p, q))
        d2.append(b[r] / a)
    return np.array(pairs, dtype=np.int64).reshape(-1, 2), np.array(d2, dtype=float)


def graph_trace_bound(n: int, pairs: np.ndarray, d2: np.ndarray, sources: int = 4) -> float | None:
    """A bound ``tr K <= T`` for every centered PSD ``K`` with the given edge distances.

    ``K = Y Y^T`` with ``Y^T 1 = 0``: ``tr K = sum_i ||y_i - ybar||^2 <= sum_i ||y_i - y_s||^2
    <= sum_i dist_G(s, i)^2`` for any node ``s`` (the mean minimizes the sum of squares; the
    distance along a path is at most the sum of its edge lengths ``sqrt(d2)``). Minimum over a
    few sources; ``None`` when the graph does not connect all ``n`` nodes.
    """
    if len(pairs) == 0 or np.any(d2 < 0):
        return None
    W = sp.coo_array((np.sqrt(d2) + 1e-300, (pairs[:, 0], pairs[:, 1])), shape=(n, n)).tocsr()
    W = W.maximum(W.T)
    ncomp, _ = connected_components(W, directed=False)
    if ncomp > 1:
        return None
    rng = np.random.default_rng(0)
    src = np.unique(np.r_[0, rng.choice(n, size=min(n, sources) - 1, replace=False)]) if n > 1 \
        else np.array([0])
    D = dijkstra(W, directed=False, indices=src)
    return float(np.min(np.sum(D**2, axis=1)))


# --------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------
@dataclass
class LowRankSDPResult:
    """Result of :func:`specopt.solvers.sdp.solve_low_rank_sdp` (the user's sense and units).

    ``Y``: the factor (``K = Y Y^T``); ``y``: row multipliers (``S = C - A^*(y)`` PSD at the
    optimum when minimizing, ``A^*(y) - C`` when maximizing); ``mu``: multiplier of ``tr K <= t``;
    ``bound``: proven bound (lower when minimizing, upper when maximizing) or None;
    ``lambda_min``: smallest eigenvalue of the (sign-adjusted) dual slack; ``primal_residual``:
    ``||A(K) - b||_2 / (1 + ||b||_2)``; ``sigma``: final penalty (for warm starts).
    """

    Y: np.ndarray
    y: np.ndarray
    mu: float
    objective: float
    bound: float | None
    gap: float
    dual_value: float
    lambda_min: float
    dual_infeasibility: float
    primal_residual: float
    max_abs_residual: float
    status: str
    iterations: int
    inner_iterations: int
    rank: int
    sigma: float
    trace_bound_used: float | None
    solve_time: float
    history: dict[str, list[float]] = field(default_factory=dict)
    rank_growths: int = 0
    ray: np.ndarray | None = None

    @property
    def K(self) -> np.ndarray:
        return self.Y @ self.Y.T


# --------------------------------------------------------------------------------------------
# The problem in solver units
# --------------------------------------------------------------------------------------------
class Scaled:
    """The problem in solver units: unit-norm rows, ``|C| ~ 1``, ``K = kappa K~``."""

    def __init__(self, C: SymOp, A: SparseRows, b: np.ndarray, t: float | None,
                 t_implied: float | None, centered: bool, sense: float,
                 face: Any = None, ineq: np.ndarray | None = None) -> None:
        n = A.n
        norms = A.row_norms()
        if np.any(norms == 0):
            bad = np.flatnonzero(norms == 0)
            if np.any(b[bad] != 0):
                raise ValueError(f"row {int(bad[0])} is identically zero with b != 0: infeasible")
            norms[bad] = 1.0
        self.row_scale = 1.0 / norms
        self.A = A.scaled(self.row_scale)
        bt = b * self.row_scale
        cands = [float(np.max(np.abs(bt))) if bt.size else 0.0]
        if t is not None:
            cands.append(t / n)
        kappa = max(cands)
        self.kappa = kappa if kappa > 0 else 1.0
        self.b = bt / self.kappa
        cn = C.fro_norm() / math.sqrt(n)
        self.gamma = cn if cn > 0 else 1.0
        self.C = C.scaled(sense / self.gamma)
        self.t = None if t is None else t / self.kappa
        self.t_cert = None
        for v in (t, t_implied):
            if v is not None:
                self.t_cert = v / self.kappa if self.t_cert is None else min(
                    self.t_cert, v / self.kappa)
        #: ``c > 0`` with ``C <= -c I`` (or None): the certificate's scaled dual bound
        self.c_margin = self.C.negative_margin()
        self.centered = centered
        self.sense = sense
        self.n = n
        self.m = A.m
        # facial reduction: K = V Z V^T (V orthonormal, n x f; orthogonal to 1 when centered)
        self.face = face
        self.V = None if face is None else np.ascontiguousarray(face.V)
        #: the rows ``A_r(K) <= b_r`` (bool mask), None when every row is an equality
        self.ineq = None if ineq is None or not np.any(ineq) else np.asarray(ineq, dtype=bool)

    def user_objective(self, obj: float) -> float:
        """A solver-unit objective (or bound) in the user's units and sense."""
        return obj * self.gamma * self.kappa * self.sense

    def project(self, Y: np.ndarray) -> np.ndarray:
        if self.V is not None:
            return self.V @ (self.V.T @ Y)
        return Y - Y.mean(axis=0, keepdims=True) if self.centered else Y

    def slack_norm_bound(self, y: np.ndarray, mu: float) -> float:
        """An upper bound on ``||C - A^*(y) + mu I||_2`` (row-sum norm of the sparse parts)."""
        adj = abs(self.A.pairs.adjoint(y))
        return self.C.norm2_bound() + float(np.max(adj.sum(axis=1), initial=0.0)) + abs(mu)

    def residual(self, Y: np.ndarray) -> np.ndarray:
        """``A(Y Y^T) - b``, on the inequality rows only its positive part (the violation)."""
        r = self.A.pairs.yyt(Y) - self.b
        if self.ineq is not None:
            r[self.ineq] = np.maximum(r[self.ineq], 0.0)
        return r

    def dual_feasible(self, y: np.ndarray) -> np.ndarray:
        """``y`` with the inequality rows' multipliers ``<= 0`` (a valid dual bound needs it:
        ``y_r (A_r(K) - b_r) >= 0`` on every feasible ``K``)."""
        if self.ineq is None:
            return y
        y = np.array(y, dtype=float, copy=True)
        y[self.ineq] = np.minimum(y[self.ineq], 0.0)
        return y

    def slack_matmat(self, y: np.ndarray, mu: float, X: np.ndarray) -> np.ndarray:
        out = self.C.matmat(X) - self.A.pairs.adj_times(y, X)
        if mu:
            out += mu * X
        return out
