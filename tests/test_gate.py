"""The verification gate (specopt.gate): the five regression cases of issue 13 and its checks."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import specopt
from specopt import eigengap, gate, linear_spectral, logdet_div, mve_cost
from tests._helpers import checked_reference


# --------------------------------------------------------------------------------------------
# the relative violation
# --------------------------------------------------------------------------------------------
def test_relative_violation_is_scaled_by_the_constraint_data():
    x = cp.Variable(2)
    big = cp.Problem(cp.Minimize(0), [1e6 * x[0] + 1e6 * x[1] <= 1e6])
    small = cp.Problem(cp.Minimize(0), [x[0] + x[1] <= 1])
    at = {x.id: np.array([0.5, 0.50005])}  # violation 50 (big) / 5e-5 (small) ...
    mb, ms = gate.measure(big, at), gate.measure(small, at)
    assert mb["max_violation"] == pytest.approx(50.0, rel=1e-6)
    assert ms["max_violation"] == pytest.approx(5e-5, rel=1e-6)
    # ... but both are the same relative violation: 5e-5 of the data's size
    # scale = max(|lhs|, |rhs|, |summands|) at the point = 1.00005e6 and 1.00005
    assert mb["relative_violation"] == pytest.approx(50.0 / (1 + 1.00005e6), rel=1e-9)
    assert ms["relative_violation"] == pytest.approx(5e-5 / (1 + 1.00005), rel=1e-9)
    # a violation of 53 on data of size 1 fails the gate's tolerance
    far = {x.id: np.array([27.0, 27.0])}
    assert gate.measure(small, far)["relative_violation"] > gate.FEASIBILITY_TOL
    assert x.value is None  # measuring does not write


def test_sums_are_scaled_by_their_summed_entries():
    """``cp.sum(K) == 0`` adds n^2 entries: its violation is relative to the entries' size (as
    for ``K[0, 0] + K[0, 1] + ... == 0``), so it passes where the same centering spelled
    ``K @ 1 == 0`` passes; ``trace`` by the diagonal; a sum of small entries keeps scale 1."""
    n = 40
    K = cp.Variable((n, n), symmetric=True)
    rng = np.random.default_rng(0)
    G = rng.standard_normal((n, 3)) * 10.0
    G -= G.mean(axis=0)
    Kv = G @ G.T
    Kv += 3e-4 / n**2  # sum(K) = 3e-4, entries up to ~1e3
    at = {K.id: Kv}
    total = gate.measure(cp.Problem(cp.Minimize(0), [cp.sum(K) == 0]), at)
    rows = gate.measure(cp.Problem(cp.Minimize(0), [K @ np.ones(n) == 0]), at)
    assert total["max_violation"] == pytest.approx(3e-4, rel=1e-6)
    big = np.abs(Kv).max()
    assert total["relative_violation"] == pytest.approx(3e-4 / (1 + big), rel=1e-9)
    assert total["relative_violation"] <= gate.FEASIBILITY_TOL
    assert rows["relative_violation"] <= gate.FEASIBILITY_TOL
    # a real violation of the sum is still one: 1 % of the entries' size
    off = {K.id: Kv + 0.01 * big / n**2}
    assert gate.measure(cp.Problem(cp.Minimize(0), [cp.sum(K) == 0]), off)[
        "relative_violation"] > gate.FEASIBILITY_TOL
    # trace: the diagonal's entries, not the off-diagonal ones
    D = np.diag(np.r_[1.0, np.zeros(n - 1)]) + 1e3 * (np.ones((n, n)) - np.eye(n))
    tr = gate.measure(cp.Problem(cp.Minimize(0), [cp.trace(K) == 1 + 1e-3]), {K.id: D})
    assert tr["relative_violation"] == pytest.approx(1e-3 / (1 + 1 + 1e-3), rel=1e-9)
    # a probability simplex: entries below 1 leave the scale at the sides' size
    x = cp.Variable(100)
    simplex = gate.measure(cp.Problem(cp.Minimize(0), [cp.sum(x) == 1]),
                           {x.id: np.full(100, 0.0105)})
    assert simplex["relative_violation"] == pytest.approx(0.05 / (1 + 1.05), rel=1e-9)
    assert K.value is None and x.value is None


def test_rows_with_scipy_sparse_data_are_measured():
    """``cp.trace(L @ K) == d`` with ``L`` a scipy sparse array (an edge Laplacian, as users
    write distance rows): the gate measures it (its scale read a sparse value and raised
    ``ValueError`` before), and the route's answer passes."""
    import scipy.sparse as sp

    n = 6
    K = cp.Variable((n, n), symmetric=True)
    rows = []
    for i in range(n - 1):
        L = sp.csr_array(([1.0, 1.0, -1.0, -1.0], ([i, i + 1, i, i + 1], [i, i + 1, i + 1, i])),
                         shape=(n, n))
        rows.append(cp.trace(L @ K) == 1.0 + i)
    Kv = np.eye(n)
    measured = gate.measure(cp.Problem(cp.Minimize(0), rows), {K.id: Kv})
    assert measured["max_violation"] == pytest.approx(n - 3.0)  # 2 against 1 + (n - 2)
    prob = cp.Problem(cp.Maximize(cp.trace(K)), [K >> 0, cp.sum(K) == 0, *rows])
    value = specopt.solve(prob, solver="CLARABEL")
    cert = specopt.certificate(prob)
    assert cert.status == "optimal" and not cert.gate_reasons
    assert value == pytest.approx(checked_reference(prob, "CLARABEL"), rel=1e-5)


