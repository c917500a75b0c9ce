"""ITML learners: metric-learn conventions, agreement with the route, kernel/low-rank forms."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

import specopt
from specopt.learn.itml import ITML, ITMLSupervised, KernelITML, LowRankITML, draw_pairs


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _pairs(X, y, n=30, seed=0):
    P, s = draw_pairs(y, n, seed)
    return np.stack([X[P[:, 0]], X[P[:, 1]]], axis=1), s, P


def test_pairs_learner_conventions_and_route(iris):
    X, y = iris
    pairs, sides, _ = _pairs(X, y)
    est = ITML(gamma=2.0, tol=1e-10).fit(pairs, sides)
    W = est.get_mahalanobis_matrix()
    L = est.components_
    assert np.allclose(L.T @ L, W, atol=1e-10)
    assert np.linalg.eigvalsh(W)[0] > 0
    np.testing.assert_allclose(est.transform(X[:5]), X[:5] @ L.T)
    diff = pairs[:, 0] - pairs[:, 1]
    np.testing.assert_allclose(
        est.pair_distance(pairs), np.sqrt(np.einsum("ij,jk,ik->i", diff, W, diff)), rtol=1e-10
    )
    np.testing.assert_allclose(est.pair_score(pairs), -est.pair_distance(pairs))
    assert math.isclose(est.get_metric()(pairs[0, 0], pairs[0, 1]), est.pair_distance(pairs[:1])[0])
    # default bounds: percentiles of SQUARED distances between the distinct constrained points
    pts = np.unique(pairs.reshape(-1, 4), axis=0)
    sq = np.sum((pts[:, None] - pts[None]) ** 2, axis=-1)[np.triu_indices(len(pts), 1)]
    np.testing.assert_allclose(est.bounds_, np.percentile(sq, (5, 95)))
    # same problem through the route (CVXPY model) gives the same W
    u, l = est.bounds_
    Wv, xi = cp.Variable((4, 4), PSD=True), cp.Variable(len(sides))
    S, D = np.flatnonzero(sides > 0), np.flatnonzero(sides < 0)
    xi0 = np.where(sides > 0, u, l)
    prob = cp.Problem(
        cp.Minimize(specopt.logdet_div(Wv, np.eye(4)) + 2.0 * specopt.burg_div(xi, xi0)),
        [
            specopt.row_quad_forms(diff[S], Wv) <= xi[S],
            specopt.row_quad_forms(diff[D], Wv) >= xi[D],
        ],
    )
    specopt.solve(prob, route="bregman", tol=1e-10)
    assert np.linalg.norm(Wv.value - W) <= 1e-8 * np.linalg.norm(W)
    # index pairs through a preprocessor give the same answer
    _, _, P = _pairs(X, y)
    est2 = ITML(gamma=2.0, tol=1e-10, preprocessor=X).fit(P, sides)
    assert np.allclose(est2.get_mahalanobis_matrix(), W, atol=1e-9)


def test_pairs_learner_errors(iris):
    X, y = iris
    pairs, sides, _ = _pairs(X, y)
    with pytest.raises(ValueError, match=r"\+1 \(similar\) or -1"):
        ITML().fit(pairs, np.zeros(len(sides)))
    with pytest.raises(ValueError, match="bounds must be > 0"):
        ITML(bounds=(0.0, 3.0)).fit(pairs, sides)
    with pytest.raises(ValueError, match="shape"):
        ITML().fit(np.concatenate([pairs, pairs[:, :1]], axis=1), sides)  # (n, 3, d)
    with pytest.raises(ValueError, match="no positive definite metric"):
        v = pairs[:1]
        ITML(gamma=np.inf, bounds=(1.0, 2.0)).fit(np.concatenate([v, v]), np.array([1, -1]))


def test_supervised_learns_and_prior(iris):
    X, y = iris
    est = ITMLSupervised(n_constraints=40, random_state=0, tol=1e-9).fit(X, y)
    assert est.result_.status == "optimal"
    assert est.pairs_.shape[0] == est.sides_.shape[0] <= 80
    assert np.all(y[est.pairs_[est.sides_ > 0, 0]] == y[est.pairs_[est.sides_ > 0, 1]])
    assert np.all(y[est.pairs_[est.sides_ < 0, 0]] != y[est.pairs_[est.sides_ < 0, 1]])
    cov = ITMLSupervised(n_constraints=40, random_state=0, prior="covariance").fit(X, y)
    assert not np.allclose(cov.get_mahalanobis_matrix(), est.get_mahalanobis_matrix())


def test_kernel_itml_linear_kernel_equals_linear_itml(iris):
    X, y = iris
    kw = dict(n_constraints=25, random_state=1, tol=1e-10, gamma=1.0)
    lin = ITMLSupervised(**kw).fit(X, y)
    ker = KernelITML(kernel="linear", **kw).fit(X, y)
    # same constraints, and the linear kernel's bounds are the same squared distances
    np.testing.assert_array_equal(lin.pairs_, ker.pairs_)
    np.testing.assert_allclose(lin.bounds_, ker.bounds_, rtol=1e-10)
    W = lin.get_mahalanobis_matrix()
    Z1, Z2 = X[::7] + 0.1, X[3::11] - 0.2  # new points
    assert (
        np.abs(ker.kernel_matrix(Z1, Z2) - Z1 @ W @ Z2.T).max()
        <= 1e-7 * np.abs(Z1 @ W @ Z2.T).max()
    )
    D = ker.pairwise_distances(Z1, Z2)
    diff = Z1[:, None] - Z2[None]
    ref = np.sqrt(np.einsum("abi,ij,abj->ab", diff, W, diff))
    assert np.abs(D - ref).max() <= 1e-6 * ref.max()


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 1000), width=st.sampled_from([0.1, 0.5, 2.0]))
def test_kernel_itml_new_points_psd(seed, width):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((40, 3))
    y = (X[:, 0] + 0.3 * rng.standard_normal(40) > 0).astype(int)
    est = KernelITML(
        kernel="rbf", kernel_params={"gamma": width}, n_constraints=15, random_state=seed
    ).fit(X, y)
    Z = rng.standard_normal((25, 3))
    K = est.kernel_matrix(Z)
    assert np.allclose(K, K.T, atol=1e-10)
    assert np.linalg.eigvalsh(K)[0] >= -1e-8 * max(1.0, np.abs(K).max())
    D = est.pairwise_distances(Z)
    assert np.all(np.isfinite(D)) and np.allclose(np.diag(D), 0, atol=1e-6)


def test_lowrank_itml(iris):
    X, y = iris
    # planted: a metric of the form I + U L U^T defines bounds the family can meet
    for basis in ("svd", "class_means", "clusters"):
        est = LowRankITML(
            rank=2, basis=basis, n_constraints=20, random_state=0, bound_percentiles=(100, 0),
            gamma=np.inf).fit(X, y)
        U = est.basis_
        assert U.shape == (4, 2) and np.allclose(U.T @ U, np.eye(2), atol=1e-10)
        E = est.get_mahalanobis_matrix() - np.eye(4)
        assert np.linalg.norm(E - U @ U.T @ E @ U @ U.T) <= 1e-9 * max(1, np.linalg.norm(E))
    est = LowRankITML(rank=2, n_constraints=20, random_state=0, bound_percentiles=(100, 0),
                      gamma=np.inf).fit(X, y)
    # tighter bounds that the restricted family can still meet: shrink similar pairs in span U
    U = est.basis_
    Ws = np.eye(4) + U @ np.diag([-0.5, 2.0]) @ U.T
    diff = X[est.pairs_[:, 0]] - X[est.pairs_[:, 1]]
    p = np.einsum("ij,jk,ik->i", diff, Ws, diff)
    u = 1.01 * p[est.sides_ > 0].max()
    l = 0.99 * p[est.sides_ < 0].min()
    if l > 0:
        tight = LowRankITML(rank=2, n_constraints=20, random_state=0, bounds=(u, l),
                            gamma=np.inf).fit(X, y)
        W = tight.get_mahalanobis_matrix()
        q = np.einsum("ij,jk,ik->i", diff, W, diff)
        assert np.all(q[est.sides_ > 0] <= u * (1 + 1e-6))
        assert np.all(q[est.sides_ < 0] >= l * (1 - 1e-6))
    with pytest.raises(ValueError, match="no positive definite metric"):
        LowRankITML(rank=1, n_constraints=30, random_state=0, gamma=np.inf).fit(X, y)
    with pytest.raises(ValueError, match="basis"):
        LowRankITML(basis="pca").fit(X, y)


def test_itml_on_points_draws_pairs_as_itml_supervised(iris):
    """ITML.fit on 2-D points with class labels is ITMLSupervised's fit (Pipeline use)."""
    X, y = iris
    kw = dict(n_constraints=30, random_state=3)
    a, b = ITML(**kw).fit(X, y), ITMLSupervised(**kw).fit(X, y)
    np.testing.assert_array_equal(a.pairs_, b.pairs_)
    np.testing.assert_allclose(a.get_mahalanobis_matrix(), b.get_mahalanobis_matrix())
    assert a.n_features_in_ == 4


def test_lowrank_itml_slack_default_is_itml_of_the_projection(iris):
    """Default (gamma=1): W = I + U (F - I) U^T with F = ITML of the projected differences."""
    X, y = iris
    est = LowRankITML(rank=2, n_constraints=30, random_state=0, tol=1e-9).fit(X, y)
    U = est.basis_
    diff = X[est.pairs_[:, 0]] - X[est.pairs_[:, 1]]
    proj = np.stack([X[est.pairs_[:, 0]] @ U, X[est.pairs_[:, 1]] @ U], axis=1)
    ref = ITML(tol=1e-9, bounds=tuple(est.bounds_)).fit(proj, est.sides_)
    F = ref.get_mahalanobis_matrix()
    np.testing.assert_allclose(est.get_mahalanobis_matrix(), np.eye(4) + U @ (F - np.eye(2)) @ U.T,
                               atol=1e-6)
    assert est.result_.status == "optimal" and diff.shape[0] == len(est.sides_)
