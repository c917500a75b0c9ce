"""The sparse-row interior point: row factors, Schur complement, agreement with Clarabel, and
honest statuses on infeasible, capped and degenerate problems."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from specopt.solvers.sdp import SparseRows, SymOp, solve_low_rank_sdp
from specopt.solvers.sdp.ip_sparse import (
    _Space,
    padded_factors,
    row_factors,
    schur_complement,
    solve_sparse_sdp_ip,
)
from tests._helpers import recorded_kwarg


def _row_matrix(A: SparseRows, r: int) -> np.ndarray:
    M = np.zeros((A.n, A.n))
    k = A.rows == r
    np.add.at(M, (A.ii[k], A.jj[k]), A.vals[k])
    return 0.5 * (M + M.T)


def _mixed_rows(n: int, m: int, rng: np.random.Generator) -> SparseRows:
    """Rows of every shape the factorization knows: distance, diagonal entry, off-diagonal entry
    (either orientation), and generic rows of 2-4 entries with repeated / transposed pairs."""
    rows, ii, jj, vals = [], [], [], []
    for r in range(m):
        kind = rng.integers(4)
        i, j = rng.choice(n, 2, replace=False)
        a = rng.uniform(0.5, 3.0) * rng.choice([-1.0, 1.0])
        if kind == 0:
            ent = [(i, i, a), (j, j, a), (i, j, -a), (j, i, -a)]
        elif kind == 1:
            ent = [(i, i, a)]
        elif kind == 2:
            ent = [(j, i, a)]
        else:
            k = rng.integers(2, 5)
            ent = [(int(p), int(q), float(v)) for p, q, v in zip(
                rng.integers(0, n, k), rng.integers(0, n, k), rng.standard_normal(k),
                strict=True)]
            ent.append(ent[0])  # a repeated pair
        for p, q, v in ent:
            rows.append(r)
            ii.append(p)
            jj.append(q)
            vals.append(v)
    return SparseRows(np.array(rows), np.array(ii), np.array(jj), np.array(vals), m, n)


def _feasible_instance(n: int, m: int, seed: int, centered: bool = False, scale: float = 1.0):
    """Mixed rows, ``b = A(K0)`` from a strictly feasible ``K0`` (on ``1^perp`` when centered),
    a random symmetric objective times ``scale``: ``(A, b, C, K0)``."""
    rng = np.random.default_rng(seed)
    A = _mixed_rows(n, m, rng)
    G = rng.standard_normal((n, n))
    K0 = G @ G.T / n + 0.1 * np.eye(n)
    if centered:
        P = np.eye(n) - 1.0 / n
        K0 = P @ K0 @ P
    b = np.array([np.sum(_row_matrix(A, r) * K0) for r in range(m)])
    C = scale * (lambda H: (H + H.T) / 2)(rng.standard_normal((n, n)))
    return A, b, C, K0


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 9), st.integers(1, 10), st.integers(0, 10_000))
def test_row_factors_reconstruct_every_row(n, m, seed):
    A = _mixed_rows(n, m, np.random.default_rng(seed))
    F, w, O = row_factors(A.rows, A.ii, A.jj, A.vals, A.m, n)
    Fd, Od = F.toarray(), O.toarray()
    for r in range(m):
        t = np.flatnonzero(Od[:, r])
        rebuilt = (Fd[:, t] * w[t]) @ Fd[:, t].T
        assert np.allclose(rebuilt, _row_matrix(A, r), atol=1e-12)
    assert np.allclose(np.linalg.norm(Fd, axis=0), 1.0)  # unit factor columns


@settings(max_examples=25, deadline=None)
@given(st.integers(3, 8), st.integers(1, 8), st.integers(0, 10_000),
       st.sampled_from(["plain", "centered", "face"]))
def test_schur_complement_matches_the_dense_formula(n, m, seed, space):
    """``M_rs = <A_r, X A_s Z>`` on the reduced space, against the dense trace formula."""
    rng = np.random.default_rng(seed)
    A = _mixed_rows(n, m, rng)
    V = None
    if space == "face":
        V = np.linalg.qr(rng.standard_normal((n, max(1, n - 2))))[0]
    S = _Space(n, space == "centered", V)
    k = S.k
    G, H = rng.standard_normal((k, k)), rng.standard_normal((k, k))
    X, Z = G @ G.T + 0.1 * np.eye(k), H @ H.T + 0.1 * np.eye(k)
    pf = padded_factors(*row_factors(A.rows, A.ii, A.jj, A.vals, A.m, n))
    L = schur_complement(pf, S.lift(X), S.lift(Z), m)
    assert np.all(np.triu(L, 1) == 0)
    M = L + np.tril(L, -1).T
    Ar = [S.reduce(_row_matrix(A, r)) for r in range(m)]
    ref = np.array([[np.trace(Ar[a] @ X @ Ar[c] @ Z) for c in range(m)] for a in range(m)])
    assert np.allclose(M, ref, atol=1e-9 * (1 + np.abs(ref).max()))


def _clarabel(C, A, b, sense, centered=False, trace=None):
    """Clarabel's value; centered problems as ``K = Q W Q^T`` (``Q`` a basis of ``1^perp``):
    ``sum(K) == 0`` leaves no interior and Clarabel reports inaccurate solutions on it."""
    n = A.n
    if centered:
        Q = sla.null_space(np.ones((1, n)))
        W = cp.Variable((n - 1, n - 1), PSD=True)
        K = Q @ W @ Q.T
        cons = []
    else:
        K = cp.Variable((n, n), symmetric=True)
        cons = [K >> 0]
    cons.append(cp.hstack([cp.sum(cp.multiply(_row_matrix(A, r), K)) for r in range(A.m)]) == b)
    if trace is not None:
        cons.append(cp.trace(K) <= trace)
    obj = cp.trace(C @ K)
    p = cp.Problem(cp.Minimize(obj) if sense == "min" else cp.Maximize(obj), cons)
    try:
        p.solve(solver="CLARABEL")
    except cp.error.SolverError:  # the reference failed (seen on nearly dependent rows): SCS
        p.solve(solver="SCS", eps_abs=1e-10, eps_rel=1e-10, max_iters=200_000)
    # an instance the reference solvers cannot settle says nothing about the IP
    assume(p.status == cp.OPTIMAL)
    return p.status, p.value


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(4, 12), st.integers(1, 14), st.integers(0, 10_000),
       st.sampled_from(["min", "max"]), st.booleans(), st.floats(1e-3, 1e3))
def test_ip_agrees_with_clarabel(n, m, seed, sense, centered, scale):
    """Random mixed rows, b from a strictly feasible point (centered when asked), badly scaled
    objective, a trace bound (both senses bounded): certified and equal to Clarabel's value."""
    A, b, C, K0 = _feasible_instance(n, m, seed, centered, scale)
    t = 2.0 * np.trace(K0)
    st_ref, ref = _clarabel(C, A, b, sense, centered, t)
    assert st_ref == cp.OPTIMAL
    res = solve_low_rank_sdp(C, A, b, sense=sense, centered=centered, trace_bound=t, tol=1e-6,
                             method="ip", max_iters=0)  # the IP alone, no BM continuation
    tol = 1e-4 * max(1.0, abs(ref))
    if res.status == "optimal":
        assert res.objective == pytest.approx(ref, abs=tol)
        assert res.gap <= 1e-6 and res.primal_residual <= 1e-6
    # the bound is valid whatever the status
    if res.bound is not None:
        assert (res.bound <= ref + tol) if sense == "min" else (res.bound >= ref - tol)
    if centered:
        assert np.abs(res.Y.sum(axis=0)).max() <= 1e-8 * (1 + np.abs(res.Y).max())


