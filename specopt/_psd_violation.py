"""How far a matrix is from the PSD cone, ``max(0, -lambda_min(S))``, at the gate's accuracy.

CVXPY's ``(A >> B).violation()`` is ``-lambda_min((M + M^T) / 2)`` from a full ``eigvalsh``:
a Householder tridiagonalization, ``4 n^3 / 3`` flops in mostly memory-bound BLAS-2 steps
(maxG60, n = 7000: 27 s on one core, and CVXPY computed it twice per check). The gate only
needs to know that the violation is below its tolerance, and a Cholesky factorization
(``n^3 / 3`` flops, BLAS-3) proves that:

    chol(S + tau I) exists   =>   lambda_min(S) >= -tau - ||E||_2,
    ||E||_2 <= c n eps ||S||_2 <= c n^2 eps max_ij |S_ij|                          (1)

(``E``: the factorization's backward error, Higham, *Accuracy and Stability of Numerical
Algorithms*, Thm. 10.3, with ``c = 2`` taken here). So :func:`psd_violation` tries ``tau`` at
the round-off level and then at half the gate's tolerance, returns the bound (1) of the first
that factors, and computes the eigenvalue only when neither does (the point is then likely
infeasible, and the exact number is reported). Below :data:`CHOLESKY_MIN_N` the eigenvalue is
cheap and exact.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

#: from this side on the violation is bounded by Cholesky factorizations (1), not eigvalsh
CHOLESKY_MIN_N = 300


def _symmetric_part(value) -> np.ndarray:
    M = np.asarray(value)
    return (M + M.conj().T) / 2


def _eig_violation(S: np.ndarray) -> float:
    return float(max(0.0, -np.linalg.eigvalsh(S)[0])) if S.size else 0.0


def exact_psd_violation(value) -> float:
    """``max(0, -lambda_min((M + M^H) / 2))`` from the eigenvalues."""
    return _eig_violation(_symmetric_part(value))


def _factors(S: np.ndarray, tau: float) -> bool:
    A = S.copy()
    A.flat[:: S.shape[0] + 1] += tau
    try:
        sla.cholesky(A, lower=True, overwrite_a=True, check_finite=False)
    except (sla.LinAlgError, ValueError):
        return False
    return True


def psd_violation(value, tolerance: float) -> float:
    """An upper bound on ``max(0, -lambda_min((M + M^H) / 2))`` that is exact when it exceeds
    ``tolerance / 2``: Cholesky factorizations of ``S + tau I`` (1) for large ``M``, the
    eigenvalues otherwise. ``tolerance``: the absolute violation the caller accepts."""
    S = _symmetric_part(value)
    n = S.shape[0] if S.ndim == 2 else 0
    if n < CHOLESKY_MIN_N or not np.all(np.isfinite(S)):
        return _eig_violation(S)
    scale = float(np.max(np.abs(S)))
    round_off = 2.0 * n * n * np.finfo(float).eps * scale
    for tau in (1e3 * round_off, 0.5 * tolerance):
        if tau > 0 and _factors(S, tau):
            return tau + round_off
    return _eig_violation(S)
