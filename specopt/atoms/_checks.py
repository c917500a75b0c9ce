"""Validation of constant data handed to specopt atoms; every failure says what is wrong."""

from __future__ import annotations

import numpy as np


def as_finite_array(value, name: str, ndim: int | None = None) -> np.ndarray:
    """``value`` as a float array; ValueError if it is not numeric, has NaN/inf or wrong ndim."""
    if value is None:
        raise ValueError(f"{name} must be a numeric array, got None")
    if np.iscomplexobj(value):
        raise ValueError(
            f"{name} is complex; specopt works with real (symmetric) matrices only"
        )
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric array, got {type(value).__name__}") from exc
    if ndim is not None and arr.ndim != ndim:
        kind = {1: "a vector", 2: "a matrix"}.get(ndim, f"a {ndim}-d array")
        raise ValueError(f"{name} must be {kind}, got an array of shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf entries")
    return arr


def symmetric_pd_matrix(value, name: str, rtol: float = 1e-10) -> np.ndarray:
    """Check a constant symmetric positive definite matrix; returns its symmetrized copy.

    Rejects non-square, non-symmetric (beyond 1e-8 relative), singular or indefinite input
    (smallest eigenvalue <= ``rtol * max(1, |lambda_max|)``), and NaN/inf.
    """
    arr = as_finite_array(value, name, ndim=2)
    n, m = arr.shape
    if n != m:
        raise ValueError(f"{name} must be square, got shape {arr.shape}")
    scale = max(1.0, float(np.max(np.abs(arr))) if arr.size else 1.0)
    if np.max(np.abs(arr - arr.T), initial=0.0) > 1e-8 * scale:
        raise ValueError(f"{name} must be symmetric")
    arr = 0.5 * (arr + arr.T)
    eig = np.linalg.eigvalsh(arr)
    if eig[0] <= rtol * max(1.0, abs(eig[-1])):
        what = "singular" if abs(eig[0]) <= rtol * max(1.0, abs(eig[-1])) else "indefinite"
        raise ValueError(
            f"{name} must be positive definite; it is {what} (smallest eigenvalue {eig[0]:.3g})"
        )
    return arr


def is_symmetric_value(val: np.ndarray) -> bool:
    """Symmetric up to ``np.allclose``'s default tolerances, the test CVXPY's own spectral
    atoms (``lambda_max``, ``lambda_sum_largest``) apply to a value: a solver's answer for a
    ``Variable((n, n))`` constrained by ``K == K.T`` is symmetric only to its tolerance."""
    return bool(np.allclose(val, val.T))
