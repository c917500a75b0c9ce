"""row_quad_forms: values, affinity, conic form against the hand-written equivalent, errors."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import specopt
from specopt.atoms import RowQuadForms
from tests._helpers import random_symmetric


def test_value_and_structure(rng):
    V = rng.standard_normal((7, 4))
    X = cp.Variable((4, 4), symmetric=True)
    X.value = random_symmetric(rng, 4)
    q = specopt.row_quad_forms(V, X)
    assert isinstance(q, RowQuadForms) and q.shape == (7,)
    assert np.allclose(q.value, [v @ X.value @ v for v in V])
    assert q.is_affine()
    assert np.array_equal(q.V, V)


def test_nonneg_on_psd_argument():
    X = cp.Variable((3, 3), PSD=True)
    assert specopt.row_quad_forms(np.ones((2, 3)), X).is_nonneg()


@pytest.mark.parametrize("solver", ["CLARABEL", "SCS"])
def test_solution_matches_hand_written_form(rng, solver):
    m, n = 12, 5
    V = rng.standard_normal((m, n))
    X = cp.Variable((n, n), PSD=True)
    hand = cp.sum(cp.multiply(V @ X, V), axis=1)
    opts = {"eps_abs": 1e-8, "eps_rel": 1e-8} if solver == "SCS" else {}
    p1 = cp.Problem(cp.Maximize(cp.min(specopt.row_quad_forms(V, X))), [cp.trace(X) == 1])
    p2 = cp.Problem(cp.Maximize(cp.min(hand)), [cp.trace(X) == 1])
    assert np.isclose(p1.solve(solver=solver, **opts), p2.solve(solver=solver, **opts),
                      rtol=1e-5, atol=1e-6)


def test_gradient_is_the_khatri_rao_matrix(rng):
    V = rng.standard_normal((3, 4))
    X = cp.Variable((4, 4))
    X.value = rng.standard_normal((4, 4))
    q = specopt.row_quad_forms(V, X)
    G = q.grad[X].toarray()  # (n^2, m)
    assert np.allclose(G.T, q.khatri_rao())


def test_compiles_as_one_stacked_map(rng):
    m, n = 40, 6
    V = rng.standard_normal((m, n))
    X = cp.Variable((n, n), symmetric=True)
    prob = cp.Problem(cp.Minimize(0), [specopt.row_quad_forms(V, X) <= 1])
    data, _, _ = prob.get_problem_data("SCS")
    assert data["A"].shape[0] == m  # m rows of one linear map, no auxiliary cones


@pytest.mark.parametrize(
    ("V", "X", "message"),
    [
        (np.ones((2, 3)), cp.Variable((4, 4)), "columns"),
        (np.ones((2, 3)), cp.Variable((3, 4)), "square"),
        (np.ones(3), cp.Variable((3, 3)), "matrix"),
        (np.full((2, 3), np.inf), cp.Variable((3, 3)), "NaN or inf"),
    ],
)
def test_bad_arguments_are_clear_errors(V, X, message):
    with pytest.raises(ValueError, match=message):
        specopt.row_quad_forms(V, X)