def test_ip_certifies_most_random_instances():
    """Not just 'valid when optimal': the IP closes the certificate on well-posed instances."""
    ok = 0
    for seed in range(10):
        A, b, C, K0 = _feasible_instance(10, 12, seed)
        res = solve_low_rank_sdp(C, A, b, trace_bound=2 * np.trace(K0), tol=1e-6, method="ip",
                                 max_iters=0)
        ok += res.status == "optimal"
    assert ok >= 9


@pytest.mark.parametrize("case", ["contradictory", "negative_distance"])
def test_infeasible_rows_are_not_certified(case):
    n = 6
    if case == "contradictory":  # K_00 = 1 and K_00 = 2
        A = SparseRows(np.array([0, 1]), np.array([0, 0]), np.array([0, 0]), np.ones(2), 2, n)
        b = np.array([1.0, 2.0])
    else:  # a squared distance of -1
        A = SparseRows.from_pairs(np.array([[0, 1], [1, 2]]), n)
        b = np.array([1.0, -1.0])
    res = solve_low_rank_sdp(np.eye(n), A, b, sense="min", trace_bound=10.0, method="ip",
                             max_iters=0, tol=1e-6)
    assert res.status != "optimal"
    assert res.primal_residual > 1e-3


def test_capped_iterations_are_not_certified(monkeypatch):
    A, b, C, _ = _feasible_instance(12, 15, 0)
    raw = solve_sparse_sdp_ip(C, A.rows, A.ii, A.jj, A.vals, b, trace_bound=30.0, max_iters=3)
    assert not raw.converged and raw.iterations == 3
    # the solver-level driver, capped the same way, does not claim optimality either
    from specopt.solvers.sdp import ip_sparse as sparse_sdp_ip

    full = solve_low_rank_sdp(C, A, b, trace_bound=30.0, method="ip", max_iters=0, tol=1e-8)
    assert full.status == "optimal"
    orig = sparse_sdp_ip.solve_sparse_sdp_ip
    monkeypatch.setattr(sparse_sdp_ip, "solve_sparse_sdp_ip",
                        lambda *a, **k: orig(*a, **{**k, "max_iters": 3}))
    res = solve_low_rank_sdp(C, A, b, trace_bound=30.0, method="ip", max_iters=0, tol=1e-8)
    assert res.status != "optimal"
    # its bound is still a valid lower bound
    assert res.bound is None or res.bound <= full.objective + 1e-6 * abs(full.objective)


