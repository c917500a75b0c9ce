r"""Low-rank (Burer-Monteiro) augmented Lagrangian for SDPs with sparse rows. No CVXPY here.

Problem (``sense="min"``; ``"max"`` is handled as ``min <-C, K>``)::

    min_K  <C, K>   s.t.   A(K) = b   (m rows, A(K)_r = sum_k a_k K[i_k, j_k], sparse)
                           K PSD,   [1^T K 1 = 0]   [tr K <= t]

The rows are given in COO form (:class:`SparseRows`): edge distances
``K_ii + K_jj - 2 K_ij``, single entries ``K_ij``, any sparse linear functional. The centering row
``1^T K 1 = 0`` is not a row: for a PSD ``K = Y Y^T`` it is equivalent to ``Y^T 1 = 0``, a
*linear* constraint on ``Y`` enforced exactly by projecting ``Y`` (and the gradient) onto column
means zero. ``C`` is a :class:`SymOp` (sparse + low-rank ``U diag(w) U^T`` + dense parts), so the
MVE linearization ``I - 2 V V^T`` never becomes an ``n x n`` array.

**Method.** ``K = Y Y^T`` with ``Y`` of shape ``n x r`` and the augmented Lagrangian

    L(Y; y, sigma) = <C, YY^T> - y^T (A(YY^T) - b) + sigma/2 ||A(YY^T) - b||^2
                     [+ (max(0, mu + sigma (||Y||_F^2 - t))^2 - mu^2) / (2 sigma)]

whose gradient is ``2 S(y~) Y`` with ``S(y) = C - A^*(y) (+ mu~ I)`` and ``y~ = y - sigma r``.
Each outer iteration minimizes ``L`` over ``Y`` with L-BFGS (scipy's L-BFGS-B, the evaluation
in compiled numba kernels for ``A(YY^T)`` and ``A^*(w) Y``, O(nnz r)), then updates
``y <- y - sigma r`` and raises ``sigma`` when the residual did not drop by 4x. Rank: after each
outer step the smallest eigenvalues of the dual slack ``S(y)`` are computed (Lanczos, matrix-free,
on ``P S P`` with ``P`` the centering projector when centering is on); a negative eigenvalue
means the factored problem stalled at a non-optimal point of the convex problem in ``K``, and
``Y`` grows by the corresponding eigenvectors, each with the step length that minimizes ``L``
exactly along ``K + alpha^2 v v^T`` (a 1-D quadratic in ``alpha^2``). Warm start: ``Y0, y0,
sigma0`` from a previous result (e.g. the previous majorize-minimize step of MVE).

**Certificate.** For any ``y``, every feasible ``K`` satisfies

    <C, K> = b^T y + <S(y), K> >= b^T y + min(0, lambda_min(S(y))) * tr K

(``lambda_min`` over ``1^\perp`` when centering is on, since then ``K 1 = 0``). With a bound
``tr K <= T`` (the constraint ``t``, or a bound implied by the rows, ``implied_trace_bound``) this
gives the valid lower bound ``b^T y + T min(0, lambda_min)``; without one, the bound
``b^T y`` is valid only when ``lambda_min >= 0`` and is reported as ``None`` otherwise.
``lambda_min`` is exact (dense ``eigvalsh``) for ``n <= dense_threshold`` and a Lanczos Ritz value
minus its residual norm above (Lanczos from a seeded random start; it finds the extreme eigenvalue
with probability one, not with certainty). Status ``"optimal"`` needs the relative primal
residual ``||A(K) - b|| / (1 + ||b||) <= tol`` and the relative gap
``|<C,K> - bound| / (1 + |<C,K>|) <= tol`` with the bound on its proven side of ``<C, K>``
(within 5e-7 relative; a slightly infeasible ``K`` can overshoot the optimum) (without a trace
bound: the relative dual infeasibility
``max(0, -lambda_min) / (1 + ||C||)`` and ``|<C,K> - b^T y| / (1 + |<C,K>|)`` both ``<= tol``,
the criterion conic solvers use). Otherwise ``"inaccurate"`` (iteration/time cap reached).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.optimize as so
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse.csgraph import connected_components, dijkstra

from ._jit import lazy_njit

__all__ = [
    "LowRankMMResult",
    "LowRankSDPResult",
    "SparseRows",
    "SymOp",
    "distance_rows",
    "graph_trace_bound",
    "linear_spectral_factored",
    "low_rank_mm",
    "mm_step_method",
    "solve_low_rank_sdp",
]

OPTIMAL = "optimal"
INACCURATE = "inaccurate"
UNBOUNDED = "unbounded"


# --------------------------------------------------------------------------------------------
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

    def row_norms(self) -> np.ndarray:
        """Frobenius norms of the symmetrized row matrices ``(A_r + A_r^T) / 2``."""
        M = sp.coo_array((0.5 * self.vals, (self.rows, self.ii * self.n + self.jj)),
                         shape=(self.m, self.n * self.n)).tocsr()
        M = M + sp.coo_array((0.5 * self.vals, (self.rows, self.jj * self.n + self.ii)),
                             shape=(self.m, self.n * self.n)).tocsr()
        M.sum_duplicates()
        return np.sqrt(np.asarray(M.multiply(M).sum(axis=1)).ravel())

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
# Compiled kernels
# --------------------------------------------------------------------------------------------
@lazy_njit(cache=True, fastmath=True)
def _a_of_yyt(rows, ii, jj, vals, Y, m):  # pragma: no cover - compiled
    """``A(Y Y^T)``: ``out[r] += a_k <Y[i_k], Y[j_k]>``."""
    out = np.zeros(m)
    r = Y.shape[1]
    for k in range(rows.size):
        i = ii[k]
        j = jj[k]
        s = 0.0
        for c in range(r):
            s += Y[i, c] * Y[j, c]
        out[rows[k]] += vals[k] * s
    return out


@lazy_njit(cache=True, fastmath=True)
def _adj_times(rows, ii, jj, vals, w, X):  # pragma: no cover - compiled
    """``A^*(w) X`` with ``A^*(w) = sum_r w_r (A_r + A_r^T) / 2``."""
    out = np.zeros_like(X)
    p = X.shape[1]
    for k in range(rows.size):
        c = 0.5 * w[rows[k]] * vals[k]
        if c == 0.0:
            continue
        i = ii[k]
        j = jj[k]
        for q in range(p):
            out[i, q] += c * X[j, q]
            out[j, q] += c * X[i, q]
    return out


@lazy_njit(cache=True, fastmath=True)
def _a_of_ydt(rows, ii, jj, vals, Y, D, m):  # pragma: no cover - compiled
    """``A(Y D^T + D Y^T)``: ``out[r] += a_k (<Y[i_k], D[j_k]> + <D[i_k], Y[j_k]>)``."""
    out = np.zeros(m)
    r = Y.shape[1]
    for k in range(rows.size):
        i = ii[k]
        j = jj[k]
        s = 0.0
        for c in range(r):
            s += Y[i, c] * D[j, c] + D[i, c] * Y[j, c]
        out[rows[k]] += vals[k] * s
    return out


def _adjoint_sparse(A: SparseRows, w: np.ndarray) -> sp.csr_array:
    """``A^*(w)`` as a sparse symmetric matrix."""
    c = 0.5 * w[A.rows] * A.vals
    M = sp.coo_array((np.r_[c, c], (np.r_[A.ii, A.jj], np.r_[A.jj, A.ii])), shape=(A.n, A.n))
    return M.tocsr()


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
    """Result of :func:`solve_low_rank_sdp` (values in the user's sense and units).

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
# Solver
# --------------------------------------------------------------------------------------------
class _Scaled:
    """The problem in solver units: unit-norm rows, ``|C| ~ 1``, ``K = kappa K~``."""

    def __init__(self, C: SymOp, A: SparseRows, b: np.ndarray, t: float | None,
                 t_implied: float | None, centered: bool, sense: float,
                 face: Any = None) -> None:
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
        self.centered = centered
        self.n = n
        self.m = A.m
        # facial reduction: K = V Z V^T (V orthonormal, n x f; orthogonal to 1 when centered)
        self.face = face
        self.V = None if face is None else np.ascontiguousarray(face.V)

    def project(self, Y: np.ndarray) -> np.ndarray:
        if self.V is not None:
            return self.V @ (self.V.T @ Y)
        return Y - Y.mean(axis=0, keepdims=True) if self.centered else Y

    def slack_norm_bound(self, y: np.ndarray, mu: float) -> float:
        """An upper bound on ``||C - A^*(y) + mu I||_2`` (row-sum norm of the sparse parts)."""
        adj = abs(_adjoint_sparse(self.A, y))
        return self.C.norm2_bound() + float(np.max(adj.sum(axis=1), initial=0.0)) + abs(mu)

    def residual(self, Y: np.ndarray) -> np.ndarray:
        A = self.A
        return _a_of_yyt(A.rows, A.ii, A.jj, A.vals, Y, A.m) - self.b

    def slack_matmat(self, y: np.ndarray, mu: float, X: np.ndarray) -> np.ndarray:
        A = self.A
        out = self.C.matmat(X) - _adj_times(A.rows, A.ii, A.jj, A.vals, y, X)
        if mu:
            out += mu * X
        return out


def _al_value_grad(Y: np.ndarray, P: _Scaled, y: np.ndarray, sigma: float, mu: float):
    r = P.residual(Y)
    ytil = y - sigma * r
    CY = P.C.matmat(Y)
    val = float(np.sum(CY * Y)) - float(y @ r) + 0.5 * sigma * float(r @ r)
    A = P.A
    G = CY - _adj_times(A.rows, A.ii, A.jj, A.vals, ytil, Y)
    mut = 0.0
    if P.t is not None:
        tr = float(np.sum(Y * Y))
        mut = max(0.0, mu + sigma * (tr - P.t))
        val += (mut**2 - mu**2) / (2 * sigma)
        G += mut * Y
    return val, 2.0 * G, r, mut


def _al_hessp(Y: np.ndarray, D: np.ndarray, P: _Scaled, ytil: np.ndarray, sigma: float,
              mut: float) -> np.ndarray:
    """Hessian of the augmented Lagrangian at ``Y`` applied to ``D``."""
    A = P.A
    dr = _a_of_ydt(A.rows, A.ii, A.jj, A.vals, Y, D, A.m)
    H = P.C.matmat(D) - _adj_times(A.rows, A.ii, A.jj, A.vals, ytil, D)
    H += sigma * _adj_times(A.rows, A.ii, A.jj, A.vals, dr, Y)
    if P.t is not None and mut > 0:
        H += mut * D + 2.0 * sigma * float(np.sum(Y * D)) * Y
    return 2.0 * H


def _min_eigs(P: _Scaled, y: np.ndarray, mu: float, k: int, dense_threshold: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """Smallest ``k`` eigenpairs of ``S = C - A^*(y) + mu I`` (on ``1^perp`` when centered).

    Returns ``(vals, vecs, err)`` with ``err`` an error allowance (residual norm for Lanczos).
    """
    n = P.n
    if P.V is not None:
        return _min_eigs_face(P, y, mu, k, dense_threshold, rng)
    big = 0.0
    if P.centered:
        # P S P + big * 11^T / n: the constant vector (K 1 = 0) is pushed above the spectrum;
        # ||S||_2 <= ||C||_F + ||A^*(y)||_F + |mu|
        adj = _adjoint_sparse(P.A, y)
        big = 2.0 * (P.C.fro_norm() + float(spla.norm(adj)) + abs(mu)) + 1.0

    def mat(X: np.ndarray) -> np.ndarray:
        X2 = X if X.ndim == 2 else X[:, None]
        Xp = X2 - X2.mean(axis=0, keepdims=True) if P.centered else X2
        out = P.slack_matmat(y, mu, np.ascontiguousarray(Xp))
        if P.centered:
            out = out - out.mean(axis=0, keepdims=True) + big * X2.mean(axis=0, keepdims=True)
        return out if X.ndim == 2 else out[:, 0]

    k = max(1, min(k, n - 1 if n > 1 else 1))
    if n <= dense_threshold:
        return _dense_smallest(mat(np.eye(n)), k)
    # shift by a norm bound so that the wanted eigenvalues are far from 0: ARPACK's test is
    # relative to |theta|, hopeless for the (near-)zero eigenvalues of a complementary slack
    shift = big if P.centered else 2.0 * (
        P.C.fro_norm() + float(spla.norm(_adjoint_sparse(P.A, y))) + abs(mu)) + 1.0

    def shifted(X: np.ndarray) -> np.ndarray:
        return mat(X) + shift * X

    op = spla.LinearOperator((n, n), matvec=shifted, matmat=shifted, dtype=float)
    v0 = rng.standard_normal(n)
    w = np.zeros(0)
    for ncv, tol_ in ((min(n, max(2 * k + 1, 40)), 1e-10), (min(n, max(4 * k + 1, 120)), 1e-8)):
        try:
            w, V = spla.eigsh(op, k=k, which="SA", v0=v0, tol=tol_, ncv=ncv,
                              maxiter=max(1000, 5 * n))
            break
        except spla.ArpackNoConvergence as exc:
            w, V = exc.eigenvalues, exc.eigenvectors
            if w.size:
                break
    if w.size == 0:
        if n <= 4000:
            S = mat(np.eye(n))
            w, V = sla.eigh(0.5 * (S + S.T))
            return w[:k], V[:, :k], 1e-12 * max(1.0, float(np.max(np.abs(w))))
        return np.array([-math.inf]), np.zeros((n, 1)), 0.0
    w = w - shift
    order = np.argsort(w)
    w, V = w[order], V[:, order]
    res = np.linalg.norm(mat(V) - V * w, axis=0)
    return w, V, float(res[0]) if res.size else 0.0


def _dense_smallest(S: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The ``k`` smallest eigenpairs of a dense symmetric matrix (LAPACK evr, subset only:
    0.5 s at n = 1800 against 1.9 s for the whole spectrum) and a rounding allowance."""
    S = 0.5 * (S + S.T)
    w, V = sla.eigh(S, subset_by_index=[0, k - 1], driver="evr")
    return w, V, 1e-12 * max(1.0, float(np.linalg.norm(S)))


def _min_eigs_face(P: _Scaled, y: np.ndarray, mu: float, k: int, dense_threshold: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """Smallest eigenpairs of the reduced slack ``V^T S V`` (eigenvectors returned as ``V x``)."""
    V = P.V
    f = V.shape[1]
    if f == 0:
        return np.array([math.inf]), np.zeros((P.n, 1)), 0.0
    k = max(1, min(k, f - 1 if f > 1 else 1))
    if f <= dense_threshold:
        w, U, err = _dense_smallest(V.T @ P.slack_matmat(y, mu, V), k)
        return w, V @ U, err
    shift = 2.0 * P.slack_norm_bound(y, mu) + 1.0

    def mat(X: np.ndarray) -> np.ndarray:
        X2 = X if X.ndim == 2 else X[:, None]
        out = V.T @ P.slack_matmat(y, mu, np.ascontiguousarray(V @ X2))
        return out if X.ndim == 2 else out[:, 0]

    op = spla.LinearOperator((f, f), matvec=lambda x: mat(x) + shift * x,
                             matmat=lambda X: mat(X) + shift * X, dtype=float)
    try:
        w, U = spla.eigsh(op, k=k, which="SA", v0=rng.standard_normal(f), tol=1e-10,
                          ncv=min(f, max(2 * k + 1, 40)), maxiter=max(1000, 5 * f))
    except spla.ArpackNoConvergence as exc:
        w, U = exc.eigenvalues, exc.eigenvectors
        if not w.size:
            return np.array([-math.inf]), np.zeros((P.n, 1)), 0.0
    w = w - shift
    order = np.argsort(w)
    w, U = w[order], U[:, order]
    res = np.linalg.norm(mat(U) - U * w, axis=0)
    return w, V @ U, float(res[0])


def solve_low_rank_sdp(
    C: SymOp | np.ndarray | sp.sparray,
    A: SparseRows,
    b: np.ndarray,
    *,
    sense: str = "min",
    trace_bound: float | None = None,
    implied_trace_bound: float | None = None,
    centered: bool = False,
    face: Any = None,
    rank: int | None = None,
    max_rank: int | None = None,
    Y0: np.ndarray | None = None,
    y0: np.ndarray | None = None,
    mu0: float = 0.0,
    sigma0: float | None = None,
    tol: float = 1e-5,
    max_iters: int = 200,
    inner_max_iters: int = 2000,
    time_limit: float | None = None,
    dense_threshold: int = 2500,
    eig_k: int = 4,
    seed: int | None = 0,
    sigma_factor: float = 4.0,
    sigma_max: float = 1e6,
    inner: str = "auto",
    newton_max_iters: int = 100,
    method: str = "auto",
    verbose: bool = False,
    callback: Callable | None = None,
) -> LowRankSDPResult:
    """Solve ``min/max <C, K> s.t. A(K) = b, K PSD [, 1^T K 1 = 0] [, tr K <= trace_bound]``.

    Parameters
    ----------
    C : the objective matrix (:class:`SymOp`, or a dense / scipy-sparse symmetric array).
    A, b : the rows (:class:`SparseRows`) and right-hand side (length ``A.m``).
    sense : ``"min"`` or ``"max"``.
    trace_bound : ``t`` in the constraint ``tr K <= t`` (None: no such constraint).
    implied_trace_bound : a bound on ``tr K`` valid for every feasible ``K`` that is *not* a
        constraint (e.g. :func:`graph_trace_bound`); used only by the certificate.
    centered : add the centering constraint ``1^T K 1 = 0`` (as ``Y^T 1 = 0``).
    face : a :class:`specopt.solvers.facial_reduction.FaceReduction` (e.g. from
        :func:`~specopt.solvers.facial_reduction.clique_face`): ``Y`` is kept in the face's range
        ``V`` (``K = V Z V^T``), the dual slack is checked as ``V^T S V``, and the bound carries
        the exposing-matrix correction that makes it valid for the original problem
        (:func:`~specopt.solvers.facial_reduction.face_correction`). Needs a trace bound.
    rank, max_rank : initial factor width (default ``min(n, 8)``, or ``Y0``'s) and its cap
        (default ``n``).
    Y0, y0, mu0, sigma0 : warm start (a previous result's ``Y, y, mu, sigma``, user units).
    tol : relative primal residual and relative gap targets (module docstring).
    max_iters, inner_max_iters, time_limit : outer iterations, L-BFGS iterations per outer
        iteration, wall-clock cap in seconds.
    dense_threshold : dense ``eigh`` (smallest eigenpairs only) of the dual slack for ``n`` up to
        this, Lanczos above (ARPACK stalled for 60 s on the clustered near-zero spectrum of an
        SDE slack at n = 1797 where the dense subset solve takes 0.5 s).
    eig_k : eigenpairs computed per check (and columns added per rank growth at most).
    sigma_factor, sigma_max : penalty growth factor (when the residual did not drop 4x) and cap.
    inner : "lbfgs" (scipy L-BFGS-B), "trust-krylov" (Newton-Krylov with exact Hessian-vector
        products) or "auto" (L-BFGS while ``sigma < 1e3``, where it is cheaper; Newton-Krylov
        above, where L-BFGS stalls on the penalty's conditioning: measured on SDE swiss rolls).
    method : "bm" (the Burer-Monteiro augmented Lagrangian above), "ip" (the sparse-row
        interior point, :mod:`specopt.solvers.sparse_sdp_ip`, then the factored method from its
        point if the certificate does not close) or "auto" ("ip" for ``n <= IP_MAX_N`` and
        ``m <= IP_MAX_M`` without a warm start: 20-40 dense steps of ``O(n^3 + m^3)``; "bm"
        above or when warm-started, where the factored method's ``O(nnz r)`` steps win).
    callback : called once per outer iteration as ``callback(it, objective=..., gap=...,
        violation=<relative primal residual>)`` (e.g. a :class:`specopt._progress.Progress`).
    """
    if method not in ("auto", "bm", "ip"):
        raise ValueError(f"method must be auto, bm or ip, got {method!r}")
    if inner not in ("auto", "lbfgs", "trust-krylov", "trust-ncg"):
        raise ValueError(f"inner must be auto, lbfgs, trust-krylov or trust-ncg, got {inner!r}")
    t_start = time.perf_counter()
    if sense not in ("min", "max"):
        raise ValueError(f"sense must be 'min' or 'max', got {sense!r}")
    n = A.n
    b = np.asarray(b, dtype=float).ravel()
    if b.size != A.m:
        raise ValueError(f"b has {b.size} entries for {A.m} rows")
    if not np.all(np.isfinite(b)):
        raise ValueError("b must be finite")
    if not isinstance(C, SymOp):
        C = SymOp(n, sparse=C) if sp.issparse(C) else SymOp(n, dense=np.asarray(C, dtype=float))
    if C.n != n:
        raise ValueError(f"C is {C.n} x {C.n} but the rows act on {n} x {n} matrices")
    if trace_bound is not None and not trace_bound >= 0:
        raise ValueError(f"trace_bound must be >= 0, got {trace_bound}")
    sgn = 1.0 if sense == "min" else -1.0
    if face is not None and face.V.shape[0] != n:
        raise ValueError(f"face basis has {face.V.shape[0]} rows for n = {n}")
    if trace_bound is None and implied_trace_bound is None and face is None:
        v = recession_ray(C, A, centered, sense)
        if v is not None:
            return _unbounded(C, A, b, v, sense=sense, centered=centered, tol=tol,
                              time_limit=time_limit, seed=seed, verbose=verbose, t_start=t_start,
                              method=method)
    P = _Scaled(C, A, b, trace_bound, implied_trace_bound, centered, sgn, face)
    rng = np.random.default_rng(seed)
    max_rank = n if max_rank is None else max(1, min(int(max_rank), n))
    if face is not None:  # rank(K) <= dim of the face
        max_rank = max(1, min(max_rank, face.dim))

    # ---- starting point (solver units) ----
    if Y0 is not None:
        Y = np.array(Y0, dtype=float, copy=True).reshape(n, -1) / math.sqrt(P.kappa)
        if rank is not None and Y.shape[1] < rank:
            Y = np.c_[Y, 1e-3 * rng.standard_normal((n, rank - Y.shape[1]))]
    else:
        r0 = min(max_rank, rank if rank is not None else min(n, 8))
        Y = rng.standard_normal((n, r0))
        scale = (P.t if P.t is not None else max(1.0, float(np.mean(np.abs(P.b))) if P.m else 1.0)
                 * n / 4)
        Y *= math.sqrt(scale / max(float(np.sum(Y * Y)), 1e-300))
    Y = np.ascontiguousarray(P.project(Y))
    if y0 is not None:
        y = np.asarray(y0, dtype=float).ravel() * sgn / (P.row_scale * P.gamma)
        if y.size != P.m:
            raise ValueError(f"y0 has {y.size} entries for {P.m} rows")
    else:
        y = np.zeros(P.m)
    mu = float(mu0) / P.gamma
    sigma = float(sigma0) if sigma0 is not None else 100.0

    hist: dict[str, list[float]] = {"objective": [], "primal_residual": [], "lambda_min": [],
                                    "sigma": [], "rank": [], "inner_iterations": [], "gap": [],
                                    "time_inner": [], "time_eig": [], "polish": [],
                                    "ls_dual_gap": []}
    bnorm = float(np.linalg.norm(P.b))
    inner_total = 0
    growths = 0
    status = INACCURATE
    gtol = 1e-2
    prev_res = math.inf
    lam, vecs, err = -math.inf, None, 0.0
    it = 0
    cert = None
    bm_iters = max_iters
    # the best point so far by max(relative residual, gap): returned when the method ends
    # uncertified on a worse one (penalty growth on degenerate problems can drift)
    best = None
    # (None: the time limit was reached before the interior point started)
    ip_steps = iter(range(1, 1 << 30))  # IP steps numbered across the HKM and NT runs

    def ip_callback(_it: int, objective: float, **kw: Any) -> None:  # in user units
        callback(next(ip_steps), objective=objective * P.gamma * P.kappa * sgn, **kw)

    ip = _ip_stage(P, tol, time_limit, t_start, dense_threshold, eig_k, rng, verbose,
                   callback and ip_callback) if _use_ip(method, n, P.m, Y0) else None
    if ip is not None:
        Y, y, mu, lam, cert = ip["Y"], ip["y"], ip["mu"], ip["lam"], ip["cert"]
        best = (ip["score"], Y, y, mu, lam, cert)  # before any truncation below
        it = ip["iterations"]
        hist["ip"] = ip["history"]
        hist["gap"].append(cert["gap"])
        hist["primal_residual"].append(ip["res"])
        if ip["optimal"]:
            status, bm_iters = OPTIMAL, 0
        elif time_limit is not None and time.perf_counter() - t_start > time_limit:
            bm_iters = 0
        else:
            if time_limit is None:
                # the factored method rarely closes what the IP left open (degenerate SDEs):
                # it gets 20x the IP's time, at least 20 s, unless the caller set a limit
                time_limit = max(20.0, 20.0 * (time.perf_counter() - t_start))
            # continue with the factored method from the IP's point: its leading columns up to
            # the Barvinok-Pataki rank (an optimal K of rank r with r(r+1)/2 <= m + 1 exists),
            # the multipliers already close
            pataki = int(math.isqrt(2 * (P.m + 1))) + 2
            Y = np.ascontiguousarray(Y[:, : max(1, min(Y.shape[1], max_rank, pataki))])
            sigma = max(sigma, 1e3)

    def deadline(intermediate_result: Any = None) -> None:
        """Stop an inner solve at the time limit (scipy ends ``minimize`` on StopIteration)."""
        if time_limit is not None and time.perf_counter() - t_start > time_limit:
            raise StopIteration

    first = it + 1
    for it in range(first, first + bm_iters):  # noqa: B020 (continues the IP's count)
        r_ = Y.shape[1]

        def fun(x: np.ndarray, _r=r_, _y=y, _s=sigma, _mu=mu):
            Yx = P.project(x.reshape(n, _r))
            val, G, _, _ = _al_value_grad(np.ascontiguousarray(Yx), P, _y, _s, _mu)
            return val, P.project(G).ravel()

        t_in = time.perf_counter()
        scale_g = max(1.0, float(np.linalg.norm(P.C.matmat(Y))))
        method = inner if inner != "auto" else ("lbfgs" if sigma < 1e3 else "trust-krylov")
        if method == "lbfgs":
            opt = so.minimize(fun, Y.ravel(), jac=True, method="L-BFGS-B", callback=deadline,
                              options={"maxiter": inner_max_iters, "ftol": 1e-15, "maxcor": 20,
                                       "gtol": gtol * scale_g / math.sqrt(Y.size)})
        else:
            def hessp(x: np.ndarray, d: np.ndarray, _r=r_, _y=y, _s=sigma, _mu=mu):
                Yx = np.ascontiguousarray(P.project(x.reshape(n, _r)))
                Dx = np.ascontiguousarray(P.project(d.reshape(n, _r)))
                rr = P.residual(Yx)
                mt = max(0.0, _mu + _s * (float(np.sum(Yx * Yx)) - P.t)) if P.t is not None \
                    else 0.0
                return P.project(_al_hessp(Yx, Dx, P, _y - _s * rr, _s, mt)).ravel()

            opt = so.minimize(fun, Y.ravel(), jac=True, hessp=hessp, method=method,
                              callback=deadline,
                              options={"maxiter": min(inner_max_iters, newton_max_iters),
                                       "gtol": gtol * scale_g})
        inner_total += int(opt.nit)
        inner_ok = bool(opt.nit < (inner_max_iters if method == "lbfgs" else min(
            inner_max_iters, newton_max_iters)))
        Y = np.ascontiguousarray(P.project(opt.x.reshape(n, r_)))
        _, _, r, mut = _al_value_grad(Y, P, y, sigma, mu)
        y = y - sigma * r
        mu = mut
        res = float(np.linalg.norm(r)) / (1.0 + bnorm)
        obj = float(np.sum(P.C.matmat(Y) * Y))
        # dual slack at the new multipliers; grow the rank along negative curvature
        t_eig = time.perf_counter()
        lamv, vecs, err = _min_eigs(P, y, mu, eig_k, dense_threshold, rng)
        hist["time_inner"].append(t_eig - t_in)
        hist["time_eig"].append(time.perf_counter() - t_eig)
        lam = float(lamv[0]) - err
        cert = _certificate(P, y, mu, obj, lam)
        if res <= 100 * tol and not cert["ok"](tol):
            # complementarity dual: y minimizing ||P (C - A^*(y) + mu I) Y||_F (LSQR from y)
            y_ls = _ls_dual(P, Y, y, mu)
            lam_ls_v, vecs_ls, err_ls = _min_eigs(P, y_ls, mu, eig_k, dense_threshold, rng)
            lam_ls = float(lam_ls_v[0]) - err_ls
            cert_ls = _certificate(P, y_ls, mu, obj, lam_ls)
            hist["ls_dual_gap"].append(cert_ls["gap"])
            if cert_ls["gap"] < cert["gap"]:
                y, lamv, vecs, err, lam, cert = y_ls, lam_ls_v, vecs_ls, err_ls, lam_ls, cert_ls
        hist["objective"].append(obj * P.gamma * P.kappa * sgn)
        hist["primal_residual"].append(res)
        hist["lambda_min"].append(lam * P.gamma)
        hist["sigma"].append(sigma)
        hist["rank"].append(Y.shape[1])
        hist["inner_iterations"].append(int(opt.nit))
        hist["gap"].append(cert["gap"])
        if callback is not None:
            callback(it, objective=hist["objective"][-1], gap=cert["gap"], violation=res)
        if verbose:
            print(f"[low_rank_sdp] it {it:3d} rank {Y.shape[1]:3d} obj {hist['objective'][-1]:.6g}"
                  f" res {res:.2e} lam_min {lam:.2e} gap {cert['gap']:.2e} sigma {sigma:.1e} "
                  f"inner {opt.nit} ({hist['time_inner'][-1]:.2f} s) "
                  f"eig {hist['time_eig'][-1]:.2f} s")
        if res <= tol and cert["ok"](tol) and _bound_side_ok(P, obj, cert):
            status = OPTIMAL
            break
        if res <= 20 * tol and cert["ok"](tol):
            # nearly feasible and the gap is closed: Gauss-Newton steps onto A(YY^T) = b
            Yp = _polish(P, Y)
            rp = P.residual(Yp)
            res_p = float(np.linalg.norm(rp)) / (1.0 + bnorm)
            obj_p = float(np.sum(P.C.matmat(Yp) * Yp))
            cert_p = _certificate(P, y, mu, obj_p, lam)
            hist["polish"].append(res_p)
            if res_p < res:
                Y, res, obj, cert = Yp, res_p, obj_p, cert_p
                hist["primal_residual"][-1], hist["gap"][-1] = res, cert["gap"]
                hist["objective"][-1] = obj * P.gamma * P.kappa * sgn
                if res <= tol and cert["ok"](tol) and _bound_side_ok(P, obj, cert):
                    status = OPTIMAL
                    break
        score = max(res, cert["gap"])
        if best is None or score < best[0]:
            best = (score, Y, y, mu, lam, cert)
        if time_limit is not None and time.perf_counter() - t_start > time_limit:
            break
        neg = lamv < -max(err, 1e-10)
        grow_tol = max(tol, 0.1 * res)
        # grow after a converged inner solve, or at once when the slack is far from PSD (an
        # unconverged inner solve at too low a rank otherwise never ends: digits N = 1797 stayed
        # at rank 8 with lambda_min ~ -3 for 20 outer iterations)
        if lam < -grow_tol and Y.shape[1] < max_rank and (inner_ok or lam < -100 * grow_tol):
            V = vecs[:, neg][:, : max_rank - Y.shape[1]]
            Y = _grow(P, Y, y, sigma, mu, V)
            growths += 1
        # penalty update: raise sigma when the residual did not drop enough
        if res > 0.25 * prev_res:
            sigma = min(sigma * sigma_factor, sigma_max)
        prev_res = res
        gtol = max(min(0.5 * gtol, 0.1 * res), 0.1 * tol)

    if status != OPTIMAL and best is not None and cert is not None:
        r_now = float(np.linalg.norm(P.residual(Y))) / (1.0 + bnorm)
        if best[0] < max(r_now, cert["gap"]):
            _, Y, y, mu, lam, cert = best
        # the returned pair, certified as it is (same test as in the loop)
        _, _, cert, ok = _measure(P, Y, y, mu, lam, tol)
        if ok:
            status = OPTIMAL
    # ---- back to user units ----
    y_user = y * P.row_scale * P.gamma * sgn
    Yu = Y * math.sqrt(P.kappa)
    r = P.residual(Y)
    abs_res = float(np.max(np.abs(r / P.row_scale * P.kappa))) if r.size else 0.0
    obj_user = float(np.sum(C.matmat(Yu) * Yu))
    bound = None
    if cert is not None and cert["bound"] is not None:
        bound = cert["bound"] * P.gamma * P.kappa * sgn
    dual_value = (cert["dual"] if cert else 0.0) * P.gamma * P.kappa * sgn
    return LowRankSDPResult(
        Y=Yu,
        y=y_user,
        mu=mu * P.gamma,
        objective=obj_user,
        bound=bound,
        gap=cert["gap"] if cert else math.inf,
        dual_value=dual_value,
        lambda_min=lam * P.gamma,
        dual_infeasibility=cert["dinf"] if cert else math.inf,
        primal_residual=float(np.linalg.norm(r)) / (1.0 + bnorm),
        max_abs_residual=abs_res,
        status=status,
        iterations=it,
        inner_iterations=inner_total,
        rank=Y.shape[1],
        sigma=sigma,
        trace_bound_used=None if P.t_cert is None else P.t_cert * P.kappa,
        solve_time=time.perf_counter() - t_start,
        history=hist,
        rank_growths=growths,
    )


def recession_ray(C: SymOp, A: SparseRows, centered: bool, sense: str,
                  max_components: int = 64) -> np.ndarray | None:
    """A direction ``v`` with ``K + s v v^T`` feasible for all ``s >= 0`` whenever ``K`` is,
    along which the objective improves without bound, or None.

    Candidates: the indicator of a connected component of the rows' support graph (edges
    ``(i, j)`` of every row entry), minus its mean when centering. Accepted when
    ``A(v v^T) = 0`` (to rounding), ``v^T 1 = 0`` when centered, and ``<C, v v^T>`` strictly
    improves the objective (``> 0`` when maximizing, ``< 0`` when minimizing). Then the problem is
    unbounded as soon as it is feasible (the SDE of a disconnected neighbour graph: the
    components drift apart).
    """
    n = A.n
    if A.rows.size == 0:
        return None
    off = A.ii != A.jj
    G = sp.coo_array((np.ones(int(off.sum())), (A.ii[off], A.jj[off])), shape=(n, n))
    ncomp, lab = connected_components(G, directed=False)
    if ncomp < 2:
        return None
    sgn = 1.0 if sense == "max" else -1.0
    cn = C.fro_norm()
    an = float(np.max(np.abs(A.vals)))
    for c in range(min(ncomp, max_components)):
        v = (lab == c).astype(float)
        if centered:
            v -= v.mean()
        nv2 = float(v @ v)
        if nv2 == 0:
            continue
        if np.max(np.abs(_a_of_yyt(A.rows, A.ii, A.jj, A.vals, v[:, None], A.m)),
                  initial=0.0) > 1e-12 * an * nv2:
            continue
        gain = sgn * float(v @ C.matmat(v[:, None])[:, 0])
        if gain > 1e-9 * max(cn, 1e-300) * nv2:
            return v / math.sqrt(nv2)
    return None


def _unbounded(C: SymOp, A: SparseRows, b: np.ndarray, v: np.ndarray, *, sense: str,
               centered: bool, tol: float, time_limit: float | None, seed: int | None,
               verbose: bool, t_start: float, method: str) -> LowRankSDPResult:
    """With a recession ray ``v`` (:func:`recession_ray`): unbounded if a feasible point exists.
    Feasibility is decided by the same problem with ``tr K <= T`` added (bounded, so the
    interior point certifies it), ``T = n (1 + sum_r sqrt(|b_r| / ||A_r||))^2`` (enough for
    distance rows: every ``K_ii`` is at most a squared path length). Status ``"unbounded"``
    when that point satisfies the rows to ``tol``; else the result of the bounded solve with
    status ``"inaccurate"`` (nothing proven)."""
    norms = A.row_norms()
    norms[norms == 0] = 1.0
    T = A.n * (1.0 + float(np.sum(np.sqrt(np.abs(b) / norms)))) ** 2
    if verbose:
        print(f"[low_rank_sdp] the objective improves without bound along a component of the "
              f"row graph; feasibility check with tr K <= {T:.3g}")
    res = solve_low_rank_sdp(C, A, b, sense=sense, centered=centered, trace_bound=T, tol=tol,
                             time_limit=time_limit, seed=seed, verbose=verbose, method=method)
    res.solve_time = time.perf_counter() - t_start
    res.trace_bound_used = None
    res.bound = None
    if res.primal_residual <= tol:
        res.status = "unbounded"
        res.ray = v
        res.objective = math.inf if sense == "max" else -math.inf
        res.gap = 0.0
    else:
        res.status = INACCURATE
    return res


#: ``method="auto"`` uses the interior point up to these sizes (matrix side, rows). Measured in
#: benchmarks/low_rank_sdp.py (docs/routes/low_rank_sdp.md).
IP_MAX_N = 1200
IP_MAX_M = 8000


def _use_ip(method: str, n: int, m: int, Y0: Any) -> bool:
    """The interior point: asked for, or "auto" without a warm start within the size range
    (the same rule as the majorize-minimize steps, :func:`mm_step_method`)."""
    return method == "ip" or (method == "auto" and Y0 is None
                              and mm_step_method("auto", n, m) == "ip")


def _ip_stage(P: _Scaled, tol: float, time_limit: float | None, t_start: float,
              dense_threshold: int, eig_k: int, rng: np.random.Generator, verbose: bool,
              callback: Callable | None) -> dict:
    """Run :func:`~specopt.solvers.sparse_sdp_ip.solve_sparse_sdp_ip` on the scaled problem and
    certify its point exactly as the factored method's (smallest eigenvalue of the dual slack at
    the IP's ``y``, the bound, the residual of the returned factor).

    HKM direction first; when its point is not certified, the NT direction from scratch (on the
    degenerate swiss-roll SDEs NT kept long steps where HKM stalled; on well-posed ones HKM needs
    fewer steps: digits N = 300, 18 vs 73) and the better certificate is kept. A point that is
    nearly feasible gets Gauss-Newton steps onto the rows (a slightly infeasible point can have
    an objective beyond the proven bound)."""
    from .sparse_sdp_ip import solve_sparse_sdp_ip

    best: dict | None = None
    C_dense = P.C.to_dense()
    for kind in ("hkm", "nt"):
        left = None if time_limit is None else time_limit - (time.perf_counter() - t_start)
        if left is not None and left <= 0:
            if best is not None:
                break
            left = 0.0  # out of time before the first direction: one IP step, not no point
        ipr = solve_sparse_sdp_ip(C_dense, P.A.rows, P.A.ii, P.A.jj, P.A.vals, P.b,
                                  centered=P.centered, trace_bound=P.t,
                                  tol=min(1e-7, 0.05 * tol), direction_kind=kind,
                                  time_limit=left, face=P.V, verbose=verbose,
                                  callback=callback)
        out = _certify_point(P, np.ascontiguousarray(ipr.Y), ipr.y, ipr.mu, tol,
                             dense_threshold, eig_k, rng)
        out.update(iterations=ipr.iterations + (best["iterations"] if best else 0),
                   history=ipr.history)
        if verbose:
            print(f"[low_rank_sdp] interior point ({kind}): {ipr.iterations} steps, res "
                  f"{out['res']:.2e} lam_min {out['lam']:.2e} gap {out['cert']['gap']:.2e} -> "
                  f"{'certified' if out['optimal'] else 'not certified'}")
        if best is None or out["optimal"] or out["score"] < best["score"]:
            best = out
        if best["optimal"]:
            break
    return best


def _certify_point(P: _Scaled, Y: np.ndarray, y: np.ndarray, mu: float, tol: float,
                   dense_threshold: int, eig_k: int, rng: np.random.Generator) -> dict:
    """The certificate of ``(Y, y, mu)`` (solver units), after a polish of ``Y`` when it is
    nearly feasible and the bound is close but the point is not yet certified."""
    lamv, _, err = _min_eigs(P, y, mu, eig_k, dense_threshold, rng)
    lam = float(lamv[0]) - err

    def measure(Yc: np.ndarray) -> tuple[float, float, dict, bool]:
        return _measure(P, Yc, y, mu, lam, tol)

    res, obj, cert, ok = measure(Y)
    if not ok and res <= 100 * tol and cert["gap"] <= 100 * tol:
        # the complementarity dual (LSQR from y) can close a gap the IP's y leaves open
        y_ls = _ls_dual(P, Y, y, mu)
        lamv_ls, _, err_ls = _min_eigs(P, y_ls, mu, eig_k, dense_threshold, rng)
        lam_ls = float(lamv_ls[0]) - err_ls
        cert_ls = _certificate(P, y_ls, mu, obj, lam_ls)
        if cert_ls["gap"] < cert["gap"]:
            y, lam = y_ls, lam_ls
            res, obj, cert, ok = measure(Y)
    if not ok and res <= 100 * tol and cert["gap"] <= 100 * tol:
        Yp = _polish(P, Y)
        res_p, obj_p, cert_p, ok_p = measure(Yp)
        if ok_p or res_p < res:
            Y, res, cert, ok = Yp, res_p, cert_p, ok_p
    return {"Y": Y, "y": y, "mu": mu, "lam": lam, "cert": cert, "res": res, "optimal": ok,
            "score": max(res, cert["gap"])}


def _measure(P: _Scaled, Y: np.ndarray, y: np.ndarray, mu: float, lam: float,
             tol: float) -> tuple[float, float, dict, bool]:
    """``(relative residual, objective, certificate, certified)`` of the pair ``(Y, y)`` in
    solver units, ``lam`` the dual slack's smallest eigenvalue at ``y`` (already computed)."""
    res = float(np.linalg.norm(P.residual(Y))) / (1.0 + float(np.linalg.norm(P.b)))
    obj = float(np.sum(P.C.matmat(Y) * Y))
    cert = _certificate(P, y, mu, obj, lam)
    return res, obj, cert, res <= tol and cert["ok"](tol) and _bound_side_ok(P, obj, cert)


def _bound_side_ok(P: _Scaled, obj: float, cert: dict, rel: float = 5e-7) -> bool:
    """The bound on the proven side of the objective (a lower bound when minimizing in solver
    units): ``bound - obj <= rel * max(1, |obj|)`` in user units. A slightly infeasible ``Y`` can
    have an objective beyond the optimum; then more outer iterations (or the polish) are needed
    before ``optimal`` (the verification gate's ``bound_side`` check, tolerance 1e-6)."""
    if cert["bound"] is None:
        return True
    u = P.gamma * P.kappa
    return (cert["bound"] - obj) * u <= rel * max(1.0, abs(obj) * u)


def _certificate(P: _Scaled, y: np.ndarray, mu: float, obj: float, lam: float) -> dict:
    """Bound and gap in solver units (see the module docstring)."""
    dual = float(P.b @ y) - (mu * P.t if P.t is not None else 0.0)
    # lam is lambda_min(C - A^*(y) + mu I); with a trace bound T:
    #   <C, K> >= b^T y - mu t + min(0, lam) T   (tr K <= t makes -mu (t - tr K) <= 0)
    dinf = max(0.0, -lam) / (1.0 + P.C.fro_norm() / math.sqrt(P.n))
    if P.face is not None and P.t_cert is not None:
        # lam is lambda_min(V^T S V); valid for the original problem via the exposing matrix
        from .facial_reduction import face_correction

        fr = P.face
        eps = fr.eps(P.t_cert * P.kappa) / P.kappa
        corr, _ = face_correction(lam, P.slack_norm_bound(y, mu), P.t_cert, eps, fr.omega,
                                  fr.w_face_min, fr.delta)
        bound = dual + corr
        gap = abs(obj - bound) / (1.0 + abs(obj))
        return {"bound": bound, "dual": dual, "gap": gap, "dinf": dinf,
                "ok": lambda tol: gap <= tol}
    if P.t_cert is not None:
        bound = dual + min(0.0, lam) * P.t_cert
        gap = abs(obj - bound) / (1.0 + abs(obj))
        return {"bound": bound, "dual": dual, "gap": gap, "dinf": dinf,
                "ok": lambda tol: gap <= tol}
    gap = abs(obj - dual) / (1.0 + abs(obj))
    bound = dual if lam >= 0 else None
    return {"bound": bound, "dual": dual, "gap": gap, "dinf": dinf,
            "ok": lambda tol: gap <= tol and dinf <= tol}


def _ls_dual(P: _Scaled, Y: np.ndarray, y: np.ndarray, mu: float,
             iters: int = 200) -> np.ndarray:
    """``argmin_y ||P (C - A^*(y) + mu I) Y||_F`` by LSQR started at ``y`` (P: centering)."""
    A = P.A
    n, r = Y.shape
    Yc = np.ascontiguousarray(Y)

    def mv(w: np.ndarray) -> np.ndarray:
        return P.project(_adj_times(A.rows, A.ii, A.jj, A.vals, w, Yc)).ravel()

    def rmv(z: np.ndarray) -> np.ndarray:
        Z = np.ascontiguousarray(P.project(z.reshape(n, r)))
        return 0.5 * _a_of_ydt(A.rows, A.ii, A.jj, A.vals, Yc, Z, A.m)

    op = spla.LinearOperator((n * r, A.m), matvec=mv, rmatvec=rmv, dtype=float)
    target = P.project(P.C.matmat(Yc) + mu * Yc).ravel()
    dy = spla.lsqr(op, target - mv(y), atol=1e-12, btol=1e-12, iter_lim=iters)[0]
    return y + dy


def _polish(P: _Scaled, Y: np.ndarray, steps: int = 5, cg_iters: int = 400) -> np.ndarray:
    """Gauss-Newton steps toward ``A(YY^T) = b``: the least-norm ``D`` with
    ``J D = -r`` (``J D = A(Y D^T + D Y^T)``), ``D = -J^T (J J^T)^{-1} r`` by CG, with a
    backtracking step length (the quadratic term ``A(D D^T)`` can undo a full step)."""
    A = P.A

    def JT(w: np.ndarray, Yc: np.ndarray) -> np.ndarray:
        return P.project(2.0 * _adj_times(A.rows, A.ii, A.jj, A.vals, w, Yc))

    for _ in range(steps):
        r = P.residual(Y)
        Yc = np.ascontiguousarray(Y)
        op = spla.LinearOperator(
            (A.m, A.m), dtype=float,
            matvec=lambda w, Yc=Yc: _a_of_ydt(A.rows, A.ii, A.jj, A.vals, Yc,
                                              np.ascontiguousarray(JT(w, Yc)), A.m))
        with np.errstate(divide="ignore", invalid="ignore"):  # singular J J^T (e.g. Y = 0)
            w, _ = spla.cg(op, -r, maxiter=cg_iters, rtol=1e-6)
        if not np.all(np.isfinite(w)):
            break
        D = JT(w, Yc)
        nr = float(np.linalg.norm(r))
        for a in (1.0, 0.5, 0.25, 0.125):
            Yn = np.ascontiguousarray(Y + a * D)
            if np.linalg.norm(P.residual(Yn)) < nr:
                break
        else:
            break
        Y = Yn
    return Y


def _grow(P: _Scaled, Y: np.ndarray, y: np.ndarray, sigma: float, mu: float,
          V: np.ndarray) -> np.ndarray:
    """Append columns ``alpha_j v_j``, each with the exact minimizing step of ``L``."""
    A = P.A
    for j in range(V.shape[1]):
        v = P.project(V[:, j:j + 1])[:, 0]
        nv = float(np.linalg.norm(v))
        if nv == 0:
            continue
        v = v / nv
        r0 = P.residual(Y)
        av = _a_of_yyt(A.rows, A.ii, A.jj, A.vals, v[:, None], A.m)
        cv = float(v @ P.C.matmat(v[:, None])[:, 0])
        # L(u) = const + u (cv - y.av) + sigma/2 ||r0 + u av||^2 (+ trace term, linearized by mu)
        slope = cv - float(y @ av) + sigma * float(r0 @ av) + mu
        curv = sigma * float(av @ av)
        if slope >= 0:
            continue
        u = -slope / curv if curv > 0 else 1.0
        if P.t is not None:
            u = min(u, max(P.t - float(np.sum(Y * Y)), 0.0) + 1e-3 * P.t)
        Y = np.c_[Y, math.sqrt(max(u, 0.0)) * v]
    return np.ascontiguousarray(Y)


# --------------------------------------------------------------------------------------------
# Majorize-minimize for linear-spectral costs on the factored iterate (MVE)
# --------------------------------------------------------------------------------------------
@dataclass
class LowRankMMResult:
    """Result of :func:`low_rank_mm`: the factor of the best iterate and the MM trace."""

    Y: np.ndarray
    objective: float
    iterations: int
    converged: bool
    stop_reason: str
    history: dict[str, list[float]]
    monotone_violations: list[tuple[int, float]]
    inner: list[LowRankSDPResult]
    inner_iterations: int
    #: the inner method of each step ("ip": cold interior point, "bm": warm-started factored)
    methods: list[str] = field(default_factory=list)

    @property
    def inner_certified(self) -> bool:
        """Every inner solve certified ``optimal`` (gap and residual within ``inner_tol``)."""
        return bool(self.inner) and all(r.status == OPTIMAL for r in self.inner)

    @property
    def stationary(self) -> bool:
        """The claim ``stationary_point`` is backed: the MM test passed and every step's
        subproblem was certified."""
        return self.converged and self.inner_certified


def _top_eig_factor(Y: np.ndarray, q: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``q`` eigenpairs of ``Y Y^T`` from a thin SVD of ``Y`` (O(n r^2))."""
    U, s, _ = np.linalg.svd(Y, full_matrices=False)
    lam = s**2
    if U.shape[1] < q:  # pad with orthonormal directions of eigenvalue 0
        extra = np.linalg.qr(np.c_[U, np.random.default_rng(0).standard_normal(
            (Y.shape[0], q - U.shape[1]))])[0][:, U.shape[1]:]
        U, lam = np.c_[U, extra], np.r_[lam, np.zeros(q - lam.size)]
    return lam[:q], U[:, :q]


def linear_spectral_factored(C0: SymOp, beta: np.ndarray, Y: np.ndarray) -> float:
    """``<C0, Y Y^T> + sum_{i<q} beta_i lambda_i(Y Y^T)`` (``beta`` zero beyond its length q)."""
    lam, _ = _top_eig_factor(Y, beta.size)
    return float(np.sum(C0.matmat(Y) * Y)) + float(beta @ lam)


def _rel_change_factored(Y: np.ndarray, Yp: np.ndarray) -> float:
    """``||Y Y^T - Yp Yp^T||_F / max(1, ||Yp Yp^T||_F)`` without forming n x n matrices."""
    a = float(np.sum((Y.T @ Y) ** 2))
    b = float(np.sum((Yp.T @ Yp) ** 2))
    c = float(np.sum((Y.T @ Yp) ** 2))
    return math.sqrt(max(a + b - 2 * c, 0.0)) / max(1.0, math.sqrt(b))


def low_rank_mm(
    C0: SymOp,
    beta: np.ndarray,
    A: SparseRows,
    b: np.ndarray,
    Y0: np.ndarray,
    *,
    centered: bool = False,
    trace_bound: float | None = None,
    implied_trace_bound: float | None = None,
    tol: float = 1e-4,
    tol_K: float = 1e-2,
    max_iters: int = 50,
    monotone_tol: float = 1e-4,
    inner_tol: float = 1e-6,
    warm_sigma_max: float = 1e2,
    method: str = "auto",
    time_limit: float | None = None,
    step_max_iters: int | None = None,
    callback: Callable | None = None,
    **solver_opts: Any,
) -> LowRankMMResult:
    """Minimize ``<C0, K> + sum_i beta_i lambda_i(K)`` over the SDP set, ``beta`` nondecreasing.

    The iterated-SDP majorize-minimize scheme (:mod:`specopt.solvers.iterated_sdp`) on the
    factor: ``beta`` (length q, the weights of the q largest eigenvalues; zero beyond) is the
    concave part's weights, ``B_t = V_q diag(beta) V_q^T`` with ``V_q`` the top eigenvectors of
    ``K_t = Y_t Y_t^T`` (thin SVD of ``Y_t``), and each step solves
    ``min <C0 + B_t, K>`` with :func:`solve_low_rank_sdp`, warm-started from the previous step's
    ``(Y, y, sigma)``. ``Y0`` is the start (it supplies the first eigenvectors; K0 need not be
    feasible). Stops when the relative objective change is ``<= tol`` and the relative change of
    ``K`` is ``<= tol_K``; the objective trace is monotone up to the inner accuracy (increases
    beyond ``monotone_tol`` are recorded). The best iterate is returned.

    ``method`` chooses each step's solver: ``"ip"`` the sparse-row interior point, cold (it does
    not warm-start; the previous ``Y`` only gives the eigenvectors), ``"bm"`` the factored method
    warm-started from the previous ``(Y, y, sigma)``, ``"auto"`` the interior point while
    ``n <= MM_IP_MAX_N`` and ``m <= MM_IP_MAX_M``, the factored method above (measured, see
    there). Every step is certified to ``inner_tol`` by :func:`solve_low_rank_sdp` whichever
    solver ran, so the iteration map, and the stationary point reached from a start, does not
    depend on it (up to ``inner_tol``). ``time_limit`` caps the whole loop (seconds; each step
    gets the remaining time; stop reason ``"time_limit"``). ``step_max_iters`` caps the factored
    method's outer iterations per step (default 5 after the interior point, when its point is
    not certified, and 40 for warm-started factored steps): a step that does not certify by then
    is taken as it is, and the result is not ``stationary``. Near-degenerate sets (swiss-roll kNN
    graphs: the interior point stalls near gap 1e-3 and the factored method does not close it
    either) otherwise spend 30-60 s per step at N = 40-100 for no certificate.
    """
    beta = np.asarray(beta, dtype=float).ravel()
    if np.any(np.diff(beta) < -1e-12):
        raise ValueError("beta must be nondecreasing (the concave part's weights)")
    t_start = time.perf_counter()
    step_method = mm_step_method(method, A.n, A.m)
    step_iters = step_max_iters if step_max_iters is not None else (
        5 if step_method == "ip" else 40)
    Y = np.asarray(Y0, dtype=float)
    hist: dict[str, list[float]] = {"objective": [], "rel_change_objective": [],
                                    "rel_change_K": []}
    viol: list[tuple[int, float]] = []
    inner: list[LowRankSDPResult] = []
    best_Y, best_val = Y, math.inf
    prev_val, prev_Y = None, Y
    y, sigma = None, solver_opts.pop("sigma0", None)
    methods: list[str] = []
    stop, converged, it = "max_iters", False, 0
    for it in range(1, max_iters + 1):
        _, V = _top_eig_factor(Y, beta.size)
        Ct = SymOp(C0.n, sparse=C0.sparse, dense=C0.dense,
                   U=V if C0.U is None else np.c_[C0.U, V],
                   w=beta if C0.U is None else np.r_[C0.w, beta])
        left = None if time_limit is None else time_limit - (time.perf_counter() - t_start)
        warm = step_method == "bm"
        res = solve_low_rank_sdp(Ct, A, b, sense="min", centered=centered,
                                 trace_bound=trace_bound, implied_trace_bound=implied_trace_bound,
                                 Y0=Y if warm else None, y0=y if warm else None,
                                 sigma0=sigma if warm else None, tol=inner_tol,
                                 method=step_method, time_limit=left,
                                 max_iters=step_iters, **solver_opts)
        inner.append(res)
        methods.append(step_method)
        # carry Y and y; the penalty restarts moderate (L-BFGS range) since y is already close
        Y, y, sigma = res.Y, res.y, min(res.sigma, warm_sigma_max)
        val = linear_spectral_factored(C0, beta, Y)
        hist["objective"].append(val)
        dK = _rel_change_factored(Y, prev_Y)
        hist["rel_change_K"].append(dK)
        if prev_val is None:
            hist["rel_change_objective"].append(math.inf)
        else:
            rel = (prev_val - val) / max(1.0, abs(prev_val))
            hist["rel_change_objective"].append(abs(rel))
            if -rel > monotone_tol:
                viol.append((it, val - prev_val))
        if val < best_val:
            best_Y, best_val = Y, val
        if callback is not None:  # one line per MM step (inner gap and residual)
            callback(it, objective=val, gap=res.gap, violation=res.primal_residual)
        if prev_val is not None and hist["rel_change_objective"][-1] <= tol and dK <= tol_K:
            stop, converged = "converged", True
            break
        prev_val, prev_Y = val, Y
        if time_limit is not None and time.perf_counter() - t_start >= time_limit:
            stop = "time_limit"
            break
    return LowRankMMResult(Y=best_Y, objective=best_val, iterations=it, converged=converged,
                           stop_reason=stop, history=hist, monotone_violations=viol, inner=inner,
                           inner_iterations=sum(r.inner_iterations for r in inner),
                           methods=methods)


#: ``low_rank_mm(method="auto")`` solves each majorize-minimize step with the cold interior point
#: up to these sizes (matrix side, rows), with the warm-started factored method above. Measured
#: on MVE steps (digits kNN graphs, /tmp measurements quoted in docs/routes/low_rank_sdp.md):
#: N = 100: interior point 0.07 s per step vs factored 0.3-8.4 s (each step certified to 1e-4);
#: N = 400: 2.0 s per step vs 30+ s (the factored method's dual certificate stalls).
MM_IP_MAX_N = IP_MAX_N
MM_IP_MAX_M = IP_MAX_M


def mm_step_method(method: str, n: int, m: int) -> str:
    """The inner solver of a majorize-minimize step: ``"ip"`` or ``"bm"`` (``method="auto"``:
    by size, ``MM_IP_MAX_N`` / ``MM_IP_MAX_M``)."""
    if method not in ("auto", "ip", "bm"):
        raise ValueError(f"method must be auto, ip or bm, got {method!r}")
    if method != "auto":
        return method
    return "ip" if n <= MM_IP_MAX_N and m <= MM_IP_MAX_M else "bm"
