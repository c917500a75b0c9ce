"""The sphere method for diagonal-row SDPs (max-cut): agreement with Clarabel, the certificate's
bound on its proven side, the deflated eigenvalue bound, capped and timed runs, the verbose
objective hook."""

from __future__ import annotations

import math
import re
import time

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specopt.solvers.sdp import SparseRows, solve_sdp
from specopt.solvers.sdp._certificate import min_eig_lower_bound
from specopt.solvers.sdp._data import Scaled, SymOp
from specopt.solvers.sdp.bm_diag import diagonal_targets


def _graph(n: int, p: float, seed: int, signed: bool = False) -> sp.csr_array:
    """The max-cut matrix ``L / 4`` of a random graph (edge probability ``p``), weights in
    (0.5, 2), or of both signs."""
    rng = np.random.default_rng(seed)
    m = rng.binomial(n * (n - 1) // 2, p)
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = i != j
    w = rng.uniform(0.5, 2.0, m) * (rng.choice([-1.0, 1.0], m) if signed else 1.0)
    W = sp.coo_array((w[keep], (i[keep], j[keep])), shape=(n, n)).tocsr()
    W = W + W.T
    return sp.csr_array(sp.diags_array(np.asarray(W.sum(axis=1)).ravel()) - W) / 4.0


def _clarabel(C: np.ndarray, d: np.ndarray) -> float:
    X = cp.Variable(C.shape, symmetric=True)
    prob = cp.Problem(cp.Maximize(cp.trace(C @ X)), [X >> 0, cp.diag(X) == d])
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == cp.OPTIMAL
    return float(prob.value)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(4, 22), p=st.floats(0.15, 0.9), seed=st.integers(0, 10_000),
       signed=st.booleans(), unit=st.booleans())
def test_agrees_with_clarabel_and_bound_on_its_side(n, p, seed, signed, unit):
    """max <C, K> s.t. K_ii = d_i: the sphere method's value matches Clarabel's, its point is
    feasible to rounding, and its certified upper bound is not below Clarabel's optimum."""
    C = _graph(n, p, seed, signed)
    rng = np.random.default_rng(seed + 1)
    d = np.ones(n) if unit else rng.uniform(0.5, 3.0, n)
    A = SparseRows.from_entries(np.arange(n), np.arange(n), n)
    res = solve_sdp(C, A, d, sense="max", method="bm", tol=1e-8, seed=seed)
    ref = _clarabel(C.toarray(), d)
    assert res.status == "optimal"
    assert res.max_abs_residual <= 1e-10 * max(1.0, d.max())
    assert res.objective == pytest.approx(ref, rel=1e-6, abs=1e-6)
    # the bound is an upper bound (maximizing): on the proven side of the true optimum
    assert res.bound >= ref - 1e-6 * max(1.0, abs(ref))
    assert res.bound >= res.objective - 1e-9 * max(1.0, abs(res.objective))
    assert np.sum(np.abs(np.sum(res.Y**2, axis=1) - d)) <= 1e-9 * d.sum()


def test_scaled_rows_and_auto_route():
    """Rows ``a_i K_ii = b_i`` with ``a_i`` of any sign and scale are recognized; under
    ``method="auto"`` the sphere method runs from DIAG_MIN_N on, the same optimum as the IP."""
    n = 120
    C = _graph(n, 0.05, 3)
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 4.0, n) * rng.choice([-1.0, 1.0], n)
    A = SparseRows(np.arange(n), np.arange(n), np.arange(n), a, n, n)
    b = a * 2.0  # K_ii = 2
    assert np.allclose(diagonal_targets(A, b), 2.0)
    auto = solve_sdp(C, A, b, sense="max", tol=1e-7)
    ip = solve_sdp(C, A, b, sense="max", tol=1e-7, method="ip")
    assert auto.status == ip.status == "optimal"
    assert "ip" not in auto.history and "ip" in ip.history
    assert auto.objective == pytest.approx(ip.objective, rel=1e-6)
    # the row multipliers (the duals the route reports) in the same convention
    assert np.allclose(auto.y, ip.y, rtol=1e-4, atol=1e-5 * np.abs(ip.y).max())


def test_diagonal_targets_rejects_other_rows():
    n = 5
    ii = np.arange(n)
    ok = SparseRows.from_entries(ii, ii, n)
    assert diagonal_targets(ok, np.ones(n)) is not None
    assert diagonal_targets(ok, np.r_[np.ones(n - 1), -1.0]) is None  # K_ii = -1: not a sphere
    assert diagonal_targets(SparseRows.from_entries(ii[:-1], ii[:-1], n), np.ones(n - 1)) is None
    off = SparseRows.from_entries(ii, np.r_[ii[1:], 0], n)
    assert diagonal_targets(off, np.ones(n)) is None
    twice = SparseRows(np.arange(n), np.r_[ii[:-1], 0], np.r_[ii[:-1], 0], np.ones(n), n, n)
    assert diagonal_targets(twice, np.ones(n)) is None


@settings(max_examples=20, deadline=None)
@given(n=st.integers(3, 40), r=st.integers(1, 6), seed=st.integers(0, 10_000),
       near=st.booleans())
