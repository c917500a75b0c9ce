r"""Linear maps ``X -> (<A_r, X>)_r`` on symmetric matrices: the data side of matrix generation.

Every operator implements :class:`SymOperator` (``quad``, ``quad_pairs``, ``adjoint_matvec``,
``adjoint_dense``) and ``take_operator(rows)`` (the rows as an in-memory operator).
:class:`FactoredOperator` stores ``A_r = sum_k M[r, k] v_k v_k^T`` (``V`` (K, n), ``M`` sparse
(m, K)), so the PSDBoost triplet matrices ``A_r = p_r p_r^T - q_r q_r^T`` cost O(|S| n) memory;
``H v`` is ``V^T (M^T w * (V v))`` and the dense ``H`` only touches rows of ``V`` with a nonzero
weight. Row-aligned Dask data: :class:`~specopt.solvers.mg.dask_rows.DaskRowOperator`.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import scipy.sparse as sp

from ._lazy_rows import stack_rows  # lazy when a stacked part lives in Dask

__all__ = [
    "DenseOperator",
    "FactoredOperator",
    "StackedOperator",
    "SymOperator",
    "row_subset",
    "sum_operators",
    "svec_index",
    "triplet_operator",
    "zero_objective",
]

_SQRT2 = np.sqrt(2.0)

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

    def take_operator(self, rows: np.ndarray) -> SymOperator:
        """The rows ``rows`` (sorted, unique int64) as an in-memory operator."""


def _pairs(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Upper-triangle index pairs ``i <= j`` in column-major order (Clarabel's svec order)."""
    J, I = np.nonzero(np.tril(np.ones((k, k), dtype=bool)))
    return I, J


def svec_index(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(I, J, scale)``: :func:`_pairs` and the svec weights (1 on the diagonal, sqrt 2 off it),
    so that ``<Q, W> = svec(Q) @ svec(W)`` with ``svec(W) = W[I, J] * scale``."""
    I, J = _pairs(k)
    return I, J, np.where(I == J, 1.0, _SQRT2)


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

    def take_operator(self, rows: np.ndarray) -> FactoredOperator:
        """The rows ``rows`` (sorted, unique), keeping only the factors they use."""
        Mb = sp.csr_array(self.M[rows])
        cols = np.unique(Mb.indices)
        return FactoredOperator(self.V[cols], Mb[:, cols])


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

    def take_operator(self, rows: np.ndarray) -> DenseOperator:
        """The rows ``rows`` (already symmetrized: no second pass)."""
        out = object.__new__(DenseOperator)
        out.A = sp.csr_array(self.A[rows])
        out.AT = sp.csr_array(out.A.T)
        out.m, out.n = rows.size, self.n
        return out


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

    def take_operator(self, rows: np.ndarray) -> StackedOperator:
        parts = []
        for o, a, b in zip(self.ops, self._cuts[:-1], self._cuts[1:], strict=True):
            parts.append(row_subset(o, rows[(rows >= a) & (rows < b)] - a))
        return StackedOperator(parts)


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

    def take_operator(self, rows: np.ndarray) -> _SumRowsOperator:
        return _SumRowsOperator([row_subset(o, rows) for o in self.ops])


def sum_operators(ops: list[SymOperator]) -> SymOperator:
    """Row-wise sum of operators with equal shapes (used to merge factored and dense parts)."""
    ops = [o for o in ops if o is not None]
    if len(ops) == 1:
        return ops[0]
    if len({(o.m, o.n) for o in ops}) != 1:
        raise ValueError("sum_operators needs operators of equal (m, n)")
    return _SumRowsOperator(ops)


def zero_objective(n: int) -> FactoredOperator:
    """The 1-row operator of ``<0, X>`` (no objective on X)."""
    return FactoredOperator(np.zeros((0, n)), sp.csr_array((1, 0)))


def row_subset(op: SymOperator, rows: np.ndarray) -> SymOperator:
    """The rows ``rows`` (sorted, unique) of a row operator as an in-memory operator (Dask-backed
    rows: one pass that returns only those rows)."""
    take = getattr(op, "take_operator", None)
    if take is None:
        raise TypeError(f"no row subset for {type(op).__name__}")
    return take(np.asarray(rows, dtype=np.int64))


def triplet_operator(P: np.ndarray, Q: np.ndarray) -> FactoredOperator:
    """``A_r = p_r p_r^T - q_r q_r^T`` (PSDBoost: p = a_i - a_k, q = a_i - a_j)."""
    P = np.asarray(P, dtype=float)
    Q = np.asarray(Q, dtype=float)
    if P.shape != Q.shape or P.ndim != 2:
        raise ValueError("P and Q must be 2-D arrays of the same shape (|S|, n)")
    m = P.shape[0]
    eye = sp.identity(m, format="csr")
    return FactoredOperator(np.vstack([P, Q]), sp.hstack([eye, -eye], format="csr"))
