"""One Mahalanobis API (specopt.learn._base) for ITML*, RelativeComparisonMetric, PSDBoostMetric."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.datasets import load_iris  # noqa: E402

from specopt.learn import (  # noqa: E402
    ITML,
    ITMLSupervised,
    LowRankITML,
    PSDBoostMetric,
    RelativeComparisonMetric,
)
from specopt.learn._base import MahalanobisMixin  # noqa: E402
from specopt.learn.itml import draw_pairs  # noqa: E402

X, y = load_iris(return_X_y=True)


def _fit(name):
    if name == "ITML":
        pairs, sides = draw_pairs(y, 30, 0)
        return ITML(gamma=1.0).fit(np.stack([X[pairs[:, 0]], X[pairs[:, 1]]], axis=1), sides)
    if name == "ITMLSupervised":
        return ITMLSupervised(random_state=0).fit(X, y)
    if name == "LowRankITML":
        return LowRankITML(rank=3, n_constraints=20, random_state=0,
                           bound_percentiles=(60.0, 40.0)).fit(X, y)
    if name == "RelativeComparisonMetric":
        return RelativeComparisonMetric(random_state=0).fit_supervised(X, y)
    return PSDBoostMetric(random_state=0).fit(X, y)


@pytest.mark.parametrize("name", ["ITML", "ITMLSupervised", "LowRankITML",
                                  "RelativeComparisonMetric", "PSDBoostMetric"])
def test_one_api_and_one_validation(name):
    est = _fit(name)
    assert isinstance(est, MahalanobisMixin)
    M = est.get_mahalanobis_matrix()
    L = est.components_
    assert M.shape == (4, 4) and L.shape[1] == 4
    np.testing.assert_allclose(L.T @ L, M, atol=1e-8 * max(1.0, np.abs(M).max()))
    assert np.linalg.eigvalsh(0.5 * (M + M.T)).min() >= -1e-9 * max(1.0, np.abs(M).max())
    Z = est.transform(X[:5])
    d2 = np.sum((Z[0] - Z[1]) ** 2)
    diff = X[0] - X[1]
    assert d2 == pytest.approx(diff @ M @ diff, rel=1e-8, abs=1e-12)
    pairs = np.stack([X[:5], X[5:10]], axis=1)
    dist = est.pair_distance(pairs)
    assert dist == pytest.approx(np.sqrt(np.einsum("ij,jk,ik->i", pairs[:, 0] - pairs[:, 1], M,
                                                    pairs[:, 0] - pairs[:, 1])), rel=1e-7)
    assert est.get_metric()(X[0], X[1]) == pytest.approx(np.sqrt(max(d2, 0.0)), rel=1e-7,
                                                          abs=1e-12)
    # the same errors everywhere, from the same check
    with pytest.raises(ValueError, match="features"):
        est.transform(X[:, :3])
    with pytest.raises(ValueError, match="NaN|infinity"):
        est.transform(np.full((2, 4), np.nan))
    with pytest.raises(ValueError, match=r"pairs must have shape \(n_pairs, 2, 4\)"):
        est.pair_distance(X[:3])
