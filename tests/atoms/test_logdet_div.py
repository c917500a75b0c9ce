"""logdet_div and burg_div: values, gradients, invariances, solved problems, errors."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specopt
from tests._helpers import random_spd, random_symmetric


def dld(X, X0):
    n = X.shape[0]
    M = X @ np.linalg.inv(X0)
    return float(np.trace(M) - np.linalg.slogdet(M)[1] - n)


def value_at(X, X0):
    return specopt.logdet_div(cp.Constant(X), X0).value


def test_value_matches_slogdet(rng):
    for n in (1, 3, 6):
        X, X0 = random_spd(rng, n), random_spd(rng, n, cond=50)
        assert np.isclose(value_at(X, X0), dld(X, X0))


def test_zero_at_prior_and_positive_elsewhere(rng):
    X0 = random_spd(rng, 4)
    assert abs(value_at(X0, X0)) < 1e-12
    assert value_at(X0 + 0.1 * np.eye(4), X0) > 0


def test_scale_and_congruence_invariance(rng):
    X, X0 = random_spd(rng, 5), random_spd(rng, 5)
    A = rng.standard_normal((5, 5)) + 3 * np.eye(5)
    base = value_at(X, X0)
    assert np.isclose(value_at(7.0 * X, 7.0 * X0), base)
    assert np.isclose(value_at(A.T @ X @ A, A.T @ X0 @ A), base)


def test_infinite_outside_domain(rng):
    X0 = random_spd(rng, 3)
    assert value_at(-np.eye(3), X0) == np.inf
    assert value_at(np.diag([1.0, 1.0, 0.0]), X0) == np.inf


def test_gradient_matches_finite_differences(rng):
    n = 4
    X, X0 = random_spd(rng, n), random_spd(rng, n)
    V = cp.Variable((n, n), symmetric=True)
    V.value = X
    G = specopt.logdet_div(V, X0).grad[V].toarray().reshape((n, n), order="F")
    assert np.allclose(G, np.linalg.inv(X0) - np.linalg.inv(X))
    E = random_symmetric(rng, n)
    h = 1e-6
    fd = (dld(X + h * E, X0) - dld(X - h * E, X0)) / (2 * h)
    assert np.isclose(np.sum(G * E), fd, rtol=1e-5)


def test_curvature_and_sign():
    W = cp.Variable((3, 3), symmetric=True)
    g = specopt.logdet_div(W, np.eye(3))
    assert g.is_convex() and not g.is_concave() and g.is_nonneg()


@pytest.mark.parametrize("solver", ["CLARABEL", "SCS"])
def test_unconstrained_minimum_is_the_prior(rng, solver):
    X0 = random_spd(rng, 4)
    W = cp.Variable((4, 4), symmetric=True)
    prob = cp.Problem(cp.Minimize(specopt.logdet_div(W, X0)))
    opts = {"eps_abs": 1e-9, "eps_rel": 1e-9} if solver == "SCS" else {}
    prob.solve(solver=solver, **opts)
    assert prob.value == pytest.approx(0.0, abs=1e-5)
    assert np.allclose(W.value, X0, atol=1e-3)


def test_one_constraint_closed_form(rng):
    # min D(W, I) s.t. v^T W v = b  ->  W = I + beta v v^T, beta = (b - p) / p^2, p = |v|^2
    n = 4
    v = rng.standard_normal(n)
    p, b = v @ v, 0.5 * (v @ v)
    W = cp.Variable((n, n), symmetric=True)
    prob = cp.Problem(cp.Minimize(specopt.logdet_div(W, np.eye(n))),
                      [specopt.row_quad_forms(v[None, :], W) == b])
    prob.solve(solver="CLARABEL")
    W_star = np.eye(n) + (b - p) / p**2 * np.outer(v, v)
    # the exponential-cone form is accurate to ~1e-4 in W, the value to ~1e-7
    assert np.allclose(W.value, W_star, atol=5e-4)
    assert np.isclose(prob.value, dld(W_star, np.eye(n)), atol=1e-6)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 4))
def test_congruence_invariance_of_solved_problems(seed, n):
    rng = np.random.default_rng(seed)
    X0 = random_spd(rng, n)
    A = random_symmetric(rng, n)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    T = Q * rng.uniform(0.5, 2.0, n)  # condition <= 4: the check is about invariance, not T
    b = 0.5 * np.sum(A * X0)
    W = cp.Variable((n, n), symmetric=True)
    p1 = cp.Problem(cp.Minimize(specopt.logdet_div(W, X0)), [cp.sum(cp.multiply(A, W)) == b])
    Ti = np.linalg.inv(T)
    p2 = cp.Problem(cp.Minimize(specopt.logdet_div(W, T.T @ X0 @ T)),
                    [cp.sum(cp.multiply(Ti @ A @ Ti.T, W)) == b])
    v1 = p1.solve(solver="CLARABEL")
    v2 = p2.solve(solver="CLARABEL")
    # exponential-cone solves are accurate to ~1e-6 absolute (300 seeded instances: 0 misses)
    assert np.isclose(v1, v2, rtol=1e-5, atol=5e-6)


@pytest.mark.parametrize(
    ("X0", "message"),
    [
        (np.array([[1.0, 2.0], [0.0, 1.0]]), "symmetric"),
        (np.array([[1.0, 0.0], [0.0, -1.0]]), "indefinite"),
        (np.array([[1.0, 1.0], [1.0, 1.0]]), "singular"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), "NaN or inf"),
        (np.ones((2, 3)), "square"),
        (np.ones(2), "matrix"),
    ],
)
def test_bad_prior_is_a_clear_error(X0, message):
    with pytest.raises(ValueError, match=message):
        specopt.logdet_div(cp.Variable((2, 2), symmetric=True), X0)


def test_shape_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="shape"):
        specopt.logdet_div(cp.Variable((3, 3), symmetric=True), np.eye(2))


def test_burg_div_value_gradient_and_errors(rng):
    x0 = rng.uniform(0.5, 2.0, 5)
    x = rng.uniform(0.5, 2.0, 5)
    v = cp.Variable(5)
    v.value = x
    g = specopt.burg_div(v, x0)
    r = x / x0
    assert np.isclose(g.value, np.sum(r - np.log(r) - 1))
    assert np.allclose(g.grad[v].toarray().ravel(), 1 / x0 - 1 / x)
    assert g.is_convex() and g.is_nonneg()
    assert specopt.burg_div(cp.Constant(x0), x0).value == pytest.approx(0.0)
    with pytest.raises(ValueError, match="strictly positive"):
        specopt.burg_div(v, -x0)
    with pytest.raises(ValueError, match="shape"):
        specopt.burg_div(v, np.ones(3))
    prob = cp.Problem(cp.Minimize(specopt.burg_div(v, x0)), [cp.sum(v) == 2 * x0.sum()])
    prob.solve(solver="CLARABEL")
    # stationarity 1/x0 - 1/x = mu: x_i = 1 / (1/x0_i - mu), with mu fixed by the constraint
    from scipy.optimize import brentq

    mu = brentq(lambda t: np.sum(1 / (1 / x0 - t)) - 2 * x0.sum(), -1e3, 0.999 / x0.max())
    assert np.allclose(v.value, 1 / (1 / x0 - mu), rtol=1e-4)
