"""RelativeComparisonMetric: agreement with the QP through CVXPY, conventions, errors."""

import cvxpy as cp
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris

from specopt.learn import RelativeComparisonMetric
from specopt.learn.relative_comparison import draw_triplets
from tests._helpers import checked_reference


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), y


def test_draw_triplets_respects_labels(iris):
    _, y = iris
    T = draw_triplets(y, 2000, random_state=0)
    assert T.shape == (2000, 3)
    assert np.all(y[T[:, 0]] == y[T[:, 1]]) and np.all(T[:, 0] != T[:, 1])
    assert np.all(y[T[:, 0]] != y[T[:, 2]])
    assert len(np.unique(T[:, 1])) > 100  # j, k spread over the data
    with pytest.raises(ValueError, match="two classes"):
        draw_triplets(np.zeros(5), 3)


@pytest.mark.parametrize("use_A", [False, True])
def test_fit_matches_cvxpy_qp(iris, use_A):
    X, y = iris
    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 3)) if use_A else None
    est = RelativeComparisonMetric(C=0.5, A=A, tol=1e-10, random_state=0)
    est.fit_supervised(X, y, n_triplets=300)
    assert est.converged_
    An = np.eye(4) if A is None else A
    T = est.triplets_
    XA = X @ An
    Z = (XA[T[:, 0]] - XA[T[:, 2]]) ** 2 - (XA[T[:, 0]] - XA[T[:, 1]]) ** 2
    w = cp.Variable(An.shape[1])
    M = An @ cp.diag(w) @ An.T
    obj = 0.5 * cp.sum_squares(M) + 0.5 * cp.sum(cp.pos(1 - Z @ w))  # 1/2 ||A W A^T||_F^2
    prob = cp.Problem(cp.Minimize(obj), [w >= 0])
    checked_reference(prob, "CLARABEL")
    assert abs(est.objective_ - prob.value) <= 1e-6 * prob.value
    np.testing.assert_allclose(est.w_, w.value, atol=1e-4)
    # conventions: M = A W A^T, transform gives the learned squared distances
    np.testing.assert_allclose(est.get_mahalanobis_matrix(), An @ np.diag(est.w_) @ An.T,
                               atol=1e-12)
    Xt = est.transform(X[:5])
    d01 = (X[0] - X[1]) @ est.get_mahalanobis_matrix() @ (X[0] - X[1])
    assert np.isclose(np.sum((Xt[0] - Xt[1]) ** 2), d01)


def test_learned_metric_orders_held_out_triplets_better(iris):
    X, y = iris
    est = RelativeComparisonMetric(C=1.0, random_state=1).fit_supervised(X, y)
    test = draw_triplets(y, 2000, random_state=99)
    learned = est.score_triplets(X, test)
    euclid = np.mean(np.sum((X[test[:, 0]] - X[test[:, 2]]) ** 2, 1)
                     > np.sum((X[test[:, 0]] - X[test[:, 1]]) ** 2, 1))
    assert learned > euclid
    assert set(np.unique(est.predict_triplets(X, test[:50]))) <= {-1, 1}


def test_sklearn_conventions(iris):
    X, y = iris
    est = RelativeComparisonMetric(C=2.0, A=np.eye(4), random_state=0)
    assert est.get_params()["C"] == 2.0
    c = clone(est)
    assert c.get_params()["C"] == 2.0 and not hasattr(c, "w_")
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        est.transform(X)
    assert est.fit_supervised(X, y, n_triplets=50) is est


@pytest.mark.parametrize(
    "kwargs, triplets, match",
    [
        ({}, np.array([[0, 1]]), r"shape \(n_triplets, 3\)"),
        ({}, np.array([[0, 1, 500]]), "indices"),
        ({}, np.array([[0.0, 1.0, 2.0]]), "integer"),
        ({"C": 0.0}, np.array([[0, 1, 100]]), "The 'C' parameter"),
        ({"C": np.nan}, np.array([[0, 1, 100]]), "The 'C' parameter"),
        ({"C": np.inf}, np.array([[0, 1, 100]]), "The 'C' parameter"),
        ({"A": np.ones((3, 2))}, np.array([[0, 1, 100]]), "A must have 4 rows"),
        ({"A": np.ones((4, 2))}, np.array([[0, 1, 100]]), "positive definite"),
    ],
)
def test_bad_inputs(iris, kwargs, triplets, match):
    X, _ = iris
    with pytest.raises(ValueError, match=match):
        RelativeComparisonMetric(**kwargs).fit(X, triplets=triplets)