def test_tied_eigenvalues_maxcut_cycle():
    """An even cycle's MaxCut SDP: every optimal K has tied eigenvalues (a degenerate face);
    certified, equal to Clarabel's value (= number of edges)."""
    n = 12
    W = np.zeros((n, n))
    for i in range(n):
        W[i, (i + 1) % n] = W[(i + 1) % n, i] = 1.0
    L = (np.diag(W.sum(1)) - W) / 4
    A = SparseRows.from_entries(np.arange(n), np.arange(n), n)
    res = solve_low_rank_sdp(SymOp(n, dense=L), A, np.ones(n), sense="max",
                             implied_trace_bound=float(n), method="ip", tol=1e-7)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(n, rel=1e-6)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(4, 10), st.integers(1, 12), st.integers(0, 10_000), st.booleans(),
       st.sampled_from(["hkm", "nt"]))
# a row of norm 6e-3 beside rows of norm ~5 (multiplier 1e3): unscaled, the raw IP stalled at
# gap 3e-4; in solver units (unit rows, as its callers pass them) it converges in 9 steps
@example(4, 4, 782, False, "hkm")
@example(4, 4, 782, True, "nt")
# NT with HKM's second-order term (dX dZ Z^-1) stalled at gap 1.3e-5 here; with its own
# (scaled-space Lyapunov) term it converges in 9 steps
@example(7, 8, 1, False, "nt")
def test_both_directions_reach_clarabel_value(n, m, seed, centered, kind):
    """The raw IP (no certificate layer) in both directions, on rows in solver units (unit
    norm, as :class:`specopt.solvers.sdp._data.Scaled` scales them): converged, feasible, same
    value as Clarabel on the unscaled rows."""
    A, b, C, K0 = _feasible_instance(n, m, seed, centered)
    t = 2.0 * np.trace(K0)
    _, ref = _clarabel(C, A, b, "min", centered, t)
    scale = 1.0 / A.row_norms()
    As = A.scaled(scale)
    raw = solve_sparse_sdp_ip(C, As.rows, As.ii, As.jj, As.vals, b * scale, centered=centered,
                              trace_bound=t, tol=1e-6, direction_kind=kind)
    K = raw.Y @ raw.Y.T
    assert raw.converged  # strictly feasible, bounded: both directions must get there
    assert np.sum(C * K) == pytest.approx(ref, abs=1e-5 * max(1.0, abs(ref)))
    assert np.trace(K) <= t * (1 + 1e-7)


def test_direction_kind_is_validated():
    with pytest.raises(ValueError, match="direction_kind"):
        solve_sparse_sdp_ip(np.eye(3), np.array([0]), np.array([0]), np.array([0]),
                            np.ones(1), np.ones(1), direction_kind="xyz")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(5, 12), st.integers(2, 14), st.integers(0, 10_000), st.booleans())
def test_warm_start_after_an_objective_change(n, m, seed, centered):
    """``ip_warm``: the interior point started near the solution of the problem with the
    previous objective (a majorize-minimize step changes only C, by a low-rank term) certifies
    the same value as its cold start."""
    A, b, _, _ = _feasible_instance(n, m, seed, centered)
    rng = np.random.default_rng(seed + 1)
    G = rng.standard_normal((n, n))
    C = G @ G.T / n + 0.5 * np.eye(n)  # PD: bounded below without a trace bound
    first = solve_low_rank_sdp(C, A, b, centered=centered, tol=1e-6, method="ip", max_iters=0)
    assume(first.status == "optimal")
    v = np.linalg.eigh(C)[1][:, :1]
    C2 = C - 0.4 * (v @ v.T)  # still PD (lambda_min(C) >= 0.5)
    cold = solve_low_rank_sdp(C2, A, b, centered=centered, tol=1e-6, method="ip", max_iters=0)
    warm = solve_low_rank_sdp(C2, A, b, centered=centered, tol=1e-6, method="ip", max_iters=0,
                              Y0=first.Y, y0=first.y, ip_warm=True)
    assume(cold.status == "optimal")
    assert warm.status == "optimal"
    assert warm.objective == pytest.approx(cold.objective, abs=1e-5 * (1 + abs(cold.objective)))
    # without a trace bound a bound exists only when the slack is PSD at the returned y
    # (lambda_min >= 0); when there is one it is below the optimum
    assert warm.bound is None or warm.bound <= cold.objective + 1e-5 * (1 + abs(cold.objective))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(5, 12), st.integers(2, 14), st.integers(0, 10_000), st.booleans(),
       st.sampled_from([0.5, 1.0, 3.0]))
