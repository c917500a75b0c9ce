"""low_rank_sdp route: infeasible / unbounded statuses (Farkas vector, recession direction) and
the checks behind them, against Clarabel on the same problems."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import specopt
from specopt.reductions._low_rank_status import farkas_check, ray_check
from specopt.reductions.low_rank_sdp import recognize_low_rank_sdp

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
    # and re-derived by the gate on the user's constraints (specopt.gate_claims)
    assert cert.checks["farkas_on_problem"].passed
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
    assert cert.checks["recession_on_problem"].passed
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


# --------------------------------------------------------------------------------------------
# Duals of every constraint the route reads
# --------------------------------------------------------------------------------------------
def _lagrangian_change(prob: cp.Problem, K: cp.Variable, Kr: np.ndarray) -> tuple[float, float]:
    """``L(Kr) - L(0)`` for CVXPY's Lagrangian with the problem's dual values (zero for every
    ``Kr`` exactly when stationarity holds), and the size of its terms."""
    def lag(Kv: np.ndarray) -> tuple[float, float]:
        K.value = Kv
        f = float(prob.objective.expr.value)
        total, size = (f if isinstance(prob.objective, cp.Minimize) else -f), abs(f)
        for con in prob.constraints:
            if isinstance(con, cp.constraints.PSD):
                t = -float(np.sum(con.dual_value * con.args[0].value))
            else:
                g = np.asarray(con.args[0].value - con.args[1].value, dtype=float)
                t = float(np.sum(np.asarray(con.dual_value) * g))
            total += t
            size = max(size, abs(t))
        return total, size

    (l1, s1), (l0, s0) = lag(Kr), lag(np.zeros_like(Kr))
    return l1 - l0, max(s1, s0)


def _sym(rng: np.random.Generator, n: int) -> np.ndarray:
    G = rng.standard_normal((n, n))
    return G + G.T


def _check_duals(prob: cp.Problem, K: cp.Variable, tol: float) -> None:
    Kopt = K.value.copy()
    psd = next(c for c in prob.constraints if isinstance(c, cp.constraints.PSD))
    Z = psd.dual_value
    assert Z is not None and np.linalg.eigvalsh(Z)[0] >= -1e-9 * np.linalg.norm(Z)
    # complementarity <Z, K> = 0 and stationarity L(K) - L(0) = 0 along random directions
    assert abs(np.sum(Z * Kopt)) <= tol * (1 + np.linalg.norm(Z) * np.linalg.norm(Kopt))
    rng = np.random.default_rng(0)
    for _ in range(3):
        change, size = _lagrangian_change(prob, K, _sym(rng, K.shape[0]))
        assert abs(change) <= tol * (1 + size)
    K.value = Kopt


def _solved_and_reference(model, tol: float = 1e-8):
    """The model solved on the route's engine (checked ``optimal``, duals checked) and on
    Clarabel. The engine gets all the time it needs: on a loaded machine it missed the route's
    2 s first budget, Clarabel's leg answered, and its PSD dual (Clarabel's own, -7.8e-9 below
    the cone) is not what these tests check."""
    import specopt.reductions.low_rank_sdp as lrr

    K, prob = model()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lrr, "FIRST_BUDGET", 600.0)
        specopt.solve(prob, route="low_rank_sdp", tol=tol)
    assert specopt.certificate(prob).backend == "low_rank_sdp"
    assert prob.status == cp.OPTIMAL
    _check_duals(prob, K, 1e-6)
    _, ref = model()
    ref.solve(solver=cp.CLARABEL)
    return prob, ref


@pytest.mark.parametrize("eigh", [True, False])
def test_maxcut_psd_dual_matches_clarabel(eigh, monkeypatch):
    """The PSD dual projected by eigh (n <= PSD_DUAL_MAX_N) and, forced by a zero threshold,
    the large-n path (no eigh: shifted by the certified lambda_min)."""
    if not eigh:
        from specopt.reductions import _low_rank_duals

        monkeypatch.setattr(_low_rank_duals, "PSD_DUAL_MAX_N", 0)
    rng = np.random.default_rng(1)
    n = 25
    W = np.triu(rng.random((n, n)) < 0.3, 1) * rng.uniform(0.5, 2.0, (n, n))
    W = W + W.T
    L = np.diag(W.sum(1)) - W

    def model():
        K = cp.Variable((n, n), symmetric=True)
        return K, cp.Problem(cp.Maximize(cp.trace(L @ K) / 4), [K >> 0, cp.diag(K) == 1])

    prob, ref = _solved_and_reference(model)
    Z, Zref = prob.constraints[0].dual_value, ref.constraints[0].dual_value
    np.testing.assert_allclose(Z, Zref, atol=1e-4 * np.abs(Zref).max())
    np.testing.assert_allclose(prob.constraints[1].dual_value, ref.constraints[1].dual_value,
                               atol=1e-4 * np.abs(ref.constraints[1].dual_value).max())


def _sde(spelling: str, sense=cp.Maximize):
    rng = np.random.default_rng(3)
    n = 22
    X = rng.standard_normal((n, 3))
    pairs = np.array([(i, i + 1) for i in range(n - 1)] + [(i, i + 2) for i in range(n - 2)]
                     + [(i, i + 3) for i in range(0, n - 3, 2)])
    I, J = pairs[:, 0], pairs[:, 1]
    d2 = np.sum((X[I] - X[J]) ** 2, axis=1)
    K = cp.Variable((n, n), symmetric=True)
    center = {"sum": cp.sum(K) == 0, "rows": K @ np.ones(n) == 0,
              "scaled": 2 * cp.sum(K) == 0}[spelling]
    return K, cp.Problem(sense(cp.trace(K)), [K >> 0, center, K[I, I] + K[J, J] - 2 * K[I, J]
                                               == d2])


@pytest.mark.parametrize("spelling", ["sum", "rows", "scaled"])
def test_centering_duals_satisfy_kkt_and_agree_with_clarabel(spelling):
    K, prob = _sde(spelling)
    specopt.solve(prob, route="low_rank_sdp", tol=1e-7)
    assert prob.status == cp.OPTIMAL
    assert prob.constraints[1].dual_value is not None
    _check_duals(prob, K, 1e-5)
    K2, ref = _sde(spelling)
    ref.solve(solver=cp.CLARABEL)
    assert prob.value == pytest.approx(ref.value, rel=1e-5)
    # dual objective b^T nu (CVXPY's sign: max -> the optimum) agrees with Clarabel's
    b = np.asarray(prob.constraints[2].args[1].value)
    assert float(b @ prob.constraints[2].dual_value) == pytest.approx(
        float(b @ ref.constraints[2].dual_value), rel=1e-4)


@pytest.mark.parametrize("sense", [cp.Maximize, cp.Minimize])
def test_trace_bound_dual_matches_clarabel(sense):
    rng = np.random.default_rng(4)
    n = 24
    C = _sym(rng, n)

    def model():
        K = cp.Variable((n, n), symmetric=True)
        return K, cp.Problem(sense(cp.trace(C @ K)),
                             [K >> 0, cp.trace(K) <= 2, K[0, 1] == 0.05])

    prob, ref = _solved_and_reference(model)
    for c, r in zip(prob.constraints[1:], ref.constraints[1:], strict=True):
        assert float(c.dual_value) == pytest.approx(float(r.dual_value), rel=1e-4, abs=1e-6)


# --------------------------------------------------------------------------------------------
# auto's thresholds: both sides of each
# --------------------------------------------------------------------------------------------
def test_pays_off_rule_both_sides_of_each_threshold():
    from specopt.reductions import low_rank_sdp as lr

    n0 = lr.PAYS_OFF_MIN_N
    ok, why = lr.pays_off_rule(n0 - 1, 3 * n0, True)
    assert not ok and "Clarabel" in why
    assert lr.pays_off_rule(n0, n0, False)[0]
    # between the thresholds: the race, whatever the rows (SCS's time follows conditioning)
    for n, m in [(100, 100), (100, 2000)]:
        ok, why = lr.pays_off_rule(n, m, False)
        assert ok and why.startswith("race:")
    big = lr.PAYS_OFF_ANY_M_N
    assert lr.pays_off_rule(big, 50 * big, False)[1].startswith("race:")
    ok, why = lr.pays_off_rule(big + 1, 50 * big, False)
    assert ok and "race" not in why


def _maxcut(n: int) -> cp.Problem:
    rng = np.random.default_rng(0)
    W = np.triu(rng.random((n, n)) < 0.1, 1).astype(float)
    L = np.diag((W + W.T).sum(1)) - W - W.T
    K = cp.Variable((n, n), symmetric=True)
    return cp.Problem(cp.Maximize(cp.trace(L @ K)), [K >> 0, cp.diag(K) == 1])


def _theta(n: int, rows: int) -> cp.Problem:
    I, J = np.triu_indices(n, 1)
    K = cp.Variable((n, n), symmetric=True)
    return cp.Problem(cp.Maximize(cp.sum(K)),
                      [K >> 0, cp.trace(K) == 1, K[I[:rows], J[:rows]] == 0])


def test_auto_route_follows_the_rule():
    from specopt.reductions import low_rank_sdp as lr

    n0 = lr.PAYS_OFF_MIN_N
    assert specopt.explain(_maxcut(n0 - 1)).auto_route == "conic"
    assert specopt.explain(_maxcut(n0)).auto_route == "low_rank_sdp"
    # many rows per n (theta, n = 60, 10 n rows): the route, racing the conic side
    exp = specopt.explain(_theta(60, 10 * 60))
    assert exp.auto_route == "low_rank_sdp"
    assert "race:" in exp.verdict("low_rank_sdp").pays_off_reason


# the large-n path of the PSD dual (no eigh: Z shifted by the certified lambda_min), forced on
# small models by a zero eigh threshold, against Clarabel and CVXPY's KKT conditions
@pytest.fixture
def no_eigh_duals(monkeypatch):
    from specopt.reductions import _low_rank_duals

    monkeypatch.setattr(_low_rank_duals, "PSD_DUAL_MAX_N", 0)


@pytest.mark.parametrize("spelling", ["sum", "rows"])
def test_large_n_centering_duals_satisfy_kkt(no_eigh_duals, spelling):
    K, prob = _sde(spelling)
    specopt.solve(prob, route="low_rank_sdp", tol=1e-7)
    assert prob.status == cp.OPTIMAL
    Z = prob.constraints[0].dual_value
    assert Z is not None and prob.constraints[1].dual_value is not None
    _check_duals(prob, K, 1e-5)
    K2, ref = _sde(spelling)
    ref.solve(solver=cp.CLARABEL)
    # (Z itself is not unique: the centering dual moves it) the rows' dual objective agrees
    b = np.asarray(prob.constraints[2].args[1].value)
    assert float(b @ prob.constraints[2].dual_value) == pytest.approx(
        float(b @ ref.constraints[2].dual_value), rel=1e-4)


def test_scalar_centering_closed_form_is_psd():
    from specopt.reductions._low_rank_duals import _scalar_centering_shifted

    rng = np.random.default_rng(2)
    for n in (5, 40):
        G = rng.standard_normal((n, n))
        Z = G @ G.T + rng.standard_normal((n, 1)) @ np.ones((1, n))  # PSD off the ones
        Z = 0.5 * (Z + Z.T)
        P = np.eye(n) - 1.0 / n
        lam = float(np.linalg.eigvalsh(P @ Z @ P + 10 * np.ones((n, n)) / n)[0])
        Zs, w = _scalar_centering_shifted(Z, max(0.0, -lam))
        assert w >= 0
        assert np.linalg.eigvalsh(Zs)[0] >= -1e-9 * np.abs(Zs).max()
