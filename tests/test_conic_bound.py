"""The conic route's bound (specopt.conic_bound): recomputed from the backend's dual point,
never on the wrong side of the optimum; the gate (not the solver's flag) decides ``optimal``;
a later solve invalidates the certificate (issue 23)."""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specopt
from specopt import conic_bound
from specopt.solve import run_route
from tests._helpers import checked_reference


def _spectraplex(n: int, seed: int, maximize: bool, mu: float, cut: float):
    """``min/max <C, X> -/+ mu |X|_F^2`` over the spectraplex, one more linear row."""
    rng = np.random.default_rng(seed)
    C = rng.standard_normal((n, n))
    C = (C + C.T) / 2
    X = cp.Variable((n, n), symmetric=True)
    f = cp.trace(C @ X)
    cons = [X >> 0, cp.trace(X) == 1, X[0, 0] + X[1, 1] >= cut]
    if maximize:
        return cp.Problem(cp.Maximize(f - mu * cp.sum_squares(X)), cons)
    return cp.Problem(cp.Minimize(f + mu * cp.sum_squares(X)), cons)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(2, 6), seed=st.integers(0, 10**6), maximize=st.booleans(),
       mu=st.sampled_from([0.0, 0.1]), cut=st.sampled_from([0.0, 0.3]),
       eps=st.sampled_from([1e-2, 1e-3, 1e-4]))
def test_scs_bound_is_never_on_the_wrong_side_of_the_optimum(n, seed, maximize, mu, cut, eps):
    ref = checked_reference(_spectraplex(n, seed, maximize, mu, cut), "CLARABEL")
    prob = _spectraplex(n, seed, maximize, mu, cut)
    sense = -1.0 if maximize else 1.0
    tol = 1e-7 * max(1.0, abs(ref))  # the reference's own accuracy
    for retry in (False, True):
        _, cert = run_route(prob, route="conic", solver="SCS", retry=retry, eps_abs=eps,
                            eps_rel=eps)
        if cert.bound is not None:
            # a lower bound when minimizing, an upper bound when maximizing
            assert sense * (cert.bound - ref) <= tol
        else:
            assert cert.status != cp.OPTIMAL and "bound_unproven" in cert.extra
        if cert.status == cp.OPTIMAL:
            assert cert.bound is not None and cert.gap <= specopt.gate.GAP_TOL
            assert cert.checks["dual_feasibility"][0]


def test_solver_dual_objective_is_not_taken_as_a_bound():
    # SCS at eps 1e-2 ends with a dual objective on the wrong side of the optimum; the checked
    # bound is on the right side (or not reported) on every one of these instances
    wrong_solver_side = 0
    for seed in range(8):
        ref = checked_reference(_spectraplex(4, seed, True, 0.0, 0.3), "CLARABEL")
        prob = _spectraplex(4, seed, True, 0.0, 0.3)
        _, cert = run_route(prob, route="conic", solver="SCS", retry=False, eps_abs=1e-2,
                            eps_rel=1e-2)
        dobj = cert.extra.get("solver_dual_objective")
        if dobj is not None and -dobj < ref - 1e-9:  # SCS's canonical dual is of min -f
            wrong_solver_side += 1
        if cert.bound is not None:
            assert cert.bound >= ref - 1e-7 * max(1.0, abs(ref))
    assert wrong_solver_side >= 1  # the case the check exists for occurs among these


def test_unproven_bound_is_said_and_not_optimal(monkeypatch):
    prob = _spectraplex(4, 0, False, 0.0, 0.3)
    monkeypatch.setattr(conic_bound, "DUAL_RESIDUAL_TOL", 0.0)  # no dual point passes
    _, cert = run_route(prob, route="conic", solver="CLARABEL", retry=False)
    assert cert.bound is None and cert.gap is None
    assert "not dual feasible" in cert.extra["bound_unproven"]
    assert cert.status == cp.OPTIMAL_INACCURATE
    assert "dual_feasibility" in cert.gate_reasons[0]
    assert "unproven" in str(cert)