def test_warm_start_with_a_trace_row(n, m, seed, centered, t_scale):
    """With a trace bound (a row ``tr K + s = t``) the warm start carries its multiplier ``mu``
    too (in solver units): the warm-started step after an objective change certifies the cold
    start's value, the bound active (``t_scale`` 0.5) or not."""
    from specopt.solvers.sdp import ip_sparse as ips

    A, b, C, K0 = _feasible_instance(n, m, seed, centered)
    rng = np.random.default_rng(seed + 2)
    t = t_scale * float(np.trace(K0))
    first = solve_low_rank_sdp(C, A, b, centered=centered, trace_bound=t, tol=1e-6, method="ip",
                               max_iters=0)
    assume(first.status == "optimal")
    G = rng.standard_normal((n, 2))
    C2 = C + 0.3 * (G @ G.T) / n  # a low-rank change of the objective, as an MM step's
    cold = solve_low_rank_sdp(C2, A, b, centered=centered, trace_bound=t, tol=1e-6,
                              method="ip", max_iters=0)
    assume(cold.status == "optimal")
    with recorded_kwarg(ips, "solve_sparse_sdp_ip", "warm") as calls:
        warm = solve_low_rank_sdp(C2, A, b, centered=centered, trace_bound=t, tol=1e-6,
                                  method="ip", max_iters=0, Y0=first.Y, y0=first.y,
                                  mu0=first.mu, ip_warm=True)
    assert calls[0] is not None and len(calls[0]) == 3  # the warm start ran, with mu
    assert calls[0][2] == pytest.approx(first.mu / _gamma_of(C2, A, b, centered, t), rel=1e-12)
    assert warm.status == "optimal"
    assert warm.objective == pytest.approx(cold.objective, abs=1e-5 * (1 + abs(cold.objective)))
    assert warm.bound <= cold.objective + 1e-5 * (1 + abs(cold.objective))


def _gamma_of(C, A, b, centered, t) -> float:
    """The objective scale of the solver units (``Scaled.gamma``) of this problem."""
    from specopt.solvers.sdp._data import Scaled

    return Scaled(SymOp(A.n, dense=C), A, b, t, None, centered, 1.0).gamma


def test_lanczos_step_length_matches_the_dense_one():
    """The step to the PSD boundary by Lanczos (above PSD_STEP_DENSE_MAX) agrees with the dense
    eigenvalue, and is never past the boundary beyond its safety margin."""
    from specopt.solvers.sdp.ip_sparse import PSD_STEP_DENSE_MAX, max_psd_step

    rng = np.random.default_rng(0)
    n = PSD_STEP_DENSE_MAX + 50
    G = rng.standard_normal((n, n))
    X = G @ G.T / n + 1e-3 * np.eye(n)
    H = rng.standard_normal((n, n))
    dX = 0.3 * (H + H.T) / np.sqrt(n)
    L = np.linalg.cholesky(X)
    dense, lanczos = max_psd_step(L, dX, dense_max=n), max_psd_step(L, dX)
    assert lanczos == pytest.approx(dense, rel=1e-3)
    assert lanczos <= dense
    assert np.linalg.eigvalsh(X + 0.999 * lanczos * dX).min() > 0


@settings(max_examples=25, deadline=None)
@given(st.integers(4, 10), st.integers(1, 12), st.integers(0, 10_000),
       st.sampled_from(["hkm", "nt"]), st.floats(0.0, 1.0), st.booleans())
