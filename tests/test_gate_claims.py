"""The gate's own check of infeasible / unbounded proofs on the user's problem
(``specopt.gate_claims``): Clarabel's infeasibility certificates pass, non-certificates and any
multipliers of a feasible problem fail, rays are checked along the user's constraints."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specopt import gate
from specopt.gate_claims import farkas_on_problem, ray_on_problem
from specopt.reductions.base import RouteResult


def _psd_rows(n: int, seed: int, shift: float, scale: float) -> cp.Problem:
    """``K >> 0``, ``tr(A_i K) == b_i`` with ``b = A(K0) - shift``-ish data; infeasible for a
    negative enough diagonal target, feasible otherwise (``scale`` stretches the data)."""
    rng = np.random.default_rng(seed)
    K = cp.Variable((n, n), symmetric=True)
    G = rng.standard_normal((n, n))
    K0 = G @ G.T / n
    cons = [K >> 0]
    for _ in range(3):
        A = rng.standard_normal((n, n))
        A = scale * (A + A.T)
        cons.append(cp.trace(A @ K) == float(np.sum(A * K0)))
    cons.append(cp.trace(K) == shift * scale)  # shift < 0: tr K < 0, impossible for K PSD
    return cp.Problem(cp.Minimize(cp.trace(K)), cons)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 6), seed=st.integers(0, 10_000),
       scale=st.sampled_from([1e-3, 1.0, 1e3]))
def test_clarabel_farkas_certificates_pass_and_feasible_problems_never_do(n, seed, scale):
    bad = _psd_rows(n, seed, -1.0, scale)
    try:
        bad.solve(solver=cp.CLARABEL)
    except cp.SolverError:  # Clarabel gives up on some scaled instances: no certificate then
        pass
    if bad.status == cp.INFEASIBLE:  # Clarabel's duals are its Farkas certificate
        duals = {c.id: c.dual_value for c in bad.constraints}
        ok, inv_radius, c0 = farkas_on_problem(bad, duals)
        assert ok and c0 > 0
        flipped = {k: -np.asarray(v) for k, v in duals.items()}
        assert not farkas_on_problem(bad, flipped)[0]
    good = _psd_rows(n, seed, 1.0 + float(np.trace(np.eye(n))), scale)
    rng = np.random.default_rng(seed)
    for _ in range(5):  # soundness: nothing proves a feasible problem infeasible
        mult = {c.id: rng.standard_normal(c.shape) if c.shape else rng.standard_normal()
                for c in good.constraints}
        assert not farkas_on_problem(good, mult)[0]


def test_textbook_certificate_and_its_radius():
    K = cp.Variable((2, 2), symmetric=True)
    cons = [K >> 0, K[0, 0] == 1, K[1, 1] == 1, K[0, 1] == 2]
    prob = cp.Problem(cp.Minimize(0), cons)
    # z = (1/2, 1/2, -1) on the rows, Z = [[1/2, -1/2], [-1/2, 1/2]] = A^*(z) (K01 counted
    # once by the row, twice by <Z, K>; on a symmetric K only the symmetric part acts): the
    # weighted sum 0.5 (K00 - 1) + 0.5 (K11 - 1) - (K01 - 2) - <Z, K> is the constant 1 > 0
    Z = np.array([[0.5, -0.5], [-0.5, 0.5]])
    mult = {cons[0].id: Z, cons[1].id: 0.5, cons[2].id: 0.5, cons[3].id: -1.0}
    ok, inv_radius, c0 = farkas_on_problem(prob, mult)
    assert ok and c0 == pytest.approx(1.0) and inv_radius < 1e-12
    mult[cons[0].id] = Z + 1e-3 * np.eye(2)  # no longer cancels: a finite radius, recorded
    ok, inv_radius, _ = farkas_on_problem(prob, mult)
    assert not ok and 1e-4 < inv_radius < 1e-1
    assert farkas_on_problem(cp.Problem(cp.Minimize(0), [cp.exp(K[0, 0]) <= 1]), {}) is None


def test_ray_along_the_constraints():
    x = cp.Variable(3)
    prob = cp.Problem(cp.Maximize(x[0] + x[1]), [x >= 0, x[0] == x[1], x[2] <= 1])
    x0 = {x.id: np.array([0.0, 0.0, 0.5])}
    assert ray_on_problem(prob, x0, {x.id: np.array([1.0, 1.0, 0.0])}, 1e-4)[0]
    assert not ray_on_problem(prob, x0, {x.id: np.array([1.0, 0.0, 0.0])}, 1e-4)[0]  # row
    assert not ray_on_problem(prob, x0, {x.id: np.array([0.0, 0.0, 1.0])}, 1e-4)[0]  # bound
    flat = cp.Problem(cp.Maximize(x[2]), prob.constraints)
    assert not ray_on_problem(flat, x0, {x.id: np.array([1.0, 1.0, 0.0])}, 1e-4)[0]  # no gain


def _claim(status: str, **proof) -> RouteResult:
    return RouteResult.no_point(status, 1, backend="test", **proof)


def test_gate_downgrades_an_unproven_claim(monkeypatch):
    monkeypatch.setattr(gate, "PROBE_MAX_DENSE_DIM", 0)  # no conic probe to lean on
    K = cp.Variable((2, 2), symmetric=True)
    cons = [K >> 0, K[0, 0] == 1, K[1, 1] == 1, K[0, 1] == 2]
    prob = cp.Problem(cp.Minimize(cp.trace(K)), cons)
    Z = np.array([[0.5, -0.5], [-0.5, 0.5]])
    good = {cons[0].id: Z, cons[1].id: 0.5, cons[2].id: 0.5, cons[3].id: -1.0}
    v = gate.verify(prob, _claim(cp.INFEASIBLE, farkas=good), is_global=True)
    assert v.status == cp.INFEASIBLE and v.checks["farkas_on_problem"].passed
    wrong = {k: -np.asarray(val) for k, val in good.items()}
    v = gate.verify(prob, _claim(cp.INFEASIBLE, farkas=wrong), is_global=True)
    assert v.status == cp.INFEASIBLE_INACCURATE and "not proven" in v.reasons[0]

    x = cp.Variable(2)
    lp = cp.Problem(cp.Minimize(-x[0]), [x >= 0, x[1] == 1])
    ray = ({x.id: np.array([0.0, 1.0])}, {x.id: np.array([1.0, 0.0])})
    v = gate.verify(lp, _claim(cp.UNBOUNDED, ray=ray), is_global=True)
    assert v.status == cp.UNBOUNDED and v.checks["recession_on_problem"].passed
    ray = ({x.id: np.array([0.0, 1.0])}, {x.id: np.array([1.0, 1.0])})  # breaks x1 == 1
    v = gate.verify(lp, _claim(cp.UNBOUNDED, ray=ray), is_global=True)
    assert v.status == cp.UNBOUNDED_INACCURATE
