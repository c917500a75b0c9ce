"""Metric learners inside scikit-learn: Pipeline(StandardScaler, learner, kNN) and GridSearchCV."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris, load_wine
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from specopt.learn import (
    ITML,
    ITMLSupervised,
    KernelITML,
    LowRankITML,
    PSDBoostMetric,
    RelativeComparisonMetric,
    TransformationSVM,
)


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


@pytest.fixture(scope="module")
def wine():
    return load_wine(return_X_y=True)


CASES = [
    ("iris", ITML(n_constraints=30, random_state=0), {"gamma": [1.0, 10.0]}),
    ("wine", ITMLSupervised(n_constraints=30, random_state=0), {"gamma": [1.0, 10.0]}),
    ("iris", KernelITML(n_constraints=30, random_state=0), {"gamma": [1.0, 10.0]}),
    ("wine", LowRankITML(rank=5, random_state=0), {"rank": [3, 5]}),
    ("wine", RelativeComparisonMetric(random_state=0), {"C": [0.1, 1.0]}),
    ("iris", PSDBoostMetric(), {"C": [1.0, 100.0]}),
]


@pytest.mark.parametrize("data,learner,grid", CASES, ids=lambda c: getattr(c, "__name__", None)
                         or (type(c).__name__ if not isinstance(c, str | dict) else None))
def test_pipeline_and_grid_search_fit_every_fold(request, data, learner, grid):
    X, y = request.getfixturevalue(data)
    pipe = make_pipeline(StandardScaler(), learner, KNeighborsClassifier(n_neighbors=3))
    name = type(learner).__name__.lower()
    gs = GridSearchCV(pipe, {f"{name}__{k}": v for k, v in grid.items()},
                      cv=StratifiedKFold(3, shuffle=True, random_state=0), error_score="raise")
    gs.fit(X, y)  # error_score="raise": a failing fold fails the test
    res = gs.cv_results_
    assert np.all(np.isfinite(res["mean_test_score"]))
    assert gs.best_score_ >= 0.85, gs.best_score_
    assert gs.predict(X[:5]).shape == (5,)


def test_psdboost_c_is_valid_on_every_fold_and_bad_c_is_named(iris):
    """C weighs the mean slack: one value is valid (or not) whatever the fold's triplet count.
    Formerly C=0.01 failed 3 of 9 fits ("C * n_triplets < 1"); C < 1 is now refused by the
    parameter table before any solve, on every fold alike."""
    X, y = iris
    pipe = make_pipeline(StandardScaler(), PSDBoostMetric(), KNeighborsClassifier(1))
    gs = GridSearchCV(pipe, {"psdboostmetric__C": [1.0, 10.0, 1000.0]}, cv=3,
                      error_score="raise").fit(X, y)
    assert len(gs.cv_results_["mean_test_score"]) == 3
    # the same C is the same trade-off for any number of triplets: at C = 1 the dual weights
    # are uniform, at most a fraction 1 / C of the triplets violate the margin
    Xs = StandardScaler().fit_transform(X)
    for n in (60, 150):
        est = PSDBoostMetric(C=4.0).fit(Xs[:n], y[:n])
        P = Xs[est.triplets_[:, 0]] - Xs[est.triplets_[:, 2]]
        Q = Xs[est.triplets_[:, 0]] - Xs[est.triplets_[:, 1]]
        M = est.mahalanobis_
        margins = np.einsum("ij,jk,ik->i", P, M, P) - np.einsum("ij,jk,ik->i", Q, M, Q)
        violated = np.mean(margins < est.margin_ - 1e-6 * max(1.0, abs(est.margin_)))
        assert violated <= 1 / 4.0 + 1e-9
    with pytest.raises(ValueError, match=r"The 'C' parameter of PSDBoostMetric must be"):
        GridSearchCV(pipe, {"psdboostmetric__C": [0.01]}, cv=3, error_score="raise").fit(X, y)


def test_kernel_itml_transform_is_the_learned_kernel_distance(iris):
    X, y = iris
    X = StandardScaler().fit_transform(X)
    est = KernelITML(n_constraints=30, random_state=0).fit(X, y)
    # exact on the support (rbf kernel)
    S = est.X_support_
    Z = est.transform(S)
    D = np.sum((Z[:, None] - Z[None]) ** 2, axis=-1)
    np.testing.assert_allclose(D, est.pairwise_distances(S, squared=True), atol=1e-8)
    # linear kernel: the support spans R^4, so exact for every point
    lin = KernelITML(kernel="linear", n_constraints=30, random_state=0).fit(X, y)
    Z = lin.transform(X[:40])
    D = np.sum((Z[:, None] - Z[None]) ** 2, axis=-1)
    np.testing.assert_allclose(D, lin.pairwise_distances(X[:40], squared=True), atol=1e-8)


MAKERS = {
    "PSDBoostMetric.C": lambda v: PSDBoostMetric(C=v),
    "RelativeComparisonMetric.C": lambda v: RelativeComparisonMetric(C=v),
    "ITMLSupervised.gamma": lambda v: ITMLSupervised(gamma=v),
    "ITML.gamma": lambda v: ITML(gamma=v),
    "LowRankITML.gamma": lambda v: LowRankITML(gamma=v),
    "ITMLSupervised.tol": lambda v: ITMLSupervised(tol=v),
    "TransformationSVM.C": lambda v: TransformationSVM(C=v),
}
# gamma = inf is valid (hard constraints)
BAD = [(k, v) for k in MAKERS for v in (np.nan, np.inf, -1.0)
       if not (k.endswith("gamma") and v == np.inf)]


@pytest.mark.parametrize("which,bad", BAD)
def test_bad_numbers_named_before_any_solve(iris, monkeypatch, which, bad):
    """Issue 23: C=nan looped in HiGHS, C=inf returned a "fitted" model. Every learner names the
    parameter (InvalidParameterError, a ValueError) before any solver is called."""
    import specopt.learn.itml as itml_mod
    import specopt.learn.psdboost as psd_mod
    import specopt.learn.relative_comparison as rc_mod
    import specopt.learn.transformation as tr_mod
    from specopt.learn._base import InvalidParameterError

    def no_solve(*a, **k):
        raise AssertionError("a solve started")

    for mod, name in ((psd_mod, "solve"), (rc_mod, "dual_cd"), (itml_mod, "itml_linear"),
                      (itml_mod, "itml_lowrank"), (tr_mod, "make_tasks")):
        monkeypatch.setattr(mod, name, no_solve)
    X, y = iris
    if which.startswith("TransformationSVM"):
        X, y = X[y < 2], y[y < 2]  # binary
    param = which.split(".")[1]
    with pytest.raises(InvalidParameterError, match=rf"The '{param}' parameter of"):
        MAKERS[which](bad).fit(X, y)


def test_sparse_x_gets_a_clear_message_where_dense_is_needed(iris):
    """Issue 23/24: sparse input is named (scikit-learn's message) before any solve; the
    embeddings densify instead (tests/learn/test_embedding.py)."""
    import scipy.sparse as sp

    from specopt.learn import NuclearNormCompletion

    X, y = iris
    Xs = sp.csr_matrix(X)
    for est in (ITMLSupervised(), PSDBoostMetric(), RelativeComparisonMetric(), LowRankITML(),
                KernelITML()):
        with pytest.raises(TypeError, match="Sparse data was passed"):
            est.fit(Xs, y)
    with pytest.raises(TypeError, match="Sparse data was passed"):
        NuclearNormCompletion().fit(Xs)  # implicit zeros would read as observations


def test_itml_index_pairs_with_a_preprocessor(iris):
    X, y = iris
    P = np.array([[0, 1], [0, 60], [50, 51], [50, 120]])
    s = np.array([1, -1, 1, -1])
    a = ITML(preprocessor=X, tol=1e-9).fit(P, s)
    b = ITML(tol=1e-9).fit(np.stack([X[P[:, 0]], X[P[:, 1]]], axis=1), s)
    np.testing.assert_allclose(a.get_mahalanobis_matrix(), b.get_mahalanobis_matrix())
    with pytest.raises(ValueError, match=r"pair indices must lie in \[0, 150\)"):
        ITML(preprocessor=X).fit(np.array([[0, 150]]), np.array([1]))