def test_newton_direction_solves_the_linearized_system(n, m, seed, kind, sigma, sparse):
    """At an infeasible iterate (``Rd != 0``: cold and warm starts) the direction satisfies all
    three linearized equations: ``A(dX) = rp``, ``A^T dy + dZ = Rd`` and ``dX + left dZ right =
    sigma mu Z^-1 - X`` (symmetrized). The dual residual used to be counted twice in ``dX``
    (then the refinement pulled ``A(dX)`` back to ``rp`` at the cost of the third equation)."""
    from specopt.solvers.sdp import ip_sparse as ips

    rng = np.random.default_rng(seed)
    A = _mixed_rows(n, m, rng)
    b = rng.standard_normal(m)
    C = rng.standard_normal((n, n))
    C = C + C.T
    sp_ = ips._Space(n, False)
    ops = ips._RowOps(A.rows, A.ii, A.jj, A.vals, b, n, sp_, None)
    G, H = rng.standard_normal((2, n, n))
    state = ips._IPState(G @ G.T + np.eye(n), H @ H.T + np.eye(n), rng.standard_normal(m),
                         np.zeros(0), np.zeros(0))
    state.Lx, state.Lz = np.linalg.cholesky(state.X), np.linalg.cholesky(state.Z)
    meas = ips._measure(ops, C, state, 1.0, 1.0)
    assume(np.linalg.norm(meas.Rd) > 1e-3)
    Zi = np.linalg.inv(state.Z)
    scaling, _ = ips._scaling(kind, state, Zi)
    M = ips.schur_complement(ops.pf, *scaling, m)
    assume(np.linalg.cond(M + np.tril(M, -1).T) < 1e6)  # dependent rows: no Newton system
    lifted = (sp_.lift(scaling[0]), sp_.lift(scaling[1]))
    cM = ips._schur_factor(ops, scaling, lifted, None, state)
    newton = ips._Newton(ops, cM, state.X, Zi, state.Lx, state.Lz, meas.Rd, meas.rp,
                         meas.rd_t, state.s_t, state.z_t, 1e-12, scaling,
                         lifted if sparse else None)
    dX, dy, dZ, _, _ = newton.direction(sigma * meas.mu, None, 0.0)
    left, right = scaling
    rhs = sigma * meas.mu * Zi - state.X
    scale = 1.0 + np.linalg.norm(rhs) + np.linalg.norm(dX)
    assert np.linalg.norm(ops.A_op(dX, 0.0) - meas.rp) <= 1e-6 * (1 + np.linalg.norm(meas.rp))
    assert np.linalg.norm(ops.At_op(dy) + dZ - meas.Rd) <= 1e-9 * (1 + np.linalg.norm(meas.Rd))
    comp = dX + 0.5 * (left @ dZ @ right + (left @ dZ @ right).T) - rhs
    assert np.linalg.norm(comp) <= 1e-6 * scale


def _random_row_ops(n: int, m: int, seed: int, centered: bool, trace: bool):
    """Random mixed rows as the interior point's operators (plain or centered space, with or
    without the trace row) and two random k x k factors: ``(rng, space, ops, k, G, H)``."""
    from specopt.solvers.sdp import ip_sparse as ips

    rng = np.random.default_rng(seed)
    A = _mixed_rows(n, m, rng)
    sp_ = ips._Space(n, centered)
    ops = ips._RowOps(A.rows, A.ii, A.jj, A.vals, rng.standard_normal(m), n, sp_,
                      5.0 if trace else None)
    G, H = rng.standard_normal((2, sp_.k, sp_.k))
    return rng, sp_, ops, sp_.k, G, H


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 12), st.integers(1, 15), st.integers(0, 10_000),
       st.sampled_from(["hkm", "nt"]), st.booleans(), st.booleans(),
       st.sampled_from([1e-3, 1.0, 1e3]))
def test_sparse_sandwich_equals_the_dense_products(n, m, seed, kind, centered, trace, scale):
    """``_Newton._sandwich`` through the sparse rows in the full space (one dense product) is
    ``left A^*(dy) right`` of the reduced space (two), symmetrized: plain and centered spaces,
    with and without the trace row, HKM and NT scalings, badly scaled iterates."""
    from specopt.solvers.sdp import ip_sparse as ips

    rng, sp_, ops, k, G, H = _random_row_ops(n, m, seed, centered, trace)
    state = ips._IPState(scale * (G @ G.T + 0.1 * np.eye(k)), H @ H.T / scale + np.eye(k),
                         np.zeros(ops.me), 1.0, 1.0)
    state.Lx = np.linalg.cholesky(state.X)
    Zi = np.linalg.inv(state.Z)
    scaling, _ = ips._scaling(kind, state, Zi)
    lifted = (sp_.lift(scaling[0]), sp_.lift(scaling[1]))
    left_right = scaling[0] @ scaling[1]
    newton = ips._Newton(ops, None, state.X, Zi, state.Lx, None, np.zeros((k, k)),
                         np.zeros(m), 0.0, 1.0, 1.0, 1e-12, scaling, lifted, left_right)
    dy = rng.standard_normal(ops.me)
    Ady = ops.At_op(dy)
    dense = scaling[0] @ Ady @ scaling[1]
    got = newton._sandwich(dy, ops.At_full_sparse(dy), Ady)
    sym = 0.5 * (dense + dense.T)
    assert np.allclose(0.5 * (got + got.T), sym, rtol=1e-10,
                       atol=1e-10 * np.abs(sym).max(initial=1.0))


