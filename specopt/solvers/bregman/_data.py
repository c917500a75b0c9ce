"""Data of the Bregman solvers: the result type, the checked problem data of the linear and
kernel forms, and the input checks that build them (the methods assume validated input)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import scipy.linalg as sla

from .._status import SolverStatus

#: ``method="auto"`` of :func:`itml_linear` uses projected Newton on the dual up to this many
#: constraints (slack form), random-order sweeps beyond. Newton factors the |F| x |F| Hessian
#: block (|F| <= m) per iteration and needs no compiled kernel (no numba start-up, 0.2-0.5 s in
#: a fresh process); measured (loaded 2-core machine, tol 1e-8, gamma = 1): d=5, m=20: 1.6 ms
#: (random sweeps 0.8-12 ms); d=30, m=400: 32 ms (22 ms); d=64, m=1000: 262 ms (48 ms);
#: d=20, m=3000: 6.7 s (49 ms).
NEWTON_MAX_CONSTRAINTS = 500
#: ``method="active"``: one full sweep, then this many - 1 sweeps over the active constraints.
ACTIVE_SWEEPS = 10


@dataclass
class BregmanResult:
    """Outcome of a Bregman-projection run.

    ``status`` is ``"optimal"`` (gap and violation below tol), ``"inaccurate"`` (stopped by
    ``max_sweeps`` / ``time_limit``) or ``"infeasible"`` (hard constraints; a Farkas ray
    ``r >= 0`` with ``C(r)`` PSD and ``sum delta r xi0 < 0`` was found, stored in ``extra``).
    ``W`` is the learned matrix (linear / low-rank forms), ``K`` and ``M`` the learned kernel on
    the training points and the kernel coefficients (kernel form). ``lam`` and ``xi`` are indexed
    like the constraints given by the caller (dropped ones have lam = 0, xi = xi0).
    ``primal`` is the objective at the returned point, ``dual`` = g(lam) a lower bound,
    ``gap = |primal - dual| / max(1, |primal|)``, ``max_violation`` the largest relative
    violation ``max(0, delta (p - xi)) / xi``.
    """

    status: str
    form: str
    lam: np.ndarray
    xi: np.ndarray
    primal: float
    dual: float
    gap: float
    max_violation: float
    iterations: int
    solve_time: float
    W: np.ndarray | None = None
    K: np.ndarray | None = None
    M: np.ndarray | None = None
    support: np.ndarray | None = None
    dropped: np.ndarray | None = None
    history: dict[str, list[float]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def converged(self) -> bool:
        return self.status == SolverStatus.OPTIMAL


@dataclass(frozen=True)
class Constraints:
    """The kept constraints (distinct points) and how they sit among the caller's ``m``."""

    delta: np.ndarray  #: sides of the kept constraints (+1 similar, -1 dissimilar)
    xi0: np.ndarray  #: bounds of the kept constraints
    gamma: float
    keep: np.ndarray  #: (m,) mask of the kept constraints
    xi0_all: np.ndarray  #: (m,) bounds as given

    @property
    def m(self) -> int:
        return self.keep.size

    @property
    def dropped(self) -> np.ndarray:
        return np.flatnonzero(~self.keep)

    def scatter(self, part: np.ndarray, base: np.ndarray | None = None) -> np.ndarray:
        """A vector over the caller's constraints: ``part`` on the kept ones, ``base`` (zeros
        if None) on the dropped ones."""
        out = np.zeros(self.m) if base is None else base.copy()
        out[self.keep] = part
        return out

    def attach_ray(self, res: BregmanResult, ray: np.ndarray | None) -> BregmanResult:
        """Store a Farkas ray of the kept constraints in ``res.extra`` (caller's indexing)."""
        if ray is not None:
            res.extra["farkas_ray"] = self.scatter(ray)
        return res


@dataclass(frozen=True)
class LinearData:
    """Linear form after the checks: kept rows ``V`` (v_c = x_i - x_j) and the prior
    W0 = L0 L0^T with its inverse and log det; ``VL`` has rows L0^T v_c."""

    V: np.ndarray
    cons: Constraints
    W0: np.ndarray
    L0: np.ndarray
    W0_inv: np.ndarray
    logdet_W0: float

    @cached_property
    def VL(self) -> np.ndarray:
        return self.V @ self.L0  # C congruent to L0^T C L0 = VL^T diag VL


@dataclass(frozen=True)
class KernelData:
    """Kernel form after the checks, restricted to the support S (points in some constraint):
    ``I``, ``J`` index S for each kept pair, ``K0s`` = K0[S, S] symmetrized."""

    K0: np.ndarray
    K0s: np.ndarray
    support: np.ndarray
    I: np.ndarray  # noqa: E741
    J: np.ndarray
    cons: Constraints

    @cached_property
    def R(self) -> np.ndarray:
        """R with K0s = R R^T (for certificates and the factored form)."""
        return psd_factor(self.K0s)


def psd_factor(K: np.ndarray) -> np.ndarray:
    """R with K = R R^T (eigenvalues clipped at 0; tiny ones dropped), for certificates only."""
    ev, U = np.linalg.eigh(0.5 * (K + K.T))
    keep = ev > 1e-14 * max(float(ev[-1]), 1e-300)
    return U[:, keep] * np.sqrt(ev[keep])


