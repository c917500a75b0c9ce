"""The exact-line-search L-BFGS of the factored method (specopt.solvers.sdp.lbfgs): the step is
the global minimizer of the augmented Lagrangian along the direction, the inner solve reaches
scipy's minimum, and the factored method with it agrees with Clarabel."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specopt.solvers.sdp import SparseRows, SymOp, solve_low_rank_sdp
from specopt.solvers.sdp._data import Scaled
from specopt.solvers.sdp.bm import al_value_grad
from specopt.solvers.sdp.lbfgs import (
    _best_step,
    _line_poly,
    _steihaug,
    al_hessp,
    lbfgs_exact,
    newton_exact,
)


def _problem(n: int, m: int, seed: int, trace: float | None = None) -> Scaled:
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(m), 2)
    ii, jj = rng.integers(0, n, 2 * m), rng.integers(0, n, 2 * m)
    A = SparseRows(rows, ii, jj, rng.standard_normal(2 * m), m, n)
    G = rng.standard_normal((n, n))
    # indefinite C only with a trace bound (else the Lagrangian is unbounded below)
    C = SymOp(n, dense=(G + G.T) / 2 if trace is not None else G @ G.T / n)
    b = rng.standard_normal(m)
    return Scaled(C, A, b, trace, None, False, 1.0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 9), st.integers(1, 8), st.integers(0, 10_000),
       st.floats(1e-2, 1e4), st.booleans())
def test_step_is_the_global_minimizer_along_the_line(n, m, seed, sigma, with_trace):
    P = _problem(n, m, seed, trace=float(n) if with_trace else None)
    rng = np.random.default_rng(seed + 1)
    Y = rng.standard_normal((n, 3))
    D = rng.standard_normal((n, 3))
    y = rng.standard_normal(m)
    mu = 0.5 if with_trace else 0.0
    poly, _, _ = _line_poly(P, Y, D, P.residual(Y), P.C.matmat(Y), P.C.matmat(D), y, sigma)
    tr = (float(np.sum(Y * Y)), 2.0 * float(np.sum(Y * D)), float(np.sum(D * D))) \
        if with_trace else None
    tau = _best_step(poly, tr, mu, sigma, P.t)

    def L(t: float) -> float:
        return al_value_grad(np.ascontiguousarray(Y + t * D), P, y, sigma, mu)[0]

    grid = np.linspace(0.0, 4.0 * max(tau, 1.0), 4001)
    vals = np.array([L(t) for t in grid])
    scale = 1e-9 * (1.0 + np.abs(vals).max())
    assert L(tau) <= vals.min() + scale
    assert tau >= 0.0


@pytest.mark.parametrize("trace", [None, 6.0])
@pytest.mark.parametrize("solver", ["lbfgs", "newton"])
def test_inner_solve_reaches_scipys_minimum(trace, solver):
    import scipy.optimize as so

    P = _problem(12, 10, 3, trace=trace)
    rng = np.random.default_rng(0)
    Y0 = rng.standard_normal((12, 4))
    y = rng.standard_normal(10)
    sigma, mu = 10.0, 0.3 if trace else 0.0
    if solver == "lbfgs":
        out = lbfgs_exact(P, Y0, y, sigma, mu, gtol=1e-9, max_iters=5000)
    else:
        out = newton_exact(P, Y0, y, sigma, mu, gtol=1e-10, max_iters=500)
    assert out.converged

    def fun(x: np.ndarray):
        v, g, _, _ = al_value_grad(np.ascontiguousarray(x.reshape(12, 4)), P, y, sigma, mu)
        return v, g.ravel()

    ref = so.minimize(fun, Y0.ravel(), jac=True, method="L-BFGS-B",
                      options={"maxiter": 20000, "gtol": 1e-11, "ftol": 1e-16})
    v = fun(out.Y.ravel())[0]
    # a nonconvex function: both end at stationary points; from the same start on this instance
    # the same value (and never a worse one by more than rounding)
    assert v <= ref.fun + 1e-7 * (1 + abs(ref.fun))
    assert np.abs(fun(out.Y.ravel())[1]).max() <= 1e-9


def test_stops_at_the_time_limit_and_iteration_cap():
    P = _problem(10, 8, 1)
    Y0 = np.random.default_rng(1).standard_normal((10, 3))
    calls = []

    def out_of_time() -> bool:
        calls.append(1)
        return len(calls) > 3

    out = lbfgs_exact(P, Y0, np.zeros(8), 100.0, 0.0, gtol=0.0, max_iters=1000,
                      out_of_time=out_of_time)
    assert out.nit == 3 and not out.converged
    out = lbfgs_exact(P, Y0, np.zeros(8), 100.0, 0.0, gtol=0.0, max_iters=7)
    assert out.nit == 7 and not out.converged


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_factored_method_with_exact_steps_agrees_with_clarabel(seed):
    rng = np.random.default_rng(seed)
    n = 25
    W = np.triu(rng.random((n, n)) < 0.3, 1) * rng.uniform(0.5, 2.0, (n, n))
    W = W + W.T
    # a theta-like block: fixed trace plus zero entries (rows the sphere method does not take)
    ii, jj = np.nonzero(np.triu(W, 1))
    A = SparseRows(np.r_[np.zeros(n, dtype=np.int64), 1 + np.arange(ii.size)],
                   np.r_[np.arange(n), ii], np.r_[np.arange(n), jj],
                   np.r_[np.ones(n), 2 * np.ones(ii.size)], 1 + ii.size, n)
    b = np.r_[1.0, np.zeros(ii.size)]
    res = solve_low_rank_sdp(np.ones((n, n)), A, b, sense="max", method="bm",
                             inner="lbfgs-exact", tol=1e-6, time_limit=60)
    K = cp.Variable((n, n), symmetric=True)
    ref = cp.Problem(cp.Maximize(cp.sum(K)), [K >> 0, cp.trace(K) == 1, K[ii, jj] == 0])
    ref.solve(solver=cp.CLARABEL)
    assert res.objective == pytest.approx(ref.value, rel=1e-5)
    if res.status == "optimal":  # (no trace bound proven: the bound only when S is PSD)
        assert res.bound is None or res.bound >= ref.value - 1e-6 * abs(ref.value)
        assert res.gap <= 1e-6 and math.isfinite(res.lambda_min)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 9), st.integers(1, 8), st.integers(0, 10_000), st.floats(1e-2, 1e4),
       st.booleans())
def test_hessian_product_matches_finite_differences(n, m, seed, sigma, with_trace):
    """``al_hessp`` is the derivative of the gradient (central differences, both sides of the
    trace bound's kink avoided by the margin)."""
    P = _problem(n, m, seed, trace=float(n) if with_trace else None)
    rng = np.random.default_rng(seed + 2)
    Y, D = rng.standard_normal((n, 2)), rng.standard_normal((n, 2))
    y, mu = rng.standard_normal(m), 0.5 if with_trace else 0.0
    r = P.residual(Y)
    mut = max(0.0, mu + sigma * (float(np.sum(Y * Y)) - P.t)) if with_trace else 0.0
    if with_trace and abs(mu + sigma * (float(np.sum(Y * Y)) - P.t)) < 1e-3 * sigma:
        return  # at the kink of max(0, .): no Hessian
    H = al_hessp(Y, D, P, y - sigma * r, sigma, mut)
    h = 1e-6
    gp = al_value_grad(np.ascontiguousarray(Y + h * D), P, y, sigma, mu)[1]
    gm = al_value_grad(np.ascontiguousarray(Y - h * D), P, y, sigma, mu)[1]
    fd = (gp - gm) / (2 * h)
    assert np.abs(H - fd).max() <= 1e-5 * (1.0 + np.abs(fd).max())


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(0, 10_000), st.floats(-1.0, 1.0))
def test_truncated_cg_returns_a_descent_direction(n, seed, shift):
    """On any symmetric (also indefinite) matrix the Steihaug direction has ``<D, G> < 0``; on a
    positive definite one with enough products it solves ``H D = -G``."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((n, n))
    H = B @ B.T / n + shift * np.eye(n)
    G = rng.standard_normal((n, 1))
    D = _steihaug(lambda X: H @ X, G, 1e-12, 3 * n)
    assert float(np.sum(D * G)) < 0
    if np.linalg.eigvalsh(H)[0] > 1e-3:
        assert np.allclose(H @ D, -G, atol=1e-6 * (1 + np.abs(G).max()) * np.linalg.cond(H))