def test_deflated_eigenvalue_bound_is_a_lower_bound(n, r, seed, near):
    """``min_eig_lower_bound`` never exceeds the exact smallest eigenvalue of the slack, for any
    ``y`` and basis ``Y`` (``near``: ``Y`` close to the slack's bottom eigenvectors, the case it
    is built for, where the bound is also nearly tight)."""
    rng = np.random.default_rng(seed)
    C = _graph(n, 0.4, seed, signed=True)
    A = SparseRows.from_entries(np.arange(n), np.arange(n), n)
    y = rng.standard_normal(n)
    P = Scaled(SymOp(n, sparse=C), A, np.ones(n), None, None, False, 1.0)
    S = P.slack_matmat(y, 0.0, np.eye(n))
    w, V = np.linalg.eigh(0.5 * (S + S.T))
    r = min(r, n)
    Y = V[:, :r] + (1e-6 if near else 1.0) * rng.standard_normal((n, r))
    lo, _ = min_eig_lower_bound(P, y, 0.0, Y, dense_threshold=1000, rng=rng)
    assert lo <= w[0] + 1e-9 * max(1.0, abs(w[0]))
    if near:
        assert lo >= w[0] - 1e-4 * max(1.0, abs(w[0]))


def test_deflated_bound_stops_its_lanczos_when_time_is_up():
    """The Lanczos run of ``min_eig_lower_bound`` checks the caller's clock at every product:
    out of time, it proves nothing (``-inf``, no direction) instead of running on (at n = 1e5
    it ran minutes past the solve's time limit); in time, the bound is finite and below the
    exact smallest eigenvalue."""
    n = 80
    rng = np.random.default_rng(3)
    C = _graph(n, 0.2, 3, signed=True)
    A = SparseRows.from_entries(np.arange(n), np.arange(n), n)
    P = Scaled(SymOp(n, sparse=C), A, np.ones(n), None, None, False, 1.0)
    y, Y = rng.standard_normal(n), rng.standard_normal((n, 3))
    calls = []

    def after_five() -> bool:
        calls.append(1)
        return len(calls) > 5

    lo, V = min_eig_lower_bound(P, y, 0.0, Y, dense_threshold=0, rng=rng,
                                out_of_time=after_five)
    assert lo == -math.inf and not np.any(V) and len(calls) == 6
    lo, V = min_eig_lower_bound(P, y, 0.0, Y, dense_threshold=0, rng=rng,
                                out_of_time=lambda: False)
    S = P.slack_matmat(y, 0.0, np.eye(n))
    assert math.isfinite(lo) and lo <= np.linalg.eigvalsh(0.5 * (S + S.T))[0] + 1e-9


def test_capped_and_timed_runs_are_not_certified():
    n = 200
    C = _graph(n, 0.05, 1)
    A = SparseRows.from_entries(np.arange(n), np.arange(n), n)
    capped = solve_sdp(C, A, np.ones(n), sense="max", method="bm", max_iters=0)
    assert capped.status != "optimal" and capped.bound is None
    t0 = time.perf_counter()
    timed = solve_sdp(C, A, np.ones(n), sense="max", method="bm", time_limit=1e-6)
    assert time.perf_counter() - t0 < 5.0
    assert timed.status != "optimal" or timed.gap <= 1e-5  # never a claim it cannot back


@pytest.mark.slow
def test_time_limit_honoured_at_scale():
    n = 6000
    C = _graph(n, 6.0 / n, 2, signed=True)
    A = SparseRows.from_entries(np.arange(n), np.arange(n), n)
    solve_sdp(C[:50, :50], SparseRows.from_entries(np.arange(50), np.arange(50), 50),
              np.ones(50), sense="max", method="bm")  # compile apart
    t0 = time.perf_counter()
    res = solve_sdp(C, A, np.ones(n), sense="max", method="bm", tol=1e-9, time_limit=1.0)
    assert time.perf_counter() - t0 < 4.0
    assert res.status != "optimal"


def test_verbose_prints_the_callers_objective(capsys):
    """``objective_scale`` / ``objective_offset``: the verbose line and the callback show
    ``scale * <C, K> + offset`` (e.g. a route's sign change and constant)."""
    n = 12
    C = _graph(n, 0.5, 4)
    A = SparseRows.from_entries(np.arange(n), np.arange(n), n)
    seen = []
    res = solve_sdp(C, A, np.ones(n), sense="max", method="bm", tol=1e-8, verbose=True,
                    objective_scale=-2.0, objective_offset=7.0,
                    callback=lambda it, **kw: seen.append(kw["objective"]))
    shown = [float(m) for m in re.findall(r" obj (\S+) ", capsys.readouterr().out)]
    assert shown and seen
    assert shown[-1] == pytest.approx(-2.0 * res.objective + 7.0, rel=1e-6)
    assert seen[-1] == pytest.approx(-2.0 * res.objective + 7.0, rel=1e-9)
    assert not math.isclose(seen[-1], res.objective)


@pytest.mark.slow
def test_time_limit_honoured_by_the_interior_point_stage():
    """The IP stage's certificate (least-squares dual, polish) is skipped past the time limit:
    a degenerate swiss-roll SDE (no certificate within the limit) returns close to it."""
    from benchmarks.low_rank_sdp import instance
    from specopt.solvers.sdp import graph_trace_bound

    n, E, d2 = instance("swiss", 300, 0)
    t0 = time.perf_counter()
    res = solve_sdp(sp.identity(n, format="csr"), SparseRows.from_pairs(E, n), d2, sense="max",
                    centered=True, implied_trace_bound=graph_trace_bound(n, E, d2), tol=1e-6,
                    time_limit=3.0)
    assert time.perf_counter() - t0 < 3.0 + 4.0  # one IP step / eigenvalue check past it
    assert res.status != "optimal"
