"""Facial reduction by fixed-distance cliques: the face, its certificate, the engine on it."""

from __future__ import annotations

import cvxpy as cp
import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specopt.solvers.sdp import (
    SparseRows,
    SymOp,
    graph_trace_bound,
    solve_low_rank_sdp,
)
from specopt.solvers.sdp.facial import clique_face, face_correction, maximal_cliques


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 25), st.floats(0.05, 0.8), st.integers(0, 10_000))
def test_maximal_cliques_match_networkx(n, p, seed):
    rng = np.random.default_rng(seed)
    pairs = np.array([(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < p],
                     dtype=np.int64).reshape(-1, 2)
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from(map(tuple, pairs.tolist()))
    ref = sorted(sorted(c) for c in nx.find_cliques(G))
    assert sorted(maximal_cliques(n, pairs)) == ref


def _cluster_chain(clusters: int, seed: int, size: int = 5):
    """Clusters of ``size`` points in R^3 (each a clique of fixed distances: Slater fails for
    size >= 5), consecutive clusters joined by one edge (a flexible chain)."""
    rng = np.random.default_rng(seed)
    X, pairs = [], []
    for c in range(clusters):
        base = c * size
        X.append(rng.standard_normal((size, 3)) + np.array([3.0 * c, 0, 0]))
        pairs += [(base + a, base + b) for a in range(size) for b in range(a + 1, size)]
        if c:
            pairs.append((base - 1, base))
    X = np.vstack(X)
    pairs = np.array(pairs)
    d2 = np.sum((X[pairs[:, 0]] - X[pairs[:, 1]]) ** 2, axis=1)
    return X, pairs, d2


def test_clique_face_contains_every_realization():
    X, pairs, d2 = _cluster_chain(4, 0)
    n = len(X)
    fr = clique_face(n, pairs, d2)
    assert fr is not None and fr.cliques_used == 4 and fr.clique_sizes == {5: 4}
    # each 5-clique in R^3 loses one dimension; centering one more
    assert fr.dim == n - 1 - 4
    assert np.allclose(fr.V.T @ fr.V, np.eye(fr.dim), atol=1e-10)
    assert np.abs(fr.V.sum(axis=0)).max() < 1e-10
    # the true centered configuration (and a rotated / reflected copy) lies in the face
    Xc = X - X.mean(axis=0)
    Q = np.linalg.qr(np.random.default_rng(1).standard_normal((3, 3)))[0]
    for Z in (Xc, Xc @ Q):
        assert np.linalg.norm(Z - fr.V @ (fr.V.T @ Z)) <= 1e-9 * np.linalg.norm(Z)
    assert abs(fr.eps_rows) < 1e-12 and fr.rho < 1e-12 and fr.omega > 0
    # another realization of the same distances in R^4 (hinges folded out): still in the face
    Y = np.c_[Xc, np.zeros(n)]
    R = np.eye(4)
    R[2:, 2:] = [[0.0, -1.0], [1.0, 0.0]]  # rotate the last cluster about the x-y plane
    Y[15:] = (Y[15:] - Y[15]) @ R.T + Y[15]
    Yc = Y - Y.mean(axis=0)
    assert np.allclose(np.sum((Yc[pairs[:, 0]] - Yc[pairs[:, 1]]) ** 2, axis=1), d2)
    assert np.linalg.matrix_rank(Yc, tol=1e-8) == 4
    assert np.linalg.norm(Yc - fr.V @ (fr.V.T @ Yc)) <= 1e-9 * np.linalg.norm(Yc)


def test_no_reduction_for_generic_high_dimensional_cliques():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 8))  # 5-cliques of points in R^8 have full-rank Grams
    pairs = np.array([(i, j) for i in range(12) for j in range(i + 1, 12) if j - i <= 4])
    d2 = np.sum((X[pairs[:, 0]] - X[pairs[:, 1]]) ** 2, axis=1)
    assert clique_face(12, pairs, d2) is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 12), st.integers(1, 3), st.integers(0, 10_000),
       st.sampled_from([0.0, 1e-12, 1e-6]), st.floats(1e-3, 1e3))
def test_face_correction_lower_bounds_the_slack(n, k, seed, eps, wscale):
    """value <= min(0, lambda_min(S + t W)) T - t eps for the t it returns (dense check)."""
    k = min(k, n - 1)
    rng = np.random.default_rng(seed)
    Qf = np.linalg.qr(rng.standard_normal((n, n)))[0]
    N, V = Qf[:, :k], Qf[:, k:]
    W = N @ np.diag(wscale * rng.uniform(0.5, 2.0, k)) @ N.T
    S = rng.standard_normal((n, n)) * rng.choice([1e-3, 1.0, 1e3])
    S = 0.5 * (S + S.T)
    a = float(np.linalg.eigvalsh(V.T @ S @ V)[0])
    s_norm = float(np.linalg.norm(S, 2)) * (1 + 1e-12)
    omega = float(np.linalg.eigvalsh(N.T @ W @ N)[0])
    T = 10.0
    val, t = face_correction(a, s_norm, T, eps, omega, 0.0, 1e-15)
    assert val <= 0.0
    lam = float(np.linalg.eigvalsh(S + t * W)[0])
    assert val <= min(0.0, lam) * T - t * eps + 1e-9 * (1 + abs(val) + t * wscale)
    if eps == 0.0:  # tends to the reduced bound min(0, a) T
        assert val >= min(0.0, a) * T - 1e-3 * (1 + abs(a) * T)


