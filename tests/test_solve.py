"""method="specopt": route choice, certificates, explain, failures that change nothing."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import specopt
from specopt.reductions import RouteMismatch
from tests._helpers import random_symmetric


def spectraplex_problem(rng, n=5):
    C = random_symmetric(rng, n)
    X = cp.Variable((n, n), symmetric=True, name="X")
    return cp.Problem(cp.Minimize(cp.sum(cp.multiply(C, X))), specopt.spectraplex(X)), X, C


def test_method_specopt_equals_specopt_solve_and_closed_form(rng):
    prob, X, C = spectraplex_problem(rng)
    v1 = prob.solve(method="specopt", route="conic", solver="CLARABEL")
    v2 = specopt.solve(prob, route="conic", solver="CLARABEL")
    assert np.isclose(v1, v2)
    assert np.isclose(v1, np.linalg.eigvalsh(C)[0], atol=1e-7)
    assert prob.status == cp.OPTIMAL
    assert X.value is not None
    assert prob.constraints[0].dual_value is not None


def test_certificate_reports_gap_violation_and_times(rng):
    prob, _, C = spectraplex_problem(rng)
    prob.solve(method="specopt", solver="CLARABEL")
    cert = specopt.certificate(prob)
    assert cert.route == "conic" and cert.backend == "CLARABEL"
    assert cert.status == cp.OPTIMAL and cert.is_global
    assert cert.bound <= cert.objective + 1e-9  # minimization: a lower bound
    assert cert.gap < 1e-6 and cert.max_violation < 1e-6
    assert cert.total_time > 0 and cert.iterations > 0
    assert prob.solver_stats.solver_name == "specopt:conic:CLARABEL"
    assert "relative gap" in str(cert)
    assert specopt.last_certificate(prob) is cert


def test_maximize_bound_is_an_upper_bound(rng):
    n = 4
    C = random_symmetric(rng, n)
    X = cp.Variable((n, n), symmetric=True)
    prob = cp.Problem(cp.Maximize(cp.sum(cp.multiply(C, X))), specopt.spectraplex(X))
    prob.solve(method="specopt", solver="SCS")
    cert = specopt.certificate(prob)
    assert cert.bound >= cert.objective - 1e-12
    assert np.isclose(cert.objective, np.linalg.eigvalsh(C)[-1], atol=1e-3)


def test_certificate_before_any_solve_is_an_error(rng):
    prob, _, _ = spectraplex_problem(rng)
    with pytest.raises(ValueError, match="not been solved"):
        specopt.certificate(prob)


def test_explain_lists_every_route_with_a_reason(rng):
    prob, _, _ = spectraplex_problem(rng)
    ex = specopt.explain(prob)
    assert {v.route for v in ex.verdicts} == set(specopt.route_names())
    assert ex.verdict("conic").matches
    assert ex.auto_route is not None
    assert all(v.reason for v in ex.verdicts)
    assert "route='auto' picks" in str(ex)


def test_explain_says_why_conic_does_not_apply():
    K = cp.Variable((4, 4), symmetric=True)
    prob = cp.Problem(cp.Minimize(specopt.linear_spectral(K, [1.0, -1.0, 2.0, 0.0])),
                      specopt.spectraplex(K))
    verdict = specopt.explain(prob).verdict("conic")
    assert not verdict.matches and "non-monotone alpha" in verdict.reason


def test_named_route_that_does_not_match_raises_and_changes_nothing():
    K = cp.Variable((3, 3), symmetric=True)
    K.value = np.eye(3)
    prob = cp.Problem(cp.Minimize(specopt.linear_spectral(K, [1.0, -1.0, 2.0])),
                      specopt.spectraplex(K))
    with pytest.raises(RouteMismatch, match="non-monotone"):
        prob.solve(method="specopt", route="conic")
    assert np.array_equal(K.value, np.eye(3))
    assert prob.status is None


def test_unknown_route_is_a_clear_error(rng):
    prob, _, _ = spectraplex_problem(rng)
    with pytest.raises(ValueError, match="unknown route 'nope'"):
        prob.solve(method="specopt", route="nope")


def test_failed_solve_leaves_values_unchanged(rng):
    prob, X, _ = spectraplex_problem(rng)
    X.value = np.full(X.shape, 0.5)
    with pytest.raises(cp.error.SolverError):
        prob.solve(method="specopt", solver="NOT_A_SOLVER")
    assert np.array_equal(X.value, np.full(X.shape, 0.5))
    assert prob.status is None


def test_unlicensed_mosek_is_a_clear_error_that_changes_nothing(rng):
    ok, why = specopt.backends.mosek_status()
    if ok:
        pytest.skip("MOSEK is licensed here; this test covers the unlicensed case")
    prob, X, _ = spectraplex_problem(rng)
    X.value = np.eye(X.shape[0])
    with pytest.raises(cp.error.SolverError, match="MOSEK"):
        prob.solve(method="specopt", solver="MOSEK")
    assert np.array_equal(X.value, np.eye(X.shape[0]))


def test_mosek_solves_when_licensed(rng, mosek_or_skip):
    prob, _, C = spectraplex_problem(rng)
    prob.solve(method="specopt", solver=mosek_or_skip)
    assert np.isclose(prob.value, np.linalg.eigvalsh(C)[0], atol=1e-6)


@pytest.mark.parametrize("solver", ["CLARABEL", "SCS"])
def test_infeasible_and_unbounded_are_reported(solver):
    X = cp.Variable((3, 3), symmetric=True)
    infeasible = cp.Problem(cp.Minimize(cp.trace(X)), [X >> 0, cp.trace(X) == -1])
    infeasible.solve(method="specopt", solver=solver)
    assert infeasible.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE)
    assert specopt.certificate(infeasible).status == infeasible.status
    unbounded = cp.Problem(cp.Minimize(X[0, 1]), [X >> 0])
    unbounded.solve(method="specopt", solver=solver)
    assert unbounded.status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE)


def test_positional_arguments_are_rejected(rng):
    prob, _, _ = spectraplex_problem(rng)
    with pytest.raises(TypeError, match="keyword"):
        prob.solve("CLARABEL", method="specopt")


def test_default_backend_follows_size():
    small = cp.Variable((5, 5), PSD=True)
    big = cp.Variable((60, 60), PSD=True)
    p_small = cp.Problem(cp.Minimize(cp.trace(small)), [cp.trace(small) == 1])
    p_big = cp.Problem(cp.Minimize(cp.trace(big)), [cp.trace(big) == 1])
    if specopt.mosek_licensed():
        assert specopt.default_backend(p_small) == "MOSEK"
    else:
        assert specopt.default_backend(p_small) == "CLARABEL"
        assert specopt.default_backend(p_big) == "SCS"


def _sdpa_shaped(block_sides: list[int], m: int, seed: int = 0) -> cp.Problem:
    """``max <F0, Y> s.t. <F_i, Y> = c_i`` (SDPLIB's form, ``specopt.io.build_problem``) with
    every row touching every entry of every block (the control problems' coupling)."""
    from specopt.io import SDPAData, build_problem

    rng = np.random.default_rng(seed)
    entries = []
    for n in block_sides:
        i, j = np.triu_indices(n)
        mat = np.repeat(np.arange(m + 1), i.size)
        entries.append((mat, np.tile(i, m + 1), np.tile(j, m + 1),
                        rng.standard_normal(mat.size)))
    return build_problem(SDPAData(m, list(block_sides), rng.standard_normal(m), entries))


@pytest.mark.skipif(specopt.mosek_licensed(), reason="MOSEK is the default when licensed")
def test_default_backend_is_set_by_the_largest_block_not_the_sum():
    from specopt.reductions.conic_size import (
        CLARABEL_MAX_DENSE_DIM,
        dense_kkt_dimension,
        largest_kkt_block,
    )

    # control2's shape (blocks 20 and 10, 66 rows): Clarabel 7.6e-6 in 1 s, SCS 34% off in 41 s
    control2 = _sdpa_shaped([20, 10], 66)
    assert dense_kkt_dimension(control2) > 300  # the old one-block estimate sent it to SCS
    assert largest_kkt_block(control2) <= CLARABEL_MAX_DENSE_DIM
    assert specopt.default_backend(control2) == "CLARABEL"
    # many small blocks (truss8: 33 blocks of 19) factor block by block: Clarabel
    many = _sdpa_shaped([19] * 12, 4)
    assert largest_kkt_block(many) <= CLARABEL_MAX_DENSE_DIM < dense_kkt_dimension(many)
    assert specopt.default_backend(many) == "CLARABEL"
    # one large dense block: SCS (lambda_sum_largest n = 50: SCS 0.23 s, Clarabel 8.75 s)
    big = _sdpa_shaped([40], 3)
    assert largest_kkt_block(big) > CLARABEL_MAX_DENSE_DIM
    assert specopt.default_backend(big) == "SCS"


@pytest.mark.skipif(specopt.mosek_licensed(), reason="MOSEK is the default when licensed")
def test_default_backend_that_fails_is_replaced_but_a_named_one_is_not(monkeypatch, rng):
    from specopt import _cvxpy_compat as compat

    original = compat.conic_solve

    def clarabel_fails(problem, backend, *args, **kwargs):
        if backend == "CLARABEL":
            raise cp.error.SolverError("Solver 'CLARABEL' failed.")
        return original(problem, backend, *args, **kwargs)

    monkeypatch.setattr(compat, "conic_solve", clarabel_fails)
    prob, _, _ = spectraplex_problem(rng)
    assert specopt.default_backend(prob) == "CLARABEL"
    specopt.solve(prob, route="conic")
    cert = specopt.certificate(prob)
    assert cert.backend == "SCS" and prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
    assert cert.attempts[0]["backend"] == "CLARABEL"
    assert cert.attempts[0]["status"] == "solver_error"
    prob2, _, _ = spectraplex_problem(rng)
    with pytest.raises(cp.error.SolverError, match="CLARABEL"):
        specopt.solve(prob2, route="conic", solver="CLARABEL")
    assert prob2.status is None


def test_a_write_back_that_fails_leaves_the_model_as_it_was():
    """``unpack_result`` writes values, then evaluates the objective; when that raises (here a
    clearly non-symmetric matrix under a spectral atom) the values written are taken back."""
    from specopt import _cvxpy_compat as compat

    X = cp.Variable((3, 3))
    con = cp.trace(X) == 1
    prob = cp.Problem(cp.Minimize(specopt.linear_spectral(X, [1.0, 0.0, 0.0])), [X == X.T, con])
    X.value = np.eye(3) / 3
    bad = np.triu(np.ones((3, 3)))
    with pytest.raises(ValueError, match="symmetric"):
        compat.unpack_result(prob, cp.OPTIMAL, {X.id: bad}, {con.id: 2.0}, 1.0, "test", {})
    np.testing.assert_array_equal(X.value, np.eye(3) / 3)
    assert con.dual_value is None
    assert prob.status is None