def test_sparse_sandwich_gives_the_same_interior_point_run(monkeypatch):
    """A whole centered solve with the sparse sandwich forced on takes the same steps to the same
    point as with the dense products."""
    from specopt.solvers.sdp import ip_sparse as ips

    A, b, C, _ = _feasible_instance(14, 20, 3, True)
    runs = []
    for min_n in (10**9, 0):
        monkeypatch.setattr(ips, "SPARSE_SANDWICH_MIN_N", min_n)
        runs.append(ips.solve_sparse_sdp_ip(C, A.rows, A.ii, A.jj, A.vals, b, centered=True,
                                            trace_bound=50.0, tol=1e-8))
    dense, sparse = runs
    assert dense.converged and sparse.converged
    assert abs(dense.iterations - sparse.iterations) <= 1
    K0, K1 = dense.Y @ dense.Y.T, sparse.Y @ sparse.Y.T
    assert np.linalg.norm(K0 - K1) <= 1e-5 * (1 + np.linalg.norm(K0))


@pytest.mark.parametrize("centered", [False, True])
def test_accept_stops_at_the_first_certified_iterate(centered):
    """``ip_accept``: the interior point stops at the first iterate the certificate accepts at
    ``tol`` (fewer steps than running on to ``ip_tol``), with the same certified value."""
    A, b, _, _ = _feasible_instance(10, 12, 3, centered)
    rng = np.random.default_rng(4)
    G = rng.standard_normal((10, 10))
    C = G @ G.T / 10 + 0.5 * np.eye(10)
    kw = dict(centered=centered, tol=1e-4, method="ip", max_iters=0, ip_tol=1e-9,
              implied_trace_bound=100.0)
    full = solve_low_rank_sdp(C, A, b, **kw)
    early = solve_low_rank_sdp(C, A, b, ip_accept=True, **kw)
    assert full.status == early.status == "optimal"
    assert early.iterations < full.iterations
    assert early.gap <= 1e-4 and early.primal_residual <= 1e-4
    top = early.objective + 1e-4 * (1 + abs(full.objective))
    assert early.bound <= full.objective + 1e-9 <= top


def _spd(m: int, log_cond: float, rng: np.random.Generator) -> np.ndarray:
    """A symmetric positive definite matrix with eigenvalues log-spaced over ``log_cond``
    decades, its lower triangle only (as the Schur kernel gives it)."""
    Q = np.linalg.qr(rng.standard_normal((m, m)))[0]
    lam = np.logspace(0.0, -log_cond, m) * rng.uniform(0.1, 1e3)
    return np.tril((Q * lam) @ Q.T)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 60), st.floats(0.0, 5.0), st.integers(0, 10_000))
def test_mixed_precision_schur_solve_matches_float64(m, log_cond, seed):
    """The float32 factor with float64 refinement solves to a float64 solve's accuracy (the
    normwise backward error <= 1e-12) without falling back on well-conditioned systems."""
    from specopt.solvers.sdp._schur_solve import SchurSolve

    rng = np.random.default_rng(seed)
    M = _spd(m, log_cond, rng)
    Mf = M + np.tril(M, -1).T
    h = rng.standard_normal(m)
    S = SchurSolve(M.copy(), mixed=True)
    x = S.solve(h)
    ref = sla.solve(Mf, h, assume_a="pos")
    assert S.fallbacks == 0 and S.f32 is not None
    back = np.linalg.norm(h - Mf @ x) / (np.linalg.norm(h) + np.max(np.diag(Mf))
                                          * np.linalg.norm(x))
    assert back <= 1e-12
    assert np.linalg.norm(x - ref) <= 1e-9 * 10**log_cond * np.linalg.norm(ref)


@pytest.mark.parametrize("log_cond", [9.0, 12.0])
def test_mixed_precision_schur_solve_falls_back_when_ill_conditioned(log_cond):
    """Beyond float32's reach (cond 1e9, 1e12) the refinement stalls or the factorization fails,
    and the float64 factor answers: the same solution as a float64 solve."""
    from specopt.solvers.sdp._schur_solve import SchurSolve

    rng = np.random.default_rng(7)
    M = _spd(80, log_cond, rng)
    Mf = M + np.tril(M, -1).T
    h = rng.standard_normal(80)
    S = SchurSolve(M.copy(), mixed=True)
    x = S.solve(h)
    assert S.fallbacks >= 1 and S.f64 is not None
    ref = sla.cho_solve(sla.cho_factor(Mf), h)
    assert np.linalg.norm(x - ref) <= 1e-13 * 10**log_cond * np.linalg.norm(ref)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(5, 12), st.integers(2, 14), st.integers(0, 10_000), st.booleans())
def test_mixed_precision_interior_point_agrees_with_float64(n, m, seed, centered):
    """The interior point with the float32 Schur factor (forced at every size) reaches the same
    value as with the float64 one, both converged."""
    A, b, C, _ = _feasible_instance(n, m, seed, centered)
    C = C @ C.T / n + 0.5 * np.eye(n)
    runs = [solve_sparse_sdp_ip(C, A.rows, A.ii, A.jj, A.vals, b, centered=centered, tol=1e-7,
                                schur_mixed=mixed) for mixed in (False, True)]
    assume(runs[0].converged)
    assert runs[1].converged
    vals = [float(np.sum(C * (r.Y @ r.Y.T))) for r in runs]
    assert vals[1] == pytest.approx(vals[0], abs=1e-6 * (1 + abs(vals[0])))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 30), st.integers(0, 10_000), st.sampled_from([1e-6, 1.0, 1e6]))
