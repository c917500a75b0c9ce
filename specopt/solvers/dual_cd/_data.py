"""Data of dual coordinate descent: the result type and the checked, factored problem
(``L = R^T R``, ``Y = Z R^{-1}``, ``S = R^{-1}``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from .._status import SolverStatus


@dataclass
class DualCDResult:
    """Result of :func:`dual_cd`.

    ``w`` is primal feasible (sign-constrained entries >= 0), ``xi = max(0, 1 - Z w)``;
    ``lam`` (n,) and ``t`` (m,, zero off the sign-constrained set) are dual feasible.
    ``primal``/``dual`` are the objective values at those points and ``gap = primal - dual``.
    ``status``: ``SolverStatus.OPTIMAL`` (relative gap <= tol), ``TIME_LIMIT`` or ``MAX_ITERS``.
    ``history`` has ``"dual"`` after every pass and ``"primal"``, ``"gap"``, ``"pass"`` at checks.
    """

    w: np.ndarray
    xi: np.ndarray
    lam: np.ndarray
    t: np.ndarray
    primal: float
    dual: float
    gap: float
    rel_gap: float
    status: str
    iterations: int
    setup_time: float
    solve_time: float
    history: dict[str, list[float]] = field(default_factory=dict)
    n_polish: int = 0
    method: str = "cd"

    @property
    def converged(self) -> bool:
        """Whether the certified relative gap reached ``tol``."""
        return self.status == SolverStatus.OPTIMAL


@dataclass(frozen=True)
class Problem:
    """The checked problem: ``L`` (ridge included) = R^T R (upper ``R``, ``diagonal`` when L
    is), rows ``Z``, per-row weights ``C``, sign-constrained coordinates ``mask``."""

    L: np.ndarray
    Z: np.ndarray
    C: np.ndarray
    mask: np.ndarray
    R: np.ndarray
    diagonal: bool


def problem(L, Z, C, nonneg, ridge: float, tol: float) -> Problem:
    """Check the input and factor ``L + ridge I``; errors name what is wrong."""
    L, Z, C, mask = check_inputs(L, Z, C, nonneg, ridge)
    if not (tol > 0):
        raise ValueError(f"tol must be > 0, got {tol!r}")
    R, diagonal = factor(L, ridge)
    Lr = L + ridge * np.eye(L.shape[0]) if ridge else L
    return Problem(L=Lr, Z=Z, C=C, mask=mask, R=R, diagonal=diagonal)


def check_inputs(L, Z, C, nonneg, ridge):
    Z = np.asarray(Z, dtype=float)
    L = np.asarray(L, dtype=float)
    if Z.ndim != 2:
        raise ValueError(f"Z must be a 2-D array (n constraints x m features), got shape {Z.shape}")
    n, m = Z.shape
    if n == 0 or m == 0:
        raise ValueError(f"Z must be non-empty, got shape {Z.shape}")
    if L.shape != (m, m):
        raise ValueError(
            f"L must have shape ({m}, {m}) to match Z of shape {Z.shape}, got {L.shape}"
        )
    if not np.all(np.isfinite(Z)):
        raise ValueError("Z contains NaN or infinite entries")
    if not np.all(np.isfinite(L)):
        raise ValueError("L contains NaN or infinite entries")
    C_arr = np.asarray(C, dtype=float)
    if C_arr.ndim == 0:
        C_arr = np.full(n, float(C_arr))
    elif C_arr.shape != (n,):
        raise ValueError(f"C must be a scalar or have shape ({n},), got {C_arr.shape}")
    if not np.all(np.isfinite(C_arr)):
        raise ValueError("C must be finite (got NaN or inf)")
    if np.any(C_arr <= 0):
        raise ValueError(f"C must be > 0, got min(C) = {C_arr.min():.6g}")
    if not (np.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge!r}")
    if isinstance(nonneg, (bool, np.bool_)):
        mask = np.full(m, bool(nonneg))
    else:
        mask = np.asarray(nonneg, dtype=bool)
        if mask.shape != (m,):
            raise ValueError(f"nonneg must be a bool or a boolean mask of shape ({m},)")
    scale = max(1.0, np.abs(L).max())
    if np.abs(L - L.T).max() > 1e-10 * scale:
        raise ValueError("L must be symmetric")
    return L, Z, C_arr, mask


def factor(L, ridge):
    """Upper Cholesky factor R of L + ridge I (diagonal fast path) and whether it is diagonal."""
    m = L.shape[0]
    Lr = L + ridge * np.eye(m) if ridge > 0 else L
    off = Lr - np.diag(np.diag(Lr))
    if not off.any():
        d = np.diag(Lr)
        if np.all(d > 0):
            return np.diag(np.sqrt(d)), True
    else:
        try:
            R = sla.cholesky(0.5 * (Lr + Lr.T), lower=False)
            if np.all(np.diag(R) > 0):
                return R, False
        except np.linalg.LinAlgError:
            pass
    lam_min = float(np.linalg.eigvalsh(0.5 * (Lr + Lr.T))[0])
    kind = "singular" if abs(lam_min) <= 1e-12 * max(1.0, np.abs(Lr).max()) else (
        "indefinite" if lam_min < 0 else "numerically singular")
    raise ValueError(
        f"L must be positive definite; it is {kind} (smallest eigenvalue {lam_min:.3g}). "
        "Pass ridge=r > 0 to solve with L + r*I instead."
    )


def transform(Z, R, diagonal):
    """Y = Z R^{-1} (C-contiguous, n x m) and S = R^{-1}."""
    m = R.shape[0]
    if diagonal:
        r = np.diag(R)
        if np.all(r == 1.0):
            return np.ascontiguousarray(Z), np.eye(m)
        return np.ascontiguousarray(Z / r), np.diag(1.0 / r)
    # Solve R^T Y^T = Z^T; LAPACK returns Y^T in Fortran order, so Y = (Y^T)^T is C-ordered.
    Yt = sla.solve_triangular(R, Z.T, trans="T", lower=False, check_finite=False)
    S = sla.solve_triangular(R, np.eye(m), lower=False, check_finite=False)
    return np.ascontiguousarray(Yt.T), S


