"""The gate's PSD violation from Cholesky factorizations: a sound upper bound on
``max(0, -lambda_min)``, exact once it exceeds half the tolerance, and the same verdicts as
the eigenvalues on planted spectra (tied zeros, badly scaled, slightly infeasible)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specopt import gate
from specopt._psd_violation import CHOLESKY_MIN_N, exact_psd_violation, psd_violation


def _planted(n, lam_min, rank, scale, seed, complex_=False):
    """``Q diag(spectrum) Q^H`` with ``n - rank`` eigenvalues tied at ``lam_min``."""
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(n, n)) + (1j * rng.normal(size=(n, n)) if complex_ else 0)
    Q, _ = np.linalg.qr(G)
    spectrum = np.full(n, lam_min)
    spectrum[:rank] = scale * rng.uniform(0.1, 1.0, size=rank)
    return (Q * spectrum) @ Q.conj().T


@settings(max_examples=25, deadline=None)
@given(n=st.integers(CHOLESKY_MIN_N, CHOLESKY_MIN_N + 60),
       rel=st.sampled_from([0.0, -1e-14, -1e-9, -3e-6, -4e-5, -6e-5, -1e-3, 1e-6]),
       rank=st.integers(1, 40), scale=st.sampled_from([1e-3, 1.0, 1e4]),
       seed=st.integers(0, 10**6), complex_=st.booleans())
def test_bound_is_sound_and_exact_above_half_the_tolerance(n, rel, rank, scale, seed, complex_):
    M = _planted(n, rel * scale, rank, scale, seed, complex_)
    tol = 1e-4 * (1.0 + np.max(np.abs(M)))
    exact = exact_psd_violation(M)
    bound = psd_violation(M, tol)
    assert bound >= exact - 1e-12 * (1.0 + scale)           # an upper bound
    assert (bound <= tol) == (exact <= tol) or exact > tol / 2  # same verdict below tol/2
    if exact > 0.6 * tol:                                  # reported exactly when it matters
        assert abs(bound - exact) <= 1e-9 * (1.0 + scale)


def test_small_matrices_are_exact():
    M = _planted(40, -2e-3, 5, 1.0, 0)
    assert psd_violation(M, 1.0) == exact_psd_violation(M) > 0


def _psd_problem(n):
    Y = cp.Variable((n, n), symmetric=True)
    return cp.Problem(cp.Minimize(cp.trace(Y)), [Y >> 0, cp.trace(Y) <= 2]), Y


def test_gate_feasibility_verdict_on_a_large_psd_constraint():
    """The gate's feasibility check over ``Y >> 0`` at n = 320: a low-rank PSD point passes,
    the same point pushed to lambda_min = -1e-3 fails with the exact violation measured."""
    n = CHOLESKY_MIN_N + 20
    prob, Y = _psd_problem(n)
    good = _planted(n, 0.0, 3, 1.0, 1)
    good = good / np.trace(good)
    ok = gate.measure(prob, {Y.id: good})
    assert ok["relative_violation"] <= gate.FEASIBILITY_TOL
    bad = good - 1e-3 * np.eye(n) + 1e-3 * np.outer(np.ones(n), np.ones(n)) / n
    measured = gate.measure(prob, {Y.id: bad})
    exact = exact_psd_violation(bad)
    assert measured["max_violation"] == exact and exact > 5e-4
