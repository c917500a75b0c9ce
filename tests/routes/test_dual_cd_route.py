"""Route "dual_cd" against Clarabel on the same problems (hinge and explicit-slack forms)."""

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specopt
from specopt.reductions import get_route
from specopt.reductions.base import RouteMismatch

CLARABEL_TIGHT = dict(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def _data(seed, n, m, shift):
    rng = np.random.default_rng(seed)
    Z = rng.normal(shift, 1.0, (n, m))
    A = rng.normal(size=(m, m))
    L = (A.T @ A) * (A.T @ A) + 0.1 * np.eye(m)
    return L, Z


def _hinge(L, Z, C, nonneg):
    w = cp.Variable(Z.shape[1])
    obj = 0.5 * cp.quad_form(w, L) + C * cp.sum(cp.pos(1 - Z @ w))
    return cp.Problem(cp.Minimize(obj), [w >= 0] if nonneg else []), w, None


def _slack(L, Z, C, nonneg):
    w, xi = cp.Variable(Z.shape[1]), cp.Variable(Z.shape[0])
    cons = [Z @ w >= 1 - xi, xi >= 0] + ([w >= 0] if nonneg else [])
    return cp.Problem(cp.Minimize(0.5 * cp.quad_form(w, L) + C * cp.sum(xi)), cons), w, xi


def _solve_both(build, L, Z, C, nonneg):
    ref, w_ref, xi_ref = build(L, Z, C, nonneg)
    ref.solve(**CLARABEL_TIGHT)
    prob, w, xi = build(L, Z, C, nonneg)
    specopt.solve(prob, route="dual_cd", tol=1e-11, max_passes=50_000)
    return ref, w_ref, xi_ref, prob, w, xi


@settings(max_examples=10, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    nonneg=st.booleans(),
    form=st.sampled_from(["hinge", "slack"]),
    # shift > 0 and small C: many constraints inactive; shift < 0 / large C: many active
    shift=st.sampled_from([-0.3, 0.2, 1.0]),
    C=st.sampled_from([0.1, 1.0, 10.0]),
)
def test_route_matches_clarabel(seed, nonneg, form, shift, C):
    build = _hinge if form == "hinge" else _slack
    L, Z = _data(seed, 40, 5, shift)
    ref, w_ref, xi_ref, prob, w, xi = _solve_both(build, L, Z, C, nonneg)
    assert prob.status == cp.OPTIMAL
    assert abs(prob.value - ref.value) <= 1e-6 * max(1.0, abs(ref.value))
    assert np.max(np.abs(w.value - w_ref.value)) <= 1e-4 * max(1.0, np.abs(w_ref.value).max())
    cert = specopt.certificate(prob)
    assert cert.route == "dual_cd" and cert.gap <= 1e-9
    assert cert.bound <= prob.value + 1e-9 * max(1.0, prob.value)
    if xi is not None:
        np.testing.assert_allclose(xi.value, np.maximum(0, 1 - Z @ w.value), atol=1e-9)


@pytest.mark.parametrize("nonneg", [True, False])
def test_slack_form_duals_match_clarabel(nonneg):
    L, Z = _data(11, 60, 4, 0.3)
    ref, _, _, prob, _, _ = _solve_both(_slack, L, Z, 2.0, nonneg)
    for c_ref, c in zip(ref.constraints, prob.constraints, strict=True):
        np.testing.assert_allclose(c.dual_value, c_ref.dual_value, atol=2e-4)


def test_scaled_and_mixed_forms():
    """Margins 2 - Z w / weights on xi entries / nonneg attribute / sum_squares."""
    rng = np.random.default_rng(4)
    Z = rng.normal(0.2, 1.0, (30, 3))
    c = rng.uniform(0.5, 2.0, 30)
    w = cp.Variable(3, nonneg=True)
    xi = cp.Variable(15)
    obj = (0.5 * cp.sum_squares(w) + c[:15] @ cp.pos(2 - Z[:15] @ w) + 3.0 * cp.sum(xi) + 7.0)
    cons = [3 * (Z[15:] @ w) + 2 * xi >= 1.5, xi >= 0]
    ref = cp.Problem(cp.Minimize(obj), cons)
    ref.solve(**CLARABEL_TIGHT)
    ref_vals = (ref.value, w.value.copy(), xi.value.copy(), cons[0].dual_value.copy(),
                cons[1].dual_value.copy())
    prob = cp.Problem(cp.Minimize(obj), cons)
    specopt.solve(prob, route="dual_cd", tol=1e-11, max_passes=50_000)
    assert abs(prob.value - ref_vals[0]) <= 1e-6 * ref_vals[0]
    np.testing.assert_allclose(w.value, ref_vals[1], atol=1e-4)
    np.testing.assert_allclose(xi.value, ref_vals[2], atol=1e-4)
    np.testing.assert_allclose(cons[0].dual_value, ref_vals[3], atol=1e-4)
    np.testing.assert_allclose(cons[1].dual_value, ref_vals[4], atol=1e-4)


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda w, xi, Z, L: cp.Problem(
            cp.Maximize(cp.sum_squares(w) + cp.sum(cp.pos(1 - Z @ w)))), "negative weight"),
        (lambda w, xi, Z, L: cp.Problem(cp.Minimize(cp.sum(cp.pos(1 - Z @ w)))),
         "no quadratic term"),
        (lambda w, xi, Z, L: cp.Problem(cp.Minimize(cp.sum_squares(w) + cp.sum(w))),
         "linear in w"),
        (lambda w, xi, Z, L: cp.Problem(
            cp.Minimize(cp.sum_squares(w) + cp.sum(cp.pos(-1 - Z @ w)))), "a > 0"),
        (lambda w, xi, Z, L: cp.Problem(cp.Minimize(cp.sum_squares(w) + cp.sum(xi)),
                                        [Z @ w >= 1 - xi]), "xi >= 0"),
        (lambda w, xi, Z, L: cp.Problem(cp.Minimize(cp.sum_squares(w) + cp.sum(xi)),
                                        [Z @ w >= 1 - xi, xi >= 0, w <= 1]),
         "is not w\\^T z >= 1 - xi"),
        (lambda w, xi, Z, L: cp.Problem(cp.Minimize(cp.sum_squares(w) - cp.sum(xi)),
                                        [Z @ w >= 1 - xi, xi >= 0]), "must be > 0"),
        (lambda w, xi, Z, L: cp.Problem(
            cp.Minimize(cp.sum_squares(w) + cp.sum(cp.pos(1 - Z @ w))), [w == 1]),
         "not an inequality"),
        (lambda w, xi, Z, L: cp.Problem(
            cp.Minimize(0.5 * cp.quad_form(w, L) + cp.sum(cp.pos(1 - Z @ w)))),
         "not positive definite"),
    ],
)
def test_explains_why_not(make, reason):
    w, xi = cp.Variable(3), cp.Variable(4)
    Z = np.ones((4, 3))
    L = np.diag([1.0, 1.0, 0.0])
    L_psd = cp.psd_wrap(L)
    prob = make(w, xi, Z, L_psd)
    match = get_route("dual_cd").recognize(prob)
    assert not match.ok
    assert __import__("re").search(reason, match.reason), match.reason
    with pytest.raises(RouteMismatch):
        get_route("dual_cd").solve(prob, match)


