"""Differential harness for the verification gate (issue 13).

Random instances for every route, including infeasible, unbounded, badly scaled (data entries
spread over 12 orders of magnitude), tied spectra and capped runs (max_iters / max_sweeps /
max_passes, time limits, tiny inner iteration limits). Whatever the route answers:

* ``optimal`` / ``stationary_point`` => every gate check holds, re-measured on the values written
  into the user's variables (relative violation <= FEASIBILITY_TOL, bound on the right side,
  gap <= GAP_TOL), and for convex problems the objective matches Clarabel within
  ``OBJ_TOL * (1 + |f_clarabel|)`` whenever Clarabel's own answer passes the gate;
* ``infeasible`` / ``unbounded`` => no values written and Clarabel does not certify an optimum;
* the only exception allowed is ``SolverError`` (a numerical failure on extreme data is a
  failure, never a wrong answer).

Clarabel itself is not trusted blindly: on data spread over 12 decades it can claim
``infeasible`` (the gate's probe then rejects the claim) or ``unbounded`` for a compact feasible
set; the reference is used only when its own answer passed the gate as ``optimal``.

Fast by design: few examples per route (derandomized under CI by the conftest profile).
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import specopt
from specopt import gate, linear_spectral, logdet_div, mve_cost

#: Objective agreement with Clarabel for certified convex answers (relative to 1 + |f|).
OBJ_TOL = 1e-3
SETTINGS = dict(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _scales(rng: np.random.Generator, n: int, spread: float) -> np.ndarray:
    """Row/column scales 10^u, u uniform over ``spread`` decades (0: all ones)."""
    return 10.0 ** rng.uniform(-spread / 2, spread / 2, n)


def _reference(build):
    ref, _ = build()
    try:
        specopt.solve(ref, route="conic", solver="CLARABEL", retry=False)
    except cp.error.SolverError:
        return None, None
    return ref.status, (ref.value if ref.status == cp.OPTIMAL else None)


def _solve(prob: cp.Problem, **opts) -> bool:
    """``specopt.solve``; False when the route failed with SolverError (allowed, see above)."""
    try:
        specopt.solve(prob, **opts)
    except cp.error.SolverError:
        assert prob.status is None  # nothing written
        return False
    return True


def _assert_gate(prob: cp.Problem, convex: bool, build=None) -> None:
    cert = specopt.certificate(prob)
    status = prob.status
    if status in (cp.OPTIMAL, specopt.STATIONARY):
        assert cert.checks and all(c.passed for c in cert.checks.values()), cert.checks
        # re-measured on the values written into the user's variables
        rows = gate.relative_violations(prob)
        assert max((r[2] for r in rows), default=0.0) <= gate.FEASIBILITY_TOL
        f = float(prob.objective.value)
        assert abs(f - prob.value) <= gate.OBJECTIVE_TOL * (1 + abs(f))
        if cert.bound is not None:
            sense = 1.0 if isinstance(prob.objective, cp.Minimize) else -1.0
            assert sense * (cert.bound - f) <= gate.BOUND_TOL * max(1.0, abs(f))
        if status == cp.OPTIMAL and cert.gap is not None:
            assert cert.gap <= gate.GAP_TOL
        if convex and build is not None:
            _, ref_val = _reference(build)
            if ref_val is not None:
                assert abs(prob.value - ref_val) <= OBJ_TOL * (1 + abs(ref_val)), (
                    prob.value, ref_val)
    elif status in (cp.INFEASIBLE, cp.UNBOUNDED, cp.INFEASIBLE_INACCURATE,
                    cp.UNBOUNDED_INACCURATE):
        assert all(v.value is None for v in prob.variables())
        if convex and build is not None and status in (cp.INFEASIBLE, cp.UNBOUNDED):
            ref_status, _ = _reference(build)
            assert ref_status != cp.OPTIMAL, (status, ref_status)
    else:
        assert status in (cp.OPTIMAL_INACCURATE, cp.USER_LIMIT), status


# --------------------------------------------------------------------------------------------
# conic route (Clarabel, SCS, capped SCS): spectral SDPs over the spectraplex
# --------------------------------------------------------------------------------------------
@settings(**SETTINGS)
@given(seed=st.integers(0, 10**6), n=st.integers(3, 6), spread=st.sampled_from([0.0, 6.0, 12.0]),
       kind=st.sampled_from(["feasible", "infeasible", "unbounded"]),
       backend=st.sampled_from(["CLARABEL", "SCS", "SCS-capped"]))
def test_conic_route(seed, n, spread, kind, backend):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((n, n))
    S = np.diag(_scales(rng, n, spread))
    C = S @ (B + B.T) @ S
    alpha = np.sort(rng.uniform(0, 3, n))[::-1]  # nonincreasing: convex

    def build():
        K = cp.Variable((n, n), symmetric=True)
        obj = cp.Minimize(linear_spectral(K, alpha) + cp.trace(C @ K))
        cons = [K >> 0]
        if kind != "unbounded":
            cons.append(cp.trace(K) == 1)
        else:
            obj = cp.Minimize(cp.trace(C @ K) - 10.0 * cp.trace(K) * float(np.abs(C).max()))
        if kind == "infeasible":
            cons.append(K[0, 0] >= 2)
        return cp.Problem(obj, cons), K

    prob, _ = build()
    opts = {"solver": backend.split("-")[0]}
    if backend == "SCS-capped":
        opts["max_iters"] = 20
    if _solve(prob, route="conic", **opts):
        _assert_gate(prob, True, build)


# --------------------------------------------------------------------------------------------
# bregman: ITML with hard bounds (feasible / infeasible), badly scaled data, capped sweeps
# --------------------------------------------------------------------------------------------
@settings(**SETTINGS)
@given(seed=st.integers(0, 10**6), d=st.integers(2, 4), m=st.integers(3, 12),
       spread=st.sampled_from([0.0, 4.0]), kind=st.sampled_from(["feasible", "infeasible"]),
       max_sweeps=st.sampled_from([3, 100_000]))
def test_bregman_route(seed, d, m, spread, kind, max_sweeps):
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((m, d)) * _scales(rng, d, spread)
    sq = np.sum(V**2, axis=1)
    side = rng.choice([-1.0, 1.0], m)
    if kind == "feasible":  # W = I satisfies every bound with room to spare
        bounds = np.where(side > 0, 2.0 * sq, 0.5 * sq)
    else:  # the same difference both "similar" (<= u) and "dissimilar" (>= l > u)
        V[1] = V[0]
        side[:2] = [1.0, -1.0]
        bounds = np.where(side > 0, 2.0 * sq, 0.5 * sq)
        bounds[0], bounds[1] = sq[0], 2.0 * sq[0]

    def build():
        W = cp.Variable((d, d), PSD=True)
        cons = [cp.quad_form(V[i], W) <= bounds[i] if side[i] > 0
                else cp.quad_form(V[i], W) >= bounds[i] for i in range(m)]
        return cp.Problem(cp.Minimize(logdet_div(W, np.eye(d))), cons), W

    prob, _ = build()
    if _solve(prob, route="bregman", max_sweeps=max_sweeps):
        _assert_gate(prob, True, build)


# --------------------------------------------------------------------------------------------
# matrix generation: LPs over the spectraplex (feasible / infeasible / capped)
# --------------------------------------------------------------------------------------------
@settings(**SETTINGS)
@given(seed=st.integers(0, 10**6), n=st.integers(3, 6), k=st.integers(0, 3),
       spread=st.sampled_from([0.0, 12.0]), kind=st.sampled_from(["feasible", "infeasible"]),
       max_iters=st.sampled_from([1, 500]), master=st.sampled_from(["psd", "lp"]))
def test_matrix_generation_route(seed, n, k, spread, kind, max_iters, master):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((n, n))
    S = np.diag(_scales(rng, n, spread))
    C = S @ (B + B.T) @ S
    As = [rng.standard_normal((n, n)) for _ in range(k)]
    # b_i >= <A_i, I/n> + margin: X = I/n is feasible
    bs = [float(np.trace(A + A.T) / n) + 0.1 for A in As]

    def build():
        X = cp.Variable((n, n), symmetric=True)
        cons = [X >> 0, cp.trace(X) == 1]
        cons += [cp.trace((A + A.T) @ X) <= b for A, b in zip(As, bs, strict=True)]
        if kind == "infeasible":
            cons.append(X[0, 0] >= 1.5)
        return cp.Problem(cp.Maximize(cp.trace(C @ X)), cons), X

    prob, _ = build()
    if _solve(prob, route="matrix_generation", max_iters=max_iters, master=master):
        _assert_gate(prob, True, build)


# --------------------------------------------------------------------------------------------
# dual CD: hinge-loss QPs with badly scaled rows, capped passes
# --------------------------------------------------------------------------------------------
@settings(**SETTINGS)
@given(seed=st.integers(0, 10**6), n=st.integers(5, 40), m=st.integers(2, 5),
       spread=st.sampled_from([0.0, 6.0]), max_passes=st.sampled_from([1, 100_000]),
       nonneg=st.booleans())
def test_dual_cd_route(seed, n, m, spread, max_passes, nonneg):
    rng = np.random.default_rng(seed)
    Z = rng.normal(0.5, 1.0, (n, m)) * _scales(rng, n, spread)[:, None]

    def build():
        w = cp.Variable(m)
        obj = 0.5 * cp.sum_squares(w) + cp.sum(cp.pos(1 - Z @ w))
        return cp.Problem(cp.Minimize(obj), [w >= 0] if nonneg else []), w

    prob, _ = build()
    if _solve(prob, route="dual_cd", max_passes=max_passes):
        _assert_gate(prob, True, build)


# --------------------------------------------------------------------------------------------
# iterated SDP: MVE-type costs at tied spectra, capped outer and inner iterations
# --------------------------------------------------------------------------------------------
@settings(**SETTINGS)
@given(seed=st.integers(0, 10**6), n=st.integers(3, 5), d=st.integers(1, 2),
       tied=st.booleans(), diag=st.booleans(),
       cap=st.sampled_from(["none", "max_iters=1", "max_iters=2", "scs_max_iters=5"]))
def test_iterated_sdp_route(seed, n, d, tied, diag, cap):
    d = min(d, n - 1)
    K = cp.Variable((n, n), symmetric=True)
    if tied:
        K.value = np.eye(n) / n
    else:
        G = np.random.default_rng(seed).standard_normal((n, n))
        K.value = G @ G.T
    cons = [K >> 0, cp.trace(K) == 1] + ([cp.diag(K) == 1.0 / n] if diag else [])
    prob = cp.Problem(cp.Minimize(mve_cost(K, d)), cons)
    opts: dict = {"solver": "SCS" if cap == "scs_max_iters=5" else "CLARABEL"}
    if cap != "none":
        key, val = cap.split("=")
        opts[key] = int(val)
    if _solve(prob, route="iterated_sdp", **opts):
        _assert_gate(prob, False)
    if prob.status == specopt.STATIONARY:
        # closed form: mve_cost(K, d) = tr K - 2 (lambda_1 + ... + lambda_d) >= 1 - 2 = -1
        assert prob.value >= -1.0 - 1e-6
        if not diag and d == 1:
            # on the spectraplex every stationary point of tr K - 2 lambda_1 is a minimum
            assert prob.value == pytest.approx(-1.0, abs=1e-5)
