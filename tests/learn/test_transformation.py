"""RampFeatures, TransformationSVM and MultitaskTransformationSVM."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import nnls
from sklearn.base import clone
from sklearn.isotonic import IsotonicRegression

from specopt.learn.transformation import (
    MultitaskTransformationSVM,
    RampFeatures,
    TransformationSVM,
)


def synthetic(n, D=4, seed=0, transform=np.log, plane=0):
    """Points off a linear boundary in [0,1]^D, labels by side, inputs monotonically distorted."""
    rng = np.random.default_rng(seed)
    X0 = rng.uniform(size=(6 * n, D))
    w = np.random.default_rng(1000 + plane).normal(size=D)
    s = (X0 - 0.5) @ w
    keep = np.abs(s) > 0.05 * np.linalg.norm(w)
    X0, s = X0[keep][:n], s[keep][:n]
    return transform(X0 + 0.01), np.where(s > 0, "pos", "neg")


def test_ramp_features_shape_range_clipping_and_monotone():
    X, _ = synthetic(50)
    rf = RampFeatures(n_ramps=6).fit(X)
    T = rf.transform(X)
    assert T.shape == (50, 6 * 4) and T.min() >= 0 and T.max() <= 1
    # test data outside the training range is clipped to it
    lo, hi = X.min(), X.max()
    Z = np.array([[lo - 5, hi + 5, lo, hi]])
    F = rf.transform_tensor(Z)
    assert np.allclose(F[0, :, 0], 0) and np.allclose(F[0, :, 1], 1)
    assert np.allclose(F[0, :, 0], F[0, :, 2]) and np.allclose(F[0, :, 1], F[0, :, 3])
    # each phi_j is non-decreasing in its input
    t = np.linspace(lo, hi, 200)
    assert np.all(np.diff(rf.ramp_values(t), axis=0) >= -1e-15)


def test_ramp_features_deduplicate_knots_on_sparse_data():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(40, 5)) * (rng.uniform(size=(40, 5)) < 0.2)  # mostly zeros
    rf = RampFeatures(n_ramps=10).fit(X)
    assert rf.n_ramps_ < 10 and np.all(np.diff(rf.knots_) > 0)
    assert np.isfinite(rf.transform(X)).all()


def test_per_feature_scaling_uses_cdf():
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.exponential(size=30), 100 * rng.uniform(size=30)])
    rf = RampFeatures(n_ramps=4, scaling="per_feature").fit(X)
    assert np.allclose(rf.knots_, np.linspace(0, 1, 5))
    F = rf.transform_tensor(X)
    # the largest training value of each feature maps to CDF 1: all ramps at 1
    for d in range(2):
        assert np.allclose(F[np.argmax(X[:, d]), :, d], 1.0)


def test_isotonic_pav_equals_nnls_over_ramps():
    """Knots at every data point: ramps + free intercept span all monotone fits."""
    rng = np.random.default_rng(2)
    x = np.sort(rng.uniform(size=25))
    t = np.sqrt(x) + 0.3 * rng.normal(size=25)
    rf = RampFeatures(n_ramps=24).fit(x[:, None])
    assert np.allclose(rf.knots_ * (x.max() - x.min()) + x.min(), x)
    Phi = rf.transform(x[:, None])
    # free intercept: centre, solve NNLS for m >= 0, intercept = mean residual
    m, _ = nnls(Phi - Phi.mean(0), t - t.mean())
    fit = Phi @ m + (t.mean() - Phi.mean(0) @ m)
    iso = IsotonicRegression().fit_transform(x, t)
    assert np.max(np.abs(fit - iso)) <= 1e-8


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_nonnegative_mixture_of_ramps_is_monotone(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(30, 3))
    rf = RampFeatures(n_ramps=int(rng.integers(2, 12))).fit(X)
    m = rng.uniform(size=rf.n_ramps_) * (rng.uniform(size=rf.n_ramps_) < 0.7)
    t = np.linspace(X.min() - 1, X.max() + 1, 300)
    assert np.all(np.diff(rf.ramp_values(t) @ m) >= -1e-12)


@pytest.fixture(scope="module")
def data():
    Xtr, ytr = synthetic(120, seed=3)
    Xte, yte = synthetic(200, seed=4)
    return Xtr, ytr, Xte, yte


@pytest.mark.parametrize("bias", [True, False])
def test_matrix_model_solvers_agree(data, bias):
    Xtr, ytr, Xte, _ = data
    fits = {s: TransformationSVM(n_ramps=5, solver=s, bias=bias, tol=1e-5).fit(Xtr, ytr)
            for s in ("conic", "matrix_generation", "extragradient")}
    ref = fits["conic"].decision_function(Xte)
    for s, est in fits.items():
        assert est.gap_ <= 1e-5, s
        assert np.isclose(np.trace(est.M_), 1.0, atol=1e-5), s
        # the optimal alpha is unique only up to the loss, so compare predictions loosely
        agree = np.mean(np.sign(est.decision_function(Xte)) == np.sign(ref))
        assert agree >= 0.97, s


def test_transformation_svm_learns_the_inverse_distortion(data):
    Xtr, ytr, Xte, yte = data
    est = TransformationSVM(n_ramps=8).fit(Xtr, ytr)
    assert set(est.predict(Xte)) <= set(est.classes_)
    assert est.score(Xte, yte) >= 0.9
    t = np.linspace(Xtr.min(), Xtr.max(), 50)
    g = est.transformation_(t)
    assert g.shape == (50,) and np.all(np.isfinite(g))


def test_mixture_and_kernels_models(data):
    Xtr, ytr, Xte, yte = data
    mix = TransformationSVM(n_ramps=6, model="mixture").fit(Xtr, ytr)
    assert mix.gap_ is None and np.all(mix.m_ >= 0) and mix.m_.sum() <= 1 + 1e-9
    assert np.all(np.diff(mix.objective_history_) <= 0)
    t = np.linspace(Xtr.min(), Xtr.max(), 100)
    assert np.all(np.diff(mix.transformation_(t)) >= -1e-12)
    mkl = TransformationSVM(n_ramps=6, model="kernels").fit(Xtr, ytr)
    assert np.allclose(mkl.M_, np.diag(np.diag(mkl.M_))) and mkl.gap_ <= 1e-4
    assert mix.score(Xte, yte) >= 0.85 and mkl.score(Xte, yte) >= 0.85


def test_errors_and_sklearn_conventions(data):
    Xtr, ytr, _, _ = data
    with pytest.raises(ValueError, match="binary"):
        TransformationSVM().fit(Xtr[:9], np.arange(9) % 3)
    with pytest.raises(ValueError, match="The 'model' parameter of TransformationSVM must be"):
        TransformationSVM(model="tree").fit(Xtr, ytr)
    with pytest.raises(ValueError, match="The 'solver' parameter of TransformationSVM must be"):
        TransformationSVM(solver="newton").fit(Xtr, ytr)
    with pytest.raises(ValueError, match="greedily"):
        TransformationSVM(model="mixture", solver="conic").fit(Xtr, ytr)
    with pytest.raises(ValueError, match="n_ramps"):
        RampFeatures(n_ramps=0).fit(Xtr)
    est = TransformationSVM(n_ramps=3, C=0.5)
    assert clone(est).get_params()["C"] == 0.5
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        est.predict(Xtr)


def test_multitask_shares_the_transformation():
    X1, y1 = synthetic(60, seed=5)
    X2, y2 = synthetic(60, seed=6, plane=1)
    mt = MultitaskTransformationSVM(n_ramps=5, tol=1e-5).fit([X1, X2], [y1, y2])
    assert mt.gap_ <= 1e-5 and np.isclose(np.trace(mt.M_), 1.0, atol=1e-5)
    eg = MultitaskTransformationSVM(n_ramps=5, solver="extragradient", tol=1e-5).fit(
        [X1, X2], [y1, y2])
    assert np.mean(eg.predict(X2, task=1) == mt.predict(X2, task=1)) >= 0.97
    assert mt.score(X1, y1, task=0) >= 0.9
    with pytest.raises(ValueError, match="task must be in"):
        mt.predict(X1, task=2)
    with pytest.raises(ValueError, match="same number of features"):
        MultitaskTransformationSVM().fit([X1, X2[:, :2]], [y1, y2])
    # one task given as arrays: a plain binary classifier (classes_ an array)
    one = MultitaskTransformationSVM(n_ramps=5, tol=1e-5).fit(X1, y1)
    np.testing.assert_array_equal(one.classes_, np.unique(y1))
    np.testing.assert_allclose(one.decision_function(X1),
                               MultitaskTransformationSVM(n_ramps=5, tol=1e-5).fit(
                                   [X1], [y1]).decision_function(X1, task=0))
    for bad in (np.nan, np.inf, -1.0):
        with pytest.raises(ValueError, match="The 'C' parameter"):
            MultitaskTransformationSVM(C=bad).fit(X1, y1)
