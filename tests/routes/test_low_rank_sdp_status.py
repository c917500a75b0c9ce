"""low_rank_sdp route: infeasible / unbounded statuses (Farkas vector, recession direction) and
the checks behind them, against Clarabel on the same problems."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import specopt
from specopt.reductions.low_rank_sdp import farkas_check, ray_check, recognize_low_rank_sdp

N = 25


def _infeasible(pair: tuple[int, int], value: float, seed: int) -> cp.Problem:
    """diag(K) = 1 and |K_ij| = value > 1: no PSD K (|K_ij| <= sqrt(K_ii K_jj))."""
    rng = np.random.default_rng(seed)
    C = rng.standard_normal((N, N))
    K = cp.Variable((N, N), symmetric=True)
    i, j = pair
    return cp.Problem(cp.Maximize(cp.trace((C + C.T) @ K)),
                      [K >> 0, cp.diag(K) == 1, K[i, j] == value])


def _unbounded(seed: int) -> cp.Problem:
    """A connected chain of off-diagonal rows and K_00 = 1: tr K grows along e_k e_k^T."""
    rng = np.random.default_rng(seed)
    K = cp.Variable((N, N), symmetric=True)
    vals = 0.05 * rng.uniform(0.5, 1.0, N - 1)
    cons = [K >> 0, K[0, 0] == 1]
    cons += [K[k, k + 1] == vals[k] for k in range(N - 1)]
    return cp.Problem(cp.Maximize(cp.trace(K)), cons)


@pytest.mark.parametrize("pair, value, seed", [((0, 1), 2.0, 0), ((3, 17), -1.5, 1),
                                               ((10, 24), 1.2, 2)])
def test_infeasible_rows_get_a_checked_farkas_vector(pair, value, seed):
    prob = _infeasible(pair, value, seed)
    specopt.solve(prob, route="low_rank_sdp")
    assert prob.status == cp.INFEASIBLE
    cert = specopt.certificate(prob)
    assert cert.checks["farkas"].passed
    assert all(v.value is None for v in prob.variables())  # a status, never values
    # the certificate itself: A^*(z) PSD (to rounding) and b^T z < 0 on the route's data
    d = recognize_low_rank_sdp(prob)
    ok, lam, btz = farkas_check(d, cert.extra["farkas"])
    assert ok and btz < 0
    ref = _infeasible(pair, value, seed)
    ref.solve(solver=cp.CLARABEL)
    assert ref.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE)


def test_farkas_check_rejects_a_non_certificate():
    prob = _infeasible((0, 1), 2.0, 0)
    d = recognize_low_rank_sdp(prob)
    m = d.A.m
    assert not farkas_check(d, np.ones(m))[0]  # A^*(1) = I + sym(e_0 e_1^T): b^T z > 0
    # the textbook certificate z = (1/2, 1/2, -1) on the rows K_00 = 1, K_11 = 1, K_01 = 2:
    # A^*(z) = [[1/2, -1/2], [-1/2, 1/2]] on the pair is PSD, b^T z = 1 - 2 < 0
    z = np.zeros(m)
    z[[0, 1]] = 0.5
    z[N] = -1.0
    assert farkas_check(d, z)[0]
    z[N] = -0.4  # b^T z = 1 - 0.8 > 0
    assert not farkas_check(d, z)[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_unbounded_with_a_checked_recession_direction(seed):
    prob = _unbounded(seed)
    specopt.solve(prob, route="low_rank_sdp")
    assert prob.status == cp.UNBOUNDED
    cert = specopt.certificate(prob)
    assert cert.checks["recession_ray"].passed
    Yr = cert.extra["ray"]
    d = recognize_low_rank_sdp(prob)
    ok, viol, gain = ray_check(d, Yr @ Yr.T)
    assert ok and gain > 0 and viol < 1e-6
    assert all(v.value is None for v in prob.variables())
    ref = _unbounded(seed)
    ref.solve(solver=cp.CLARABEL)
    assert ref.status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE)


def test_ray_check_rejects_directions_that_break_rows_or_do_not_improve():
    prob = _unbounded(0)
    d = recognize_low_rank_sdp(prob)
    e = np.zeros(N)
    e[0] = 1.0  # K_00 = 1 row: A(e_0 e_0^T) != 0
    assert not ray_check(d, np.outer(e, e))[0]
    e[:] = 0
    e[5] = 1.0
    assert ray_check(d, np.outer(e, e))[0]
    dmin = recognize_low_rank_sdp(cp.Problem(cp.Minimize(cp.trace(d.K)),
                                             prob.constraints))
    assert not ray_check(dmin, np.outer(e, e))[0]  # minimizing tr K: no improvement


def test_bounded_variant_is_solved_not_misclassified():
    prob = _unbounded(0)
    K = prob.variables()[0]
    bounded = cp.Problem(prob.objective, [*prob.constraints, cp.trace(K) <= 30])
    specopt.solve(bounded, route="low_rank_sdp")
    assert bounded.status == cp.OPTIMAL
    assert bounded.value == pytest.approx(30.0, rel=1e-5)