def test_a_failing_constraint_is_measured_against_its_written_out_terms():
    """``1^T K 1 == 0`` (or ``quad_form(1, K) == 0``) adds up K's entries: when it fails on its
    sides' size it is measured against its terms ``|a_rk x_k|`` (exactly: ``A @ x == b`` with
    large entries of ``A`` and ``x`` that never meet is not inflated); constraints with
    parameters keep the sides' scale."""
    n = 30
    K = cp.Variable((n, n), symmetric=True)
    rng = np.random.default_rng(1)
    G = rng.standard_normal((n, 2)) * 10.0
    G -= G.mean(axis=0)
    at = {K.id: G @ G.T + 3e-4 / n**2}
    big = np.abs(at[K.id]).max()
    one = np.ones(n)
    for con in (one @ K @ one == 0, cp.quad_form(one, K) == 0):
        m = gate.measure(cp.Problem(cp.Minimize(0), [con]), at)
        assert m["max_violation"] == pytest.approx(3e-4, rel=1e-6)
        assert m["relative_violation"] == pytest.approx(3e-4 / (1 + big), rel=1e-6)
    # the largest entries of A (1e6) meet the smallest of x (1e-6): every term is 1, so a
    # violation of 0.01 stays one (max|A| max|x| = 1e12 would have hidden it)
    x = cp.Variable(2)
    A = np.diag([1e6, 1e-6])
    m = gate.measure(cp.Problem(cp.Minimize(0), [A @ x == np.array([1.01, 1.0])]),
                     {x.id: np.array([1e-6, 1e6])})
    assert m["relative_violation"] == pytest.approx(0.01 / (1 + 1.01), rel=1e-6)
    p = cp.Parameter(value=1.0)
    m = gate.measure(cp.Problem(cp.Minimize(0), [p * (one @ K @ one) == 0]), at)
    assert m["relative_violation"] == pytest.approx(3e-4 / (1 + 3e-4), rel=1e-6)
    assert K.value is None and x.value is None


def test_checks_are_recorded_with_measured_values_and_tolerances():
    x = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - 1)), [cp.sum(x) == 1])
    specopt.solve(prob, route="conic", solver="CLARABEL")
    cert = specopt.certificate(prob)
    assert prob.status == cp.OPTIMAL
    for name in ("objective", "feasibility", "bound_side", "gap"):
        passed, measured, tol = cert.checks[name]
        assert passed and measured <= tol
    assert cert.relative_violation <= gate.FEASIBILITY_TOL
    assert "check feasibility" in str(cert)


# --------------------------------------------------------------------------------------------
# case 1: badly scaled SDP on SCS reported optimal with a wrong value
# --------------------------------------------------------------------------------------------
def _badly_scaled(n: int, seed: int, k: int):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((n, n))
    s = np.r_[np.full(k, 1e3), np.ones(n - 2 * k), np.full(k, 1e-3)]
    C = np.diag(s) @ (B + B.T) @ np.diag(s)
    K = cp.Variable((n, n), symmetric=True)
    alpha = np.zeros(n)
    alpha[:3] = [3, 2, 1]
    obj = cp.Minimize(linear_spectral(K, alpha) + cp.trace(C @ K))
    return cp.Problem(obj, [K >> 0, cp.trace(K) == 1]), K


