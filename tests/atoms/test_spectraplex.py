"""Trace-one rank-one decomposition and spectraplex helpers."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specopt


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(1, 8), rank=st.integers(1, 8),
       scale=st.floats(1e-3, 1e3))
def test_decomposition_reconstructs_exactly(seed, n, rank, scale):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((n, min(rank, n)))
    X = scale * (B @ B.T)
    theta, U = specopt.rank_one_decomposition(X)
    assert np.all(theta >= 0) and np.isclose(theta.sum(), 1.0)
    assert np.allclose(np.linalg.norm(U, axis=0), 1.0)
    assert len(theta) <= min(rank, n) or np.all(theta[min(rank, n):] < 1e-12)
    assert np.allclose(specopt.from_rank_one(theta, U), X / np.trace(X),
                       atol=1e-12 * max(1.0, np.abs(X / np.trace(X)).max()) + 1e-13)


def test_repeated_eigenvalues_and_expressions():
    X = cp.Variable((3, 3), PSD=True)
    X.value = np.eye(3)
    theta, U = specopt.rank_one_decomposition(X)
    assert np.allclose(theta, 1 / 3)
    assert np.allclose(U @ np.diag(theta) @ U.T, np.eye(3) / 3)


def test_errors():
    with pytest.raises(ValueError, match="PSD"):
        specopt.rank_one_decomposition(np.diag([1.0, -0.5]))
    with pytest.raises(ValueError, match="symmetric"):
        specopt.rank_one_decomposition(np.array([[1.0, 1.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="zero trace"):
        specopt.rank_one_decomposition(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="no value"):
        specopt.rank_one_decomposition(cp.Variable((2, 2), PSD=True))
    with pytest.raises(ValueError, match="square"):
        specopt.rank_one_decomposition(np.ones((2, 3)))
    # round-off negatives within tolerance are accepted and clipped
    theta, _ = specopt.rank_one_decomposition(np.diag([1.0, -1e-12]))
    assert np.allclose(theta, [1.0])


def test_min_linear_over_spectraplex_is_lambda_min(rng):
    n = 6
    A = rng.standard_normal((n, n))
    C = A + A.T
    X = cp.Variable((n, n), symmetric=True)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(C, X))), specopt.spectraplex(X))
    for solver in ("CLARABEL", "SCS"):
        prob.solve(solver=solver)
        assert np.isclose(prob.value, np.linalg.eigvalsh(C)[0], atol=1e-4)
        assert specopt.in_spectraplex(X.value, tol=1e-4)
