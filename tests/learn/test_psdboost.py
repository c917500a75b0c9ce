"""PSDBoostMetric: scikit-learn conventions and agreement with the generic SDP solve."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline

from specopt.learn import PSDBoostMetric
from specopt.learn.psdboost import nearest_neighbour_triplets


def _blobs(seed=0, n=30, d=5):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1, 2], n // 3)
    X = rng.normal(size=(n, d))
    X[:, 0] += 3 * y  # one informative direction, the rest noise
    return X, y


def test_fit_transform_metric_and_pipeline():
    X, y = _blobs()
    est = PSDBoostMetric(n_triplets=20, random_state=0)
    assert clone(est).get_params() == est.get_params()
    assert est.fit(X, y) is est
    M = est.get_mahalanobis_matrix()
    assert abs(np.trace(M) - 1) <= 1e-8 and np.linalg.eigvalsh(M).min() >= -1e-8
    L = est.components_
    np.testing.assert_allclose(L.T @ L, M, atol=1e-8)
    Z = est.transform(X)
    i, j = 0, 5
    np.testing.assert_allclose(np.sum((Z[i] - Z[j]) ** 2), (X[i] - X[j]) @ M @ (X[i] - X[j]))
    assert len(est.triplets_) == 20
    assert est.certificate_.route == "matrix_generation" and est.certificate_.gap <= 1e-6
    assert M[0, 0] > 0.5  # the informative feature dominates the learned metric
    pipe = make_pipeline(PSDBoostMetric(), KNeighborsClassifier(1)).fit(X, y)
    assert pipe.score(X, y) == 1.0


def test_triplets_and_errors():
    X, y = _blobs()
    T = nearest_neighbour_triplets(X, y)
    assert len(T) == len(X)
    assert np.all(y[T[:, 0]] == y[T[:, 1]]) and np.all(y[T[:, 0]] != y[T[:, 2]])
    with pytest.raises(ValueError, match="at least two classes"):
        PSDBoostMetric().fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match=r"\(n, 3\)"):
        PSDBoostMetric().fit_triplets(X, np.zeros((4, 2), dtype=int))
    for bad in (0.5, 0.0, -1.0, np.nan, np.inf):  # C >= 1, finite: named before any solve
        with pytest.raises(ValueError, match=r"The 'C' parameter of PSDBoostMetric must be"):
            PSDBoostMetric(C=bad).fit_triplets(X, T)
    with pytest.raises(Exception, match="fitted"):
        PSDBoostMetric().transform(X)


@pytest.mark.slow
def test_digits_1nn_error_equals_sdp_solvers():
    """Paper's second experiment on sklearn digits 1, 5, 7, 9 (80 training points per class)."""
    X, y = load_digits(return_X_y=True)
    sel = np.isin(y, [1, 5, 7, 9])
    X, y = X[sel] / 16.0, y[sel]
    rng = np.random.default_rng(0)
    tr = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:80] for c in (1, 5, 7, 9)])
    te = np.setdiff1d(np.arange(len(y)), tr)

    def error(est):
        est.fit(X[tr], y[tr])
        knn = KNeighborsClassifier(1).fit(est.transform(X[tr]), y[tr])
        return np.mean(knn.predict(est.transform(X[te])) != y[te]), est

    err_mg, mg = error(PSDBoostMetric())
    err_cl, cl = error(PSDBoostMetric(route="conic", solver="CLARABEL"))
    assert abs(mg.certificate_.objective - cl.certificate_.objective) <= 1e-5
    assert err_mg == err_cl