def test_case1_badly_scaled_scs_is_retried_and_never_certified_wrong():
    prob, K = _badly_scaled(8, 0, 2)
    ref, _ = _badly_scaled(8, 0, 2)
    checked_reference(ref, "CLARABEL")
    specopt.solve(prob, solver="SCS")
    cert = specopt.certificate(prob)
    # SCS's point fails the feasibility check; the retry on Clarabel passes the gate
    assert cert.attempts and cert.attempts[0]["backend"] == "SCS"
    assert "feasibility" in cert.attempts[0]["failed"]
    assert prob.status == cp.OPTIMAL and cert.backend == "CLARABEL"
    assert prob.value == pytest.approx(ref.value, rel=1e-6)
    assert np.linalg.eigvalsh(K.value).min() >= -1e-6
    # without a retry (compare's SCS row) SCS's answer is downgraded, with the reason
    table = specopt.compare(_badly_scaled(8, 0, 2)[0], backends=("SCS", "CLARABEL"))
    scs = table.row("SCS")
    assert scs.status == cp.OPTIMAL_INACCURATE
    assert not scs.certificate.checks["feasibility"].passed
    assert any("feasibility" in r for r in scs.certificate.gate_reasons)
    assert scs.note.startswith("gate: ") and not scs.certified
    assert table.best.backend == "CLARABEL"
    # retry=False (a caller with its own fallback): SCS's answer, downgraded, no Clarabel
    p, _ = _badly_scaled(8, 0, 2)
    specopt.solve(p, solver="SCS", retry=False)
    cert = specopt.certificate(p)
    assert cert.backend == "SCS" and not cert.attempts
    assert p.status == cp.OPTIMAL_INACCURATE and not cert.checks["feasibility"].passed


def test_optimal_always_means_gate_passed_on_every_backend():
    prob, _ = _badly_scaled(6, 3, 2)
    ref, _ = _badly_scaled(6, 3, 2)
    checked_reference(ref, "CLARABEL")
    for solver in ("SCS", "CLARABEL"):
        p, _ = _badly_scaled(6, 3, 2)
        specopt.solve(p, solver=solver)
        cert = specopt.certificate(p)
        if p.status == cp.OPTIMAL:
            assert all(c.passed for c in cert.checks.values())
            assert p.value == pytest.approx(ref.value, rel=1e-4)


# --------------------------------------------------------------------------------------------
# case 2: infeasible hard-constraint ITML (wine data)
# --------------------------------------------------------------------------------------------
def _wine_itml():
    from sklearn.datasets import load_wine

    data = load_wine()
    X = (data.data - data.data.mean(0)) / data.data.std(0)
    y = data.target
    rng = np.random.default_rng(0)
    sim, dis = [], []
    while len(sim) < 60 or len(dis) < 60:
        i, j = rng.integers(len(X), size=2)
        if i == j:
            continue
        if y[i] == y[j] and len(sim) < 60:
            sim.append((i, j))
        elif y[i] != y[j] and len(dis) < 60:
            dis.append((i, j))
    pairs = [(i, j) for i in range(len(X)) for j in range(i)][::50]
    D2 = np.array([np.sum((X[i] - X[j]) ** 2) for i, j in pairs])
    u, lo = np.percentile(D2, 5), np.percentile(D2, 95)  # slack-form bounds used without slack
    d = X.shape[1]
    W = cp.Variable((d, d), PSD=True)
    cons = [cp.quad_form(X[i] - X[j], W) <= u for i, j in sim]
    cons += [cp.quad_form(X[i] - X[j], W) >= lo for i, j in dis]
    return cp.Problem(cp.Minimize(logdet_div(W, np.eye(d))), cons), W


def test_case2_infeasible_itml_is_infeasible_with_no_values():
    ref, _ = _wine_itml()
    ref.solve(solver="CLARABEL")
    assert ref.status == cp.INFEASIBLE
    prob, W = _wine_itml()
    # the sweeps to the cap (slow_after=None: no hand-off to the conic route), so that the gate
    # reclassifies the route's last iterate
    specopt.solve(prob, route="bregman", max_sweeps=20000, slow_after=None)
    cert = specopt.certificate(prob)
    assert prob.status == cp.INFEASIBLE
    assert W.value is None and prob.value == np.inf
    assert cert.objective == np.inf and cert.bound is None
    assert not cert.checks["feasibility"].passed  # what the gate measured on the last iterate
    # as the route runs by default: the slow sweeps hand the problem to the conic route, which
    # proves infeasibility itself
    prob, W = _wine_itml()
    specopt.solve(prob, route="bregman", max_sweeps=20000)
    assert prob.status == cp.INFEASIBLE and W.value is None


