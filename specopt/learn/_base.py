"""What every Mahalanobis metric learner shares (ITML*, RelativeComparisonMetric, PSDBoostMetric).

A fitted learner has ``components_`` L (r x d) with learned squared distances
``d(x, x')^2 = (x - x')^T M (x - x')``, ``M = L^T L``. The API follows metric-learn:
``get_mahalanobis_matrix()`` (M), ``transform(X) = X L^T`` (Euclidean distances there are the
learned ones), ``pair_distance(pairs)`` (unsquared), ``pair_score = -pair_distance`` and
``get_metric()`` (a function of two points). Inputs are checked once, here, with scikit-learn's
``validate_data`` (wrong number of features, NaN/inf, non-numeric data: ``ValueError`` saying
what was expected).
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import TransformerMixin

# scikit-learn's parameter validator is private (sklearn.utils._param_validation): this is the one
# place that imports it; the learners take Interval / StrOptions / Options from here.
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    Options,
    StrOptions,
    validate_parameter_constraints,
)
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = [
    "HasMethods",
    "Integral",
    "Interval",
    "InvalidParameterError",
    "MahalanobisMixin",
    "Options",
    "Real",
    "StrOptions",
    "check_params",
    "components_from_matrix",
    "finish_progress",
    "progress_callback",
    "reject_dask_nan",
]

#: Shared parameter constraints (scikit-learn's ``_parameter_constraints`` vocabulary).
POSITIVE = Interval(Real, 0, None, closed="neither")  # finite and > 0: NaN and inf rejected
NONNEG = Interval(Real, 0, None, closed="left")
TOL = [POSITIVE]
COUNT = Interval(Integral, 1, None, closed="left")
VERBOSE = ["verbose"]
RANDOM_STATE = ["random_state"]  # None, an int or a numpy RandomState (check_random_state)
SOLVER_OPTIONS = [dict, None]


def check_params(est: Any) -> None:
    """Check ``est``'s constructor parameters against its table ``_parameter_constraints``.

    Raises :class:`sklearn.utils._param_validation.InvalidParameterError` (a ``ValueError`` and a
    ``TypeError``) naming the parameter, what it must be and the value given, before any solve:
    NaN and infinite numbers fall outside every interval here (``Interval(Real, 0, None)`` is
    finite; ``gamma=np.inf`` is allowed by ITML's table explicitly).
    """
    validate_parameter_constraints(
        est._parameter_constraints, est.get_params(deep=False), caller_name=type(est).__name__
    )


def reject_dask_nan(X: Any, name: str = "X") -> None:
    """For a Dask array: one reduction over the blocks, ``ValueError`` naming ``name`` if it holds
    NaN or infinity (numpy inputs are checked by ``validate_data`` / ``check_array``)."""
    import dask.array as da

    bad = bool(da.any(~da.isfinite(X)).compute())
    if bad:
        raise ValueError(f"Input {name} contains NaN or infinity (Dask array checked block by "
                         "block before the solve)")


def components_from_matrix(M: np.ndarray, rtol: float = 0.0) -> np.ndarray:
    """L with ``L^T L = M`` (symmetrized; eigenvalues below ``rtol * max`` dropped, negatives
    clipped), rows in decreasing eigenvalue order."""
    M = 0.5 * (M + M.T)
    ev, U = np.linalg.eigh(M)
    keep = ev > rtol * max(float(ev.max(initial=0.0)), 1e-300) if rtol > 0 else np.ones_like(
        ev, dtype=bool)
    ev, U = ev[keep][::-1], U[:, keep][:, ::-1]
    return (U * np.sqrt(np.maximum(ev, 0.0))).T


class MahalanobisMixin(TransformerMixin):
    """metric-learn's Mahalanobis API on ``components_`` (and the learned matrix, if stored).

    ``_matrix_attr`` names the attribute holding M as learned (e.g. ``"W_"``); without it M is
    ``components_.T @ components_``.
    """

    _matrix_attr: str | None = None

    def get_mahalanobis_matrix(self) -> np.ndarray:
        """The learned M (d x d, PSD)."""
        check_is_fitted(self, "components_")
        if self._matrix_attr is not None:
            return getattr(self, self._matrix_attr)
        return self.components_.T @ self.components_

    def transform(self, X: Any) -> np.ndarray:
        """``X L^T``: squared Euclidean distances there are the learned distances."""
        check_is_fitted(self, "components_")
        X = validate_data(self, X, reset=False, dtype=float)
        return X @ self.components_.T

    def pair_distance(self, pairs: Any) -> np.ndarray:
        """Unsquared distances ``sqrt((x - x')^T M (x - x'))`` of pairs (n_pairs, 2, d)."""
        check_is_fitted(self, "components_")
        P = np.asarray(pairs, dtype=float)
        d = self.components_.shape[1]
        if P.ndim != 3 or P.shape[1] != 2 or P.shape[2] != d:
            raise ValueError(f"pairs must have shape (n_pairs, 2, {d}), got {P.shape}")
        if not np.all(np.isfinite(P)):
            raise ValueError("pairs contain NaN or infinity")
        D = (P[:, 0] - P[:, 1]) @ self.components_.T
        return np.sqrt(np.einsum("ij,ij->i", D, D))

    def pair_score(self, pairs: Any) -> np.ndarray:
        """``-pair_distance`` (larger means more similar)."""
        return -self.pair_distance(pairs)

    def get_metric(self) -> Callable[[np.ndarray, np.ndarray], float]:
        """The learned distance as a function of two points (for e.g. ``KNeighborsClassifier``)."""
        check_is_fitted(self, "components_")
        M = np.array(self.get_mahalanobis_matrix(), dtype=float)

        def metric(u, v):
            diff = np.asarray(u, dtype=float) - np.asarray(v, dtype=float)
            return float(np.sqrt(max(diff @ M @ diff, 0.0)))

        return metric


def progress_callback(verbose: bool, route: str, what: str, unit: str):
    """The progress printer for a learner that calls a solver directly (None unless verbose)."""
    from .._progress import progress_for

    return progress_for(bool(verbose), route, what, unit)


def finish_progress(callback, summary: Any = None) -> None:
    """Print the summary of a learner's progress printer (if any)."""
    from .._progress import Progress, take_current

    take_current()
    if isinstance(callback, Progress):
        callback.finish(summary)
