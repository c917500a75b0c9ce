"""The spectraplex ``{X PSD, tr X = 1}`` and the trace-one rank-one decomposition.

The spectraplex is the convex hull of the unit rank-one matrices ``u u^T`` (``||u|| = 1``):
any PSD ``X != 0`` satisfies

    X / tr X = sum_i theta_i u_i u_i^T,  theta_i = lambda_i / tr X >= 0,  sum_i theta_i = 1,  (1)

with ``(lambda_i, u_i)`` its eigenpairs. This is what lets matrix generation replace ``X`` by a
simplex of rank-one columns.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ._checks import as_finite_array


def rank_one_decomposition(X, tol: float = 1e-8) -> tuple[np.ndarray, np.ndarray]:
    """Decompose a PSD matrix as in (1): ``(theta, U)`` with ``X / tr X = U diag(theta) U^T``.

    ``X`` is an array or a CVXPY expression with a value. ``theta`` (length k) is nonnegative
    and sums to 1; the columns of ``U`` (n x k) are orthonormal; components with
    ``theta == 0`` are dropped. Eigenvalues in ``[-tol * scale, 0)`` (round-off) are set to zero;
    anything more negative is an error, as are a non-symmetric matrix and a zero trace.
    """
    if isinstance(X, cp.Expression):
        if X.value is None:
            raise ValueError("rank_one_decomposition: the expression has no value (solve first)")
        X = X.value
    A = as_finite_array(X, "X", ndim=2)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"rank_one_decomposition needs a square matrix, got shape {A.shape}")
    scale = max(1.0, float(np.max(np.abs(A)))) if A.size else 1.0
    if np.max(np.abs(A - A.T), initial=0.0) > 1e-8 * scale:
        raise ValueError("rank_one_decomposition needs a symmetric matrix")
    lam, vecs = np.linalg.eigh(0.5 * (A + A.T))
    lam, vecs = lam[::-1], vecs[:, ::-1]
    eig_scale = max(1.0, float(np.max(np.abs(lam)))) if lam.size else 1.0
    if lam.size and lam[-1] < -tol * eig_scale:
        raise ValueError(
            f"rank_one_decomposition needs a PSD matrix; smallest eigenvalue is {lam[-1]:.3g} "
            f"(tolerance {tol * eig_scale:.1e})"
        )
    lam = np.clip(lam, 0.0, None)
    total = float(lam.sum())
    if total <= 0.0:
        raise ValueError("rank_one_decomposition: the matrix has zero trace")
    keep = lam > 0.0
    return lam[keep] / total, vecs[:, keep]


def from_rank_one(theta, U) -> np.ndarray:
    """``sum_i theta_i u_i u_i^T = U diag(theta) U^T``."""
    theta = np.asarray(theta, dtype=float)
    U = np.asarray(U, dtype=float)
    return (U * theta) @ U.T


def spectraplex(X: cp.Expression, trace: float = 1.0, inequality: bool = False) -> list:
    """Constraints ``X >> 0, tr X == trace`` (or ``<= trace`` when ``inequality``)."""
    tr = cp.trace(X)
    return [X >> 0, tr <= trace if inequality else tr == trace]


def in_spectraplex(X, tol: float = 1e-8) -> bool:
    """Numerical membership test: symmetric, ``lambda_min >= -tol`` and ``|tr X - 1| <= tol``."""
    A = as_finite_array(X, "X", ndim=2)
    if np.max(np.abs(A - A.T), initial=0.0) > tol:
        return False
    return bool(np.linalg.eigvalsh(0.5 * (A + A.T))[0] >= -tol and abs(np.trace(A) - 1) <= tol)