# --------------------------------------------------------------------------------------------
# case 3: iterated SDP stationarity (capped inner solves, max_iters=1, ties)
# --------------------------------------------------------------------------------------------
def test_case3a_capped_inner_solves_are_not_stationary():
    K = cp.Variable((4, 4), symmetric=True)
    prob = cp.Problem(cp.Maximize(eigengap(K, 2)), [K >> 0, cp.trace(K) <= 1])
    specopt.solve(prob, route="iterated_sdp", solver="SCS", scs_max_iters=5, max_iters=3)
    cert = specopt.certificate(prob)
    assert prob.status != specopt.STATIONARY
    assert cert.gate_reasons
    failing = [k for k, c in cert.checks.items() if not c.passed]
    assert "inner_solves_accurate" in failing or "feasibility" in failing


def test_case3b_one_iteration_is_not_stationary():
    K = cp.Variable((4, 4), symmetric=True)
    prob = cp.Problem(cp.Maximize(eigengap(K, 2)), [K >> 0, cp.trace(K) <= 1])
    specopt.solve(prob, route="iterated_sdp", solver="CLARABEL", max_iters=1)
    cert = specopt.certificate(prob)
    assert cert.extra["converged"] is False
    assert prob.status == cp.OPTIMAL_INACCURATE
    assert not cert.checks["converged"].passed


@pytest.mark.parametrize("start", ["value", "auto"])
def test_case3c_tied_eigenvalues_descend_to_the_minimum(start):
    K = cp.Variable((4, 4), symmetric=True)
    if start == "value":
        K.value = np.eye(4) / 4  # the tie: every eigenvalue 1/4
    cons = [K >> 0, cp.trace(K) == 1, cp.diag(K) == 0.25]
    prob = cp.Problem(cp.Minimize(mve_cost(K, 1)), cons)
    specopt.solve(prob, route="iterated_sdp", solver="CLARABEL")
    cert = specopt.certificate(prob)
    # the minimum is -1 (K = v v^T, v = (+-1/2, ...)); I/4 (value 0.5) is not stationary
    assert prob.status == specopt.STATIONARY
    assert prob.value == pytest.approx(-1.0, abs=1e-6)
    passed, measured, tol = cert.checks["stationarity"]
    assert passed and measured <= tol


def test_case3c_stationarity_check_sees_the_tie():
    from specopt.reductions.iterated_sdp import build_surrogate, stationarity_check

    K = cp.Variable((4, 4), symmetric=True)
    prob = cp.Problem(cp.Minimize(mve_cost(K, 1)),
                      [K >> 0, cp.trace(K) == 1, cp.diag(K) == 0.25])
    surr = build_surrogate(prob)
    K0 = np.eye(4) / 4

    def run(Bs):
        surr.nodes[0].B.value = Bs[0].ravel(order="F")
        surr.problem.solve(solver="CLARABEL")
        Kv = np.asarray(surr.nodes[0].K.value)
        return {"K": [Kv], "objective": float(surr.true_objective.value),
                "surrogate": float(surr.problem.value), "primal": {}, "dual": {},
                "status": surr.problem.status}

    point = {"K": [K0], "objective": 0.5}
    st = stationarity_check(surr, point, run, 1e-6, 0)
    # one linearization (eigenvectors e_i) proves nothing: the tied space is 4-dimensional
    assert st["tied_dims"] == [4] and not st["exhaustive"]
    assert st["descent"] is not None and st["measured"] > 0.1
    assert st["descent"]["objective"] < 0.5 - 0.1


# --------------------------------------------------------------------------------------------
# case 4: infeasible matrix generation is a status
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("master", ["psd", "lp"])
def test_case4_infeasible_matrix_generation_is_a_status(master):
    rng = np.random.default_rng(0)
    n = 6
    C = rng.standard_normal((n, n))
    C = C + C.T
    X = cp.Variable((n, n), symmetric=True)
    X.value = np.eye(n) / n
    prob = cp.Problem(cp.Maximize(cp.trace(C @ X)), [X >> 0, cp.trace(X) == 1, X[0, 0] >= 2])
    specopt.solve(prob, route="matrix_generation", master=master)
    assert prob.status == cp.INFEASIBLE
    assert X.value is None
    assert specopt.certificate(prob).checks["conic_probe"].passed


# --------------------------------------------------------------------------------------------
# infeasible / unbounded on the conic route
# --------------------------------------------------------------------------------------------
def test_conic_infeasible_and_unbounded_are_statuses():
    x = cp.Variable(2)
    inf = cp.Problem(cp.Minimize(cp.sum(x)), [x >= 1, cp.sum(x) <= 0])
    specopt.solve(inf, route="conic", solver="CLARABEL")
    assert inf.status == cp.INFEASIBLE and x.value is None
    unb = cp.Problem(cp.Minimize(cp.sum(x)), [x <= 1])
    specopt.solve(unb, route="conic", solver="CLARABEL")
    assert unb.status == cp.UNBOUNDED and x.value is None and unb.value == -np.inf
