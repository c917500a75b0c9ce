"""Majorize-minimize on the low-rank engine (MVE): the inner solver (cold interior point, warm
factored method, conic iterated SDP) does not change the stationary point; the size switch; the
monotone trace; honest statuses when the loop is capped."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from specopt.learn.embedding import MinimumVolumeEmbedding, make_hubs_and_spokes
from specopt.solvers.iterated_sdp import MM_EXTRAPOLATION, slow_contraction
from specopt.solvers.sdp import IP_MAX_M as MM_IP_MAX_M
from specopt.solvers.sdp import IP_MAX_N as MM_IP_MAX_N
from specopt.solvers.sdp import SymOp, _solve, low_rank_mm, mm, mm_step_method


def _mve_data(n_spokes=4, per=5, seed=0, k=2):
    """Spokes data prepared as the learner does: rows, squared lengths (mean 1), trace bound,
    the affinity start."""
    X, _ = make_hubs_and_spokes(n_spokes=n_spokes, points_per_spoke=per, noise=0.2,
                                random_state=seed)
    est = MinimumVolumeEmbedding(n_components=2, n_neighbors=k)
    A, C = est._prepare(X)
    rows, d2, T = est._low_rank_data(A, C)
    unit = float(np.mean(d2))
    A, d2 = A / unit, d2 / unit
    T = None if T is None else T / unit
    Y0 = est._low_rank_start(A, min(A.shape[0] - 1, 24))
    return rows, d2, T, Y0


def _mm(rows, d2, T, Y0, method, **kw):
    n = rows.n
    kw.setdefault("max_iters", 50)
    return low_rank_mm(SymOp.identity(n), np.full(2, -2.0), rows, d2, Y0, centered=True,
                       implied_trace_bound=T, tol=1e-6, tol_K=1e-4, inner_tol=1e-6,
                       monotone_tol=1e-5, method=method, **kw)


def _rel(K1, K2):
    return np.linalg.norm(K1 - K2) / np.linalg.norm(K2)


def test_step_method_switch_and_validation():
    assert mm_step_method("auto", MM_IP_MAX_N, MM_IP_MAX_M) == "ip"
    assert mm_step_method("auto", MM_IP_MAX_N + 1, 10) == "bm"
    assert mm_step_method("auto", 10, MM_IP_MAX_M + 1) == "bm"
    assert mm_step_method("bm", 10, 10) == "bm" and mm_step_method("ip", 10**5, 10) == "ip"
    with pytest.raises(ValueError, match="method must be"):
        mm_step_method("fast", 10, 10)
    rows, d2, T, Y0 = _mve_data()
    with pytest.raises(ValueError, match="method must be"):
        _mm(rows, d2, T, Y0, "conic")


def test_same_stationary_point_ip_bm_and_conic():
    """Same start (the affinity) and tolerance: the interior-point steps, the warm-started
    factored steps and the conic iterated SDP (Clarabel, the learner's path) reach the same
    stationary point; each MM trace is monotone and every step is certified."""
    rows, d2, T, Y0 = _mve_data()
    res = {m: _mm(rows, d2, T, Y0, m) for m in ("ip", "bm")}
    for m, r in res.items():
        assert r.converged and r.inner_certified and r.stationary, m
        assert set(r.methods) == {m}
        assert not r.monotone_violations
        obj = r.history["objective"]
        assert all(b <= a + 1e-5 * max(1.0, abs(a)) for a, b in zip(obj, obj[1:], strict=False))
    K = {m: r.Y @ r.Y.T for m, r in res.items()}
    assert res["ip"].objective == pytest.approx(res["bm"].objective, rel=1e-5)
    # K is pinned down less tightly than the value: the MM stops on the step size tol_K, and
    # with a contraction factor rho the distance to the limit is ~ tol_K / (1 - rho)
    assert _rel(K["ip"], K["bm"]) <= 1e-2
    # the conic iterated SDP from the same start (the learner, Clarabel; it solves in the same
    # units: mean squared edge length 1, and reports the objective in them)
    X, _ = make_hubs_and_spokes(n_spokes=4, points_per_spoke=5, noise=0.2, random_state=0)
    cl = MinimumVolumeEmbedding(n_components=2, n_neighbors=2, solver="CLARABEL",
                                tol=1e-6).fit(X)
    assert cl.certificate_.route == "iterated_sdp"
    assert cl.certificate_.status == "stationary_point"
    unit = float(np.mean(_edge_sq(cl)))
    assert res["ip"].objective == pytest.approx(cl.objective_, rel=1e-4)
    # (the conic path stops by the stationarity measure, a value test at 10 tol: K is pinned
    # down to ~1e-2 there)
    assert _rel(K["ip"] * unit, cl.kernel_) <= 2e-2


def _edge_sq(est):
    A, C = est.affinity_, est.connectivity_
    i, j = np.nonzero(np.triu(C, 1))
    return np.diag(A)[i] + np.diag(A)[j] - 2 * A[i, j]


def test_size_switch_bm_above_threshold(monkeypatch):
    """``method="auto"`` uses the interior point up to MM_IP_MAX_N and the warm-started factored
    method above (the threshold lowered to below this instance's size): the same point."""
    rows, d2, T, Y0 = _mve_data(n_spokes=3, per=4)
    below = _mm(rows, d2, T, Y0, "auto", max_iters=30)
    monkeypatch.setattr(_solve, "MM_IP_MAX_N", rows.n - 1)
    above = _mm(rows, d2, T, Y0, "auto", max_iters=30)
    assert set(below.methods) == {"ip"} and set(above.methods) == {"bm"}
    assert below.stationary and above.stationary
    assert above.objective == pytest.approx(below.objective, rel=1e-5)
    assert _rel(above.Y @ above.Y.T, below.Y @ below.Y.T) <= 1e-2


def test_capped_iterations_and_time_are_not_stationary():
    rows, d2, T, Y0 = _mve_data()
    capped = _mm(rows, d2, T, Y0, "ip", max_iters=2)
    assert capped.iterations == 2 and not capped.converged and not capped.stationary
    assert capped.stop_reason == "max_iters"
    # a time limit below one step: stops after the first step, not stationary
    timed = _mm(rows, d2, T, Y0, "ip", time_limit=1e-9)
    assert timed.stop_reason == "time_limit" and not timed.stationary
    # the learner reports it: not a stationary point (one step: the first feasible iterate
    # needs a second step to certify it; two steps already certify the first at the learner's
    # stationarity tolerance)
    X, _ = make_hubs_and_spokes(n_spokes=4, points_per_spoke=5, noise=0.2, random_state=0)
    est = MinimumVolumeEmbedding(n_components=2, n_neighbors=2, solver="LOW_RANK",
                                 max_iter=1).fit(X)
    assert est.certificate_.status == "optimal_inaccurate"
    assert not est.converged_
    full = MinimumVolumeEmbedding(n_components=2, n_neighbors=2, solver="LOW_RANK").fit(X)
    assert full.certificate_.status == "stationary_point"
    assert full.certificate_.extra["inner_solves_accurate"]
    assert set(full.certificate_.extra["inner_methods"]) == {"ip"}


def test_uncertified_inner_solve_is_not_stationary(monkeypatch):
    """Steps whose subproblem is not certified (here: the solver given no iterations, so K does
    not move and the MM test passes at once) do not make a stationary point."""
    rows, d2, T, Y0 = _mve_data(n_spokes=3, per=4)
    real = mm.solve_low_rank_sdp

    def no_iterations(*args, **kw):
        kw["max_iters"] = 0
        return real(*args, **kw)

    monkeypatch.setattr(mm, "solve_low_rank_sdp", no_iterations)
    res = _mm(rows, d2, T, Y0, "bm", max_iters=5)
    assert res.converged and not res.inner_certified and not res.stationary


def test_learner_default_switch(monkeypatch):
    """MinimumVolumeEmbedding (solver=None) runs on the low-rank engine from its measured size
    on, the conic iterated SDP below it."""
    import specopt.learn.embedding as emb

    assert emb.MVE_LOW_RANK_MIN_N == emb.MinimumVolumeEmbedding._low_rank_min_n
    X, _ = make_hubs_and_spokes(n_spokes=3, points_per_spoke=4, noise=0.2, random_state=0)
    n = X.shape[0]
    monkeypatch.setattr(emb.MinimumVolumeEmbedding, "_low_rank_min_n", n + 1)
    below = MinimumVolumeEmbedding(n_components=2, n_neighbors=2).fit(X)
    monkeypatch.setattr(emb.MinimumVolumeEmbedding, "_low_rank_min_n", n)
    above = MinimumVolumeEmbedding(n_components=2, n_neighbors=2).fit(X)
    assert below.certificate_.route == "iterated_sdp"
    assert above.certificate_.route == "low_rank_sdp"
    assert above.objective_ == pytest.approx(below.objective_, rel=1e-3)


def test_stationarity_stop_returns_the_certified_iterate():
    """With stationarity_tol the loop stops when the step's proven bound is within the tolerance
    of the previous iterate's cost, and returns that iterate (not the step's point)."""
    rows, d2, T, Y0 = _mve_data()
    tol = 1e-4
    res = _mm(rows, d2, T, Y0, "ip", stationarity_tol=tol)
    assert res.stop_reason == "stationary" and res.converged
    assert res.stationarity is not None and res.stationarity <= tol
    assert res.history["stationarity"][-1] == res.stationarity
    obj = res.history["objective"]
    assert res.objective == pytest.approx(obj[-2], rel=1e-12)  # the iterate before the last step
    assert obj[-1] <= res.objective + 1e-5 * abs(res.objective)  # monotone up to inner tol


def test_step_tolerance_schedule():
    """Loose first, a tenth of the last measure after, nonincreasing, inner_tol once within 3x
    of it or the measure within 3x of the stop (and then for good); summable along
    geometrically decreasing measures."""
    from specopt.solvers.sdp.mm import step_tolerance

    inner, loose = 1e-4, 1e-2
    assert step_tolerance(None, np.inf, inner, loose) == loose
    assert step_tolerance(loose, 0.05, inner, loose) == pytest.approx(5e-3)
    assert step_tolerance(1e-3, 0.5, inner, loose) == 1e-3  # nonincreasing
    assert step_tolerance(5e-3, 2e-3, inner, loose) == inner  # within 3x: snapped
    assert step_tolerance(inner, 1.0, inner, loose) == inner  # tight for good
    assert step_tolerance(loose, 2e-3, 1e-6, loose, 1e-3) == 1e-6  # the stop is near
    assert step_tolerance(loose, 4e-3, 1e-6, loose, 1e-3) == pytest.approx(4e-4)
    tols, prev = [], None
    for t in range(30):
        prev = step_tolerance(prev, 0.5 * 0.7**t, inner, loose)
        tols.append(prev)
    assert all(b <= a for a, b in zip(tols, tols[1:], strict=False))
    assert sum(t for t in tols if t > inner) <= loose + 0.1 * 0.5 / (1 - 0.7)


def test_inexact_warm_steps_reach_the_exact_stationary_point():
    """Inexact MM with warm-started interior points (the default with stationarity_tol)
    certifies a stationary point of the same value as exact cold steps: the returned iterate's
    step and the certifying step at inner_tol, the schedule nonincreasing; under the same
    schedule, warm-started steps take fewer interior-point steps than cold ones."""
    rows, d2, T, Y0 = _mve_data()
    fast = _mm(rows, d2, T, Y0, "ip", stationarity_tol=1e-4)  # inner_tol 1e-6
    cold = _mm(rows, d2, T, Y0, "ip", stationarity_tol=1e-4, warm_ip=False)
    exact = _mm(rows, d2, T, Y0, "ip", stationarity_tol=1e-4, inexact=False, warm_ip=False)
    for r in (fast, cold, exact):
        assert r.stationary and r.stop_reason == "stationary"
    assert fast.step_tols[-1] == fast.step_tols[-2] == 1e-6
    assert all(b <= a for a, b in zip(fast.step_tols, fast.step_tols[1:], strict=False))
    assert fast.step_tols[0] > 1e-6 and set(exact.step_tols) == {1e-6}
    # both stationary to 1e-4 (relative): the values agree to that order
    assert fast.objective == pytest.approx(exact.objective, rel=1e-3)
    ip_steps = [sum(s.iterations for s in r.inner) for r in (fast, cold)]
    assert ip_steps[0] < ip_steps[1]


def test_inexact_warm_factored_steps_agree_with_interior_point_steps():
    """The factored method warm-started from the previous step's ``(Y, y, sigma)`` under the
    inexact schedule and the stationarity stop (the learner's settings) certifies a stationary
    point of the same value as the interior-point steps from the same start; every step's
    subproblem certified to its scheduled tolerance, the last two to ``inner_tol``."""
    rows, d2, T, Y0 = _mve_data()
    res = {m: _mm(rows, d2, T, Y0, m, stationarity_tol=1e-4) for m in ("ip", "bm")}
    for m, r in res.items():
        assert r.stationary and r.stop_reason == "stationary", m
        assert set(r.methods) == {m}
        assert r.step_tols[-1] == r.step_tols[-2] == 1e-6
        assert r.stationarity is not None and r.stationarity <= 1e-4
        # warm starts carry the multipliers: every factored step after the first starts at y
        assert all(s.status == "optimal" for s in r.inner)
    # both stationary to 1e-4 (relative measure, proven bound): the values agree to that order
    assert res["bm"].objective == pytest.approx(res["ip"].objective, rel=1e-4)


def test_capped_factored_steps_are_not_stationary():
    """Warm-started factored steps under a step iteration cap that does not let them certify,
    or an MM cap: the result is not claimed stationary."""
    rows, d2, T, Y0 = _mve_data()
    capped = _mm(rows, d2, T, Y0, "bm", stationarity_tol=1e-4, step_max_iters=1, max_iters=6)
    assert not capped.stationary and not capped.inner_certified
    assert capped.stop_reason == "max_iters" and not capped.converged
    short = _mm(rows, d2, T, Y0, "bm", stationarity_tol=1e-4, max_iters=2)
    assert short.stop_reason == "max_iters" and not short.stationary


def test_first_step_warm_from_given_multipliers():
    """``y0`` (an SDE solve's multipliers on the same rows, minimizing sign) warm-starts the
    first step: the same certified stationary value as the cold first step."""
    from specopt.solvers.sdp import solve_low_rank_sdp

    rows, d2, T, _ = _mve_data()
    sde = solve_low_rank_sdp(SymOp.identity(rows.n), rows, d2, sense="max", centered=True,
                             implied_trace_bound=T, tol=1e-6)
    assert sde.status == "optimal"
    cold = _mm(rows, d2, T, sde.Y, "ip", stationarity_tol=1e-4)
    warm = _mm(rows, d2, T, sde.Y, "ip", stationarity_tol=1e-4, y0=-sde.y)
    assert cold.stationary and warm.stationary
    assert warm.objective == pytest.approx(cold.objective, rel=1e-4)
    with pytest.raises(ValueError, match="y0 has"):
        _mm(rows, d2, T, sde.Y, "ip", y0=np.zeros(rows.m + 1))


@pytest.mark.parametrize("seed", [0, 1])
def test_early_accepted_steps_certify_the_same_stationary_cost(seed):
    """``ip_accept`` (the default with the inexact schedule: each step's interior point stops at
    the first iterate its certificate accepts) and the float32 Schur factor (forced on these
    small systems) certify a stationary point of the same cost as steps run to their own
    tolerance in float64, with no more interior-point steps."""
    rows, d2, T, Y0 = _mve_data(seed=seed)
    runs = {}
    for name, opts in (("accept", {}), ("full", {"ip_accept": False}),
                       ("f32", {"ip_schur_mixed": True})):
        runs[name] = _mm(rows, d2, T, Y0, "ip", stationarity_tol=1e-4, **opts)
        assert runs[name].stationary and runs[name].stop_reason == "stationary"
    ref = runs["full"].objective
    for r in runs.values():
        assert r.objective == pytest.approx(ref, rel=1e-3)
    steps = {k: sum(s.iterations for s in r.inner) for k, r in runs.items()}
    assert steps["accept"] <= steps["full"]


def test_mm_steps_use_the_interior_point_further_than_single_solves():
    """MM steps (indefinite objective: no complementarity mode for the factored method) stay on
    the interior point up to MM_IP_MAX_N / MM_IP_MAX_M; single solves switch at IP_MAX_N."""
    from specopt.solvers.sdp import _solve

    n, m = _solve.IP_MAX_N + 800, _solve.IP_MAX_M - 1000
    assert _solve.mm_step_method("auto", n, m) == "bm"
    assert _solve.mm_step_method("auto", n, m, mm=True) == "ip"
    assert _solve.mm_step_method("auto", _solve.MM_IP_MAX_N + 1, m, mm=True) == "bm"
    assert _solve.mm_step_method("auto", n, _solve.MM_IP_MAX_M + 1, mm=True) == "bm"
    assert _solve.mm_step_method("bm", 10, 10, mm=True) == "bm"
    assert _solve.MM_IP_MAX_N >= _solve.IP_MAX_N and _solve.MM_IP_MAX_M >= _solve.IP_MAX_M


def test_capped_cold_first_step_is_only_a_linearization_point():
    """With the inexact schedule the cold first step stops after ``first_step_ip_max_iters``
    interior-point steps (uncertified here); the run still certifies a stationary point, on the
    last two steps (``claim_steps``), at the uncapped run's cost."""
    rows, d2, T, Y0 = _mve_data()
    tol = 1e-4
    capped = _mm(rows, d2, T, Y0, "ip", stationarity_tol=tol, first_step_ip_max_iters=2)
    free = _mm(rows, d2, T, Y0, "ip", stationarity_tol=tol, first_step_ip_max_iters=None)
    assert capped.inner[0].iterations <= 2 and capped.inner[0].status != "optimal"
    assert free.inner[0].status == "optimal"
    assert capped.stop_reason == "stationary" and capped.stationary
    assert capped.claim_steps == capped.inner[-2:]
    assert all(r.status == "optimal" for r in capped.claim_steps)
    assert capped.objective == pytest.approx(free.objective, rel=1e-3)


def test_stationary_claim_rests_on_the_returned_and_the_certifying_step():
    """``inner_certified`` after the stationarity stop reads the last two steps only (an early
    uncertified step only supplied a linearization point); either of those two uncertified, or a
    stop without the stationarity test, and the claim needs every step."""
    from types import SimpleNamespace

    def run(statuses, stop):
        inner = [SimpleNamespace(status=s) for s in statuses]
        return mm.LowRankMMResult(Y=np.zeros((2, 1)), objective=0.0, iterations=len(inner),
                                  converged=True, stop_reason=stop, history={},
                                  monotone_violations=[], inner=inner, inner_iterations=0)

    assert run(["inaccurate", "optimal", "optimal"], "stationary").stationary
    assert not run(["optimal", "inaccurate", "optimal"], "stationary").stationary
    assert not run(["optimal", "optimal", "inaccurate"], "stationary").stationary
    assert not run(["inaccurate", "optimal", "optimal"], "converged").stationary
    assert run(["optimal", "optimal"], "converged").stationary


def test_interior_point_step_cap_skips_retries_and_the_factored_continuation():
    """``ip_max_iters``: at most that many interior-point steps, HKM only, no factored method
    after an uncertified point (its certificate says so); uncapped, the same step certifies."""
    rows, d2, T, Y0 = _mve_data()
    n = rows.n
    C = SymOp.identity(n)
    kw = dict(sense="max", centered=True, implied_trace_bound=T, tol=1e-6, method="ip")
    capped = _solve.solve_low_rank_sdp(C, rows, d2, ip_max_iters=3, **kw)
    full = _solve.solve_low_rank_sdp(C, rows, d2, **kw)
    assert capped.iterations <= 3 and capped.status != "optimal"
    assert capped.inner_iterations == 0  # no factored continuation
    assert full.status == "optimal" and full.iterations > 3


def _clarabel_measure(rows, d2, Y, q=2):
    """The stationarity measure of ``K = Y Y^T`` for ``tr K - 2 sum_{i<=q} lambda_i(K)`` computed
    independently: Clarabel's minimum of the majorizer ``<I - 2 V V^T, X>`` (``V`` the top-q
    eigenvectors of K) over the set, against the cost at K, relative to ``1 + |cost|``."""
    import cvxpy as cp
    import scipy.sparse as sp

    K = Y @ Y.T
    w, U = np.linalg.eigh(K)
    V = U[:, ::-1][:, :q]
    Cm = np.eye(rows.n) - 2.0 * V @ V.T
    X = cp.Variable((rows.n, rows.n), PSD=True)
    S = sp.csr_matrix((rows.vals, (rows.rows, np.arange(rows.vals.size))),
                      shape=(rows.m, rows.vals.size))
    prob = cp.Problem(cp.Minimize(cp.trace(Cm @ X)),
                      [S @ X[rows.ii, rows.jj] == d2, cp.sum(X) == 0])
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == cp.OPTIMAL
    cost = float(np.trace(K) - 2.0 * np.sum(np.sort(w)[::-1][:q]))
    return max(0.0, cost - prob.value) / (1.0 + abs(cost))


@given(seed=st.integers(0, 50), theta=st.sampled_from([0.5, 1.0, 1.5, 3.0, 50.0]))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_extrapolated_steps_certify_a_stationary_point(seed, theta):
    """Extrapolated linearization points (``extrapolation``): the run still ends
    ``stationary`` on a plain step (an extrapolated step has no measure: ``inf`` in the
    history; the returned iterate's own step may be extrapolated, the claim needs its point
    feasible, not its step's bound), and Clarabel's own majorizer step from the returned point
    confirms the claim at its tolerance. The first extrapolated step that increased the cost
    switched extrapolation off (none after it) and is not reported as a monotonicity violation."""
    try:
        rows, d2, T, Y0 = _mve_data(seed=seed)
    except ValueError:  # a disconnected kNN graph (the learner's error): no instance
        assume(False)
    tol = 1e-4
    res = _mm(rows, d2, T, Y0, "ip", stationarity_tol=tol, extrapolation=theta)
    assert res.stationary and res.stop_reason == "stationary"
    ex = res.extrapolated
    assert len(ex) == res.iterations and not ex[-1]  # the certifying step is plain
    if any(ex):  # started once the plain measures contracted slowly
        assert slow_contraction(res.history["stationarity"][: ex.index(True)])
    for flag, m in zip(ex, res.history["stationarity"], strict=True):
        assert not flag or m == np.inf
    if res.extrapolation_rejected:
        first = res.extrapolation_rejected[0]
        assert res.extrapolation_rejected == [first] and ex[first - 1]
        assert not any(ex[first:])
        assert all(it != first for it, _ in res.monotone_violations)
    assert _clarabel_measure(rows, d2, res.Y) <= tol + 1e-6


def test_extrapolation_is_used_where_mm_contracts_slowly():
    """Spokes sets whose plain MM measures fall slowly (kNN 3; measured: seeds 5, 7, 8, 9 use
    it, most faster sets do not): the extrapolated runs certify the same kind of point, each
    confirmed by Clarabel's majorizer step."""
    used = 0
    for seed in (5, 7, 8, 9):
        rows, d2, T, Y0 = _mve_data(seed=seed, k=3)
        res = _mm(rows, d2, T, Y0, "ip", stationarity_tol=1e-4,
                  extrapolation=MM_EXTRAPOLATION)  # the learner's
        assert res.stationary
        used += any(res.extrapolated)
        assert _clarabel_measure(rows, d2, res.Y) <= 1e-4 + 1e-6
    assert used >= 2


def test_bad_extrapolation_is_refused_by_the_loop_and_the_learner():
    """A negative, NaN or infinite ``extrapolation`` is an error naming the option (it was
    silently plain MM), in the engine loop and through the MVE learner's solver options."""
    rows, d2, T, Y0 = _mve_data()
    X, _ = make_hubs_and_spokes(n_spokes=4, points_per_spoke=5, noise=0.2, random_state=0)
    for theta in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="extrapolation must be a finite number >= 0"):
            _mm(rows, d2, T, Y0, "ip", stationarity_tol=1e-4, extrapolation=theta)
        with pytest.raises(ValueError, match="extrapolation must be a finite number >= 0"):
            MinimumVolumeEmbedding(n_components=2, n_neighbors=2, solver="LOW_RANK",
                                   solver_options={"extrapolation": theta}).fit(X)


def test_extrapolation_off_is_plain_mm():
    """``extrapolation=0`` (and any value without the stationarity stop) linearizes at the
    iterate: no step is extrapolated, the same run as without the option."""
    rows, d2, T, Y0 = _mve_data()
    plain = _mm(rows, d2, T, Y0, "ip", stationarity_tol=1e-4)
    off = _mm(rows, d2, T, Y0, "ip", stationarity_tol=1e-4, extrapolation=0.0)
    assert not any(plain.extrapolated) and off.history["objective"] == plain.history["objective"]
    fixed_tol = _mm(rows, d2, T, Y0, "ip", extrapolation=1.5)
    assert not any(fixed_tol.extrapolated)