def test_centered_space_lift_reduce_and_entries_match_the_explicit_basis(n, seed, scale):
    """The Householder lift ``Q W Q^T``, reduction ``Q^T M Q`` (also in place) and the lifted
    entries the rows read agree with the explicit basis ``Q`` of ``1^perp`` (``Q^T Q = I``,
    ``Q^T 1 = 0``), and a reduction that may not overwrite leaves its argument alone."""
    from specopt.solvers.sdp import ip_sparse as ips

    rng = np.random.default_rng(seed)
    sp_ = ips._Space(n, True)
    Q = (np.eye(n) - sp_.c * np.outer(sp_.w, sp_.w))[:, 1:]
    assert np.allclose(Q.T @ Q, np.eye(n - 1), atol=1e-12)
    assert np.allclose(Q.T @ np.ones(n), 0.0, atol=1e-12)
    W = scale * rng.standard_normal((n - 1, n - 1))
    W = W + W.T
    tol = 1e-12 * scale * n
    assert np.allclose(sp_.lift(W), Q @ W @ Q.T, atol=tol)
    M = scale * rng.standard_normal((n, n))
    M = M + M.T
    kept = M.copy()
    assert np.allclose(sp_.reduce(M), Q.T @ kept @ Q, atol=tol)
    assert np.array_equal(M, kept)
    assert np.allclose(sp_.reduce(M, overwrite=True), Q.T @ kept @ Q, atol=tol)
    ii, jj = rng.integers(0, n, (2, 3 * n))
    assert np.allclose(sp_.entries(W, ii, jj), (Q @ W @ Q.T)[ii, jj], atol=tol)


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 12), st.integers(1, 15), st.integers(0, 10_000), st.booleans(),
       st.booleans(), st.floats(-10.0, 10.0))
def test_scalar_dual_residual_products_equal_the_dense_ones(n, m, seed, centered, trace, rho):
    """With ``Rd = rho I`` (warm-started runs) the direction's ``X Rd Z^-1`` and the corrector's
    ``dX dZ Z^-1`` (one dense product each, through the sparse rows) equal the dense products,
    in the plain and the centered space, with and without the trace row;
    ``reduce(symmetric=False)`` is ``Q^T M Q`` for a nonsymmetric ``M``."""
    from specopt.solvers.sdp import ip_sparse as ips

    rng, sp_, ops, k, G, H = _random_row_ops(n, m, seed, centered, trace)
    X, Z = G @ G.T + 0.1 * np.eye(k), H @ H.T + np.eye(k)
    Zi = np.linalg.inv(Z)
    lifted = (sp_.lift(X), sp_.lift(Zi))
    Rd = rho * np.eye(k)
    newton = ips._Newton(ops, None, X, Zi, None, None, Rd, np.zeros(m), 0.0, 1.0, 1.0, 1e-12,
                         (X, Zi), lifted, X @ Zi, noise_ref=1.0)
    assert newton.rd_scalar is not None and abs(newton.rd_scalar - rho) <= 1e-12 * (1 + abs(rho))
    XRdZi = np.asarray(newton.XRdZi) if rho != 0 else np.zeros((k, k))
    assert np.allclose(XRdZi, X @ Rd @ Zi, atol=1e-10 * (1 + abs(rho)) * np.abs(X @ Zi).max())
    dy = rng.standard_normal(ops.me)
    dZ = Rd - ops.At_op(dy)
    dX = rng.standard_normal((k, k))
    dX = dX + dX.T
    dense = dX @ dZ @ Zi
    assert np.allclose(newton.second_order(dX, dy, dZ), dense,
                       atol=1e-9 * np.abs(dense).max(initial=1.0))
    # a residual that is not a multiple of I keeps the dense products
    Rd2 = Rd + 1e-3 * np.diag(np.arange(k, dtype=float))
    other = ips._Newton(ops, None, X, Zi, None, None, Rd2, np.zeros(m), 0.0, 1.0, 1.0, 1e-12,
                        (X, Zi), lifted, X @ Zi, noise_ref=1.0)
    assert other.rd_scalar is None or k == 1
    if centered:
        Q = (np.eye(n) - sp_.c * np.outer(sp_.w, sp_.w))[:, 1:]
        M = rng.standard_normal((n, n))
        assert np.allclose(sp_.reduce(M.copy(), symmetric=False), Q.T @ M @ Q, atol=1e-12 * n)


@settings(max_examples=30, deadline=None)
@given(st.integers(4, 14), st.integers(1, 15), st.integers(0, 10_000), st.booleans(),
       st.sampled_from([1e-12, 1e-9, 1e-6]))
