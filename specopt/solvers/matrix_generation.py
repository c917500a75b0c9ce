r"""Matrix (column) generation for linear programs over the spectraplex.

Problem solved (maximization; all data plain arrays, no CVXPY)::

    max_{X, z}  <C, X> + c^T z + offset
    s.t.        lb <= A(X) + G z <= ub            (m rows, A(X)_r = <A_r, X>)
                zlb <= z <= zub
                X PSD,  tr X = t   (or tr X <= t)

Writing ``X = sum_i theta_i u_i u_i^T`` with ``||u_i|| = 1`` and ``theta >= 0``,
``sum theta = t`` (the spectraplex is the convex hull of the unit rank-one matrices) turns the
problem into an LP with one column per unit vector. The *restricted master* keeps finitely many
columns; it lives in one HiGHS model for the whole run (new columns are appended with
``addCols`` and the simplex restarts from the previous basis).

**Pricing and bound.** For any row multipliers ``y`` with the sign of the active side
(``y_r >= 0`` needs ``ub_r < inf``, ``y_r <= 0`` needs ``lb_r > -inf``) weak duality gives::

    OPT <= t * lambda_max(H(y)) + sum_j sup_{z_j in [zlb_j, zub_j]} (c - G^T y)_j z_j
           + sum_r max(y_r ub_r, y_r lb_r) + offset,         H(y) = C - A^*(y)

(with ``max(lambda_max, 0)`` for ``tr X <= t``). This Lagrangian bound is valid every round; the
top eigenvectors of ``H`` at the master duals are the columns with the largest reduced cost
``u^T H u - mu`` (``mu`` = dual of the trace row). The run stops when
``(bound - master) / max(1, |master|) <= tol``.

**Data kept factored.** ``A`` is a :class:`SymOperator`; :class:`FactoredOperator` stores
``A_r = sum_k M[r, k] v_k v_k^T`` (``V`` of shape (K, n), ``M`` sparse (m, K)), so the PSDBoost
triplet matrices ``A_r = p_r p_r^T - q_r q_r^T`` cost O(|S| n) memory; ``H v`` is
``V^T (M^T w * (V v))`` and the dense ``H`` (for small n) only touches rows of ``V`` with a
nonzero weight.

**Tailing-off remedies** (measured in ``benchmarks/matrix_generation.py``):
several eigenvectors per round (``columns_per_round``), Wentges dual smoothing
(``smoothing``: price at ``alpha * y_best + (1 - alpha) * y_master``, falling back to the master
duals on a mispricing), pruning of columns that stayed at zero for ``prune_after`` rounds, and
aggregation of all columns into the eigenvectors of the current ``X`` when the master grows past
``max_columns``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import highspy
import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .._interrupt import call_interruptibly
from ._dask_rows import initial_working_set, stack_rows  # no dask import unless Dask-backed
from ._highs import new_highs, run_highs
from .sdp.ip_small import solve_small_sdp

__all__ = [
    "DenseOperator",
    "FactoredOperator",
    "MatrixGenerationResult",
    "StackedOperator",
    "UnboundedProblem",
    "SymOperator",
    "lagrangian_bound",
    "solve_spectraplex_lp",
    "triplet_operator",
]


# --------------------------------------------------------------------------------------------
# Linear operators X -> (<A_r, X>)_r on symmetric matrices
# --------------------------------------------------------------------------------------------
class SymOperator(Protocol):
    """A linear map ``X -> (<A_r, X>)_{r < m}`` on symmetric n x n matrices."""

    n: int
    m: int

    def quad(self, U: np.ndarray) -> np.ndarray:
        """``out[r, k] = u_k^T A_r u_k`` for the columns of ``U`` (n, k); shape (m, k)."""

    def adjoint_matvec(self, w: np.ndarray, V: np.ndarray) -> np.ndarray:
        """``(sum_r w_r A_r) @ V`` for ``V`` of shape (n, k)."""

    def adjoint_dense(self, w: np.ndarray) -> np.ndarray:
        """``sum_r w_r A_r`` as a dense symmetric (n, n) array."""

    def quad_pairs(self, P: np.ndarray) -> np.ndarray:
        """``out[r, l] = p_i^T A_r p_j`` for ``(i, j) = _pairs(k)[l]``; shape (m, k(k+1)/2)."""


def _pairs(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Upper-triangle index pairs ``i <= j`` in column-major order (Clarabel's svec order)."""
    J, I = np.nonzero(np.tril(np.ones((k, k), dtype=bool)))
    return I, J


