"""The 1-slack cut master (specopt.solvers.mg.cuts) in memory: same certified objective as the row
master and Clarabel on PSDBoost-type problems (both spellings of the hinge rows, explicit extra
rows, all rows satisfied, tiny C), a bound that the returned multipliers reproduce on the
original problem, the exact one-variable polish, dispatch and bad options."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import example, given, settings
from hypothesis import strategies as st

import specopt
from specopt.solvers.mg import (
    DenseOperator,
    StackedOperator,
    lagrangian_bound,
    solve_spectraplex_lp,
    triplet_operator,
)
from specopt.solvers.mg import cuts as mg_cuts
from specopt.solvers.mg._bound import _top_eigs
from tests._helpers import checked_reference


def _rows(seed, m, n, noise, separable=False):
    rng = np.random.default_rng(seed)
    if separable:
        # a_k far, a_j close in every direction: every margin is positive at any trace-1 M
        P = rng.normal(size=(m, n)) + 3.0 * np.sign(rng.normal(size=(m, n)))
        Q = 0.05 * rng.normal(size=(m, n))
    else:
        P = rng.normal(size=(m, n)) * rng.uniform(0.3, 2, n)
        Q = rng.normal(size=(m, n)) * rng.uniform(0.3, 2, n) * noise
    return P, Q


def _problem(P, Q, C, spelling="ge", extra_row=False):
    m, n = P.shape
    M = cp.Variable((n, n), PSD=True)
    rho, xi = cp.Variable(), cp.Variable(m, nonneg=True)
    marg = specopt.row_quad_forms(P, M) - specopt.row_quad_forms(Q, M)
    cons = [cp.trace(M) == 1]
    cons.append(marg >= rho - xi if spelling == "ge" else rho - xi - marg <= 0)
    if extra_row:
        cons.append(M[0, 0] <= 0.2)
    return cp.Problem(cp.Maximize(rho - C * cp.sum(xi)), cons), xi


def _solve(prob, **opts):
    specopt.solve(prob, route="matrix_generation", tol=1e-7, **opts)
    return specopt.certificate(prob)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31), m=st.integers(8, 120), n=st.integers(2, 6),
       noise=st.sampled_from([0.3, 1.0, 2.0]), C_scale=st.sampled_from([1.05, 3.0, 40.0, 1e4]),
       spelling=st.sampled_from(["ge", "le"]), extra_row=st.booleans())
@example(seed=317, m=17, n=6, noise=0.3, C_scale=1.05, spelling="ge", extra_row=False)
def test_cut_master_equals_row_master_and_clarabel(seed, m, n, noise, C_scale, spelling,
                                                   extra_row):
    P, Q = _rows(seed, m, n, noise)
    C = C_scale / m
    cert = {}
    for cuts in (True, False):
        prob, xi = _problem(P, Q, C, spelling, extra_row)
        cert[cuts] = _solve(prob, cuts=cuts)
        if cuts:
            # the cut master ran (or stalled short of the gap and handed over to the row
            # master: seed 317, m 17, n 6, noise 0.3, C |S| = 1.05, gap 0.14)
            hist = cert[cuts].history
            assert "cuts" in hist or hist.get("cut_master_stalled_gap", [0.0])[0] > 0
            xi_cut = xi.value
    ref, _ = _problem(P, Q, C, spelling, extra_row)
    with warnings.catch_warnings():
        # an inaccurate Clarabel reference is not compared (CVXPY warns about it)
        warnings.filterwarnings("ignore", "Solution may be inaccurate")
        ref.solve(solver=cp.CLARABEL)
    a, b = cert[True], cert[False]
    assert a.status == b.status == cp.OPTIMAL
    assert a.gap <= 1e-7 and a.max_violation <= 1e-8
    assert abs(a.objective - b.objective) <= 1e-6 * max(1.0, abs(b.objective))
    if ref.status == cp.OPTIMAL:
        assert abs(a.objective - ref.value) <= 1e-5 * max(1.0, abs(ref.value))
    assert np.all(xi_cut >= 0)


def test_cut_master_all_rows_satisfied_and_tiny_C():
    # separable: every slack is zero at the optimum (the cuts carry no rows there)
    P, Q = _rows(3, 60, 4, 1.0, separable=True)
    prob, xi = _problem(P, Q, 10.0)
    a = _solve(prob, cuts=True)
    assert np.max(xi.value) <= 1e-9
    ref, _ = _problem(P, Q, 10.0)
    checked_reference(ref, cp.CLARABEL)
    assert a.status == cp.OPTIMAL and abs(a.objective - ref.value) <= 1e-5 * abs(ref.value)
    # C |S| barely above 1: rho is held only by the sum of all slacks
    P, Q = _rows(4, 80, 3, 1.5)
    prob, _ = _problem(P, Q, 1.001 / 80)
    a = _solve(prob, cuts=True)
    prob, _ = _problem(P, Q, 1.001 / 80)
    b = _solve(prob, cuts=False)
    assert a.status == cp.OPTIMAL
    assert abs(a.objective - b.objective) <= 1e-6 * max(1.0, abs(b.objective))
    # C |S| < 1: unbounded (the cut master's relaxation defers to the row master)
    prob, _ = _problem(P, Q, 0.5 / 80)
    specopt.solve(prob, route="matrix_generation", cuts=True)
    assert prob.status == cp.UNBOUNDED


def _data(P, Q, C, extra):
    m, n = P.shape
    A = triplet_operator(P, Q)
    G = sp.hstack([sp.csr_array(-np.ones((m, 1))), sp.identity(m, format="csr")], format="csr")
    lb, ub = np.zeros(m), np.full(m, np.inf)
    if extra:
        # an explicit (non-hinge) row: X[0, 0] + 0.1 rho <= 0.3
        E = np.zeros((n, n))
        E[0, 0] = 1.0
        A = StackedOperator([A, DenseOperator(E.reshape(1, -1, order="F"), n)])
        G = sp.vstack([G, sp.csr_array(np.append(0.1, np.zeros(m)).reshape(1, -1))],
                      format="csr")
        lb, ub = np.append(lb, -np.inf), np.append(ub, 0.3)
    c = np.append(1.0, -C * np.ones(m))
    zlb = np.append(-np.inf, np.zeros(m))
    return A, G, c, lb, ub, zlb, np.full(m + 1, np.inf)


@pytest.mark.parametrize("extra", [False, True])
def test_returned_multipliers_reproduce_the_bound(extra):
    """The certificate is the Lagrangian bound of the ORIGINAL problem at the returned row
    multipliers (every row, not the cuts): recomputed here from scratch."""
    P, Q = _rows(7, 300, 5, 1.0)
    A, G, c, lb, ub, zlb, zub = _data(P, Q, 20.0 / 300, extra)
    res = solve_spectraplex_lp(A, None, G, c, lb, ub, zlb, zub, master="psd", tol=1e-8,
                               cuts=True)
    ref = solve_spectraplex_lp(A, None, G, c, lb, ub, zlb, zub, master="psd", tol=1e-8,
                               cuts=False)
    assert "cuts" in res.history and res.status == "optimal"
    assert abs(res.objective - ref.objective) <= 1e-6 * max(1.0, abs(ref.objective))
    y = res.y
    assert y.shape == (A.m,)
    assert np.all(y[lb > -np.inf] <= 0) and np.all(y[ub < np.inf] >= 0)
    vals, _ = _top_eigs(A, -y, 1, True, None, 1e-12)  # H = 0 - A^*(y)
    bnd = lagrangian_bound(vals[0], y, lb, ub, G, c, zlb, zub, 1.0, True, ztol=1e-7)
    assert bnd == pytest.approx(res.bound, rel=1e-9, abs=1e-9)
    assert res.bound >= ref.objective - 1e-9
    # the returned point is feasible and its objective is the reported one
    act = res.row_activity
    assert np.all(act >= lb - 1e-9) and np.all(act <= ub + 1e-9)
    assert np.all(res.z[1:] >= 0)
    assert float(c @ res.z) == pytest.approx(res.objective, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), k=st.integers(1, 40),
       c0=st.floats(-3, 3), box=st.sampled_from([(-np.inf, np.inf), (-0.5, 0.5), (0.0, np.inf)]))
def test_polish_shared_is_the_exact_maximizer(seed, k, c0, box):
    rng = np.random.default_rng(seed)
    d, C = rng.normal(size=k), rng.uniform(0.01, 2, k)
    e = rng.choice([-1.0, 1.0, 0.0, 2.5], k)

    def f(z):
        return c0 * z - float(C @ np.maximum(0.0, d - e * z))

    z = mg_cuts.polish_shared(d, e, C, c0, *box)
    cands = [b for b in box if np.isfinite(b)] + list(d[e != 0] / e[e != 0])
    cands = [x for x in cands if box[0] <= x <= box[1]]
    far = [x for x in (-1e6, 1e6) if box[0] <= x <= box[1]]
    if z is None:  # unbounded: the slope beyond every breakpoint points into an open side
        right = c0 + float(C[e < 0] @ e[e < 0])
        left = c0 + float(C[e > 0] @ e[e > 0])
        assert (right > 0 and box[1] == np.inf) or (left < 0 and box[0] == -np.inf)
        return
    assert box[0] <= z <= box[1]
    assert f(z) >= max(f(x) for x in cands + far) - 1e-9


def test_dispatch_threshold_and_bad_option(monkeypatch):
    P, Q = _rows(1, 50, 3, 1.0)
    args = _data(P, Q, 5.0 / 50, False)
    A, G, c, lb, ub, zlb, zub = args
    res = solve_spectraplex_lp(A, None, G, c, lb, ub, zlb, zub, master="psd")
    assert "cuts" not in res.history  # below CUT_MIN_ROWS: the row master
    monkeypatch.setattr(mg_cuts, "CUT_MIN_ROWS", 40)
    res2 = solve_spectraplex_lp(A, None, G, c, lb, ub, zlb, zub, master="psd")
    assert "cuts" in res2.history
    assert abs(res.objective - res2.objective) <= 1e-6 * max(1.0, abs(res.objective))
    # no hinge rows (slacks with a finite upper bound): the row master, whatever ``cuts`` says
    res3 = solve_spectraplex_lp(A, None, G, c, lb, ub, zlb, np.append(np.inf, np.ones(50)),
                                master="psd", cuts=True, max_iters=3)
    assert "cuts" not in res3.history
    with pytest.raises(ValueError, match="cuts must be"):
        solve_spectraplex_lp(A, None, G, c, lb, ub, zlb, zub, master="psd", cuts="yes")


def _hinge_reference(G, c, lb, ub, zlb, zub):
    """The definition of a hinge row, column by column in plain Python."""
    m, p = G.shape
    Gc = sp.csc_array(G)
    slack_of = {}
    for j in range(p):
        nz = Gc.indices[Gc.indptr[j]:Gc.indptr[j + 1]]
        vals = Gc.data[Gc.indptr[j]:Gc.indptr[j + 1]]
        if not (nz.size == 1 and vals[0] != 0 and zlb[j] == 0 and zub[j] == np.inf and c[j] < 0):
            continue
        r, g = int(nz[0]), vals[0]
        side_ok = (np.isfinite(lb[r]) and ub[r] == np.inf) if g > 0 else (
            np.isfinite(ub[r]) and lb[r] == -np.inf)
        if side_ok:
            slack_of.setdefault(r, []).append(j)
    hinge = {r: js[0] for r, js in slack_of.items() if len(js) == 1}
    return sorted(hinge), [hinge[r] for r in sorted(hinge)]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(1, 12), p=st.integers(1, 14))
def test_hinge_structure_matches_its_definition(seed, m, p):
    rng = np.random.default_rng(seed)
    G = sp.random_array((m, p), density=0.3, rng=rng, format="csr")
    G.data = np.sign(rng.normal(size=G.data.size)) * (G.data + 0.1)
    single = rng.integers(0, m, p)  # columns with one entry: possible slacks
    one = rng.random(p) < 0.6
    G = sp.lil_array(G)
    for j in np.flatnonzero(one):
        G[:, [j]] = 0
        G[single[j], j] = rng.choice([-1.0, 0.5, 2.0])
    G = sp.csr_array(G)
    c = rng.choice([-1.0, -0.2, 0.0, 1.0], p)
    zlb = rng.choice([0.0, -np.inf, -1.0], p, p=[0.7, 0.2, 0.1])
    zub = rng.choice([np.inf, 1.0], p, p=[0.85, 0.15])
    kind = rng.integers(0, 3, m)
    lb = np.where(kind == 1, -np.inf, rng.normal(size=m))
    ub = np.where(kind == 0, np.inf, np.where(kind == 1, rng.normal(size=m), lb + 1.0))
    rows, cols = _hinge_reference(G, c, lb, ub, zlb, zub)
    hs = mg_cuts.hinge_structure(G, c, lb, ub, zlb, zub)
    if not rows:
        assert hs is None
        return
    assert hs.rows.tolist() == rows and hs.cols.tolist() == cols
    assert hs.explicit.tolist() == sorted(set(range(m)) - set(rows))
    assert hs.shared.tolist() == sorted(set(range(p)) - set(cols))
    g = G.toarray()[hs.rows, hs.cols]
    assert np.allclose(hs.gabs, np.abs(g)) and np.array_equal(hs.sign, np.sign(g))
    assert np.allclose(hs.weight, -c[hs.cols] / np.abs(g))


@pytest.mark.parametrize("warm", [True, False])
def test_warm_started_cut_master_has_the_cold_optimum(monkeypatch, warm):
    """Each warm-started cut master (the previous round's point and duals mapped to the new
    block, band and cuts) reaches the optimum of the same master solved cold; without
    CUT_WARM_START (the default) none is started; the run's result does not depend on it."""
    monkeypatch.setattr(mg_cuts, "CUT_WARM_START", warm)
    P, Q = _rows(7, 600, 20, 1.0)  # blocks of k >= 16 over ~400 rows: interior-point masters
    A, G, c, lb, ub, zlb, zub = _data(P, Q, 20.0 / 600, False)
    orig, pairs, starts = mg_cuts._psd_block_master, [], []

    def both(*a, start=None, info=None, **kw):
        res = orig(*a, start=start, info=info, **kw)
        starts.append(start is not None)
        if start is not None:
            pairs.append((res[0], orig(*a, **kw)[0]))
        return res

    monkeypatch.setattr(mg_cuts, "_psd_block_master", both)
    res = solve_spectraplex_lp(A, None, G, c, lb, ub, zlb, zub, master="psd", tol=1e-8,
                               cuts=True)
    assert "cuts" in res.history and res.status == "optimal"
    if warm:
        assert len(pairs) >= 2
        for a, b in pairs:
            assert abs(a - b) <= 1e-6 * max(1.0, abs(b))
    else:
        assert not any(starts)
    ref = solve_spectraplex_lp(A, None, G, c, lb, ub, zlb, zub, master="psd", tol=1e-8,
                               cuts=False)
    assert abs(res.objective - ref.objective) <= 1e-6 * max(1.0, abs(ref.objective))
