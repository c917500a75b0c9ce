r"""Schultz-Joachims metric learning from relative comparisons (triplets).

A triplet (i, j, k) says "x_i is closer to x_j than to x_k". With a fixed linear map A (d x p;
the identity when ``A=None``) the metric is::

    d_w(u, v) = (u - v)^T A diag(w) A^T (u - v) = w^T ((A^T u - A^T v) o (A^T u - A^T v)),  w >= 0

and w solves the QP (2.3) of Nguyen, Morell and De Baets::

    min_{w >= 0, xi >= 0}  1/2 w^T L w + C sum_t xi_t   s.t.  w^T z_t >= 1 - xi_t,
    L = (A^T A) o (A^T A),   z_ijk = Delta(x_i, x_k) - Delta(x_i, x_j),
    Delta(u, v) = (A^T u - A^T v) o (A^T u - A^T v)

(1/2 w^T L w = 1/2 ||A diag(w) A^T||_F^2), solved by :func:`specopt.solvers.dual_cd.dual_cd`
(dual coordinate descent with a duality-gap certificate).

Conventions follow metric-learn: ``get_mahalanobis_matrix()`` is M = A diag(w) A^T,
``components_`` is (A diag(sqrt(w)))^T so that ``transform(X) = X @ components_.T`` and
||transform(u) - transform(v)||^2 = d_w(u, v); ``triplet_decision_function(X, triplets)`` is
d(x_i, x_k) - d(x_i, x_j), ``predict_triplets`` its sign, ``score_triplets`` the fraction of
triplets ordered correctly.

``fit(X, y)`` draws ``n_triplets`` (default 3 N) triplets from the class labels y
(:func:`draw_triplets`), so the learner sits in ``Pipeline(StandardScaler(), learner,
KNeighborsClassifier())`` and GridSearchCV; ``fit(X, triplets=T)`` (or ``fit_triplets``) takes
given triplets.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ..solvers.dual_cd import dual_cd
from ..solvers.dual_cd.dask import dual_cd_dask
from ..solvers.mg.dask_rows import is_dask_array
from ._base import (
    COUNT,
    NONNEG,
    POSITIVE,
    RANDOM_STATE,
    TOL,
    VERBOSE,
    MahalanobisMixin,
    finish_progress,
    fit_context,
    labelled_data,
    progress_callback,
    reject_dask_nan,
    require_y,
    summary_lines,
    triplets_given,
)
from ._dask_fit import check_triplet_indices, triplet_z_rows

__all__ = ["RelativeComparisonMetric", "draw_triplets"]


def draw_triplets(y: np.ndarray, n_triplets: int, random_state: Any = None) -> np.ndarray:
    """Random triplets (i, j, k) with y_i = y_j, i != j and y_i != y_k (the paper's protocol).

    Anchors i are drawn uniformly among points whose class has another member and whose class
    is not the only one; j uniformly in the anchor's class minus i, k uniformly outside it.
    """
    y = np.asarray(y)
    if n_triplets < 1:
        raise ValueError(f"n_triplets must be >= 1, got {n_triplets}")
    rng = check_random_state(random_state)
    classes, inv, counts = np.unique(y, return_inverse=True, return_counts=True)
    n = y.size
    ok = (counts[inv] >= 2) & (counts[inv] < n)
    anchors = np.flatnonzero(ok)
    if anchors.size == 0:
        raise ValueError("triplets need a class with >= 2 points and at least two classes")
    order = np.argsort(inv, kind="stable")  # points grouped by class
    start = np.concatenate([[0], np.cumsum(counts)])
    i = anchors[rng.randint(0, anchors.size, n_triplets)]
    ci = inv[i]
    # j: uniform in the class of i without i (draw among count-1 slots, skip i's own slot)
    pos_i = np.empty(n, dtype=np.int64)
    pos_i[order] = np.arange(n) - start[inv[order]]
    rj = rng.randint(0, counts[ci] - 1)
    rj = rj + (rj >= pos_i[i])
    j = order[start[ci] + rj]
    # k: uniform among the n - count points outside the class of i
    rk = rng.randint(0, n - counts[ci])
    rk = rk + counts[ci] * (rk >= start[ci])
    k = order[rk]
    return np.column_stack([i, j, k])


#: with Dask triplets, from ``2 * COARSE_ROWS`` of them on, the QP's warm start is solved on
#: about this many (every ``s``-th; ``dual_cd_dask(coarse=...)``)
COARSE_ROWS = 2_000_000


class RelativeComparisonMetric(MahalanobisMixin, BaseEstimator):
    """Learn w >= 0 of the metric (u - v)^T A diag(w) A^T (u - v) from triplets.

    Parameters
    ----------
    C : weight of the hinge losses (> 0).
    A : None (A = I) or a (d, p) array, the fixed map of the metric. (Called ``A`` rather than
        ``transform`` because ``transform`` is the scikit-learn method of this estimator.)
    tol : relative duality gap to reach (default 1e-4: held-out accuracy is the same from 1e-2
        on wine and breast cancer, docs/learners.md; ``gap_``/``converged_`` report it).
    max_passes, ridge, random_state : passed to :func:`specopt.solvers.dual_cd.dual_cd`
        (``random_state`` seeds its permutations and the triplets drawn from labels).
    n_triplets : triplets drawn from the labels in ``fit(X, y)`` (None: 3 N).

    Attributes
    ----------
    w_ : the learned weights (p,); transform_matrix_ : the A used (d, p); components_ :
    ``(A diag(sqrt(w)))^T``; triplets_ : the triplets drawn in ``fit(X, y)``; objective_,
    gap_, converged_, n_iter_ : the dual coordinate descent's primal value, duality gap, whether
    it reached ``tol``, and its passes.
    """

    _parameter_constraints = {
        "C": [POSITIVE],
        "A": ["array-like", None],
        "tol": TOL,
        "max_passes": [COUNT],
        "ridge": [NONNEG],
        "random_state": RANDOM_STATE,
        "n_triplets": [COUNT, None],
        "verbose": VERBOSE,
    }

    def __init__(self, C: float = 1.0, A: np.ndarray | None = None, tol: float = 1e-4,
                 max_passes: int = 2000, ridge: float = 0.0, random_state: Any = None,
                 n_triplets: int | None = None, verbose: bool = False):
        self.C = C
        self.A = A
        self.tol = tol
        self.max_passes = max_passes
        self.ridge = ridge
        self.random_state = random_state
        self.n_triplets = n_triplets
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    # ---------------------------------------------------------------------------------------
    def _A(self, d: int) -> np.ndarray:
        if self.A is None:
            return np.eye(d)
        A = check_array(self.A, ensure_2d=True)
        if A.shape[0] != d:
            raise ValueError(f"A must have {d} rows (one per feature), got shape {A.shape}")
        return A

    @staticmethod
    def _triplet_z(XA: np.ndarray, T: np.ndarray) -> np.ndarray:
        dij = (XA[T[:, 0]] - XA[T[:, 1]]) ** 2
        dik = (XA[T[:, 0]] - XA[T[:, 2]]) ** 2
        return dik - dij

    def _check_triplets(self, triplets, n: int) -> np.ndarray:
        T = np.asarray(triplets)
        if T.ndim != 2 or T.shape[1] != 3:
            raise ValueError(f"triplets must have shape (n_triplets, 3), got {T.shape}")
        if T.shape[0] == 0:
            raise ValueError("at least one triplet is needed")
        if not np.issubdtype(T.dtype, np.integer):
            raise ValueError("triplets must be integer indices into X")
        if T.min() < 0 or T.max() >= n:
            raise ValueError(f"triplet indices must lie in [0, {n})")
        return T

    @fit_context()
    def fit(self, X, y=None, triplets=None) -> RelativeComparisonMetric:
        """Fit from class labels ``y`` (``n_triplets`` triplets drawn, stored as
        ``triplets_``) or from given integer ``triplets`` (n, 3): x_i closer to x_j than x_k."""
        if triplets_given(y, triplets):
            return self.fit_triplets(X, triplets)
        require_y(self, y, " (give class labels y, or triplets=)")
        X, y = labelled_data(self, X, y)
        n_t = 3 * X.shape[0] if self.n_triplets is None else int(self.n_triplets)
        self.triplets_ = draw_triplets(y, n_t, self.random_state)
        return self._fit(X, self.triplets_)

    @fit_context()
    def fit_triplets(self, X, triplets) -> RelativeComparisonMetric:
        """Fit from ``X`` (N, d) and integer ``triplets`` (n, 3): x_i closer to x_j than x_k."""
        if is_dask_array(X) or is_dask_array(triplets):
            return self._fit_dask(X, triplets)
        X = validate_data(self, X)
        return self._fit(X, self._check_triplets(triplets, X.shape[0]))

    def _fit_dask(self, X: Any, triplets: Any) -> RelativeComparisonMetric:
        """``X`` or the triplets a Dask array: the rows ``z_t`` are formed per block on the
        cluster and the QP is solved by :func:`specopt.solvers.dual_cd.dask.dual_cd_dask`
        (every pass returns O(p^2) numbers; the certified gap is over all rows)."""
        if is_dask_array(X):
            if X.ndim != 2 or not np.issubdtype(np.dtype(X.dtype), np.number):
                raise ValueError(f"X must be a numeric (N, d) array, got shape {X.shape}")
            reject_dask_nan(X)
            self.n_features_in_ = X.shape[1]
        else:
            X = validate_data(self, X)
        T = triplets if is_dask_array(triplets) else np.asarray(triplets)
        check_triplet_indices(T, X.shape[0])
        A = self._A(X.shape[1])
        Z = triplet_z_rows(X @ A, T)
        AtA = A.T @ A
        cb = progress_callback(self.verbose, "dual_cd", f"RelativeComparisonMetric on Dask: "
                               f"{Z.shape[0]} triplets in {Z.numblocks[0]} blocks, "
                               f"{Z.shape[1]} weights, C={self.C:g}", "step")
        n, coarse = int(Z.shape[0]), None
        if n >= 2 * COARSE_ROWS:  # warm start on every s-th triplet (dual_cd_dask's coarse)
            coarse = triplet_z_rows(X @ A, T[:: n // COARSE_ROWS])
        res = dual_cd_dask(AtA * AtA, Z, self.C, nonneg=True, tol=self.tol, ridge=self.ridge,
                           max_passes=self.max_passes, callback=cb, coarse=coarse)
        self.triplets_ = T
        return self._store(res, A, cb, "data passes")

    def _fit(self, X: np.ndarray, T: np.ndarray) -> RelativeComparisonMetric:
        A = self._A(X.shape[1])
        XA = X @ A
        Z = self._triplet_z(XA, T)
        AtA = A.T @ A
        L = AtA * AtA
        seed = check_random_state(self.random_state).randint(0, 2**31 - 1)
        cb = progress_callback(self.verbose, "dual_cd", f"RelativeComparisonMetric: "
                               f"{Z.shape[0]} triplets, {Z.shape[1]} weights, C={self.C:g}",
                               "iter")
        res = dual_cd(L, Z, self.C, nonneg=True, tol=self.tol, max_passes=self.max_passes,
                      ridge=self.ridge, seed=seed, callback=cb)
        return self._store(res, A, cb, "CD passes")

    def _store(self, res: Any, A: np.ndarray, cb: Any, unit: str) -> RelativeComparisonMetric:
        """The fitted attributes from a dual-CD result (summary printed, warning if the gap
        did not reach ``tol``)."""
        finish_progress(cb, summary_lines(
            ("converged", res.converged), ("objective", f"{res.primal:.6g}"),
            ("bound", f"{res.dual:.6g}"), ("relative gap", f"{res.rel_gap:.3g}"),
            (unit, res.iterations)))
        if not res.converged:
            warnings.warn(f"dual coordinate descent stopped with relative gap {res.rel_gap:.2e} "
                          f"> tol={self.tol:g} after {res.iterations} {unit}",
                          ConvergenceWarning, stacklevel=3)
        self.w_ = res.w
        self.transform_matrix_ = A
        self.components_ = (A * np.sqrt(res.w)).T
        self.n_iter_ = res.iterations
        self.objective_ = res.primal
        self.gap_ = res.gap
        self.converged_ = res.converged
        return self

    def fit_supervised(self, X, y, n_triplets: int | None = None) -> RelativeComparisonMetric:
        """``fit(X, y)`` with ``n_triplets`` for this call (kept for earlier callers)."""
        if n_triplets is None:
            return self.fit(X, y)
        saved, self.n_triplets = self.n_triplets, n_triplets
        try:
            return self.fit(X, y)
        finally:
            self.n_triplets = saved

    # ---------------------------------------------------------------------------------------
    def triplet_decision_function(self, X, triplets) -> np.ndarray:
        """d(x_i, x_k) - d(x_i, x_j) for each triplet (positive: ordered as the triplet says)."""
        check_is_fitted(self, "components_")
        XT = self.transform(X)
        T = self._check_triplets(triplets, XT.shape[0])
        return self._triplet_z(XT, T).sum(axis=1)

    def predict_triplets(self, X, triplets) -> np.ndarray:
        """+1 where x_i is closer to x_j than to x_k under the learned metric, else -1."""
        return np.where(self.triplet_decision_function(X, triplets) > 0, 1, -1)

    def score_triplets(self, X, triplets) -> float:
        """Fraction of triplets ordered correctly (d(x_i, x_j) < d(x_i, x_k))."""
        return float(np.mean(self.triplet_decision_function(X, triplets) > 0))
