"""Tests of the Bregman-projection ITML solver (linear, kernel, low-rank forms)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specopt.solvers.bregman import itml_kernel, itml_linear, itml_lowrank, logdet_objective


def _instance(seed, d=4, n=15, m=25, lo=10, hi=90):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((d, n))
    P = rng.integers(0, n, (3 * m, 2))
    P = P[P[:, 0] != P[:, 1]][:m]
    V = (X[:, P[:, 0]] - X[:, P[:, 1]]).T
    dist = np.sum(V**2, axis=1)
    delta = np.where(np.arange(len(P)) % 2 == 0, 1.0, -1.0)
    u, l = np.percentile(dist, lo), np.percentile(dist, hi)
    b = np.where(delta > 0, u, l)
    return X, P, V, b, delta


def _planted(seed, d=4, n=15, m=25):
    """Hard-constraint instance feasible by construction: bounds from a planted W*."""
    X, P, V, _, delta = _instance(seed, d, n, m)
    rng = np.random.default_rng(seed + 100)
    B = rng.standard_normal((d, d))
    Ws = B @ B.T + 0.5 * np.eye(d)
    p = np.einsum("ij,jk,ik->i", V, Ws, V)
    b = np.where(delta > 0, 1.1 * p, p / 1.1)
    return X, P, V, b, delta


def _check_invariants(res, V, b, delta, W0, gamma):
    lam = res.lam
    assert np.all(lam >= 0)
    C = (V.T * (delta * lam)) @ V
    lhs = np.linalg.inv(res.W)
    rhs = np.linalg.inv(W0) + C
    assert np.linalg.norm(lhs - rhs) <= 1e-8 * np.linalg.norm(rhs)
    if not math.isinf(gamma):
        np.testing.assert_allclose(1 / res.xi, 1 / b - delta * lam / gamma, rtol=1e-9)
    g = np.array(res.history["dual"])
    assert np.all(np.diff(g) >= -1e-9 * np.maximum(1, np.abs(g[1:])))


@pytest.mark.parametrize("gamma", [1.0, 10.0, math.inf])
def test_invariants_and_certificate(gamma):
    X, P, V, b, delta = _planted(0) if math.isinf(gamma) else _instance(0)
    rng = np.random.default_rng(3)
    B = rng.standard_normal((4, 4))
    W0 = B @ B.T + np.eye(4)
    res = itml_linear(V, b, delta, W0, gamma, check_every=1)
    assert res.status == "optimal"
    assert res.gap <= 1e-8 and res.max_violation <= 1e-8
    _check_invariants(res, V, b, delta, W0, gamma)
    # the primal value reported is the objective at W
    prim = logdet_objective(res.W, W0)
    if not math.isinf(gamma):
        r = res.xi / b
        prim += gamma * np.sum(r - np.log(r) - 1)
    assert abs(prim - res.primal) <= 1e-9 * max(1, abs(prim))
    # KKT: complementary slackness at the solution
    p = np.einsum("ij,jk,ik->i", V, res.W, V)
    assert np.all(res.lam * np.abs(p - res.xi) <= 1e-6 * res.xi * max(1, res.lam.max()))


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), gamma=st.sampled_from([0.1, 1.0, 100.0]))
def test_random_instances_monotone_dual(seed, gamma):
    _, _, V, b, delta = _instance(seed, d=3, n=10, m=12)
    res = itml_linear(V, b, delta, None, gamma, check_every=1)
    assert res.status == "optimal"
    _check_invariants(res, V, b, delta, np.eye(3), gamma)
    assert res.dual <= res.primal + 1e-7 * max(1, abs(res.primal))


@pytest.mark.parametrize("gamma", [1.0, math.inf])
def test_kernel_equals_linear(gamma):
    X, P, V, b, delta = _planted(1) if math.isinf(gamma) else _instance(1)
    # the kernel form sweeps cyclically; with hard constraints the optimal lam is not unique,
    # so lam is compared for the same (cyclic) order
    lin = itml_linear(V, b, delta, None, gamma, tol=1e-10, method="cyclic")
    ker = itml_kernel(X.T @ X, P, b, delta, gamma, tol=1e-10)  # singular K0: n=15 > d=4
    assert lin.status == ker.status == "optimal"
    np.testing.assert_allclose(ker.lam, lin.lam, rtol=1e-6, atol=1e-9 * lin.lam.max())
    Kl = X.T @ lin.W @ X
    assert np.abs(ker.K - Kl).max() <= 1e-8 * np.abs(Kl).max()
    # W = I + X_S M X_S^T
    XS = X[:, ker.support]
    Wk = np.eye(X.shape[0]) + XS @ ker.M @ XS.T
    assert np.linalg.norm(Wk - lin.W) <= 1e-7 * np.linalg.norm(lin.W)
    assert abs(ker.primal - lin.primal) <= 1e-8 * max(1, abs(lin.primal))
    # sweeping on K alone and recovering M = -(I + C K0)^{-1} C at the end gives the same M
    ker2 = itml_kernel(X.T @ X, P, b, delta, gamma, tol=1e-10, track_M=False)
    assert ker2.status == "optimal"
    assert np.abs(ker2.M - ker.M).max() <= 1e-6 * max(1, np.abs(ker.M).max())
    assert np.abs(ker2.K - ker.K).max() <= 1e-8 * np.abs(ker.K).max()


def _poly_features(Z):
    """Explicit features of k(z, z') = (1 + z.z')^2 in 2-d."""
    z1, z2 = Z[:, 0], Z[:, 1]
    s = np.sqrt(2)
    return np.stack([np.ones_like(z1), s * z1, s * z2, z1**2, z2**2, s * z1 * z2])


def test_out_of_sample_kernel_matches_features():
    rng = np.random.default_rng(5)
    Z = rng.standard_normal((20, 2))
    Phi = _poly_features(Z)  # D=6 features, n=20 points: K0 singular
    K0 = (1 + Z @ Z.T) ** 2
    np.testing.assert_allclose(Phi.T @ Phi, K0, rtol=1e-12, atol=1e-12)
    P = np.array([(i, (i * 7 + 3) % 20) for i in range(20)])
    P = P[P[:, 0] != P[:, 1]]
    d0 = K0[P[:, 0], P[:, 0]] + K0[P[:, 1], P[:, 1]] - 2 * K0[P[:, 0], P[:, 1]]
    delta = np.where(np.arange(len(P)) % 2 == 0, 1.0, -1.0)
    b = np.where(delta > 0, np.percentile(d0, 20), np.percentile(d0, 80))
    ker = itml_kernel(K0, P, b, delta, 1.0, tol=1e-10)
    lin = itml_linear((Phi[:, P[:, 0]] - Phi[:, P[:, 1]]).T, b, delta, None, 1.0, tol=1e-10)
    assert ker.status == lin.status == "optimal"
    Znew = rng.standard_normal((7, 2))
    k1 = (1 + Znew @ Z[ker.support].T) ** 2
    Knew = (1 + Znew @ Znew.T) ** 2 + k1 @ ker.M @ k1.T
    Phin = _poly_features(Znew)
    Kfeat = Phin.T @ lin.W @ Phin
    assert np.abs(Knew - Kfeat).max() <= 1e-7 * np.abs(Kfeat).max()
    assert np.linalg.eigvalsh(0.5 * (Knew + Knew.T))[0] >= -1e-9 * np.abs(Knew).max()


def test_rbf_ill_conditioned_kernel():
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((25, 2))
    D2 = np.sum((Z[:, None] - Z[None]) ** 2, axis=-1)
    cond, g = 0.0, 0.0
    for g in np.geomspace(0.3, 0.03, 60):
        cond = np.linalg.cond(np.exp(-g * D2))
        if 1e9 <= cond <= 1e11:
            break
    assert 1e9 <= cond <= 1e11
    K0 = np.exp(-g * D2)
    P = np.array([(i, (i * 5 + 2) % 25) for i in range(25) if i != 12])
    d0 = 2 - 2 * K0[P[:, 0], P[:, 1]]
    delta = np.where(np.arange(24) % 3 == 0, -1.0, 1.0)
    b = np.where(delta > 0, np.percentile(d0, 10), np.percentile(d0, 90))
    ker = itml_kernel(K0, P, b, delta, 10.0, tol=1e-9)
    assert ker.status == "optimal"
    # reference: the linear form on explicit features Phi = diag(sqrt ev) U^T (K0 = Phi^T Phi)
    ev, U = np.linalg.eigh(K0)
    Phi = (U * np.sqrt(np.maximum(ev, 0))).T
    lin = itml_linear((Phi[:, P[:, 0]] - Phi[:, P[:, 1]]).T, b, delta, None, 10.0, tol=1e-9)
    Kl = Phi.T @ lin.W @ Phi
    assert np.abs(ker.K - Kl).max() <= 1e-6 * np.abs(Kl).max()
    np.testing.assert_allclose(ker.lam, lin.lam, rtol=1e-4, atol=1e-8 * lin.lam.max())
    assert np.linalg.eigvalsh(ker.K)[0] >= -1e-8


def test_input_errors_and_drops():
    X, P, V, b, delta = _instance(2)
    with pytest.raises(ValueError, match="bounds must be > 0"):
        itml_linear(V, np.where(delta > 0, 0.0, b), delta)
    with pytest.raises(ValueError, match="bounds must be > 0"):
        itml_kernel(X.T @ X, P, -b, delta)
    with pytest.raises(ValueError, match="sides"):
        itml_linear(V, b, 2 * delta)
    with pytest.raises(ValueError, match="gamma"):
        itml_linear(V, b, delta, gamma=0.0)
    with pytest.raises(ValueError, match="positive definite"):
        itml_linear(V, b, delta, W0=np.diag([1.0, 1.0, 1.0, -1.0]))
    V2 = V.copy()
    V2[0] = 0.0
    with pytest.warns(RuntimeWarning, match="coincide"):
        res = itml_linear(V2, b, delta, gamma=1.0)
    assert res.status == "optimal" and res.lam[0] == 0 and list(res.dropped) == [0]
    P2 = P.copy()
    P2[1] = [3, 3]
    with pytest.warns(RuntimeWarning, match="coincide"):
        resk = itml_kernel(X.T @ X, P2, b, delta, gamma=1.0)
    assert resk.status == "optimal" and list(resk.dropped) == [1]


def test_infeasible_hard_constraints_detected():
    rng = np.random.default_rng(0)
    v = rng.standard_normal(3)
    V = np.vstack([v, v, rng.standard_normal((4, 3))])
    delta = np.array([1.0, -1.0, 1, 1, -1, -1])
    b = np.array([1.0, 2.0, 5, 5, 0.1, 0.1])  # ||v||_W^2 <= 1 and >= 2: infeasible
    res = itml_linear(V, b, delta, gamma=math.inf, max_sweeps=20_000)
    assert res.status == "infeasible"
    r = res.extra["farkas_ray"]
    assert np.all(r >= 0) and np.sum(delta * r * b) < 0
    X = np.hstack([np.zeros((3, 1)), v[:, None], rng.standard_normal((3, 2))])
    P = np.array([[0, 1], [1, 0], [0, 2], [2, 3]])
    resk = itml_kernel(
        X.T @ X,
        P,
        np.array([1.0, 2.0, 5, 0.1]),
        np.array([1.0, -1, 1, -1]),
        gamma=math.inf,
        max_sweeps=20_000,
    )
    assert resk.status == "infeasible"
    # slack problems are always feasible
    assert itml_linear(V, b, delta, gamma=1.0).status == "optimal"


def test_lowrank_form():
    X, P, V, b, delta = _planted(4, d=6, n=20, m=20)
    with pytest.raises(ValueError, match="hard constraints"):
        itml_lowrank(V, b, delta, np.eye(6)[:, :2], gamma=1.0)
    U, _, _ = np.linalg.svd(X, full_matrices=False)
    U = U[:, :6]
    full = itml_linear(V, b, delta, None, math.inf, tol=1e-10)
    low = itml_lowrank(V, b, delta, U, tol=1e-10)  # k = d: same problem
    assert full.status == low.status == "optimal"
    assert np.linalg.norm(low.W - full.W) <= 1e-7 * np.linalg.norm(full.W)
    # k < d on an instance feasible inside the family: W - I lives in span(U), constraints hold
    Uk = U[:, :3]
    Ws = np.eye(6) + Uk @ np.diag([2.0, 0.5, 1.5]) @ Uk.T
    p = np.einsum("ij,jk,ik->i", V, Ws, V)
    b2 = np.where(delta > 0, 1.1 * p, p / 1.1)
    low2 = itml_lowrank(V, b2, delta, Uk, tol=1e-10)
    assert low2.status == "optimal"
    E = low2.W - np.eye(6)
    Pp = np.eye(6) - Uk @ Uk.T
    assert np.linalg.norm(Pp @ E) <= 1e-9 * max(1, np.linalg.norm(E))
    p2 = np.einsum("ij,jk,ik->i", V, low2.W, V)
    assert np.all(delta * (p2 - b2) <= 1e-7 * b2)
    # a similarity bound below the part of ||v|| outside span(U) is infeasible
    e = np.eye(6)
    bad = itml_lowrank(e[[5]], np.array([0.5]), np.array([1.0]), e[:, :2])
    assert bad.status == "infeasible"


def test_scale_and_congruence_invariance():
    X, P, V, b, delta = _instance(6)
    rng = np.random.default_rng(9)
    W0 = np.eye(4) + 0.3 * np.ones((4, 4))
    base = itml_linear(V, b, delta, W0, 1.0, tol=1e-10)
    c = 7.5  # D(cW, cW0) = D(W, W0): scale W0 and the bounds by c
    sc = itml_linear(V, c * b, delta, c * W0, 1.0, tol=1e-10)
    assert np.linalg.norm(sc.W - c * base.W) <= 1e-7 * np.linalg.norm(c * base.W)
    assert abs(sc.primal - base.primal) <= 1e-8 * max(1, abs(base.primal))
    T = rng.standard_normal((4, 4)) + 3 * np.eye(4)  # x -> T^{-T}... : W -> T W T^T
    Ti = np.linalg.inv(T)
    cg = itml_linear(V @ Ti, b, delta, T @ W0 @ T.T, 1.0, tol=1e-10)
    ref = T @ base.W @ T.T
    assert np.linalg.norm(cg.W - ref) <= 1e-6 * np.linalg.norm(ref)
    assert abs(cg.primal - base.primal) <= 1e-8 * max(1, abs(base.primal))


# --------------------------------------------------------------------------------------------
# Kernel form: factored (K0_SS = G G^T, linear ITML in R^r) and blocked sweeps == plain form
# --------------------------------------------------------------------------------------------
def _same_kernel_solution(a, f, Knew_a=None, Knew_f=None, rtol=1e-7):
    # both forms must reach the same point; a few planted hard-constraint instances (d = 2, 24
    # constraints) converge too slowly for the sweep cap, and then both stop at the same iterate
    assert a.status == f.status and a.status in ("optimal", "inaccurate")
    np.testing.assert_array_equal(a.support, f.support)
    # multipliers of planted hard-constraint instances are ill-determined: seed 351, d = 2,
    # gamma = inf reaches the same K to 6e-9 and the same objectives to 7e-12 with one
    # multiplier 6e-6 apart (relative), so they are compared at 1e-5; K, M, values stay tight
    np.testing.assert_allclose(f.lam, a.lam, rtol=1e-5, atol=1e-8 * max(a.lam.max(), 1e-300))
    assert np.abs(f.K - a.K).max() <= rtol * np.abs(a.K).max()
    Ka, Kf = a.extra["K_support"], f.extra["K_support"]
    assert np.abs(Kf - Ka).max() <= rtol * np.abs(Ka).max()
    assert np.abs(f.M - a.M).max() <= 1e-6 * max(1.0, np.abs(a.M).max())
    for x, y in ((f.primal, a.primal), (f.dual, a.dual)):
        assert abs(x - y) <= 1e-7 * max(1.0, abs(y))
    if a.status == "optimal":
        assert f.gap <= 1e-9 and f.max_violation <= 1e-9
    else:
        assert abs(f.gap - a.gap) <= 1e-6 * max(1.0, a.gap)


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    gamma=st.sampled_from([1.0, 10.0, math.inf]),
    d=st.integers(2, 5),
)
def test_factored_equals_kernel_form_singular_linear_K0(seed, gamma, d):
    n = 18  # linear kernel, n > d: K0 singular, numerical rank r = d <= s / 2
    X, P, V, b, delta = _planted(seed, d, n, 24) if math.isinf(gamma) else _instance(seed, d, n, 24)
    K0 = X.T @ X
    a = itml_kernel(K0, P, b, delta, gamma, tol=1e-10, factored=False, max_sweeps=20_000)
    f = itml_kernel(K0, P, b, delta, gamma, tol=1e-10, max_sweeps=20_000)  # auto: factored
    assert f.extra["factored"] and f.extra["rank"] == d and not a.extra["factored"]
    _same_kernel_solution(a, f)
    # same out-of-sample kernel k(z1, z2) = k0(z1, z2) + k1^T M k2, and W = I + X_S M X_S^T
    Z = np.random.default_rng(seed).standard_normal((d, 5))
    k = Z.T @ X[:, a.support]
    Ka, Kf = Z.T @ Z + k @ a.M @ k.T, Z.T @ Z + k @ f.M @ k.T
    assert np.abs(Kf - Ka).max() <= 1e-7 * np.abs(Ka).max()
    if a.status == "optimal":
        lin = itml_linear(V, b, delta, None, gamma, tol=1e-10)
        XS = X[:, f.support]
        Wf = np.eye(d) + XS @ f.M @ XS.T
        assert np.linalg.norm(Wf - lin.W) <= 1e-7 * np.linalg.norm(lin.W)


def test_factored_equals_kernel_form_rbf_cond_1e10():
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((25, 2))
    D2 = np.sum((Z[:, None] - Z[None]) ** 2, axis=-1)
    g = next(g for g in np.geomspace(0.3, 0.03, 60) if np.linalg.cond(np.exp(-g * D2)) >= 1e9)
    K0 = np.exp(-g * D2)
    assert 1e9 <= np.linalg.cond(K0) <= 1e11
    P = np.array([(i, (i * 5 + 2) % 25) for i in range(25) if i != 12])
    d0 = 2 - 2 * K0[P[:, 0], P[:, 1]]
    delta = np.where(np.arange(24) % 3 == 0, -1.0, 1.0)
    b = np.where(delta > 0, np.percentile(d0, 10), np.percentile(d0, 90))
    a = itml_kernel(K0, P, b, delta, 10.0, tol=1e-10, factored=False)
    assert not a.extra["factored"]  # rank 25 > s / 2: auto keeps the kernel form
    f = itml_kernel(K0, P, b, delta, 10.0, tol=1e-10, factored=True)
    assert f.extra["factored"] and f.extra["rank"] == 25
    _same_kernel_solution(a, f, rtol=1e-6)
    # new points: learned kernel equal and PSD
    Zn = rng.standard_normal((6, 2))
    k = np.exp(-g * np.sum((Zn[:, None] - Z[a.support][None]) ** 2, axis=-1))
    k00 = np.exp(-g * np.sum((Zn[:, None] - Zn[None]) ** 2, axis=-1))
    Ka, Kf = k00 + k @ a.M @ k.T, k00 + k @ f.M @ k.T
    assert np.abs(Kf - Ka).max() <= 1e-6 * np.abs(Ka).max()
    assert np.linalg.eigvalsh(0.5 * (Kf + Kf.T))[0] >= -1e-8


def test_factored_detects_infeasible_hard_constraints():
    rng = np.random.default_rng(0)
    v = rng.standard_normal(3)
    X = np.hstack([np.zeros((3, 1)), v[:, None], rng.standard_normal((3, 2))])
    P = np.array([[0, 1], [1, 0], [0, 2], [2, 3]])
    b, delta = np.array([1.0, 2.0, 5, 0.1]), np.array([1.0, -1, 1, -1])
    res = itml_kernel(X.T @ X, P, b, delta, math.inf, max_sweeps=20_000, factored=True)
    assert res.status == "infeasible"
    r = res.extra["farkas_ray"]
    assert r.shape == (4,) and np.all(r >= 0) and np.sum(delta * r * b) < 0


@pytest.mark.parametrize("block", [1, 3, 64])
def test_blocked_kernel_sweeps_equal_rank_one_updates(block):
    rng = np.random.default_rng(3)
    Z = rng.standard_normal((40, 6))
    K0 = np.exp(-0.1 * np.sum((Z[:, None] - Z[None]) ** 2, axis=-1))
    P = rng.integers(0, 40, (90, 2))
    P = P[P[:, 0] != P[:, 1]]
    d0 = K0[P[:, 0], P[:, 0]] + K0[P[:, 1], P[:, 1]] - 2 * K0[P[:, 0], P[:, 1]]
    delta = np.where(np.arange(len(P)) % 2 == 0, 1.0, -1.0)
    b = np.where(delta > 0, np.percentile(d0, 30), np.percentile(d0, 70))
    a = itml_kernel(K0, P, b, delta, 1.0, tol=1e-10, factored=False, track_M=True)
    f = itml_kernel(K0, P, b, delta, 1.0, tol=1e-10, factored=False, track_M=False, block=block)
    assert f.iterations == a.iterations
    _same_kernel_solution(a, f, rtol=1e-10)


# --------------------------------------------------------------------------------------------
# Methods: projected Newton on the dual, active-set ("project and forget"), random order
# --------------------------------------------------------------------------------------------
def _all_constraint_certificate(res, V, b, delta, W0, gamma):
    """Violation and gap recomputed from the returned W, xi, lam over ALL constraints."""
    p = np.einsum("ij,jk,ik->i", V, res.W, V)
    viol = float(np.max(np.maximum(0.0, delta * (p - res.xi)) / res.xi))
    prim = logdet_objective(res.W, W0)
    r = res.xi / b
    prim += gamma * np.sum(r - np.log(r) - 1)
    L0 = np.linalg.cholesky(W0)
    VL = V @ L0
    S = np.eye(V.shape[1]) + (VL.T * (delta * res.lam)) @ VL
    dual = np.linalg.slogdet(S)[1] + gamma * np.sum(np.log(1 - delta * res.lam * b / gamma))
    return viol, prim, dual


def _clarabel_itml(V, b, delta, W0, gamma):
    import cvxpy as cp

    import specopt

    d = V.shape[1]
    W = cp.Variable((d, d), PSD=True)
    xi = cp.Variable(len(b))
    S, D = np.flatnonzero(delta > 0), np.flatnonzero(delta < 0)
    prob = cp.Problem(
        cp.Minimize(specopt.logdet_div(W, W0) + gamma * specopt.burg_div(xi, b)),
        [specopt.row_quad_forms(V[S], W) <= xi[S], specopt.row_quad_forms(V[D], W) >= xi[D]],
    )
    specopt.solve(prob, route="conic", solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10,
                  tol_feas=1e-10, max_iter=500)
    return prob.value, W.value


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    gamma=st.sampled_from([0.05, 1.0, 50.0]),
    scale=st.sampled_from([1e-3, 1.0, 1e3]),
    lo=st.sampled_from([5, 30]),
)
def test_methods_agree_with_each_other_and_clarabel(seed, gamma, scale, lo):
    """newton, cyclic, active-set and random sweeps reach the same certified solution as
    Clarabel, on badly scaled data and tight/loose bounds; certificates hold on ALL constraints."""
    _, _, V, b, delta = _instance(seed, d=3, n=12, m=30, lo=lo, hi=100 - lo)
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((3, 3))
    W0 = B @ B.T / 3 + np.eye(3)
    # reference on the well-scaled problem: v -> s v, b -> s^2 b leaves W* and the optimal
    # value unchanged (Clarabel itself is inaccurate on the 1e-6-scaled bounds)
    val, Wc = _clarabel_itml(V, b, delta, W0, gamma)
    V = V * scale
    b = b * scale**2
    sols = {}
    for method in ("newton", "cyclic", "active", "random"):
        res = itml_linear(V, b, delta, W0, gamma, tol=1e-9, method=method)
        assert res.status == "optimal", method
        assert res.extra["method"] == method
        viol, prim, dual = _all_constraint_certificate(res, V, b, delta, W0, gamma)
        assert viol <= 1e-9 and abs(viol - res.max_violation) <= 1e-12 + 1e-6 * viol
        assert abs(prim - res.primal) <= 1e-8 * max(1.0, abs(prim))
        assert abs(dual - res.dual) <= 1e-8 * max(1.0, abs(dual))
        assert res.dual <= res.primal + 1e-9 * max(1.0, abs(res.primal))
        assert abs(res.primal - val) <= 1e-6 * max(1.0, abs(val))
        assert np.linalg.norm(res.W - Wc) <= 1e-4 * np.linalg.norm(Wc)
        sols[method] = res
    ref = sols["cyclic"].W
    for method, res in sols.items():
        assert np.linalg.norm(res.W - ref) <= 1e-6 * np.linalg.norm(ref), method


def test_capped_active_set_certificate_covers_all_constraints():
    """Stopped after a few sweeps, the active-set method still reports the violation over ALL
    constraints (the forgotten ones included), and a lower bound below the primal value."""
    _, _, V, b, delta = _instance(4, d=4, n=30, m=120, lo=20, hi=80)
    res = itml_linear(V, b, delta, None, 1.0, tol=1e-12, method="active", max_sweeps=3,
                      check_every=1)
    assert res.status == "inaccurate" and res.iterations == 3
    viol, prim, dual = _all_constraint_certificate(res, V, b, delta, np.eye(4), 1.0)
    assert abs(viol - res.max_violation) <= 1e-12 + 1e-9 * viol and viol > 1e-6
    assert abs(dual - res.dual) <= 1e-9 * max(1.0, abs(dual))
    opt = itml_linear(V, b, delta, None, 1.0, tol=1e-10, method="newton")
    assert res.dual <= opt.primal + 1e-9 and opt.status == "optimal"
    # a capped Newton run hands over to sweeps from a consistent point: same solution
    res2 = itml_linear(V, b, delta, None, 1.0, tol=1e-10, method="newton", max_sweeps=10**5)
    assert res2.status == "optimal"
    assert np.linalg.norm(res2.W - opt.W) <= 1e-8 * np.linalg.norm(opt.W)


def test_newton_warm_start_hand_over_to_sweeps():
    """A time-capped Newton stage leaves (W, xi, lam) consistent, so sweeps continue correctly."""
    from specopt.solvers.bregman import linear as bregman

    _, _, V, b, delta = _instance(6, d=4, n=30, m=80)
    lam = np.zeros(len(b))
    its, ok = bregman._dual_newton(V, b, delta, 1.0, lam, 1e-10, max_iter=2)
    assert its == 2 and not ok and np.all(lam >= 0)
    full = itml_linear(V, b, delta, None, 1.0, tol=1e-10, method="cyclic")
    newt = itml_linear(V, b, delta, None, 1.0, tol=1e-10, method="newton")
    assert newt.status == full.status == "optimal"
    assert np.linalg.norm(newt.W - full.W) <= 1e-7 * np.linalg.norm(full.W)


def test_method_errors():
    _, _, V, b, delta = _instance(0)
    with pytest.raises(ValueError, match="unknown method"):
        itml_linear(V, b, delta, None, 1.0, method="greedy")
    with pytest.raises(ValueError, match="slack form"):
        itml_linear(V, b, delta, None, math.inf, method="newton")