class FactoredOperator:
    """``A_r = sum_k M[r, k] v_k v_k^T`` with ``V`` (K, n) dense and ``M`` sparse (m, K)."""

    def __init__(self, V: np.ndarray, M: sp.spmatrix | np.ndarray):
        self.V = np.ascontiguousarray(np.asarray(V, dtype=float))
        if self.V.ndim != 2:
            raise ValueError("V must be a 2-D array (K, n)")
        self.M = sp.csr_array(M, dtype=float)
        if self.M.shape[1] != self.V.shape[0]:
            raise ValueError(
                f"M has {self.M.shape[1]} columns but V has {self.V.shape[0]} rows"
            )
        self.m = self.M.shape[0]
        self.n = self.V.shape[1]
        self._MT = sp.csr_array(self.M.T)

    def quad(self, U: np.ndarray) -> np.ndarray:
        VU = self.V @ U
        return np.asarray(self.M @ (VU * VU))

    def _weights(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = self._MT @ np.asarray(w, dtype=float)
        idx = np.flatnonzero(s)
        return idx, s[idx]

    def adjoint_matvec(self, w: np.ndarray, V: np.ndarray) -> np.ndarray:
        idx, s = self._weights(w)
        Va = self.V[idx]
        Y = Va @ V
        return Va.T @ (s.reshape(-1, *([1] * (Y.ndim - 1))) * Y)

    def adjoint_dense(self, w: np.ndarray) -> np.ndarray:
        idx, s = self._weights(w)
        Va = self.V[idx]
        H = Va.T @ (s[:, None] * Va)
        return 0.5 * (H + H.T)

    def quad_pairs(self, P: np.ndarray) -> np.ndarray:
        B = self.V @ P
        I, J = _pairs(P.shape[1])
        return np.asarray(self.M @ (B[:, I] * B[:, J]))


class DenseOperator:
    """Rows given by ``vec(A_r)`` (column-major) in a sparse or dense (m, n^2) matrix.

    The matrices are symmetrized: only ``<A_r, X>`` for symmetric ``X`` matters.
    """

    def __init__(self, Avec: sp.spmatrix | np.ndarray, n: int):
        A = sp.csr_array(Avec, dtype=float)
        if A.shape[1] != n * n:
            raise ValueError(f"Avec must have n^2 = {n * n} columns, got {A.shape[1]}")
        # symmetrize: vec(A) -> (vec(A) + vec(A^T)) / 2
        perm = np.arange(n * n).reshape(n, n).T.ravel()
        self.A = sp.csr_array(0.5 * (A + A[:, perm]))
        self.AT = sp.csr_array(self.A.T)
        self.m, self.n = A.shape[0], n

    def quad(self, U: np.ndarray) -> np.ndarray:
        U = np.asarray(U, dtype=float)
        k = U.shape[1]
        # vec(u u^T) column-major equals kron(u, u)
        K = (U[:, None, :] * U[None, :, :]).reshape(self.n * self.n, k, order="F")
        return np.asarray(self.A @ K).reshape(self.m, k)

    def adjoint_dense(self, w: np.ndarray) -> np.ndarray:
        v = self.AT @ np.asarray(w, dtype=float)
        return np.asarray(v).reshape(self.n, self.n, order="F")

    def adjoint_matvec(self, w: np.ndarray, V: np.ndarray) -> np.ndarray:
        return self.adjoint_dense(w) @ V

    def quad_pairs(self, P: np.ndarray) -> np.ndarray:
        I, J = _pairs(P.shape[1])
        K = (P[:, None, I] * P[None, :, J]).reshape(self.n * self.n, I.size, order="F")
        return np.asarray(self.A @ K).reshape(self.m, I.size)


class StackedOperator:
    """Rows of several operators on the same n, one after the other."""

    def __init__(self, ops: list[SymOperator]):
        if not ops:
            raise ValueError("StackedOperator needs at least one operator")
        self.ops = list(ops)
        self.n = ops[0].n
        if any(o.n != self.n for o in ops):
            raise ValueError("all stacked operators must act on the same n")
        self.m = sum(o.m for o in ops)
        self._cuts = np.cumsum([0] + [o.m for o in ops])

    def quad(self, U: np.ndarray) -> np.ndarray:
        return stack_rows([o.quad(U) for o in self.ops])  # lazy if a part lives in Dask

    def quad_pairs(self, P: np.ndarray) -> np.ndarray:
        return stack_rows([o.quad_pairs(P) for o in self.ops])

    def _parts(self, w: np.ndarray):
        for o, a, b in zip(self.ops, self._cuts[:-1], self._cuts[1:], strict=True):
            wi = w[a:b]
            if np.any(wi):
                yield o, wi

    def adjoint_matvec(self, w: np.ndarray, V: np.ndarray) -> np.ndarray:
        out = np.zeros((self.n,) + V.shape[1:])
        for o, wi in self._parts(w):
            out += o.adjoint_matvec(wi, V)
        return out

    def adjoint_dense(self, w: np.ndarray) -> np.ndarray:
        out = np.zeros((self.n, self.n))
        for o, wi in self._parts(w):
            out += o.adjoint_dense(wi)
        return out


class _SumRowsOperator:
    """``A_r = sum_j B^(j)_r`` for operators with the same (m, n)."""

    def __init__(self, ops: list[SymOperator]):
        self.ops = list(ops)
        self.n, self.m = ops[0].n, ops[0].m

    def quad(self, U):
        return sum(o.quad(U) for o in self.ops)

    def adjoint_matvec(self, w, V):
        return sum(o.adjoint_matvec(w, V) for o in self.ops)

    def adjoint_dense(self, w):
        return sum(o.adjoint_dense(w) for o in self.ops)

    def quad_pairs(self, P):
        return sum(o.quad_pairs(P) for o in self.ops)


def sum_operators(ops: list[SymOperator]) -> SymOperator:
    """Row-wise sum of operators with equal shapes (used to merge factored and dense parts)."""
    ops = [o for o in ops if o is not None]
    if len(ops) == 1:
        return ops[0]
    if len({(o.m, o.n) for o in ops}) != 1:
        raise ValueError("sum_operators needs operators of equal (m, n)")
    return _SumRowsOperator(ops)


def triplet_operator(P: np.ndarray, Q: np.ndarray) -> FactoredOperator:
    """``A_r = p_r p_r^T - q_r q_r^T`` (PSDBoost: p = a_i - a_k, q = a_i - a_j)."""
    P = np.asarray(P, dtype=float)
    Q = np.asarray(Q, dtype=float)
    if P.shape != Q.shape or P.ndim != 2:
        raise ValueError("P and Q must be 2-D arrays of the same shape (|S|, n)")
    m = P.shape[0]
    eye = sp.identity(m, format="csr")
    return FactoredOperator(np.vstack([P, Q]), sp.hstack([eye, -eye], format="csr"))


class UnboundedProblem(ValueError):
    """The objective is unbounded above on the feasible set."""


class MasterInfeasible(RuntimeError):
    """The restricted (PSD-block) master is infeasible: not a proof that the problem is."""


# --------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------
@dataclass
class MatrixGenerationResult:
    """Outcome of :func:`solve_spectraplex_lp`.

    ``X = U @ diag(theta) @ U.T`` (columns of ``U`` unit vectors, ``theta >= 0``,
    ``sum theta = t`` or ``<= t``); ``z`` the LP variables; ``y`` the row duals (max-sense:
    ``OPT <= bound(y)``), ``mu`` the trace-row dual. ``objective`` is the master value (attained
    by the returned point), ``bound`` the best Lagrangian bound, ``gap`` their relative gap.
    """

    status: str
    objective: float
    bound: float
    gap: float
    theta: np.ndarray
    U: np.ndarray
    z: np.ndarray
    y: np.ndarray
    mu: float
    row_activity: np.ndarray
    iterations: int
    n_columns: int
    solve_time: float
    history: dict[str, list[float]] = field(default_factory=dict)
    artificial: float = 0.0
    #: the multipliers behind ``bound`` (LP master; None where not kept)
    y_bound: np.ndarray | None = None

    @property
    def X(self) -> np.ndarray:
        return (self.U * self.theta) @ self.U.T


# --------------------------------------------------------------------------------------------
# Eigen-oracle
# --------------------------------------------------------------------------------------------
def _top_eigs(
    op_full: SymOperator, w: np.ndarray, k: int, dense: bool, v0: np.ndarray | None, tol: float
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` eigenpairs of ``H = sum_r w_r A_r`` (values descending) and a safe lambda_max.

    Returns ``(vals, vecs)``; for the Lanczos path ``vals[0]`` is increased by the residual
    norm of its Ritz pair so that it stays an upper estimate for the bound.
    """
    n = op_full.n
    k = max(1, min(k, n))
    if dense or n <= k + 1:
        H = op_full.adjoint_dense(w)
        vals, vecs = sla.eigh(H, subset_by_index=[n - k, n - 1], driver="evr")
        return vals[::-1], vecs[:, ::-1]
    lin = spla.LinearOperator(
        (n, n), matvec=lambda x: op_full.adjoint_matvec(w, x), dtype=float
    )
    kk = min(max(k, 2), n - 2)
    try:
        vals, vecs = spla.eigsh(lin, k=kk, which="LA", v0=v0, tol=tol, maxiter=20 * n)
    except (spla.ArpackError, spla.ArpackNoConvergence):
        # e.g. H = 0 (no objective on X at the start): fall back to the dense path
        return _top_eigs(op_full, w, k, True, None, tol)
    order = np.argsort(vals)[::-1]
    vals, vecs = vals[order][:k], vecs[:, order][:, :k]
    r = op_full.adjoint_matvec(w, vecs[:, :1])[:, 0] - vals[0] * vecs[:, 0]
    vals = vals.copy()
    vals[0] += np.linalg.norm(r)
    return vals, vecs


def lagrangian_bound(
    lam_max: float,
    y: np.ndarray,
    lb: np.ndarray,
    ub: np.ndarray,
    G: sp.csr_array,
    c: np.ndarray,
    zlb: np.ndarray,
    zub: np.ndarray,
    t: float,
    trace_eq: bool,
    offset: float = 0.0,
    ztol: float = 1e-9,
) -> float:
    """Weak-duality bound ``t lambda_max(H(y)) + sup_z (c - G^T y)^T z + h(y) + offset``.

    ``y`` must already respect the signs of its rows (see :func:`_clip_duals`); reduced costs of
    unbounded LP variables below ``ztol * max(1, |c_j|)`` count as zero (they are zero in exact
    arithmetic at a master optimum).
    """
    with np.errstate(invalid="ignore"):
        hy = np.where(y > 0, y * ub, np.where(y < 0, y * lb, 0.0)).sum()
        d = c - G.T @ y if G.shape[1] else np.zeros(0)
        small = np.abs(d) <= ztol * np.maximum(1.0, np.abs(c))
        d = np.where(small & ~(np.isfinite(zlb) & np.isfinite(zub)), 0.0, d)
        zt = np.where(d > 0, d * zub, np.where(d < 0, d * zlb, 0.0)).sum()
    xt = t * lam_max if trace_eq else t * max(lam_max, 0.0)
    val = float(xt + zt + hy + offset)
    return val if np.isfinite(val) else np.inf


def _clip_duals(y: np.ndarray, lb: np.ndarray, ub: np.ndarray) -> np.ndarray:
    """Zero the multipliers whose sign points at an infinite side (keeps the bound finite)."""
    y = y.copy()
    y[(y > 0) & ~np.isfinite(ub)] = 0.0
    y[(y < 0) & ~np.isfinite(lb)] = 0.0
    return y


# --------------------------------------------------------------------------------------------
# Restricted master in HiGHS
# --------------------------------------------------------------------------------------------
class _Master:
    """The restricted master LP, alive for the whole run (z columns first, then theta)."""

    def __init__(self, A, C, G, c, lb, ub, zlb, zub, t, trace_eq, big_m):
        self.A, self.C = A, C
        self.m, self.p = A.m, G.shape[1]
        self.h = new_highs()
        h = self.h
        h.setOptionValue("solver", "simplex")
        h.setOptionValue("presolve", "off")
        h.setOptionValue("primal_feasibility_tolerance", 1e-9)
        h.setOptionValue("dual_feasibility_tolerance", 1e-9)
        inf = highspy.kHighsInf
        f = lambda a: np.clip(np.nan_to_num(a, posinf=inf, neginf=-inf), -inf, inf)  # noqa: E731
        rl = np.append(f(lb), t if trace_eq else -inf)
        ru = np.append(f(ub), t)
        h.addRows(self.m + 1, rl, ru, 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        if self.p:
            Gc = sp.csc_array(G)
            h.addCols(
                self.p, np.asarray(c, float), f(zlb), f(zub), Gc.nnz,
                Gc.indptr.astype(np.int32), Gc.indices.astype(np.int32), Gc.data.astype(float),
            )
        self.n_art = 0
        self.big_m = big_m
        self.U = np.zeros((A.n, 0))
        self.col_age = np.zeros(0, dtype=int)

    def add_artificials(self) -> None:
        """Elastic columns ``+-s_r`` with cost ``-big_m`` on every constraint row (phase 1).

        They go between the z and the theta columns (the layout every index here assumes): the
        theta columns are taken out and put back after them."""
        m = self.m
        U = self.U
        self.delete_theta(np.arange(U.shape[1]))
        idx = np.arange(m, dtype=np.int32)
        for sign in (1.0, -1.0):
            self.h.addCols(
                m, np.full(m, -self.big_m), np.zeros(m), np.full(m, highspy.kHighsInf), m,
                np.arange(m, dtype=np.int32), idx, np.full(m, sign),
            )
        self.n_art = 2 * m
        self.add_columns(U)

    @property
    def theta_start(self) -> int:
        return self.p + self.n_art

    def add_columns(self, U: np.ndarray) -> None:
        U = U / np.linalg.norm(U, axis=0, keepdims=True)
        k = U.shape[1]
        cost = self.C.quad(U)[0]
        vals = np.vstack([self.A.quad(U), np.ones((1, k))])
        vals[np.abs(vals) < 1e-14] = 0.0
        Ac = sp.csc_array(vals)
        self.h.addCols(
            k, cost, np.zeros(k), np.full(k, highspy.kHighsInf), Ac.nnz,
            Ac.indptr.astype(np.int32), Ac.indices.astype(np.int32), Ac.data,
        )
        self.U = np.hstack([self.U, U])
        self.col_age = np.append(self.col_age, np.zeros(k, dtype=int))

    def delete_theta(self, local_idx: np.ndarray) -> None:
        if local_idx.size == 0:
            return
        cols = (local_idx + self.theta_start).astype(np.int32)
        self.h.deleteCols(cols.size, cols)
        keep = np.ones(self.U.shape[1], bool)
        keep[local_idx] = False
        self.U = self.U[:, keep]
        self.col_age = self.col_age[keep]

    def solve(self):
        run_highs(self.h)
        status = self.h.getModelStatus()
        if status == highspy.HighsModelStatus.kNotset:
            # the warm start failed inside HiGHS (seen after column deletion): solve cold
            self.h.clearSolver()
            run_highs(self.h)
            status = self.h.getModelStatus()
        sol = self.h.getSolution()
        x = np.asarray(sol.col_value)
        y = np.asarray(sol.row_dual)
        obj = self.h.getInfo().objective_function_value
        return status, obj, x, y, np.asarray(sol.row_value)


# --------------------------------------------------------------------------------------------
# Main loop
# --------------------------------------------------------------------------------------------
def solve_spectraplex_lp(
    A: SymOperator,
    C: SymOperator | np.ndarray | None = None,
    G: sp.spmatrix | np.ndarray | None = None,
    c: np.ndarray | None = None,
    lb: np.ndarray | None = None,
    ub: np.ndarray | None = None,
    zlb: np.ndarray | None = None,
    zub: np.ndarray | None = None,
    *,
    trace: float = 1.0,
    trace_eq: bool = True,
    offset: float = 0.0,
    tol: float = 1e-6,
    max_iters: int = 2000,
    time_limit: float = np.inf,
    columns_per_round: int = 5,
    smoothing: float = 0.5,
    prune_after: int = 0,
    max_columns: int | None = None,
    dense_threshold: int = 300,
    init_columns: np.ndarray | None = None,
    big_m: float = 1e4,
    master: str = "lp",
    max_rank: int = 30,
    row_selection: int = 500,
    row_band: float = 1e-2,
    resolve_rows: bool = False,
    verbose: bool = False,
    callback: Callable[..., None] | None = None,
    cuts: str | bool = "auto",
) -> MatrixGenerationResult:
    r"""Column generation for ``max <C,X> + c^T z`` over the spectraplex (see module docstring).

    Parameters
    ----------
    A : SymOperator with ``m`` rows (``<A_r, X>``); C : objective matrix (dense (n, n) array or a
    1-row operator; None means 0); G : (m, p) coefficients of the LP variables ``z``; c : (p,)
    objective of ``z``; lb, ub : row bounds (``+-inf`` allowed); zlb, zub : bounds of ``z``.
    trace, trace_eq : ``tr X == trace`` (True) or ``tr X <= trace``.
    tol : stop when ``(bound - master) / max(1, |master|) <= tol``.
    columns_per_round : eigenvectors priced per round (those with positive reduced cost are added).
    smoothing : Wentges parameter ``alpha`` in [0, 1) (0 disables stabilization).
    prune_after : delete columns that were zero for this many consecutive rounds (0, default,
        disables: measured to cost rounds, see docs/routes/matrix_generation.md).
    max_columns : aggregate all columns into the eigenvectors of ``X`` beyond this many (None,
        default: never; aggregation was measured to cost rounds as well).
    dense_threshold : use dense ``eigh`` for n <= this, Lanczos (``eigsh``) above.
    master : "lp" (HiGHS over rank-one columns) or "psd" (PSD block over the generated span).
    max_rank : size of the PSD block (it grows beyond when X needs more directions).
    row_selection : with the PSD master and at least this many rows, inactive rows with zero
        multiplier leave the master and return when violated.
    row_band : rows whose slack exceeds ``row_band * max(1, |activity|)`` (and with a zero
        multiplier) leave the working set; a wider band means fewer rows coming back.
    resolve_rows : re-solve the master until no row outside the working set is violated (the
        exact restricted master every round). False (default): one solve per round; the
        violated rows join the working set for the next round and the LP variables are
        re-optimized for the master's ``X`` (``_polish_z``), so the value used for the gap is
        that of an exactly feasible point (falls back to the exact master if none exists).
    cuts : hinge rows (a slack private to the row, in ``[0, inf)``, with negative cost) in the
        1-slack cutting-plane master of :mod:`specopt.solvers.mg_cuts` (PSD master only):
        "auto" (default) from ``mg_cuts.CUT_MIN_ROWS`` hinge rows on or for Dask-backed data,
        True always when there are hinge rows, False never.
    callback : called every round as ``callback(round, objective=master value, bound=best
        bound, gap=rel. gap, violation=None)`` (``specopt._progress.Progress``).
    """
    t0 = time.perf_counter()
    n, m = A.n, A.m
    if trace <= 0:
        raise ValueError(f"trace bound must be positive, got {trace}")
    if C is None:
        C = FactoredOperator(np.zeros((0, n)), sp.csr_array((1, 0)))
    elif isinstance(C, np.ndarray):
        if C.shape != (n, n):
            raise ValueError(f"C must be ({n}, {n}), got {C.shape}")
        C = DenseOperator(C.reshape(1, -1, order="F"), n)
    G = sp.csr_array((m, 0)) if G is None else sp.csr_array(G, dtype=float)
    p = G.shape[1]
    if G.shape[0] != m:
        raise ValueError(f"G must have {m} rows, got {G.shape[0]}")
    c = np.zeros(p) if c is None else np.asarray(c, float).ravel()
    lb = np.full(m, -np.inf) if lb is None else np.asarray(lb, float).ravel()
    ub = np.full(m, np.inf) if ub is None else np.asarray(ub, float).ravel()
    zlb = np.full(p, -np.inf) if zlb is None else np.asarray(zlb, float).ravel()
    zub = np.full(p, np.inf) if zub is None else np.asarray(zub, float).ravel()
    for name, arr, size in (("c", c, p), ("lb", lb, m), ("ub", ub, m), ("zlb", zlb, p),
                            ("zub", zub, p)):
        if arr.size != size:
            raise ValueError(f"{name} must have {size} entries, got {arr.size}")
    if not 0.0 <= smoothing < 1.0:
        raise ValueError("smoothing must be in [0, 1)")
    full = StackedOperator([C, A])  # pricing weights w = (1, -y)
    dense = n <= dense_threshold
    if master == "psd" and cuts:
        from . import mg_cuts

        res = mg_cuts.dispatch(full, A, C, G, c, lb, ub, zlb, zub, trace, trace_eq, cuts,
                               tol=tol, max_iters=max_iters, time_limit=time_limit,
                               cpr=columns_per_round, max_rank=max_rank, verbose=verbose,
                               t0=t0, offset=offset, callback=callback)
        if res is not None:
            return res
    if master == "psd":
        return _psd_block_loop(full, A, C, G, c, lb, ub, zlb, zub, trace, trace_eq, tol,
                               max_iters, time_limit, columns_per_round, max_rank, dense,
                               verbose, t0, offset, smoothing, row_selection, row_band,
                               resolve_rows, callback=callback)
    if master != "lp":
        raise ValueError(f"master must be 'lp' or 'psd', got {master!r}")
    max_columns = max_columns or np.iinfo(np.int64).max

    master = _Master(A, C, G, c, lb, ub, zlb, zub, trace, trace_eq, big_m)
    # initial columns: top eigenvectors of C (or given), plus the coordinate axes for small n
    if init_columns is not None:
        U0 = np.asarray(init_columns, float).reshape(n, -1)
    else:
        vals, U0 = _top_eigs(full, np.append(1.0, np.zeros(m)), columns_per_round, dense, None,
                             1e-8)
        if n <= 50:
            U0 = np.hstack([U0, np.eye(n)])
    master.add_columns(U0)

    hist: dict[str, list[float]] = {k: [] for k in
                                    ("objective", "bound", "gap", "columns", "time", "lambda")}
    best_bound, y_best = np.inf, None
    v0 = None
    status_str = "max_iters"
    it = 0
    obj = -np.inf
    x = y = rowv = None
    mu = 0.0
    for it in range(1, max_iters + 1):
        st, obj, x, yrow, rowv = master.solve()
        if st == highspy.HighsModelStatus.kInfeasible and master.n_art == 0:
            master.add_artificials()
            st, obj, x, yrow, rowv = master.solve()
        if st == highspy.HighsModelStatus.kUnbounded or (
            st == highspy.HighsModelStatus.kUnboundedOrInfeasible
        ):
            raise UnboundedProblem("the problem is unbounded (the master LP is)")
        if st != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"HiGHS master LP failed: {master.h.modelStatusToString(st)}")
        y = _clip_duals(yrow[:m], lb, ub)
        mu = float(yrow[m])
        ym = y
        # stabilized separation point
        use_smooth = smoothing > 0 and y_best is not None
        ys = smoothing * y_best + (1 - smoothing) * ym if use_smooth else ym
        vals, vecs = _top_eigs(full, np.append(1.0, -ys), columns_per_round, dense, v0, 1e-10)
        bnd = lagrangian_bound(vals[0], ys, lb, ub, G, c, zlb, zub, trace, trace_eq)
        if bnd < best_bound:
            best_bound, y_best = bnd, ys
        # reduced costs w.r.t. the master duals
        rc = full.quad(vecs).T @ np.append(1.0, -ym) - mu
        keep = rc > 1e-12 * max(1.0, abs(obj))
        if use_smooth and not keep.any():  # mispricing: price at the master duals
            vals, vecs = _top_eigs(full, np.append(1.0, -ym), columns_per_round, dense, v0, 1e-10)
            bnd = lagrangian_bound(vals[0], ym, lb, ub, G, c, zlb, zub, trace, trace_eq)
            if bnd < best_bound:
                best_bound, y_best = bnd, ym
            keep = vals - mu > 1e-12 * max(1.0, abs(obj))
        v0 = vecs[:, 0]
        gap = record_round(hist, it, obj, best_bound, offset, master.U.shape[1], float(vals[0]),
                           t0, callback)
        if verbose:
            print(f"[mg] it {it:4d} obj {obj + offset:+.9e} bound {best_bound + offset:+.9e} "
                  f"gap {gap:.2e} cols {master.U.shape[1]}")
        art = float(x[master.p: master.theta_start].sum()) if master.n_art else 0.0
        if gap <= tol and art <= 1e-9:
            status_str = "optimal"
            break
        if time.perf_counter() - t0 > time_limit:
            status_str = "time_limit"
            break
        if not keep.any():
            # nothing prices out although the gap is open: numerical floor of the oracle
            status_str = "stalled"
            break
        # column management
        theta = x[master.theta_start:]
        master.col_age = np.where(theta > 1e-12, 0, master.col_age + 1)
        if prune_after and it % 10 == 0:
            master.delete_theta(np.flatnonzero(master.col_age >= prune_after))
        if master.U.shape[1] > max_columns:
            theta = master.h.getSolution().col_value[master.theta_start:]
            Uc = _aggregate(master.U, np.asarray(theta))
            master.delete_theta(np.arange(master.U.shape[1]))
            master.add_columns(Uc)
        master.add_columns(vecs[:, keep])

    if x is not None and x.size != master.theta_start + master.U.shape[1]:
        # the loop ended after changing the columns: re-solve (the master value can only rise)
        _, obj_new, x, yrow, rowv = master.solve()
        obj = max(obj, obj_new)
    theta = np.asarray(x[master.theta_start:]) if x is not None else np.zeros(0)
    theta = np.maximum(theta, 0.0)
    art = float(x[master.p: master.theta_start].sum()) if master.n_art else 0.0
    if art > 1e-9:
        # the big-M master still uses its artificials: infeasible only with a proof (phase 1)
        proven = phase_one(A, G, lb, ub, zlb, zub, trace, trace_eq,
                           max_iters=max_iters, time_limit=time_limit, dense=dense)
        status_str = "infeasible" if proven else (
            "stalled" if status_str == "optimal" else status_str)
    pos = theta > 0
    return MatrixGenerationResult(
        status=status_str,
        objective=float(obj + offset),
        bound=float(best_bound + offset),
        gap=float((best_bound - obj) / max(1.0, abs(obj))),
        theta=theta[pos],
        U=master.U[:, pos],
        z=np.asarray(x[: master.p]),
        y=y,
        mu=mu,
        row_activity=np.asarray(rowv[:m]),
        iterations=it,
        n_columns=int(master.U.shape[1]),
        solve_time=time.perf_counter() - t0,
        history=hist,
        artificial=art,
        y_bound=y_best,
    )


def farkas_bound(A: SymOperator, y: np.ndarray, G, lb, ub, zlb, zub, t: float,
                 trace_eq: bool, dense: bool) -> float:
    """``t lambda_max(-A^T y) + sup_z (-G^T y)^T z + h(y)``: the Lagrangian bound of
    ``max 0`` over the constraints at the multipliers ``y`` (signs as in :func:`_clip_duals`).

    Negative means that no ``X`` in the spectraplex and ``z`` in its bounds satisfies
    ``lb <= A(X) + G z <= ub`` (every feasible point would give ``0 <= bound``): ``y`` is then
    a Farkas certificate. The eigenvalue is computed here, not taken from an LP solver."""
    H = A.adjoint_dense(-y) if dense else None
    if dense:
        lam = float(sla.eigh(0.5 * (H + H.T), eigvals_only=True, subset_by_index=[A.n - 1] * 2,
                             driver="evr")[0])
    else:
        zero = FactoredOperator(np.zeros((0, A.n)), sp.csr_array((1, 0)))
        lam = float(_top_eigs(StackedOperator([zero, A]), np.append(1.0, -y), 1, False, None,
                              1e-10)[0][0])
    p = G.shape[1]
    return lagrangian_bound(lam, y, lb, ub, G, np.zeros(p), zlb, zub, t, trace_eq, ztol=0.0)


def phase_one(A: SymOperator, G, lb, ub, zlb, zub, t: float, trace_eq: bool, *,
              max_iters: int = 500, time_limit: float = np.inf, dense: bool = True,
              rel_tol: float = 1e-7) -> bool:
    """Whether the constraints are proven infeasible: phase 1 of the LP master.

    Solves ``max -sum_r (s+_r + s-_r)`` subject to ``lb <= A(X) + G z + s+ - s- <= ub`` over
    the spectraplex (the LP master with elastic columns of cost -1, see
    :func:`solve_spectraplex_lp`), then checks the best multipliers ``y`` (``|y| <= 1``) as a
    Farkas certificate with :func:`farkas_bound`: infeasible when that bound is below
    ``-rel_tol * (1 + max |finite bound|)``.
    """
    m = A.m
    G = sp.csr_array(G)
    p = G.shape[1]
    Gp = sp.hstack([G, sp.identity(m), -sp.identity(m)], format="csr")
    cp1 = np.concatenate([np.zeros(p), -np.ones(2 * m)])
    zlb1 = np.concatenate([zlb, np.zeros(2 * m)])
    zub1 = np.concatenate([zub, np.full(2 * m, np.inf)])
    res = solve_spectraplex_lp(A, None, Gp, cp1, lb, ub, zlb1, zub1, trace=t, trace_eq=trace_eq,
                               tol=1e-9, max_iters=max_iters, time_limit=time_limit,
                               master="lp", dense_threshold=A.n if dense else 0, big_m=1.0)
    finite = np.concatenate([lb[np.isfinite(lb)], ub[np.isfinite(ub)], [0.0]])
    margin = rel_tol * (1.0 + float(np.abs(finite).max()))
    if not res.bound < -margin:
        return False
    # the certificate, checked on its own: the row multipliers of the best bound
    y = _clip_duals(np.clip(res.y_bound, -1.0, 1.0), lb, ub)
    return farkas_bound(A, y, G, lb, ub, zlb, zub, t, trace_eq, dense) < -margin


def _aggregate(U: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Eigenvectors of ``X = U diag(theta) U^T`` with nonzero eigenvalue (same X, fewer columns)."""
    W = U * np.sqrt(np.maximum(theta, 0.0))
    Q, s, _ = np.linalg.svd(W, full_matrices=False)
    r = int((s > 1e-10 * max(s[0], 1e-300)).sum()) if s.size else 0
    return Q[:, : max(r, 1)]


# --------------------------------------------------------------------------------------------
# PSD-block master (spectral-bundle style)
# --------------------------------------------------------------------------------------------
_SQRT2 = np.sqrt(2.0)
_RANK_TOL = 1e-5  # eigenvalues of W below this (times t) go to the aggregate, not the block


def _psd_block_master_ip(Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k,
                         acc=1e-9):
    r"""The master of :func:`_psd_block_master` by the row-space interior point
    (:func:`~specopt.solvers.sdp.ip_small.solve_small_sdp`); ``None`` if it does not converge.

    Standard form (minimization of the negated objective): ``W`` is the PSD block, ``alpha``
    and the shifted bounded parts of ``z`` (``z = zlb + u``, ``z = zub - v``, and ``u + v =
    zub - zlb`` for boxes) are nonnegative, unbounded ``z`` are free; a row with one finite
    side gets a surplus/slack, a two-sided row ``lb <= a x <= ub`` becomes ``a x - s1 = lb``,
    ``s1 + s2 = ub - lb``. Row duals are mapped back to the max-sense multipliers ``y_r =
    d OPT / d(bound)`` (= minus the standard-form dual of the row's first equation).
    """
    m, npairs = Bs.shape
    p = G.shape[1]
    I, J = _pairs(k)
    scale = np.where(I == J, 1.0, _SQRT2)

    def mats(coef):  # <Q, W> = coef @ (W[I, J] * scale)  ->  Q[I, J] = coef / scale
        Q = np.zeros(coef.shape[:-1] + (k, k))
        Q[..., I, J] = coef / scale
        Q[..., J, I] = coef / scale
        return Q

    G = sp.csc_array(G)
    lbz, ubz = np.isfinite(zlb), np.isfinite(zub)
    fixed = lbz & ubz & (zlb == zub)
    box = lbz & ubz & ~fixed
    lo_only, up_only = lbz & ~ubz, ubz & ~lbz
    free = ~lbz & ~ubz
    z0 = np.where(lbz, zlb, np.where(ubz, zub, 0.0))
    shift = G @ z0
    lbr, ubr = lb - shift, ub - shift
    eq = np.isfinite(lbr) & np.isfinite(ubr) & (lbr == ubr)
    two = np.isfinite(lbr) & np.isfinite(ubr) & ~eq
    lo = np.isfinite(lbr) & ~np.isfinite(ubr)
    up = np.isfinite(ubr) & ~np.isfinite(lbr)
    keep = eq | two | lo | up
    rows = np.flatnonzero(keep)
    nr = rows.size
    nbox, ntwo = int(box.sum()), int(two[rows].sum())
    me = nr + 1 + ntwo + nbox
    # PSD part: the kept rows, then the trace row; the extra rows do not touch W
    Amats = np.zeros((me, k, k))
    Amats[:nr] = mats(Bs[rows])
    Amats[nr][np.diag_indices(k)] = 1.0
    b = np.zeros(me)
    b[:nr] = np.where(np.isfinite(lbr[rows]), lbr[rows], ubr[rows])
    b[nr] = t
    Cmat = -mats(cobj)
    # nonnegative columns, in blocks: [alpha] [trace slack] [z parts] [v of boxes] [row slacks]
    Gk = sp.csc_array(G[rows]) if nr else sp.csc_array((0, p))
    blocks, costs = [], []

    def block(rows_idx, cols_idx, vals, ncols):
        blocks.append(sp.csc_array((vals, (rows_idx, cols_idx)), shape=(me, ncols)))

    if abar is not None:
        nzr = np.flatnonzero(abar[rows])
        block(np.r_[nzr, nr], np.zeros(nzr.size + 1, int), np.r_[abar[rows][nzr], 1.0], 1)
        costs.append([-cbar])
    if not trace_eq:
        block([nr], [0], [1.0], 1)
        costs.append([0.0])
    nonneg = np.flatnonzero(lo_only | box | up_only)  # z = zlb + u or z = zub - v
    sgn = np.where(up_only[nonneg], -1.0, 1.0)
    Gz = sp.coo_array(Gk[:, nonneg] @ sp.diags_array(sgn)) if nr else sp.coo_array((0, 0))
    jbox = np.flatnonzero(box[nonneg])
    brow = nr + 1 + ntwo + np.arange(nbox)
    block(np.r_[Gz.row, brow], np.r_[Gz.col, jbox], np.r_[Gz.data, np.ones(nbox)], nonneg.size)
    costs.append(-sgn * np.asarray(c, dtype=float)[nonneg])
    block(brow, np.arange(nbox), np.ones(nbox), nbox)
    costs.append(np.zeros(nbox))
    b[brow] = (zub - zlb)[box]
    ri = np.flatnonzero(~eq[rows])  # rows with a slack (lower: -s, upper: +s, two-sided: -s1)
    tw = np.flatnonzero(two[rows[ri]])  # slack columns of the two-sided rows
    trow = nr + 1 + np.arange(ntwo)
    sval = np.where(up[rows[ri]], 1.0, -1.0)
    block(np.r_[ri, trow], np.r_[np.arange(ri.size), tw], np.r_[sval, np.ones(ntwo)], ri.size)
    costs.append(np.zeros(ri.size))
    block(trow, np.arange(ntwo), np.ones(ntwo), ntwo)
    costs.append(np.zeros(ntwo))
    b[trow] = (ubr - lbr)[rows[ri[tw]]]
    Al = sp.hstack(blocks, format="csr")
    cl = np.concatenate([np.asarray(x, dtype=float) for x in costs])
    fj = np.flatnonzero(free)
    Af = np.zeros((me, fj.size))
    if nr:
        Af[:nr] = Gk[:, fj].toarray()
    cf = -np.asarray(c, dtype=float)[fj]
    sol = solve_small_sdp(Amats, b, Cmat, Al, cl, Af, cf, tol=acc)
    if sol is None:
        return None
    W = sol.X
    alpha = float(sol.xl[0]) if abar is not None else 0.0
    off = (abar is not None) + (not trace_eq)
    z = z0.copy()
    z[nonneg] += sgn * sol.xl[off: off + nonneg.size]
    z[fj] = sol.xf
    y = np.zeros(m)
    y[rows] = -sol.y[:nr]
    mu = -float(sol.y[nr])
    obj = float(cobj @ (W[I, J] * scale)) + alpha * (cbar or 0.0) + float(c @ z)
    return obj, W, max(alpha, 0.0), z, y, mu


def _psd_block_master(Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k):
    r"""Solve the restricted master over ``X = P W P^T + alpha Xbar``.

    ``max <P^T C P, W> + alpha cbar + c^T z`` s.t. ``tr W + alpha = t`` (or ``<= t``),
    ``lb <= A(P W P^T) + alpha abar + G z <= ub``, ``W PSD``, ``alpha >= 0``, z in its box;
    returns ``(obj, W, alpha, z, y, mu)`` with ``y`` the max-sense row duals.

    The row-space interior point wins once the PSD block is not small next to the rows
    (Clarabel's KKT carries a dense k(k+1)/2 scaling block; the IP's Schur complement has one
    row per master row): measured 4x faster at k = 36-45 with 500-660 rows, 4x slower at k = 16
    with 1400 rows. Small blocks stay with Clarabel: cheap there, and its vertex-like solutions
    suit a tight max_rank better (the IP's analytic-centre solutions stalled a max_rank = 3
    run). Clarabel also takes every master the IP gives up on.
    """
    args = (Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k)
    if k >= 12 and 4 * Bs.shape[1] >= Bs.shape[0]:
        res = _psd_block_master_ip(*args)
        if res is not None:
            return res
    return _psd_block_master_clarabel(*args)


def _psd_block_master_clarabel(Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k,
                               acc=1e-10):
    r"""The master of :func:`_psd_block_master` with Clarabel's own API.

    Variables ``x = (svec W, [alpha], z)``; decides infeasible (``MasterInfeasible``) and
    unbounded (``UnboundedProblem``) masters.
    """
    import clarabel

    m, npairs = Bs.shape
    p = G.shape[1]
    has_bar = abar is not None
    na = 1 if has_bar else 0
    nx = npairs + na + p
    I, J = _pairs(k)
    diag = (I == J).astype(float)
    parts = [sp.csr_array(Bs)] + ([sp.csr_array(abar.reshape(-1, 1))] if has_bar else []) + [G]
    R = sp.hstack(parts, format="csr")
    trow = sp.csr_array(np.concatenate([diag, np.ones(na), np.zeros(p)]).reshape(1, -1))
    eq = np.isfinite(lb) & np.isfinite(ub) & (lb == ub)
    up = np.isfinite(ub) & ~eq
    lo = np.isfinite(lb) & ~eq
    zeye = sp.hstack([sp.csr_array((p, npairs + na)), sp.identity(p, format="csr")], format="csr")
    zup, zlo = np.isfinite(zub), np.isfinite(zlb)
    blocks_zero, b_zero = [], []
    blocks_nn, b_nn = [], []
    (blocks_zero if trace_eq else blocks_nn).append(trow)
    (b_zero if trace_eq else b_nn).append([t])
    blocks_zero.append(R[eq])
    b_zero.append(ub[eq])
    blocks_nn += [R[up], -R[lo], zeye[zup], -zeye[zlo]]
    b_nn += [ub[up], -lb[lo], zub[zup], -zlb[zlo]]
    if has_bar:
        e = np.zeros((1, nx))
        e[0, npairs] = -1.0
        blocks_nn.append(sp.csr_array(e))
        b_nn.append([0.0])
    psd = sp.hstack([-sp.identity(npairs), sp.csr_array((npairs, na + p))], format="csr")
    Aall = sp.vstack(blocks_zero + blocks_nn + [psd], format="csc")
    b = np.concatenate([np.concatenate(b_zero), np.concatenate(b_nn), np.zeros(npairs)])
    nz = sum(x.shape[0] for x in blocks_zero)
    nn = sum(x.shape[0] for x in blocks_nn)
    cones = []
    if nz:
        cones.append(clarabel.ZeroConeT(nz))
    if nn:
        cones.append(clarabel.NonnegativeConeT(nn))
    cones.append(clarabel.PSDTriangleConeT(k))
    q = -np.concatenate([cobj, [cbar] if has_bar else [], c])
    # Clarabel sometimes stops at its first factorization on these degenerate masters; the
    # retries (no equilibration, stronger static regularization, default accuracy) fix it
    attempts = ({}, {"equilibrate_enable": False}, {"static_regularization_constant": 1e-7},
                {"tol_gap_abs": 1e-8, "tol_gap_rel": 1e-8, "tol_feas": 1e-8,
                 "static_regularization_constant": 1e-7, "equilibrate_enable": False})
    for extra in attempts:
        st = clarabel.DefaultSettings()
        st.verbose = False
        st.tol_gap_abs = st.tol_gap_rel = acc
        st.tol_feas = acc
        st.max_threads = 1
        for key, val in extra.items():
            setattr(st, key, val)
        solver = clarabel.DefaultSolver(sp.csc_array((nx, nx)), q, Aall, b, cones, st)
        sol = call_interruptibly(solver.solve)
        if str(sol.status) in ("Solved", "AlmostSolved", "DualInfeasible"):
            break
    if str(sol.status) in ("DualInfeasible", "AlmostDualInfeasible"):
        raise UnboundedProblem("the problem is unbounded (the PSD-block master is)")
    if str(sol.status) in ("PrimalInfeasible", "AlmostPrimalInfeasible"):
        raise MasterInfeasible(f"Clarabel PSD-block master failed: {sol.status}")
    if str(sol.status) not in ("Solved", "AlmostSolved"):
        raise RuntimeError(f"Clarabel PSD-block master failed: {sol.status}")
    x = np.asarray(sol.x)
    zd = np.asarray(sol.z)
    # duals: trace row first in its cone group
    if trace_eq:
        mu = zd[0]
        zeq = zd[1:nz]
        off = nz
    else:
        mu = zd[nz]
        zeq = zd[:nz]
        off = nz + 1
    y = np.zeros(m)
    y[eq] = zeq
    nup, nlo = int(up.sum()), int(lo.sum())
    y[up] += zd[off: off + nup]
    y[lo] -= zd[off + nup: off + nup + nlo]
    w = x[:npairs]
    W = np.zeros((k, k))
    W[I, J] = np.where(I == J, w, w / _SQRT2)
    W = W + np.triu(W, 1).T
    alpha = float(x[npairs]) if has_bar else 0.0
    return -float(sol.obj_val), W, max(alpha, 0.0), x[npairs + na:], y, float(mu)


def record_round(hist: dict, it: int, obj: float, bound: float, offset: float, columns: int,
                 lam: float, t0: float, callback, **extra: float) -> float:
    """Append one master round to ``hist`` (objective, bound, gap, columns, time, lambda and any
    ``extra`` series), call the progress ``callback``; return the relative gap
    ``(bound - obj) / max(1, |obj|)`` (shared by the LP, row and cut masters)."""
    gap = (bound - obj) / max(1.0, abs(obj))
    for key, val in (("objective", obj + offset), ("bound", bound + offset), ("gap", gap),
                     ("columns", columns), ("time", time.perf_counter() - t0), ("lambda", lam),
                     *extra.items()):
        hist[key].append(val)
    if callback is not None:
        callback(it, objective=obj + offset, bound=bound + offset, gap=gap)
    return gap


def iterate_factor(P, W, Ubar, thbar, alpha, t):
    """The iterate ``X = P W P^T + alpha Ubar diag(thbar) Ubar^T`` as ``Q diag(s2) Q^T``
    (weights below ``1e-12 max(t, max s2)`` dropped); also the eigenpairs ``(lw, Vw)`` of W."""
    lw, Vw = np.linalg.eigh(W)
    F = P @ (Vw * np.sqrt(np.maximum(lw, 0.0)))
    if Ubar is not None and alpha > 0:
        F = np.hstack([F, Ubar * np.sqrt(alpha * thbar)])
    Q, s, _ = np.linalg.svd(F, full_matrices=False)
    s2 = s * s
    nzr = s2 > 1e-12 * max(t, s2.max(initial=0.0))
    return lw, Vw, Q[:, nzr], s2[nzr]


def next_subspace(P, lw, Vw, newv, Ubar, thbar, alpha, t, max_rank):
    """The next block ``P`` and aggregate ``(Ubar, thbar)`` of the PSD-block masters.

    Keeps the eigenvectors of ``W`` (eigenpairs ``lw, Vw``), largest first: never a direction X
    uses (weight above ``_RANK_TOL t``; interior-point masters leave small weights on directions
    they do not use, which the aggregate keeps, so X is unchanged), and up to
    ``max(max_rank, 2 (rank + new))`` with the new directions ``newv`` (room for as many past
    directions as X uses: with a block of rank(X) + new columns a rank-16 member tailed off at
    gap 9e-3 after 74 rounds). What is dropped joins the aggregate, normalized to trace 1.
    """
    k = P.shape[1]
    n_new = newv.shape[1]
    n_pos = int((lw > _RANK_TOL * t).sum())
    cap = max(max_rank, 2 * (n_pos + n_new))
    r_keep = max(1, n_pos, min(k, cap - n_new))
    order = np.argsort(lw)[::-1]
    lw, Vw = lw[order], Vw[:, order]
    Q1 = P @ Vw[:, :r_keep]
    drop = [P @ (Vw[:, r_keep:] * np.sqrt(np.maximum(lw[r_keep:], 0.0)))]
    if Ubar is not None and alpha > 0:
        drop.append(Ubar * np.sqrt(alpha * thbar))
    Fd = np.hstack(drop)
    Qd, sd, _ = np.linalg.svd(Fd, full_matrices=False) if Fd.size else (None, np.zeros(0), 0)
    sd2 = sd * sd
    if sd2.sum() > 1e-14 * t:
        pos = sd2 > 1e-14 * sd2.sum()
        Ubar, thbar = Qd[:, pos], sd2[pos] / sd2[pos].sum()
    else:
        Ubar = thbar = None
    newv = newv - Q1 @ (Q1.T @ newv)
    Pn, Rn = np.linalg.qr(np.hstack([Q1, newv]))
    return Pn[:, np.abs(np.diag(Rn)) > 1e-10], Ubar, thbar


def _psd_block_loop(
    full, A, C, G, c, lb, ub, zlb, zub, t, trace_eq, tol, max_iters, time_limit, cpr, max_rank,
    dense, verbose, t0, offset, smoothing, row_selection_min=500, row_band=1e-2,
    resolve_rows=False, callback=None,
) -> MatrixGenerationResult:
    m = A.m
    _, P = _top_eigs(full, np.append(1.0, np.zeros(m)), cpr, dense, None, 1e-8)
    Ubar = thbar = None
    abar = cbar = None
    hist: dict[str, list[float]] = {k: [] for k in
                                    ("objective", "bound", "gap", "columns", "time", "lambda")}
    best_bound, y_best = np.inf, None
    v0 = None
    status = "max_iters"
    best_obj, best_pt = -np.inf, None
    it = 0
    p = G.shape[1]
    # row working set (rows may leave the master when inactive, see _master_on_rows)
    select_rows = m >= row_selection_min
    work = np.ones(m, dtype=bool)
    age = np.zeros(m, dtype=int)  # rounds a row has been idle in a row
    patience = np.ones(m, dtype=int)  # idle rounds before it may leave the working set
    Gc = sp.csc_array(G)
    cnt = np.diff(Gc.indptr)
    priv = np.full(p, -1)
    if select_rows and Gc.nnz:
        one = np.flatnonzero(cnt == 1)
        priv[one] = Gc.indices[Gc.indptr[one]]
    zcur = np.clip(np.zeros(p), zlb, zub)
    if select_rows:  # Dask-backed rows: round 1 on a top-k of the rows, not all of them
        work = initial_working_set(A, P, t, G, zcur, lb, ub, work)
    for it in range(1, max_iters + 1):
        k = P.shape[1]
        I, J = _pairs(k)
        scale = np.where(I == J, 1.0, _SQRT2)
        Bfull = full.quad_pairs(P) * scale
        # tight master solves (looser ones early on were measured to cost rounds at the end)
        obj, W, alpha, z, y, mu, viol = _master_on_rows(
            Bfull, I, J, scale, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k, work, priv,
            zcur, resolve=resolve_rows,
        )
        ax = _row_activity(Bfull, I, J, scale, W, alpha, abar)
        if viol is not None:
            # one solve on the working set: X is kept, the LP variables re-optimized for it
            # (exactly feasible, so its value is a valid lower bound); the violated rows join
            z_pol, _ = _polish_z(ax, G, c, lb, ub, zlb, zub)
            if z_pol is None:  # no feasible z for this X: fall back to the exact master
                work |= viol
                obj, W, alpha, z, y, mu, _ = _master_on_rows(
                    Bfull, I, J, scale, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k,
                    work, priv, zcur, resolve=True,
                )
                ax = _row_activity(Bfull, I, J, scale, W, alpha, abar)
                viol = None
            else:
                z = z_pol
                obj = float(Bfull[0] @ (W[I, J] * scale)) + alpha * (cbar or 0.0) + float(c @ z)
        zcur = z
        if select_rows:
            # rows with room to spare and a zero multiplier leave the master (their private LP
            # variables are frozen); they come back as soon as they are violated. Against
            # cycling (rows dropped, violated by the next master, re-added, ...), a row that came
            # back must stay idle twice as many rounds as before it may leave again.
            act = ax + G @ z
            slack = np.minimum(act - lb, ub - act)
            small = np.abs(y) <= 1e-6 * max(1.0, float(np.abs(y).max(initial=0.0)))
            idle = (slack > row_band * np.maximum(1.0, np.abs(act))) & small
            age = np.where(idle, age + 1, 0)
            work = ~(idle & (age >= patience))
            if viol is not None:
                patience[viol] *= 2
                age[viol] = 0
                work |= viol
        y = _clip_duals(y, lb, ub)
        lw, Vw, Q, s2 = iterate_factor(P, W, Ubar, thbar, alpha, t)
        if obj > best_obj:
            best_obj, best_pt = obj, (Q, s2, z, y, mu)
        obj = best_obj
        use_smooth = smoothing > 0 and y_best is not None
        ys = smoothing * y_best + (1 - smoothing) * y if use_smooth else y
        vals, vecs = _top_eigs(full, np.append(1.0, -ys), cpr, dense, v0, 1e-10)
        bnd = lagrangian_bound(vals[0], ys, lb, ub, G, c, zlb, zub, t, trace_eq, ztol=1e-7)
        if bnd < best_bound:
            best_bound, y_best = bnd, ys
        if use_smooth:
            # price at the master duals too (one more eigen-solve, cheap next to the master):
            # their bound is often the better one, and their columns never misprice
            vm, Um = _top_eigs(full, np.append(1.0, -y), cpr, dense, v0, 1e-10)
            bnd = lagrangian_bound(vm[0], y, lb, ub, G, c, zlb, zub, t, trace_eq, ztol=1e-7)
            if bnd < best_bound:
                best_bound, y_best = bnd, y
            vecs = np.linalg.qr(np.hstack([Um, vecs]))[0]
            rc = full.quad(vecs).T @ np.append(1.0, -y) - mu
            vals = np.append(vm[0], vals)
        else:
            rc = vals - mu
        v0 = vecs[:, 0]
        gap = record_round(hist, it, obj, best_bound, offset, k, float(vals[0]), t0, callback)
        if verbose:
            print(f"[mg-psd] it {it:3d} obj {obj + offset:+.9e} bound {best_bound + offset:+.9e} "
                  f"gap {gap:.2e} k {k} rank {Q.shape[1]} rows {int(work.sum())}")
        if gap <= tol:
            status = "optimal"
            break
        if time.perf_counter() - t0 > time_limit:
            status = "time_limit"
            break
        keep = rc > 1e-12 * max(1.0, abs(obj))
        if not keep.any() and viol is None:
            status = "stalled"
            break  # (rows just joined the working set: the next master differs, go on)
        P, Ubar, thbar = next_subspace(P, lw, Vw, vecs[:, keep], Ubar, thbar, alpha, t,
                                       max_rank)
        if Ubar is not None:
            abar = A.quad(Ubar) @ thbar
            cbar = float(C.quad(Ubar)[0] @ thbar)
        else:
            abar = cbar = None
    # the best point seen (the master value can dip when a working-set solve is not exact)
    Q, s2, z, y, mu = best_pt
    # exact trace and PSD by construction; polish z for exact row feasibility with X fixed
    if trace_eq and s2.sum() > 0:
        s2 = s2 * (t / s2.sum())
    elif s2.sum() > t:
        s2 = s2 * (t / s2.sum())
    ax = A.quad(Q) @ s2
    cx = float(C.quad(Q)[0] @ s2)
    z_pol, act = _polish_z(ax, G, c, lb, ub, zlb, zub)
    if z_pol is not None:
        z = z_pol
        obj = cx + float(c @ z)
    return MatrixGenerationResult(
        status=status,
        objective=float(obj + offset),
        bound=float(best_bound + offset),
        gap=float((best_bound - obj) / max(1.0, abs(obj))),
        theta=s2,
        U=Q,
        z=np.asarray(z),
        y=y,
        mu=mu,
        row_activity=ax + G @ z,
        iterations=it,
        n_columns=int(P.shape[1]),
        solve_time=time.perf_counter() - t0,
        history=hist,
    )


def _row_activity(Bfull, I, J, scale, W, alpha, abar):
    """``A(P W P^T + alpha Xbar)`` from the scaled pair coefficients."""
    act = Bfull[1:] @ (W[I, J] * scale)
    return act + alpha * abar if abar is not None else act


def _master_on_rows(Bfull, I, J, scale, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k,
                    work, priv, zcur, resolve=True):
    """The PSD-block master on the rows in ``work`` (updated in place), exact for all rows.

    LP variables private to a row outside the working set (one nonzero in G, in that row) are
    frozen at ``zcur``. After a solve, rows outside the set that are violated are added and the
    master is solved again, so the result is the optimum of the master with every row (its
    multipliers are zero on the rows left out). With ``resolve=False`` the first solve is
    returned with the mask of the violated rows outside the set (last item; None when none is
    violated, i.e. the result is exact); the caller adds them to the set for the next round.
    """
    m = len(lb)
    while True:
        rows = np.flatnonzero(work)
        free = (priv < 0) | work[np.maximum(priv, 0)]
        Gr = sp.csr_array(G[rows])
        const = float(c[~free] @ zcur[~free])
        obj, W, alpha, zf, yr, mu = _psd_block_master(
            Bfull[1:][rows], Bfull[0], abar[rows] if abar is not None else None, cbar,
            sp.csr_array(Gr[:, np.flatnonzero(free)]), c[free], lb[rows], ub[rows],
            zlb[free], zub[free], t, trace_eq, k,
        )
        z = zcur.copy()
        z[free] = zf
        if work.all():
            break
        act = _row_activity(Bfull, I, J, scale, W, alpha, abar) + G @ z
        tol = 1e-9 * np.maximum(1.0, np.abs(act))
        viol = ~work & ((act < lb - tol) | (act > ub + tol))
        if not viol.any():
            break
        if not resolve:
            y = np.zeros(m)
            y[rows] = yr
            return obj + const, W, alpha, z, y, mu, viol
        work |= viol
    y = np.zeros(m)
    y[rows] = yr
    return obj + const, W, alpha, z, y, mu, None


def _polish_z(ax, G, c, lb, ub, zlb, zub):
    """With ``A(X) = ax`` fixed, the best exactly feasible ``z`` (an LP in HiGHS), or None."""
    m, p = G.shape
    if p == 0:
        return np.zeros(0), ax
    h = new_highs()
    h.setOptionValue("primal_feasibility_tolerance", 1e-10)
    h.setOptionValue("dual_feasibility_tolerance", 1e-10)
    inf = highspy.kHighsInf
    f = lambda a: np.clip(np.nan_to_num(a, posinf=inf, neginf=-inf), -inf, inf)  # noqa: E731
    Gc = sp.csc_array(G)
    h.addRows(m, f(lb - ax), f(ub - ax), 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
              np.zeros(0))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    h.addCols(p, np.asarray(c, float), f(zlb), f(zub), Gc.nnz, Gc.indptr.astype(np.int32),
              Gc.indices.astype(np.int32), Gc.data.astype(float))
    run_highs(h)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None, None
    z = np.clip(np.asarray(h.getSolution().col_value), zlb, zub)
    return z, ax + G @ z
