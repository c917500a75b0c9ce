"""Certificate pieces of the LogDet problems: primal objective terms, the dual function's slack
terms, and the Farkas test for infeasible hard constraints."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Relative tolerances of the infeasibility (Farkas ray) test for hard constraints.
_RAY_EIG_TOL = 1e-10
_RAY_SLACK_TOL = 1e-6


def slack_terms(lam, delta, xi0, gamma):
    """gamma * sum log(1 - delta lam xi0 / gamma) (its limit -sum delta lam xi0 for inf)."""
    if math.isinf(gamma):
        return -float(np.sum(delta * lam * xi0))
    t = 1.0 - delta * lam * xi0 / gamma
    if np.any(t <= 0):
        return -math.inf
    return gamma * float(np.sum(np.log(t)))


def burg(xi, xi0):
    """sum_c (xi_c / xi0_c - log(xi_c / xi0_c) - 1), the slack divergence."""
    r = xi / xi0
    return float(np.sum(r - np.log(r) - 1.0))


def logdet_pd(S: np.ndarray) -> float:
    """log det of a symmetric matrix, -inf if not positive definite."""
    try:
        L = np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        return -math.inf
    return 2.0 * float(np.sum(np.log(np.diag(L))))


def logdet_objective(W: np.ndarray, W0: np.ndarray, W0_inv: np.ndarray | None = None) -> float:
    """D_ld(W, W0) = tr(W W0^{-1}) - log det(W W0^{-1}) - d (inf if W is not PD)."""
    if W0_inv is None:
        W0_inv = np.linalg.inv(W0)
    ld = logdet_pd(W)
    ld0 = logdet_pd(W0)
    if not math.isfinite(ld):
        return math.inf
    return float(np.sum(W * W0_inv)) - ld + ld0 - W.shape[0]


def ray_infeasible(D: np.ndarray, r: np.ndarray, delta, xi0) -> bool:
    """Farkas test for hard constraints: C(r) = sum delta r d d^T PSD and sum delta r xi0 < 0.

    ``D`` has rows d_c = R^T v_c (any congruence of C). If both hold, no W > 0 satisfies the
    constraints: feasibility gives 0 <= tr(W C(r)) <= sum delta r xi0 < 0. Tolerances are
    relative to sum r xi0 and to sum r ||d_c||^2.
    """
    slack = float(np.sum(delta * r * xi0))
    if not (slack < -_RAY_SLACK_TOL * float(np.sum(r * xi0))):
        return False
    ev = np.linalg.eigvalsh((D.T * (delta * r)) @ D)
    scale = float(np.sum(r * np.einsum("ij,ij->i", D, D)))
    return bool(ev[0] >= -_RAY_EIG_TOL * scale)


@dataclass
class RayWatch:
    """Farkas-ray search along the iterates (hard constraints): remembers lam at the previous
    check. When hard constraints are infeasible, lam diverges along a ray; the growth direction
    converges to it much faster than lam / ||lam|| does."""

    last: np.ndarray

    def candidates(self, lam: np.ndarray) -> list[np.ndarray]:
        """Normalized candidate rays: the growth of lam since the previous check, and lam."""
        out = []
        step = np.maximum(lam - self.last, 0.0)
        self.last = lam.copy()
        for r in (step, lam):
            tot = float(r.sum())
            if tot > 0 and np.isfinite(tot):
                out.append(r / tot)
        return out

    def find(self, D: np.ndarray, lam: np.ndarray, delta, xi0) -> np.ndarray | None:
        """A candidate ray that passes :func:`ray_infeasible` on rows ``D``, or None."""
        for r in self.candidates(lam):
            if ray_infeasible(D, r, delta, xi0):
                return r
        return None