def check_common(bounds, delta, gamma, m):
    """Bounds (> 0, finite), sides (+-1) and gamma (> 0 or inf) as float arrays / float."""
    bounds = np.asarray(bounds, dtype=float).ravel()
    delta = np.asarray(delta, dtype=float).ravel()
    if bounds.shape != (m,) or delta.shape != (m,):
        raise ValueError(
            f"need one bound and one side per constraint: {m} constraints, "
            f"{bounds.size} bounds, {delta.size} sides"
        )
    if not np.all(np.isfinite(bounds)):
        raise ValueError("bounds must be finite")
    if np.any(bounds <= 0):
        bad = np.flatnonzero(bounds <= 0)[:5].tolist()
        raise ValueError(
            f"bounds must be > 0 (the slack divergence needs xi0 > 0); bad constraints: {bad}"
        )
    if not np.all(np.isin(delta, (-1.0, 1.0))):
        raise ValueError("sides must be +1 (similar, <= u) or -1 (dissimilar, >= l)")
    gamma = float(gamma)
    if not (gamma > 0):
        raise ValueError(f"gamma must be > 0 (or inf for hard constraints), got {gamma}")
    return bounds, delta, gamma


def check_rows(V) -> np.ndarray:
    """V as a float (m, d) array."""
    V = np.asarray(V, dtype=float)
    if V.ndim != 2:
        raise ValueError(f"V must be (m, d), got shape {V.shape}")
    return V


def nonzero_rows(V: np.ndarray) -> np.ndarray:
    """Mask of the rows of V that are not zero (relative to the largest row norm)."""
    norms = np.sqrt(np.einsum("ij,ij->i", V, V))
    return norms > 1e-14 * max(float(norms.max(initial=0.0)), 1e-300)


def drop_warning(n_drop: int, stacklevel: int = 3) -> None:
    """Warn about dropped pairs; ``stacklevel`` counts from this function (3: its caller's
    caller, the user of a public function that calls it directly)."""
    warnings.warn(
        f"dropped {n_drop} constraint(s) whose two points coincide (x_i = x_j): "
        "their distance is 0 under every W",
        RuntimeWarning,
        stacklevel=stacklevel,
    )


def _keep(keep: np.ndarray, xi0, delta, gamma) -> Constraints:
    if not np.all(keep):
        drop_warning(int(np.sum(~keep)), stacklevel=5)  # _keep, *_data, front end, user
    return Constraints(delta=delta[keep], xi0=xi0[keep], gamma=gamma, keep=keep, xi0_all=xi0)


def _check_prior(W0, d: int) -> np.ndarray:
    if W0 is None:
        return np.eye(d)
    W0 = np.asarray(W0, dtype=float)
    if W0.shape != (d, d):
        raise ValueError(f"W0 must be {d} x {d}, got {W0.shape}")
    if not np.allclose(W0, W0.T, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(W0).max())):
        raise ValueError("W0 must be symmetric")
    return 0.5 * (W0 + W0.T)


def linear_data(V, bounds, delta, W0, gamma) -> LinearData:
    """Check the linear form's input; drop pairs of coinciding points (with a warning)."""
    V = np.ascontiguousarray(check_rows(V))
    m, d = V.shape
    xi0, delta, gamma = check_common(bounds, delta, gamma, m)
    W0 = _check_prior(W0, d)
    try:
        L0 = np.linalg.cholesky(W0)
    except np.linalg.LinAlgError:
        raise ValueError("W0 must be positive definite") from None
    W0_inv = sla.cho_solve((L0, True), np.eye(d))
    cons = _keep(nonzero_rows(V), xi0, delta, gamma)
    return LinearData(
        V=np.ascontiguousarray(V[cons.keep]), cons=cons, W0=W0, L0=L0,
        W0_inv=0.5 * (W0_inv + W0_inv.T), logdet_W0=2.0 * float(np.sum(np.log(np.diag(L0)))),
    )


def kernel_data(K0, pairs, bounds, delta, gamma) -> KernelData:
    """Check the kernel form's input; drop pairs at distance 0 under K0 (with a warning) and
    restrict to the support."""
    K0 = np.asarray(K0, dtype=float)
    n = K0.shape[0]
    if K0.ndim != 2 or K0.shape != (n, n):
        raise ValueError(f"K0 must be square, got shape {K0.shape}")
    if not np.allclose(K0, K0.T, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(K0).max())):
        raise ValueError("K0 must be symmetric")
    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or not np.issubdtype(pairs.dtype, np.integer):
        raise ValueError("pairs must be an (m, 2) integer array of point indices")
    m = pairs.shape[0]
    if m and (pairs.min() < 0 or pairs.max() >= n):
        raise ValueError(f"pair indices must lie in [0, {n})")
    xi0, delta, gamma = check_common(bounds, delta, gamma, m)
    pi, pj = pairs[:, 0], pairs[:, 1]
    p0 = K0[pi, pi] + K0[pj, pj] - 2 * K0[pi, pj]
    kscale = max(float(np.abs(np.diag(K0)).max(initial=0.0)), 1e-300)
    cons = _keep((pi != pj) & (p0 > 1e-14 * kscale), xi0, delta, gamma)
    support, inv = np.unique(pairs[cons.keep].ravel(), return_inverse=True)
    inv = inv.reshape(-1, 2)
    K0s = K0[np.ix_(support, support)]
    return KernelData(
        K0=K0, K0s=np.ascontiguousarray(0.5 * (K0s + K0s.T)), support=support,
        I=np.ascontiguousarray(inv[:, 0]).astype(np.int64),
        J=np.ascontiguousarray(inv[:, 1]).astype(np.int64), cons=cons,
    )
