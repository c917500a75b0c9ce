"""Importing specopt changes nothing else in CVXPY: the DCP hint does not move warnings."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import specopt  # noqa: F401  (installs the hint)
from specopt import mve_cost


def test_plain_solve_of_nonconvex_spectral_problem_gets_the_hint():
    K = cp.Variable((4, 4), symmetric=True)
    prob = cp.Problem(cp.Minimize(mve_cost(K, 1)), [K >> 0, cp.trace(K) == 1])
    with pytest.raises(cp.error.DCPError, match='method="specopt"') as info:
        prob.solve(solver="CLARABEL")
    assert "Problem does not follow DCP rules" in str(info.value)
    assert K.value is None


def test_dcp_error_without_specopt_atoms_is_cvxpy_own():
    x = cp.Variable(2)
    prob = cp.Problem(cp.Minimize(cp.sqrt(x[0])), [x >= 1])
    with pytest.raises(cp.error.DCPError) as info:
        prob.solve(solver="CLARABEL")
    assert "specopt" not in str(info.value)


def _inaccurate_solve():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 10))
    x = cp.Variable(10)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(A @ x - 1) + cp.norm1(x)), [x >= -1])
    prob.solve(solver="SCS", max_iters=3)  # this line is where the warning belongs
    return prob


def test_solve_warnings_keep_their_origin():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prob = _inaccurate_solve()
    assert prob.status == cp.OPTIMAL_INACCURATE
    ours = [w for w in caught if "inaccurate" in str(w.message)]
    assert ours, [str(w.message) for w in caught]
    for w in ours:
        assert w.filename == __file__, w.filename  # the user's line, not specopt's
        assert "specopt" not in w.filename


def test_solve_path_has_no_specopt_wrapper():
    assert not getattr(cp.Problem._solve, "_specopt_wrapped", False)
    assert cp.Problem._solve.__module__.startswith("cvxpy")