def test_factor_cut_keeps_the_rows_of_the_iterate(n, m, seed, centered, small):
    """The returned factor of an interior iterate: with the rows, the rank cut drops only
    eigenvalues that move the rows by at most the iterate's own residual (twice it, plus
    1e-12 ||b||), however many small eigenvalues an interior point carries; without them, the
    plain cut (and so fewer columns)."""
    from specopt.solvers.sdp import ip_sparse as ips

    rng, sp_, ops, k, G, _ = _random_row_ops(n, m, seed, centered, False)
    r = max(1, k // 3)
    Q = np.linalg.qr(rng.standard_normal((k, k)))[0]
    ev = np.r_[rng.uniform(1.0, 10.0, r), small * rng.uniform(0.5, 2.0, k - r)]
    X = (Q * ev) @ Q.T
    K = sp_.lift(X)
    ops.bb = ops.A_op(X, 0.0) + 1e-9 * rng.standard_normal(ops.m)  # X nearly on the rows
    rp = ops.bb - ops.A_op(X, 0.0)

    def rows_of(Y):
        return np.array([np.sum(_row_matrix(SparseRows(ops.rows, ops.ii, ops.jj, ops.vals,
                                                       ops.m, n), q) * (Y @ Y.T))
                         for q in range(ops.m)])

    Y = ips._factor_of(X, sp_, 1e-9, ops, rp)
    assert np.linalg.norm(ops.bb - rows_of(Y)) <= (
        2.0 * np.linalg.norm(rp) + 1e-12 * np.linalg.norm(ops.bb) + 1e-12 * np.abs(K).max())
    assert np.all(np.linalg.eigvalsh(K - Y @ Y.T) >= -1e-9 * np.abs(K).max())  # K's own parts
    plain = ips._factor_of(X, sp_, 1e-9)
    assert plain.shape[1] <= Y.shape[1]
    if small < 1e-9 * np.sum(ev) / 2:  # all small eigenvalues below the plain cut
        assert plain.shape[1] == r


@settings(max_examples=12, deadline=None)
@given(n=st.integers(4, 9), m=st.integers(2, 12), seed=st.integers(0, 10_000),
       share=st.sampled_from([0.3, 0.7, 1.0]))
def test_inequality_rows_agree_with_clarabel(n, m, seed, share):
    """Rows ``A_r(K) <= b_r`` (slacks in the interior point) next to equality rows and a trace
    bound: the same optimum as Clarabel, multipliers ``<= 0`` on the inequality rows, the rows
    met (an inequality at most its bound) and complementary slackness."""
    from specopt.solvers.sdp import ip_sparse as ips

    rng = np.random.default_rng(seed)
    A = _mixed_rows(n, m, rng)
    ineq = rng.random(m) < share
    G = rng.standard_normal((n, 2))
    K0 = G @ G.T + 0.1 * np.eye(n)  # strictly feasible: slack on every inequality row
    b = np.bincount(A.rows, weights=A.vals * K0[A.ii, A.jj], minlength=m) + np.where(
        ineq, rng.uniform(0.1, 1.0, m), 0.0)
    C = rng.standard_normal((n, n))
    C = C + C.T
    t = 3.0 * float(np.trace(K0))
    res = ips.solve_sparse_sdp_ip(C, A.rows, A.ii, A.jj, A.vals, b, trace_bound=t, tol=1e-9,
                                  ineq=ineq)
    K = res.Y @ res.Y.T
    X = cp.Variable((n, n), symmetric=True)
    expr = [cp.sum(cp.hstack([A.vals[k] * X[A.ii[k], A.jj[k]]
                              for k in np.flatnonzero(A.rows == r)])) for r in range(m)]
    cons = [X >> 0, cp.trace(X) <= t] + [e <= b[r] if ineq[r] else e == b[r]
                                        for r, e in enumerate(expr)]
    ref = cp.Problem(cp.Minimize(cp.trace(C @ X)), cons)
    ref.solve(solver="CLARABEL")
    assume(ref.status == cp.OPTIMAL)
    value = float(np.sum(C * K))
    assert value == pytest.approx(ref.value, rel=1e-5, abs=1e-5)
    Ak = np.bincount(A.rows, weights=A.vals * K[A.ii, A.jj], minlength=m)
    scale = 1.0 + np.abs(b).max()
    assert np.all(Ak[ineq] - b[ineq] <= 1e-6 * scale)
    assert np.all(np.abs(Ak[~ineq] - b[~ineq]) <= 1e-6 * scale)
    assert np.all(res.y[ineq] <= 1e-7 * (1 + np.abs(res.y).max()))
    # complementary slackness: a multiplier only where the row is (nearly) tight
    slack = b[ineq] - Ak[ineq]
    assert np.all(np.abs(res.y[ineq] * slack) <= 1e-5 * (1 + np.abs(value)))
