r"""The Schur complement's linear solves in the sparse-row interior point
(:mod:`specopt.solvers.sdp.ip_sparse`): a float32 Cholesky factor with float64 iterative
refinement, or the float64 factor. No CVXPY.

For the symmetric positive definite ``M`` (the Schur complement ``M_rs = <A_r, X A_s Z^-1>``)
each solve ``M x = h`` starts from the float32 factor's ``x_0`` and refines
``x_{k+1} = x_k + M_32^-1 (h - M x_k)`` with the residual in float64, until the normwise backward
error ``||h - M x|| / (||h|| + max_i M_ii ||x||)`` reaches about what a float64 Cholesky solve
gives. It converges when ``cond(M)`` is well below ``1 / eps_32 ~ 1.7e7``; beyond, the float64
factor is used.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla
from scipy.linalg.blas import dsymv as _dsymv

__all__ = ["SCHUR_F32_MIN_M", "SchurSolve"]

#: The Schur complement is factored in float32 from this many rows (equations) on, with
#: float64 iterative refinement (:class:`SchurSolve`); float64 below. Cholesky CPU time at
#: m = 4153 (digits N = 1000 MVE steps; one thread, load ~3): float64 0.52-0.58 s, float32
#: 0.27 s; one refinement sweep (a float32 solve and a float64 ``dsymv``) ~17 ms.
SCHUR_F32_MIN_M = 1500


class SchurSolve:
    """Solves ``M x = h`` with the symmetric positive definite Schur complement ``M`` (its lower
    triangle in a C-ordered array, as :func:`schur_complement` gives it).

    ``mixed``: Cholesky factor of ``float32(M)`` and iterative refinement in float64 (residual
    ``h - M x`` with ``M`` in float64) until the normwise backward error ``||h - M x|| /
    (||h|| + max_i M_ii ||x||)`` is ``<= refine_tol`` (about what a float64 Cholesky solve
    reaches); the float64 factor instead when the float32 factorization fails (not positive
    definite in single precision, entries out of its range) or the refinement stalls
    (residual not halved by a sweep: ``cond(M)`` beyond ~1e7), counted in ``fallbacks``.
    Otherwise (``mixed=False``) the float64 factor only."""

    def __init__(self, M: np.ndarray, mixed: bool, refine_tol: float = 1e-12,
                 max_sweeps: int = 10) -> None:
        self.M = M
        self.refine_tol, self.max_sweeps = refine_tol, max_sweeps
        self.dmax = float(np.max(np.diag(M), initial=0.0))
        self.f32 = self.f64 = None
        self.fallbacks = 0
        self.sweeps = 0
        dmin = float(np.min(np.diag(M), initial=math.inf))
        if mixed and np.isfinite(self.dmax) and 0.0 < self.dmax < 1e30 and dmin > 1e-30 * self.dmax:
            try:  # M.T: F-ordered with the upper triangle filled (no copy in LAPACK)
                self.f32 = sla.cho_factor(M.astype(np.float32).T, lower=False,
                                          overwrite_a=True, check_finite=False)
                if not np.all(np.isfinite(np.diag(self.f32[0]))):
                    self.f32 = None
            except np.linalg.LinAlgError:
                self.f32 = None
            if self.f32 is None:
                self.fallbacks += 1
        if self.f32 is None:
            # a float64 factor of its own (M is kept for the refinement's products)
            self.f64 = sla.cho_factor(M.T, lower=False, overwrite_a=not mixed,
                                      check_finite=False)
            if not mixed:
                self.M = None  # overwritten by the factor

    def _factor64(self) -> None:
        if self.f64 is None:
            self.f64 = sla.cho_factor(self.M.T, lower=False, overwrite_a=False,
                                      check_finite=False)

    def solve(self, h: np.ndarray) -> np.ndarray:
        """``M^-1 h``."""
        if self.f32 is not None:
            x = self._refined(np.asarray(h, dtype=float))
            if x is not None:
                return x
            self.fallbacks += 1
            self._factor64()
        return sla.cho_solve(self.f64, h, check_finite=False)

    def _refined(self, h: np.ndarray) -> np.ndarray | None:
        """The float32 solve refined in float64; None when it stalls (or is not finite)."""
        x = sla.cho_solve(self.f32, h.astype(np.float32), check_finite=False).astype(float)
        hn = float(np.linalg.norm(h))
        prev = math.inf
        for _ in range(self.max_sweeps):
            r = h - _dsymv(1.0, self.M.T, x, lower=0)
            rn = float(np.linalg.norm(r))
            if not math.isfinite(rn):
                return None
            if rn <= self.refine_tol * (hn + self.dmax * float(np.linalg.norm(x))):
                return x
            if rn > 0.5 * prev:
                return None
            prev = rn
            self.sweeps += 1
            x += sla.cho_solve(self.f32, r.astype(np.float32), check_finite=False)
        return None
