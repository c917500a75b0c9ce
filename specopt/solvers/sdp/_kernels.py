"""Compiled kernels of the SDP engine: ``A(Y Y^T)``, ``A^*(w) X`` and ``A(Y D^T + D Y^T)`` for
rows in COO form (:class:`specopt.solvers.sdp._data.SparseRows`), O(nnz(A) r) each."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._jit import lazy_njit


@lazy_njit(inline="always", fastmath=True)
def _row_dot(P, Q, i, j):  # pragma: no cover - compiled
    """``<P[i], Q[j]>``, inlined into the kernels below (no call per entry)."""
    s = 0.0
    for c in range(P.shape[1]):
        s += P[i, c] * Q[j, c]
    return s


@lazy_njit(cache=True, fastmath=True)
def a_of_yyt(rows, ii, jj, vals, Y, m):  # pragma: no cover - compiled
    """``A(Y Y^T)``: ``out[r] += a_k <Y[i_k], Y[j_k]>``."""
    out = np.zeros(m)
    for k in range(rows.size):
        out[rows[k]] += vals[k] * _row_dot(Y, Y, ii[k], jj[k])
    return out


@lazy_njit(cache=True, fastmath=True)
def adj_times(rows, ii, jj, vals, w, X):  # pragma: no cover - compiled
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
def a_of_ydt(rows, ii, jj, vals, Y, D, m):  # pragma: no cover - compiled
    """``A(Y D^T + D Y^T)``: ``out[r] += a_k (<Y[i_k], D[j_k]> + <D[i_k], Y[j_k]>)``."""
    out = np.zeros(m)
    for k in range(rows.size):
        i = ii[k]
        j = jj[k]
        out[rows[k]] += vals[k] * (_row_dot(Y, D, i, j) + _row_dot(D, Y, i, j))
    return out


@a_of_yyt.twin
def _a_of_yyt_np(rows, ii, jj, vals, Y, m):
    return np.bincount(rows, vals * np.einsum("ij,ij->i", Y[ii], Y[jj]), minlength=m)


@adj_times.twin
def _adj_times_np(rows, ii, jj, vals, w, X):
    return np.asarray(_adjoint_csr(rows, ii, jj, vals, w, X.shape[0]) @ X)


@a_of_ydt.twin
def _a_of_ydt_np(rows, ii, jj, vals, Y, D, m):
    v = np.einsum("ij,ij->i", Y[ii], D[jj]) + np.einsum("ij,ij->i", D[ii], Y[jj])
    return np.bincount(rows, vals * v, minlength=m)


def adjoint_sparse(A, w: np.ndarray) -> sp.csr_array:
    """``A^*(w)`` as a sparse symmetric matrix."""
    return _adjoint_csr(A.rows, A.ii, A.jj, A.vals, w, A.n)


def _adjoint_csr(rows, ii, jj, vals, w, n: int) -> sp.csr_array:
    """``A^*(w) = sum_r w_r (A_r + A_r^T) / 2`` from the rows' COO arrays."""
    c = 0.5 * w[rows] * vals
    return sp.coo_array((np.r_[c, c], (np.r_[ii, jj], np.r_[jj, ii])), shape=(n, n)).tocsr()