@pytest.mark.parametrize("seed", [0, 1])
def test_engine_on_the_face_bounds_clarabel_and_the_truth(seed):
    X, pairs, d2 = _cluster_chain(3, seed)
    n = len(X)
    A = SparseRows.from_pairs(pairs, n)
    T = graph_trace_bound(n, pairs, d2)
    fr = clique_face(n, pairs, d2)
    res = solve_low_rank_sdp(SymOp.identity(n), A, d2, sense="max", centered=True, face=fr,
                             implied_trace_bound=T, tol=1e-5, time_limit=60)
    # Clarabel on the original (Slater fails: its answer may be flagged inaccurate)
    K = cp.Variable((n, n), symmetric=True)
    I, J = pairs[:, 0], pairs[:, 1]
    prob = cp.Problem(cp.Maximize(cp.trace(K)),
                      [K >> 0, cp.sum(K) == 0, K[I, I] + K[J, J] - 2 * K[I, J] == d2])
    prob.solve(solver="CLARABEL")
    assert prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
    Xc = X - X.mean(axis=0)
    truth = float(np.sum(Xc**2))  # a feasible point
    assert res.primal_residual <= 1e-4
    assert np.linalg.norm(res.Y - fr.V @ (fr.V.T @ res.Y)) <= 1e-8 * np.linalg.norm(res.Y)
    assert res.objective == pytest.approx(prob.value, rel=1e-3)
    assert res.bound is not None
    # a valid upper bound: above a feasible point and above Clarabel's optimum (to its accuracy)
    assert res.bound >= truth
    assert res.bound >= prob.value * (1 - 1e-6)
    assert res.status == "optimal" and res.gap <= 1e-5


def test_face_must_match_size():
    X, pairs, d2 = _cluster_chain(2, 0)
    fr = clique_face(10, pairs, d2)
    with pytest.raises(ValueError, match="face basis"):
        solve_low_rank_sdp(SymOp.identity(11), SparseRows.from_pairs(pairs, 11), d2,
                           centered=True, face=fr)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(4, 12), q=st.integers(1, 5))
def test_face_row_matrix_reads_any_rows_on_the_face(seed, n, q):
    """``face_row_matrix(A, B) @ vec(Z) = A(B Z B^T)`` for symmetric ``Z`` and rows of every
    kind: distance rows, single entries (diagonal and off-diagonal), a trace row."""
    from specopt.solvers.sdp import SparseRows
    from specopt.solvers.sdp.facial import face_row_matrix

    rng = np.random.default_rng(seed)
    B = rng.normal(size=(n, q)) * (rng.random((n, q)) < 0.6)
    pairs = np.array([(i, j) for i in range(n) for j in range(i + 1, n)])[: 2 * n]
    dist = SparseRows.from_pairs(pairs, n)
    ii, jj = rng.integers(n, size=5), rng.integers(n, size=5)
    m0 = dist.m
    rows = np.r_[dist.rows, m0 + np.arange(5), np.full(n, m0 + 5)]
    A = SparseRows(rows, np.r_[dist.ii, ii, np.arange(n)], np.r_[dist.jj, jj, np.arange(n)],
                   np.r_[dist.vals, rng.normal(size=5), np.full(n, 2.0)], m0 + 6, n)
    Z = rng.normal(size=(q, q))
    Z = Z + Z.T
    K = B @ Z @ B.T
    want = np.bincount(A.rows, weights=A.vals * K[A.ii, A.jj], minlength=A.m)
    got = face_row_matrix(A, B) @ Z.ravel()
    assert np.allclose(got, want, atol=1e-10 * (1 + np.abs(want).max()))


def test_face_basis_is_an_echelon_basis_of_the_same_space():
    from specopt.solvers.sdp.facial import face_basis, independent_rows

    rng = np.random.default_rng(0)
    V, _ = np.linalg.qr(rng.normal(size=(15, 4)))
    B = face_basis(V)
    assert np.linalg.norm(B - V @ (V.T @ B)) <= 1e-12 * np.linalg.norm(B)
    assert sum(np.count_nonzero(b) == 1 and b.max() == 1.0 for b in B) >= 4
    M = np.r_[np.eye(3), [[1.0, 2.0, 0.0]], [[0.0, 0.0, 5.0]]]
    idx = independent_rows(M)
    assert len(idx) == 3 and np.linalg.matrix_rank(M[idx]) == 3  # rank 3, five rows
