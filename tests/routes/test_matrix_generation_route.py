"""Route "matrix_generation" against the conic route (Clarabel and SCS) on the same problems."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import specopt
from specopt.reductions import RouteMismatch
from tests._helpers import psdboost_triplet_factors


def psdboost_problem(P, Q, C, factored=True, trace_le=False):
    D, m = P.shape[1], P.shape[0]
    X = cp.Variable((D, D), PSD=True)
    rho, xi = cp.Variable(), cp.Variable(m)
    if factored:
        margins = specopt.row_quad_forms(P, X) - specopt.row_quad_forms(Q, X)
    else:
        M = np.einsum("ri,rj->rij", P, P) - np.einsum("ri,rj->rij", Q, Q)
        margins = M.reshape(m, -1, order="F") @ cp.vec(X, order="F")
    tr = cp.trace(X) <= 1 if trace_le else cp.trace(X) == 1
    cons = [tr, margins >= rho - xi, xi >= 0]
    return cp.Problem(cp.Maximize(rho - C * cp.sum(xi)), cons), X


def _reference(prob, solver):
    kw = {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200000} if solver == "SCS" else {}
    specopt.solve(prob, route="conic", solver=solver, **kw)
    return prob.value, [np.array(c.dual_value, dtype=float) for c in prob.constraints]


def _check_spectraplex(X, t=1.0, eq=True):
    val = np.asarray(X.value)
    np.testing.assert_allclose(val, val.T, atol=1e-12)
    assert np.linalg.eigvalsh(val).min() >= -1e-8
    if eq:
        assert abs(np.trace(val) - t) <= 1e-8
    else:
        assert np.trace(val) <= t + 1e-8


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    D=st.integers(3, 9),
    S=st.integers(10, 60),
    Cm=st.sampled_from([1.05, 2.0, 5.0, 100.0]),  # C * |S| near 1: many slacks active
    seed=st.integers(0, 10_000),
    factored=st.booleans(),
)
def test_agrees_with_clarabel_on_random_psdboost(D, S, Cm, seed, factored):
    P, Q = psdboost_triplet_factors(D, S, seed)
    C = Cm / S
    prob, X = psdboost_problem(P, Q, C, factored=factored)
    ref, _ = _reference(prob, "CLARABEL")
    specopt.solve(prob, route="matrix_generation")
    assert abs(prob.value - ref) <= 1e-5 * max(1.0, abs(ref))
    _check_spectraplex(X)
    cert = specopt.certificate(prob)
    assert cert.route == "matrix_generation"
    assert prob.status == cp.OPTIMAL and cert.gap <= 1e-6
    assert cert.bound >= ref - 1e-6 * max(1.0, abs(ref))
    assert cert.max_violation <= 1e-7
    theta, U = cert.extra["theta"], cert.extra["U"]
    np.testing.assert_allclose((U * theta) @ U.T, X.value, atol=1e-10)


@pytest.mark.parametrize("master", ["psd", "lp"])
def test_agrees_with_scs_and_duals_match(master):
    P, Q = psdboost_triplet_factors(6, 40, 7)
    prob, X = psdboost_problem(P, Q, 0.3)
    ref_scs, _ = _reference(prob, "SCS")
    ref, duals = _reference(prob, "CLARABEL")
    assert abs(ref - ref_scs) <= 1e-5 * max(1, abs(ref))
    specopt.solve(prob, route="matrix_generation", master=master, tol=1e-8)
    assert abs(prob.value - ref_scs) <= 1e-5 * max(1.0, abs(ref))
    _check_spectraplex(X)
    # trace dual (mu) and the margin duals (w, on the capped simplex) agree with Clarabel's
    assert abs(float(prob.constraints[0].dual_value) - float(duals[0])) <= 1e-4
    w = np.asarray(prob.constraints[1].dual_value)
    assert abs(w.sum() - 1.0) <= 1e-7 and w.min() >= -1e-9 and w.max() <= 0.3 + 1e-7
    np.testing.assert_allclose(w, duals[1], atol=1e-3)


def test_general_form_minimize_dense_data_trace_inequality():
    rng = np.random.default_rng(5)
    n = 7
    A = rng.normal(size=(n, n))
    A = A + A.T
    B = rng.normal(size=(n, n))
    X = cp.Variable((n, n), symmetric=True)
    z = cp.Variable(2, nonneg=True)
    cons = [X >> 0, cp.trace(X) <= 2, cp.trace(B @ X) + z[0] >= 0.3, X[2, 2] - z[1] <= 0.1,
            X[3, 3] == 0.2]
    prob = cp.Problem(cp.Minimize(cp.trace(A @ X) + z[0] + 2 * z[1] + 1.5), cons)
    ref, duals = _reference(prob, "CLARABEL")
    specopt.solve(prob, route="matrix_generation")
    assert prob.status == cp.OPTIMAL
    assert abs(prob.value - ref) <= 1e-5 * max(1, abs(ref))
    _check_spectraplex(X, t=2.0, eq=False)
    for con, d in zip(cons, duals, strict=True):
        np.testing.assert_allclose(np.asarray(con.dual_value, dtype=float), d, atol=2e-3)


def test_explain_reasons_and_named_route_errors():
    P, Q = psdboost_triplet_factors(4, 12, 0)
    X = cp.Variable((4, 4), PSD=True)
    Y = cp.Variable((4, 4), PSD=True)
    rho, xi = cp.Variable(), cp.Variable(12, nonneg=True)
    margins = specopt.row_quad_forms(P, X) - specopt.row_quad_forms(Q, X)
    cases = {
        "second PSD variable": cp.Problem(
            cp.Maximize(rho - cp.sum(xi) - cp.trace(Y)),
            [cp.trace(X) == 1, margins >= rho - xi, cp.trace(Y) <= 1],
        ),
        "non-linear term": cp.Problem(
            cp.Maximize(rho - cp.sum(xi) - cp.norm(X, "fro")),
            [cp.trace(X) == 1, margins >= rho - xi],
        ),
        "no trace bound": cp.Problem(
            cp.Maximize(rho - cp.sum(xi)), [X[0, 0] <= 1, margins >= rho - xi]
        ),
    }
    for reason, prob in cases.items():
        text = str(specopt.explain(prob))
        line = next(ln for ln in text.splitlines() if "matrix_generation" in ln)
        assert "does not match" in line and reason in line, line
        with pytest.raises(RouteMismatch, match=reason):
            specopt.solve(prob, route="matrix_generation")
        assert X.value is None  # a failed solve leaves the model as it was


def test_unbounded_when_c_times_s_below_one():
    P, Q = psdboost_triplet_factors(4, 10, 2)
    prob, _ = psdboost_problem(P, Q, 0.05)  # C |S| = 0.5 < 1: rho -> infinity pays
    specopt.solve(prob, route="matrix_generation")
    assert prob.status == cp.UNBOUNDED


def test_auto_uses_conic_on_small_instances_and_bad_option_errors():
    P, Q = psdboost_triplet_factors(5, 20, 1)
    prob, _ = psdboost_problem(P, Q, 1.0)
    exp = specopt.explain(prob)
    assert exp.verdict("matrix_generation").matches
    assert exp.verdict("matrix_generation").pays_off is False
    assert exp.auto_route == "conic"
    with pytest.raises(ValueError, match="unknown option"):
        specopt.solve(prob, route="matrix_generation", bogus=1)


@pytest.mark.parametrize(
    ("D", "S", "picked"),
    [(24, 550, False), (50, 2000, False), (100, 550, False), (99, 2500, False),
     (100, 1999, False), (100, 2000, True), (224, 20000, True)],
)
def test_pays_off_thresholds_from_the_family_worst_case(D, S, picked):
    """auto picks the route only where it beat SCS on every measured family member: D=100 /
    |S|=2000 (worst 1.9x), not D=50/|S|=2000 (rank-21 members: 0.76x) nor D=24/|S|=550."""
    from specopt.reductions import matrix_generation as mg

    P, Q = np.ones((S, D)), np.zeros((S, D))  # recognition only: the data do not matter
    prob, _ = psdboost_problem(P, Q, 10.0 / S)
    verdict = specopt.explain(prob).verdict("matrix_generation")
    assert verdict.matches
    assert verdict.pays_off is picked
    assert (D >= mg.PAYS_OFF_MIN_N and S >= mg.PAYS_OFF_MIN_ROWS
            and S * D * D >= mg.PAYS_OFF_MIN_DATA) is picked


@pytest.mark.parametrize("m", [60, 6000])
@pytest.mark.parametrize("master", ["psd", "lp"])
def test_infeasible_detected_by_the_route_at_every_size(m, master, monkeypatch):
    """``X[0, 0] >= 1.5`` under ``trace(X) == 1``: infeasible whatever the rows; the route says
    so itself (phase 1, checked Farkas certificate), below and above the gate's probe size (the
    probe is switched off here), and writes no values."""
    from specopt import gate

    monkeypatch.setattr(gate, "feasibility_probe", lambda problem: None)
    rng = np.random.default_rng(m)
    D = 4
    P, Q = rng.standard_normal((m, D)), rng.standard_normal((m, D))
    prob, X = psdboost_problem(P, Q, 0.1)
    prob = cp.Problem(prob.objective, [*prob.constraints, X[0, 0] >= 1.5])
    specopt.solve(prob, route="matrix_generation", master=master)
    assert prob.status == cp.INFEASIBLE and X.value is None
    # the same rows with a satisfiable entry bound: optimal, as Clarabel says
    feas = cp.Problem(prob.objective, [*prob.constraints[:-1], X[0, 0] >= 0.5])
    specopt.solve(feas, route="matrix_generation", master=master)
    assert feas.status == cp.OPTIMAL and X.value[0, 0] >= 0.5 - 1e-7
    ref = feas.value
    feas.solve(solver="CLARABEL")
    assert ref == pytest.approx(feas.value, rel=1e-5, abs=1e-5)


def test_phase_one_certificate():
    """phase_one proves infeasibility with a multiplier vector checked on its own (a negative
    Lagrangian bound of ``max 0``), and proves nothing on feasible constraints."""
    from specopt.solvers.mg import DenseOperator, farkas_bound, phase_one

    rng = np.random.default_rng(3)
    n = 6
    E = np.zeros((n, n))
    E[0, 0] = 1.0
    B = rng.standard_normal((n, n))
    A = DenseOperator(np.stack([E.ravel(order="F"), (B + B.T).ravel(order="F")]), n)
    G = np.zeros((2, 0))
    inf = np.inf
    z = np.zeros(0)
    # X[0, 0] >= 1.5 with trace 1: infeasible; its certificate y = (-1, 0) gives 1 * 0 - 1.5 < 0
    lb, ub = np.array([1.5, -inf]), np.array([inf, 10.0])
    assert phase_one(A, G, lb, ub, z, z, 1.0, True)
    assert farkas_bound(A, np.array([-1.0, 0.0]), sp.csr_array(G), lb, ub, z, z, 1.0, True, True) \
        == pytest.approx(-0.5)
    # X[0, 0] >= 0.5: feasible
    assert not phase_one(A, G, np.array([0.5, -inf]), ub, z, z, 1.0, True)


def test_lp_master_artificials_keep_the_column_layout():
    """n > 50 (no coordinate columns to start with) and a row the first columns cannot meet: the
    LP master adds its elastic columns mid-run; the answer still agrees with Clarabel."""
    rng = np.random.default_rng(1)
    n = 52
    C = rng.standard_normal((n, n))
    X = cp.Variable((n, n), symmetric=True)
    prob = cp.Problem(cp.Maximize(cp.trace((C + C.T) @ X)),
                      [X >> 0, cp.trace(X) == 1, X[0, 0] >= 0.9])
    specopt.solve(prob, route="matrix_generation", master="lp")
    assert prob.status == cp.OPTIMAL
    val = prob.value
    prob.solve(solver="CLARABEL")
    assert val == pytest.approx(prob.value, rel=1e-5)


@pytest.mark.parametrize("C", [np.nan, np.inf])
def test_bad_data_named_before_any_solve(C):
    """NaN / inf in the data of a model handed to matrix generation (HiGHS loops on a NaN cost):
    a ValueError naming the variable; zero rows in row_quad_forms: a ValueError naming V."""
    P, Q = psdboost_triplet_factors(3, 12, 0)
    prob, X = psdboost_problem(P, Q, C)
    xi = prob.variables()[-1] if prob.variables()[-1].size > 1 else prob.variables()[1]
    with pytest.raises(ValueError, match=r"coefficients of variable .* contains (NaN|infinite)"):
        specopt.solve(prob, route="matrix_generation")
    assert X.value is None and xi.value is None
    with pytest.raises(ValueError, match="V has no rows"):
        specopt.row_quad_forms(np.zeros((0, 3)), X)


@pytest.mark.parametrize("case", ["nan_rhs", "inf_rhs", "nan_coef"])
def test_bad_constraint_data_named(case):
    """NaN on a right-hand side, +inf on the binding side of a >= row, NaN in a coefficient of
    an LP variable: a ValueError naming the constraint, before any solve."""
    P, Q = psdboost_triplet_factors(3, 12, 0)
    m, D = P.shape[0], P.shape[1]
    X = cp.Variable((D, D), PSD=True)
    rho, xi = cp.Variable(), cp.Variable(m)
    a, b = np.ones(m), np.zeros(m)
    if case == "nan_coef":
        a[3] = np.nan
    else:
        b[4] = np.nan if case == "nan_rhs" else np.inf
    margins = specopt.row_quad_forms(P, X) - specopt.row_quad_forms(Q, X)
    prob = cp.Problem(cp.Maximize(rho - 0.1 * cp.sum(xi)),
                      [cp.trace(X) == 1, margins >= cp.multiply(a, rho) - xi + b, xi >= 0])
    match = {"nan_rhs": "right-hand side of constraint .* NaN",
             "inf_rhs": "infinite on its binding side",
             "nan_coef": "coefficients of constraint .* NaN"}[case]
    with pytest.raises(ValueError, match=match):
        specopt.solve(prob, route="matrix_generation")
    assert X.value is None
