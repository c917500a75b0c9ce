r"""Pricing and bounds: the eigen-oracle and the Lagrangian (weak-duality) bound.

For row multipliers ``y`` with the sign of the active side (``y_r >= 0`` needs ``ub_r < inf``,
``y_r <= 0`` needs ``lb_r > -inf``)::

    OPT <= t * lambda_max(H(y)) + sum_j sup_{z_j in [zlb_j, zub_j]} (c - G^T y)_j z_j
           + sum_r max(y_r ub_r, y_r lb_r) + offset,         H(y) = C - A^*(y)

(with ``max(lambda_max, 0)`` for ``tr X <= t``); the top eigenvectors of ``H`` are the columns
with the largest reduced cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ._operators import StackedOperator, SymOperator, zero_objective
from ._problem import SpectraplexLP

__all__ = ["BestBound", "farkas_bound", "lagrangian_bound"]


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
        lam = float(_top_eigs(StackedOperator([zero_objective(A.n), A]), np.append(1.0, -y), 1,
                              False, None, 1e-10)[0][0])
    p = G.shape[1]
    return lagrangian_bound(lam, y, lb, ub, G, np.zeros(p), zlb, zub, t, trace_eq, ztol=0.0)


@dataclass(frozen=True, eq=False)
class BestBound:
    """The best (lowest) Lagrangian bound of a run so far and the multipliers behind it."""

    value: float = np.inf
    y: np.ndarray | None = None

    def improve(self, bnd: float, y: np.ndarray) -> BestBound:
        return BestBound(bnd, y) if bnd < self.value else self

    def smoothed(self, y: np.ndarray, alpha: float) -> np.ndarray | None:
        """Wentges' separation point ``alpha y_best + (1 - alpha) y`` (None: no smoothing yet)."""
        if alpha > 0 and self.y is not None:
            return alpha * self.y + (1 - alpha) * y
        return None


def bound_at(prob: SpectraplexLP, lam_max: float, y: np.ndarray, ztol: float = 1e-9) -> float:
    """:func:`lagrangian_bound` of the problem ``prob`` (no offset)."""
    return lagrangian_bound(lam_max, y, prob.lb, prob.ub, prob.G, prob.c, prob.zlb, prob.zub,
                            prob.trace, prob.trace_eq, ztol=ztol)
