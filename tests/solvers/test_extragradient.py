"""Extragradient for the matrix-mixture saddle problem: projections, gradients, certificate."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from specopt.solvers.extragradient import (
    _grads,
    extragradient,
    project_box,
    project_capped_simplex,
    project_spectraplex,
)
from specopt.solvers.transformation import (
    gram,
    kernel_margins,
    lower_bound,
    make_tasks,
    upper_bound,
)
from tests._helpers import checked_reference

TIGHT = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12, "max_iter": 500}


def ramp_data(rng, N=30, D=3, J=4, shift=0.0):
    """Ramp features of random data with labels from a noisy linear rule."""
    X = rng.uniform(size=(N, D))
    y = np.sign(X @ rng.normal(size=D) - 0.3 * D * shift + 0.1 * rng.normal(size=N))
    y[y == 0] = 1.0
    y[0], y[1] = 1.0, -1.0
    z = np.quantile(X.ravel(), np.linspace(0, 1, J + 1))
    F = np.clip((X[:, None, :] - z[:-1, None]) / (z[1:, None] - z[:-1, None]), 0, 1)
    return F, y


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 6), st.floats(0.01, 20.0))
@example(117, 1, 0.0625)  # Clarabel 1.25e-7 from the exact clip(a, 0, 1) of a 1 x 1 matrix
def test_spectraplex_projection_matches_cvxpy(seed, J, scale):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(J, J)) * scale
    A = 0.5 * (A + A.T)
    X = cp.Variable((J, J), PSD=True)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(X - A)), [cp.trace(X) <= 1])
    checked_reference(prob, "CLARABEL", **TIGHT)
    P = project_spectraplex(A)
    # Clarabel's point is accurate to its tolerances only (1.25e-7 on a 1 x 1 instance); the
    # projection is feasible and at least as close to A as Clarabel's point
    assert np.max(np.abs(P - X.value)) <= 1e-6
    assert np.trace(P) <= 1 + 1e-12 and np.linalg.eigvalsh(P)[0] >= -1e-12
    assert np.sum((P - A) ** 2) <= np.sum((X.value - A) ** 2) + 1e-9 * (1 + np.sum(A * A))


def test_capped_simplex_inside_and_outside():
    v = np.array([0.2, -0.5, 0.3])
    assert np.allclose(project_capped_simplex(v), [0.2, 0.0, 0.3])
    p = project_capped_simplex(np.array([2.0, 1.0, -1.0]))
    assert np.isclose(p.sum(), 1.0) and np.allclose(p, [1.0, 0.0, 0.0])


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 90), st.booleans())
def test_box_projection_matches_cvxpy(seed, N, with_y):
    rng = np.random.default_rng(seed)
    v = 2 * rng.normal(size=N)
    C = 0.7
    y = np.where(rng.uniform(size=N) < 0.5, 1.0, -1.0)
    y[0], y[1] = 1.0, -1.0
    a = cp.Variable(N)
    cons = [a >= 0, a <= C] + ([y @ a == 0] if with_y else [])
    cp.Problem(cp.Minimize(cp.sum_squares(a - v)), cons).solve(solver="CLARABEL", **TIGHT)
    p = project_box(v, C, y if with_y else None)
    # p is feasible and at least as close to v as the interior-point answer, and the distance
    # between them is what Clarabel's own suboptimality allows: f = ||. - v||^2 is 2-strongly
    # convex, so the exact projection p* has ||a - p*||^2 <= f(a) - f(p*) for feasible a
    # (a fixed 1e-6 failed on seed 88, N 31: Clarabel 1.2e-6 off in one entry)
    assert np.all(p >= 0) and np.all(p <= C)
    f_p, f_cvx = np.sum((p - v) ** 2), np.sum((a.value - v) ** 2)
    assert f_p <= f_cvx + 1e-12 * max(1.0, f_cvx)
    assert np.linalg.norm(p - a.value) <= np.sqrt(max(f_cvx - f_p, 0.0)) + 1e-7
    if with_y:
        assert abs(y @ p) <= 1e-10


def test_box_projection_one_class_gives_zero():
    """With labels of one class only, y^T a = 0 in the box forces a = 0."""
    assert np.allclose(project_box(np.array([0.3, 2.0, -1.0, 0.5]), 1.0, np.ones(4)), 0.0)


def test_gradient_signs_match_finite_differences(rng):
    """dS/dM = -G(alpha), grad_alpha S = 2 - 2 Y K(M) Y alpha (the thesis has both signs wrong)."""
    F, y = ramp_data(rng, N=12, J=3)
    task = make_tasks(F, y, 1.0)[0]
    A = rng.normal(size=(3, 3))
    M = A @ A.T
    a = rng.uniform(size=12)

    def S(M, a):
        Bt = (task.F2.T @ (y * a)).reshape(3, -1)
        return 2 * a.sum() - np.sum(M * (Bt @ Bt.T))

    gM, ga, _ = _grads([task], M, [a])
    h = 1e-6
    E = np.zeros((3, 3))
    E[0, 1] = 1
    assert np.isclose((S(M + h * E, a) - S(M - h * E, a)) / (2 * h), gM[0, 1], rtol=1e-5)
    e = np.zeros(12)
    e[5] = 1
    assert np.isclose((S(M, a + h * e) - S(M, a - h * e)) / (2 * h), ga[0][5], rtol=1e-5)
    assert np.allclose(gM, -gram(task, a))


def test_bounds_sandwich_and_gap_closes(rng):
    F, y = ramp_data(rng, N=25, J=4)
    tasks = make_tasks(F, y, 1.0)
    res = extragradient(tasks, tol=1e-4, max_iter=20000)
    assert res.converged and res.gap <= 1e-4
    assert res.lower <= res.upper
    # the bounds are the solver-independent ones, recomputed here
    assert np.isclose(lower_bound(tasks, res.dual_alphas), res.lower)
    assert np.isclose(upper_bound(tasks, res.M, res.alphas, False)[0], res.upper)
    assert np.isclose(np.trace(res.M), 1.0, atol=1e-6)
    # best bounds are monotone along the run
    assert np.all(np.diff(res.history["upper"]) <= 1e-12)
    assert np.all(np.diff(res.history["lower"]) >= -1e-12)


def test_multitask_shares_M_and_sums_objectives(rng):
    F1, y1 = ramp_data(rng, N=20, J=3)
    F2, y2 = ramp_data(rng, N=15, J=3, shift=0.5)
    tasks = make_tasks([F1, F2], [y1, y2], [1.0, 0.5])
    res = extragradient(tasks, tol=1e-4, max_iter=20000)
    assert res.converged and len(res.alphas) == 2
    assert np.all(res.alphas[1] <= 0.5 + 1e-12)
    # a single shared M is no better than separate ones: p*(joint) >= p*(1) + p*(2)
    r1 = extragradient(tasks[:1], tol=1e-5, max_iter=40000)
    r2 = extragradient(tasks[1:], tol=1e-5, max_iter=40000)
    assert res.upper >= r1.lower + r2.lower - 1e-9


def test_bias_keeps_equality(rng):
    F, y = ramp_data(rng, N=20, J=3)
    tasks = make_tasks(F, y, 1.0)
    res = extragradient(tasks, bias=True, tol=1e-3, max_iter=20000)
    assert abs(y @ res.alphas[0]) <= 1e-9 and abs(y @ res.dual_alphas[0]) <= 1e-9
    Bt = (tasks[0].F2.T @ (y * res.alphas[0])).reshape(3, -1)
    f = kernel_margins(tasks[0], res.M, Bt)
    assert np.isfinite(f).all()
