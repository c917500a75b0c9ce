"""Route "bregman" against Clarabel on the conic form of the same ITML problems."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

import specopt
from specopt.reductions import RouteMismatch
from specopt.solvers.bregman import itml_lowrank

CLARABEL_TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500)


def _data(seed, d=4, n=14, m=16, planted=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((d, n))
    P = rng.integers(0, n, (4 * m, 2))
    P = P[P[:, 0] != P[:, 1]][:m]
    V = (X[:, P[:, 0]] - X[:, P[:, 1]]).T
    delta = np.where(np.arange(m) % 2 == 0, 1.0, -1.0)
    if planted:  # feasible by construction for hard constraints
        B = rng.standard_normal((d, d))
        p = np.einsum("ij,jk,ik->i", V, B @ B.T + 0.5 * np.eye(d), V)
        b = np.where(delta > 0, 1.2 * p, p / 1.2)
    else:
        dist = np.sum(V**2, axis=1)
        b = np.where(delta > 0, np.percentile(dist, 10), np.percentile(dist, 90))
    B0 = rng.standard_normal((d, d))
    W0 = B0 @ B0.T / d + np.eye(d)
    return V, b, delta, W0


def _problem(V, b, delta, W0, gamma, weight=1.0):
    d = V.shape[1]
    W = cp.Variable((d, d), PSD=True)
    S, D = np.flatnonzero(delta > 0), np.flatnonzero(delta < 0)
    if math.isinf(gamma):
        obj = weight * specopt.logdet_div(W, W0)
        cons = [
            specopt.row_quad_forms(V[S], W) <= b[S],
            specopt.row_quad_forms(V[D], W) >= b[D],
        ]
        return cp.Problem(cp.Minimize(obj), cons), W, None
    xi = cp.Variable(len(b))
    obj = weight * specopt.logdet_div(W, W0) + weight * gamma * specopt.burg_div(xi, b)
    cons = [specopt.row_quad_forms(V[S], W) <= xi[S], specopt.row_quad_forms(V[D], W) >= xi[D]]
    return cp.Problem(cp.Minimize(obj), cons), W, xi


@pytest.mark.parametrize("gamma", [1.0, 10.0, math.inf])
def test_against_clarabel(gamma):
    V, b, delta, W0 = _data(0, planted=math.isinf(gamma))
    prob, W, xi = _problem(V, b, delta, W0, gamma)
    # slack form: dual Newton (no compiled kernel) always pays off; hard constraints sweep with
    # a compiled kernel whose one-off start-up exceeds Clarabel's time at this size
    from specopt.solvers._jit import numba_loaded

    expected = "bregman" if not math.isinf(gamma) or numba_loaded() else "conic"
    assert specopt.explain(prob).auto_route == expected
    specopt.solve(prob, route="bregman", tol=1e-10)
    cert = specopt.certificate(prob)
    assert prob.status == cp.OPTIMAL and cert.route == "bregman"
    assert cert.gap <= 1e-8 and cert.bound <= prob.value + 1e-7
    Wb, vb = W.value.copy(), prob.value
    duals_b = [c.dual_value.copy() for c in prob.constraints]
    specopt.solve(prob, route="conic", solver="CLARABEL", **CLARABEL_TIGHT)
    assert prob.status == cp.OPTIMAL
    assert np.linalg.norm(Wb - W.value) <= 1e-4 * np.linalg.norm(W.value)
    assert abs(vb - prob.value) <= 1e-6 * max(1.0, abs(prob.value))
    for db, c in zip(duals_b, prob.constraints, strict=True):
        scale = max(1.0, np.abs(c.dual_value).max())
        assert np.abs(db - c.dual_value).max() <= 1e-3 * scale


def test_quad_form_constraints_and_weighted_objective():
    V, b, delta, W0 = _data(1)
    d = V.shape[1]
    W = cp.Variable((d, d), symmetric=True)
    xi = cp.Variable(len(b))
    cons = []
    for c in range(len(b)):
        q = cp.quad_form(V[c], W)
        cons.append(q <= xi[c] if delta[c] > 0 else xi[c] <= q)
    cons += [W >> 0, xi >= 0]
    prob = cp.Problem(
        cp.Minimize(3.0 * specopt.logdet_div(W, W0) + 6.0 * specopt.burg_div(xi, b) + 1.5), cons
    )
    match = specopt.explain(prob).verdict("bregman")
    assert match.matches, match.reason
    specopt.solve(prob, route="bregman", tol=1e-10)
    Wb, vb = W.value.copy(), prob.value
    ref, W2, _ = _problem(V, b, delta, W0, 2.0, weight=3.0)
    specopt.solve(ref, route="bregman", tol=1e-10)
    assert np.linalg.norm(Wb - W2.value) <= 1e-8 * np.linalg.norm(Wb)
    assert abs(vb - (ref.value + 1.5)) <= 1e-8 * abs(vb)
    specopt.solve(prob, route="conic", solver="CLARABEL", **CLARABEL_TIGHT)
    assert abs(vb - prob.value) <= 1e-6 * abs(prob.value)


def test_mismatch_reasons():
    V, b, delta, W0 = _data(2)
    d = V.shape[1]
    W = cp.Variable((d, d), PSD=True)
    rq = specopt.row_quad_forms(V, W)
    cases = {
        "objective term": cp.Problem(
            cp.Minimize(specopt.logdet_div(W, W0) + cp.sum_squares(W)), [rq <= b]
        ),
        "not a squared distance": cp.Problem(
            cp.Minimize(specopt.logdet_div(W, W0)), [W[0, 1] <= 1]
        ),
        "rank-one": cp.Problem(cp.Minimize(specopt.logdet_div(W, W0)), [cp.trace(W) <= 5]),
        "<= 0": cp.Problem(cp.Minimize(specopt.logdet_div(W, W0)), [rq <= 0]),
        "no logdet_div": cp.Problem(cp.Minimize(specopt.burg_div(cp.diag(W), 1.0)), [rq <= b]),
        "minimized": cp.Problem(cp.Maximize(-specopt.logdet_div(W, W0)), [rq <= b]),
    }
    xi = cp.Variable(len(b))
    cases["mixed hard and slack"] = cp.Problem(
        cp.Minimize(specopt.logdet_div(W, W0) + specopt.burg_div(xi, b)),
        [rq[:3] <= xi[:3], rq[3:] >= b[3:]],
    )
    for phrase, prob in cases.items():
        verdict = specopt.explain(prob).verdict("bregman")
        assert not verdict.matches
        assert phrase in verdict.reason, (phrase, verdict.reason)
    with pytest.raises(RouteMismatch, match="rank-one"):
        specopt.solve(cases["rank-one"], route="bregman")


def test_infeasible_hard_constraints_and_values_untouched():
    rng = np.random.default_rng(0)
    v = rng.standard_normal(3)
    W = cp.Variable((3, 3), PSD=True)
    W.value = np.eye(3)
    prob = cp.Problem(
        cp.Minimize(specopt.logdet_div(W, np.eye(3))),
        [specopt.row_quad_forms(v[None], W) <= 1.0, specopt.row_quad_forms(2 * v[None], W) >= 8.0],
    )
    specopt.solve(prob, route="bregman")
    assert prob.status == cp.INFEASIBLE
    specopt.solve(prob, route="conic", solver="CLARABEL")
    assert prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE)


def test_scale_and_congruence_invariance():
    V, b, delta, W0 = _data(3)
    prob, W, _ = _problem(V, b, delta, W0, 1.0)
    specopt.solve(prob, route="bregman", tol=1e-10)
    Wref, vref = W.value.copy(), prob.value
    c = 4.0
    p2, W2, _ = _problem(V, c * b, delta, c * W0, 1.0)
    specopt.solve(p2, route="bregman", tol=1e-10)
    assert np.linalg.norm(W2.value - c * Wref) <= 1e-7 * c * np.linalg.norm(Wref)
    assert abs(p2.value - vref) <= 1e-8 * max(1, vref)
    T = np.random.default_rng(3).standard_normal((4, 4)) + 3 * np.eye(4)
    p3, W3, _ = _problem(V @ np.linalg.inv(T), b, delta, T @ W0 @ T.T, 1.0)
    specopt.solve(p3, route="bregman", tol=1e-10)
    ref = T @ Wref @ T.T
    assert np.linalg.norm(W3.value - ref) <= 1e-6 * np.linalg.norm(ref)
    assert abs(p3.value - vref) <= 1e-8 * max(1, vref)


def test_lowrank_equals_restricted_conic_problem():
    V, b, delta, _ = _data(4, d=5, m=12)
    rng = np.random.default_rng(4)
    U, _ = np.linalg.qr(rng.standard_normal((5, 2)))
    Ws = np.eye(5) + U @ np.diag([1.5, 0.4]) @ U.T  # planted inside the family
    p = np.einsum("ij,jk,ik->i", V, Ws, V)
    b = np.where(delta > 0, 1.2 * p, p / 1.2)
    low = itml_lowrank(V, b, delta, U, tol=1e-10)
    assert low.status == "optimal"
    F = cp.Variable((2, 2), symmetric=True)
    Wexpr = np.eye(5) + U @ (F - np.eye(2)) @ U.T
    S, D = np.flatnonzero(delta > 0), np.flatnonzero(delta < 0)
    prob = cp.Problem(
        cp.Minimize(specopt.logdet_div(F, np.eye(2))),
        [
            specopt.row_quad_forms(V[S], Wexpr) <= b[S],
            specopt.row_quad_forms(V[D], Wexpr) >= b[D],
        ],
    )
    specopt.solve(prob, route="conic", solver="CLARABEL", **CLARABEL_TIGHT)
    Wc = np.eye(5) + U @ (F.value - np.eye(2)) @ U.T
    assert np.linalg.norm(low.W - Wc) <= 1e-4 * np.linalg.norm(Wc)
    assert abs(low.primal - prob.value) <= 1e-6 * max(1, abs(prob.value))


def test_pays_off_includes_fixed_costs():
    """auto's choice counts the compiled-kernel start-up: hard-constraint ITML at a small size
    goes to the conic route in a process where numba is not loaded, to bregman once it is, and
    the slack form (dual Newton, numpy only) goes to bregman either way (fresh interpreter)."""
    import subprocess
    import sys

    code = (
        "import sys, math, numpy as np\n"
        "sys.path.insert(0, 'tests/routes')\n"
        "import specopt\n"
        "from test_bregman_route import _data, _problem\n"
        "V, b, delta, W0 = _data(0, planted=True)\n"
        "hard = _problem(V, b, delta, W0, math.inf)[0]\n"
        "soft = _problem(*_data(0)[:3], W0, 1.0)[0]\n"
        "out = [specopt.explain(hard).auto_route, specopt.explain(soft).auto_route]\n"
        "specopt.solve(soft, route='bregman')\n"
        "out.append(str('numba' in sys.modules))\n"
        "specopt.solve(hard, route='bregman')\n"
        "out.append(specopt.explain(hard).auto_route)\n"
        "print(' '.join(out))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True)
    assert res.stdout.split() == ["conic", "bregman", "False", "bregman"]


def test_slow_sweeps_hand_the_problem_to_the_conic_route():
    """Sweeps whose measured rate would reach max_sweeps before tol stop early (status "slow")
    and the route hands the problem to the conic route: same answer as Clarabel, the hand-off
    recorded; with ``slow_after=None`` the sweeps run to the cap (optimal_inaccurate)."""
    V, b, delta, W0 = _data(3, d=5, n=20, m=40, planted=True)
    prob, W, _ = _problem(V, b, delta, W0, math.inf)
    res = itml_linear_call(V, b, delta, W0, slow_after=0.0)
    assert res.status == "slow" and res.iterations < 200
    specopt.solve(prob, route="bregman", tol=1e-12, max_sweeps=200, slow_after=0.0)
    cert = specopt.certificate(prob)
    assert cert.backend.startswith("bregman->") and "handed_to_conic" in cert.extra
    assert prob.status == cp.OPTIMAL
    value = prob.value
    specopt.solve(prob, route="bregman", tol=1e-12, max_sweeps=200, slow_after=None)
    assert prob.status == cp.OPTIMAL_INACCURATE and specopt.certificate(prob).backend == "bregman"
    specopt.solve(prob, route="conic", solver="CLARABEL", **CLARABEL_TIGHT)
    assert value == pytest.approx(prob.value, rel=1e-6)


def itml_linear_call(V, b, delta, W0, **kw):
    from specopt.solvers.bregman import itml_linear

    return itml_linear(V, b, delta, W0, math.inf, tol=1e-12, max_sweeps=200, **kw)