def test_failed_solve_keeps_user_values():
    L, Z = _data(1, 20, 3, 0.3)
    prob, w, _ = _hinge(L, Z, 1.0, True)
    w.value = np.full(3, 7.0)
    with pytest.raises(ValueError, match="unknown option"):
        specopt.solve(prob, route="dual_cd", bogus=1)
    np.testing.assert_array_equal(w.value, 7.0)


def test_pays_off_threshold():
    route = get_route("dual_cd")
    small = _hinge(*_data(0, 20, 3, 0.3), 1.0, True)[0]
    big = _hinge(*_data(0, 1500, 3, 0.3), 1.0, True)[0]
    assert not route.pays_off(small, route.recognize(small))[0]
    assert route.pays_off(big, route.recognize(big))[0]


def test_fast_hinge_reader_agrees_with_cvxpy_coefficients():
    from specopt._cvxpy_compat import affine_coefficients
    from specopt.reductions.dual_cd import _affine_in_w

    rng = np.random.default_rng(0)
    Z, c = rng.normal(size=(6, 3)), np.arange(1.0, 7.0)
    w = cp.Variable(3)
    exprs = [1 - Z @ w, 2 - 3 * (Z @ w), -(Z @ w) + np.arange(6.0), 0.5 * (1 - Z @ w),
             (1 - Z @ w) * 2, cp.multiply(c, 1 - Z @ w)]
    for e in exprs:
        A, b = _affine_in_w(e, w)
        co, off = affine_coefficients(e, [w])
        np.testing.assert_allclose(A, co[w.id].toarray())
        np.testing.assert_allclose(b, off)
    assert _affine_in_w(1 - w[0] * np.ones(6), w) is None  # unknown pattern: general reader


def test_nan_hinge_weight_is_named():
    """A NaN hinge weight is named (it used to drop the row, or report "Z must be non-empty")."""
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((20, 3))
    w = cp.Variable(3)
    wt = np.ones(20)
    wt[3] = np.nan
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + wt @ cp.pos(1 - Z @ w)))
    with pytest.raises(ValueError, match="NaN or infinite weights"):
        specopt.solve(prob, route="dual_cd")
    assert w.value is None