def test_inaccurate_flag_with_passing_checks_is_optimal():
    prob = _spectraplex(5, 1, False, 0.0, 0.0)
    # Clarabel held to unreachable tolerances stops "AlmostSolved" (CVXPY: optimal_inaccurate)
    _, cert = run_route(prob, route="conic", solver="CLARABEL", retry=False, tol_gap_abs=1e-16,
                        tol_gap_rel=1e-16, tol_feas=1e-16, max_iter=40)
    assert cert.extra["solver_status"] == "AlmostSolved"
    assert cert.status == cp.OPTIMAL
    assert "reported optimal_inaccurate; every gate check passes" in cert.gate_reasons[0]
    assert all(c[0] for c in cert.checks.values())
    # ... while one whose checks fail stays optimal_inaccurate (SCS stopped after 5 iterations)
    prob2 = _spectraplex(5, 1, False, 0.0, 0.0)
    _, cert2 = run_route(prob2, route="conic", solver="SCS", retry=False, max_iters=5)
    assert cert2.status == cp.OPTIMAL_INACCURATE
    assert not all(c[0] for c in cert2.checks.values())


def test_later_solve_invalidates_the_certificate():
    prob = _spectraplex(4, 2, False, 0.1, 0.0)
    specopt.solve(prob, route="conic", solver="CLARABEL")
    assert specopt.certificate(prob).status == cp.OPTIMAL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CVXPY: "Solution may be inaccurate"
        prob.solve(solver="SCS", max_iters=3)
    with pytest.raises(ValueError, match="last solve of this problem was not a specopt solve"):
        specopt.certificate(prob)
    prob.solve(method="specopt", route="conic", solver="CLARABEL")
    cert = specopt.certificate(prob)
    assert cert.objective == pytest.approx(prob.value, rel=1e-9)


# ---------------------------------------------------------------------------------------------
# the pieces
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("upper", [False, True])
def test_svec_projection_is_the_psd_projection(upper):
    rng = np.random.default_rng(0)
    n = 5
    M = rng.standard_normal((n, n))
    M = M + M.T
    i, j = conic_bound._svec_index(n, upper)
    v = np.where(i == j, M[i, j], math.sqrt(2.0) * M[i, j])
    p = conic_bound.project_svec_psd(v, n, upper)
    P = np.zeros((n, n))
    P[i, j] = np.where(i == j, p, p / math.sqrt(2.0))
    P[j, i] = P[i, j]
    w, U = np.linalg.eigh(M)
    np.testing.assert_allclose(P, (U * np.maximum(w, 0)) @ U.T, atol=1e-12)
    np.testing.assert_allclose(conic_bound.project_svec_psd(p, n, upper), p, atol=1e-12)
    # column-major: the first column's entries come first
    assert (i[0], j[0]) == (0, 0) and (j[1] == 0) != upper


@given(v=st.lists(st.floats(-10, 10), min_size=3, max_size=6))
def test_soc_projection_lands_in_the_cone_and_is_idempotent(v):
    p = conic_bound.project_soc(np.array(v))
    assert np.linalg.norm(p[1:]) <= p[0] + 1e-9
    np.testing.assert_allclose(conic_bound.project_soc(p), p, atol=1e-9)


@given(u=st.floats(-5, 5), v=st.floats(-5, 5), w=st.floats(-5, 5))
def test_exp_dual_correction_lands_in_the_dual_cone(u, v, w):
    cu, cv, cw = conic_bound.correct_exp_dual(np.array([u, v, w]))
    if cu < 0:  # -u e^(v/u) <= e w (in floating point: 0 where e^(v/u) underflows)
        with np.errstate(over="ignore"):
            ratio = float(np.float64(v) / cu)
        assert cw >= math.exp(math.log(-cu) + ratio - 1.0) * (1 - 1e-12)
    else:
        assert cu == 0 and cv >= 0 and cw >= 0


def test_bound_from_a_perturbed_dual_stays_below_the_optimum():
    from specopt import _cvxpy_compat as compat

    prob = _spectraplex(5, 3, False, 0.1, 0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol, info = compat.conic_solve(prob, "CLARABEL")
    canon = info["canonical"]
    p_star = sol.opt_val
    exact = conic_bound.dual_bound(**canon)
    assert exact.bound == pytest.approx(p_star, abs=1e-7) and exact.bound <= p_star + 1e-9
    rng = np.random.default_rng(0)
    for scale in (1e-6, 1e-4, 1e-2):
        y = canon["y"] + scale * rng.standard_normal(canon["y"].size)
        got = conic_bound.dual_bound(**{**canon, "y": y})
        if got.bound is not None:
            assert got.bound <= p_star + 1e-9
        else:
            assert got.residual > conic_bound.DUAL_RESIDUAL_TOL
