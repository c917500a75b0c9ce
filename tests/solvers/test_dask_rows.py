"""Dask-backed row data (no cluster: Dask's synchronous scheduler): the lazy row operator agrees
with the in-memory FactoredOperator, the atom's value, refusals and input errors."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

da = pytest.importorskip("dask.array", reason="dask is an optional extra (specopt[dask])")
import dask  # noqa: E402

import specopt  # noqa: E402
from specopt.reductions import RouteMismatch  # noqa: E402
from specopt.solvers.mg import (  # noqa: E402
    DenseOperator,
    FactoredOperator,
    StackedOperator,
)
from specopt.solvers.mg.dask_rows import DaskRowOperator, triplet_rows  # noqa: E402
from tests._helpers import checked_reference  # noqa: E402


@pytest.fixture(autouse=True)
def _sync_scheduler():
    with dask.config.set(scheduler="sync"):
        yield


def _pair(rng, m, n, chunk, signs):
    V1, V2 = rng.normal(size=(m, n)), rng.normal(size=(m, n)) * rng.uniform(0.1, 3, n)
    s1, s2 = signs
    dask_op = DaskRowOperator([(s1, da.from_array(V1, chunks=(chunk, n))),
                               (s2, da.from_array(V2, chunks=(chunk // 2 + 1, n)))])
    s1v, s2v = np.broadcast_to(s1, m), np.broadcast_to(s2, m)
    M = sp.hstack([sp.diags_array(s1v), sp.diags_array(s2v)], format="csr")
    return dask_op, FactoredOperator(np.vstack([V1, V2]), M)


@pytest.mark.parametrize("chunk,signs", [(7, (1.0, -1.0)), (50, "vec"), (200, (2.0, 0.5))])
def test_lazy_operator_matches_in_memory(rng, chunk, signs):
    m, n, k = 61, 6, 4
    if signs == "vec":
        signs = (rng.normal(size=m), np.where(rng.random(m) < 0.5, -1.0, 0.0))
    op, ref = _pair(rng, m, n, chunk, signs)
    U, P = rng.normal(size=(n, 3)), rng.normal(size=(n, k))
    q = k * (k + 1) // 2
    scale = rng.uniform(0.5, 2, q)
    Bref = ref.quad_pairs(P) * scale
    B = op.quad_pairs(P) * scale
    assert B.shape == (m, q)
    v, w = rng.normal(size=q), rng.normal(size=m) * (rng.random(m) < 0.3)
    np.testing.assert_allclose(B @ v, Bref @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(B.T @ w, Bref.T @ w, rtol=1e-12, atol=1e-12)
    rows = np.array([m - 1, 0, 5, 33, 5])
    np.testing.assert_allclose(B[rows], Bref[rows], rtol=1e-12)
    mask = rng.random(m) < 0.4
    np.testing.assert_allclose(B[mask], Bref[mask], rtol=1e-12)
    np.testing.assert_allclose(B[3], Bref[3], rtol=1e-12)
    np.testing.assert_allclose(B[10:40] @ v, Bref[10:40] @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(B[10:40]), Bref[10:40], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(op.quad(U)), ref.quad(U), rtol=1e-12)
    np.testing.assert_allclose(op.quad(U) @ np.ones(3), ref.quad(U).sum(1), rtol=1e-12)
    np.testing.assert_allclose(op.adjoint_dense(w), ref.adjoint_dense(w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.adjoint_matvec(w, U), ref.adjoint_matvec(w, U), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(op.adjoint_dense(np.zeros(m)), 0.0)
    # stacked with an in-memory operator (the solver's [C; A] and mixed constraints)
    C = rng.normal(size=(n, n))
    C = C + C.T
    Cop = DenseOperator(C.reshape(1, -1, order="F"), n)
    st, st_ref = StackedOperator([Cop, op]), StackedOperator([Cop, ref])
    ww = np.append(1.0, -w)
    np.testing.assert_allclose(st.quad(U).T @ ww, st_ref.quad(U).T @ ww, rtol=1e-11, atol=1e-12)
    Bs, Bs_ref = st.quad_pairs(P) * scale, st_ref.quad_pairs(P) * scale
    np.testing.assert_allclose(Bs[0], Bs_ref[0], rtol=1e-12)
    np.testing.assert_allclose(Bs[1:][rows], Bs_ref[1:][rows], rtol=1e-12)
    np.testing.assert_allclose(Bs[1:] @ v, Bs_ref[1:] @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(st.adjoint_dense(ww), st_ref.adjoint_dense(ww), rtol=1e-11,
                               atol=1e-12)


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 5), chunk=st.integers(1, 45), k=st.integers(1, 4),
       density=st.sampled_from([0.0, 0.1, 1.0]), scale=st.sampled_from([1e-8, 1.0, 1e6]),
       seed=st.integers(0, 2**31))
def test_lazy_operator_random_shapes(m, n, chunk, k, density, scale, seed):
    """Any chunking (one row per block, one block for all), empty weights, bad scaling: the
    lazy passes equal the in-memory operator's."""
    rng = np.random.default_rng(seed)
    op, ref = _pair(rng, m, n, chunk, (scale, -1.0 / scale))
    P = rng.normal(size=(n, k))
    w = rng.normal(size=m) * (rng.random(m) < density)
    v = rng.normal(size=k * (k + 1) // 2)
    B, Bref = op.quad_pairs(P), ref.quad_pairs(P)
    tol = dict(rtol=1e-9, atol=1e-9 * max(scale, 1 / scale) ** 2)
    np.testing.assert_allclose(B @ v, Bref @ v, **tol)
    np.testing.assert_allclose(B.T @ w, Bref.T @ w, **tol)
    rows = rng.integers(0, m, 3)
    np.testing.assert_allclose(B[rows], Bref[rows], **tol)
    np.testing.assert_allclose(op.adjoint_dense(w), ref.adjoint_dense(w), **tol)
    np.testing.assert_allclose(op.adjoint_matvec(w, P), ref.adjoint_matvec(w, P), **tol)


def test_triplet_rows_and_atom_value(rng):
    X = rng.normal(size=(40, 5))
    T = rng.integers(0, 40, size=(97, 3))
    P, Q = triplet_rows(X, T, block_rows=10)
    assert P.chunks[0][0] == 10
    np.testing.assert_allclose(P.compute(), X[T[:, 0]] - X[T[:, 2]])
    np.testing.assert_allclose(Q.compute(), X[T[:, 0]] - X[T[:, 1]])
    P2, _ = triplet_rows(da.from_array(X, chunks=(7, 5)), da.from_array(T, chunks=(13, 3)))
    np.testing.assert_allclose(P2.compute(), X[T[:, 0]] - X[T[:, 2]])
    # the atom's value is one pass over the blocks and equals the in-memory value
    W = rng.normal(size=(5, 5))
    Xv = cp.Variable((5, 5), symmetric=True, value=W + W.T)
    e = specopt.row_quad_forms(P, Xv)
    assert e.shape == (97,) and e.is_affine()
    np.testing.assert_allclose(e.value, specopt.row_quad_forms(P.compute(), Xv).value,
                               rtol=1e-12)
    with pytest.raises(ValueError, match="materialize"):
        e.khatri_rao()
    with pytest.raises(ValueError, match="must be an"):
        triplet_rows(X, T[:, :2])


def _problem(P, Q, m, d, C=None):
    M = cp.Variable((d, d), PSD=True)
    rho, xi = cp.Variable(), cp.Variable(m)
    C = 10.0 / m if C is None else C
    return cp.Problem(cp.Maximize(rho - C * cp.sum(xi)),
                      [cp.trace(M) == 1,
                       specopt.row_quad_forms(P, M) - specopt.row_quad_forms(Q, M) >= rho - xi,
                       xi >= 0])


def test_other_routes_refuse_and_bad_structure(rng):
    m, d = 30, 4
    P, Q = rng.normal(size=(m, d)), rng.normal(size=(m, d))
    Pd, Qd = da.from_array(P, chunks=(8, d)), da.from_array(Q, chunks=(8, d))
    prob = _problem(Pd, Qd, m, d)
    for route in ("conic", "bregman", "dual_cd", "iterated_sdp"):
        with pytest.raises(RouteMismatch, match="route='matrix_generation'"):
            specopt.solve(prob, route=route)
    with pytest.raises(ValueError, match="conic compilation refused"):
        prob.solve(solver=cp.CLARABEL)
    assert prob.variables()[0].value is None  # nothing written
    ex = specopt.explain(prob)
    assert ex.auto_route == "matrix_generation"
    # row_quad_forms of a Dask V summed, or in the objective: a clear mismatch
    M = cp.Variable((d, d), PSD=True)
    summed = cp.Problem(cp.Maximize(cp.sum(specopt.row_quad_forms(Pd, M))), [cp.trace(M) == 1])
    with pytest.raises(RouteMismatch, match="row by row"):
        specopt.solve(summed, route="matrix_generation")
    with pytest.raises(RouteMismatch, match="row by row"):
        specopt.solve(cp.Problem(cp.Maximize(0), [cp.trace(M) == 1,
                                                  specopt.row_quad_forms(Pd, M)[:3] >= 0]),
                      route="matrix_generation")
    with pytest.raises(ValueError, match="numeric matrix"):
        specopt.row_quad_forms(da.from_array(np.array(["a"] * 4).reshape(2, 2)), M[:2, :2])


def test_matrix_generation_dask_equals_in_memory_and_clarabel(rng):
    """Same certified objective with Dask-backed rows (threads) as in memory and as Clarabel,
    on a mixed problem: per-row weights, a second (in-memory) constraint block, LP master too."""
    m, d = 120, 5
    P, Q = rng.normal(size=(m, d)), rng.normal(size=(m, d)) * 0.7
    wts = rng.uniform(0.5, 2.0, m)
    G = rng.normal(size=(d, d))

    def build(Pv, Qv):
        M = cp.Variable((d, d), PSD=True)
        rho, xi = cp.Variable(), cp.Variable(m, nonneg=True)
        cons = [cp.trace(M) <= 1.5,
                cp.multiply(wts, specopt.row_quad_forms(Pv, M)) - specopt.row_quad_forms(Qv, M)
                >= rho - xi,
                cp.trace(G @ M) <= 0.3, M[0, 0] <= 0.2]
        return cp.Problem(cp.Maximize(rho - 0.2 * cp.sum(xi)), cons)

    ref = build(P, Q)
    checked_reference(ref, cp.CLARABEL)
    mem = build(P, Q)
    specopt.solve(mem, route="matrix_generation", tol=1e-8)
    for chunk, master in ((17, "psd"), (64, "lp")):
        dsk = build(da.from_array(P, chunks=(chunk, d)), da.from_array(Q, chunks=(chunk, d)))
        specopt.solve(dsk, route="matrix_generation", tol=1e-8, master=master,
                      max_iters=3000)
        cert = specopt.certificate(dsk)
        assert dsk.status == cp.OPTIMAL and cert.gap <= 1e-8
        assert abs(dsk.value - mem.value) <= 1e-6 * max(1.0, abs(mem.value))
        assert abs(dsk.value - ref.value) <= 1e-5 * max(1.0, abs(ref.value))
        assert cert.max_violation <= 1e-7


def test_dask_infeasible_matches_in_memory(rng):
    """Hard margins no PSD trace-1 matrix can meet: infeasible with and without Dask (LP master:
    the PSD-block master's infeasibility status is issue 13's)."""
    m, d = 40, 3
    P = rng.normal(size=(m, d))
    Q = P * 2.0  # q q^T - p p^T = 3 p p^T >= 0: every margin <= 0 < 0.1

    def build(Pv, Qv):
        M = cp.Variable((d, d), PSD=True)
        return cp.Problem(cp.Minimize(0), [cp.trace(M) == 1,
                                           specopt.row_quad_forms(Pv, M)
                                           - specopt.row_quad_forms(Qv, M) >= 0.1])

    mem, dsk = build(P, Q), build(da.from_array(P, chunks=(9, d)), da.from_array(Q, chunks=9))
    specopt.solve(mem, route="matrix_generation", master="lp")
    specopt.solve(dsk, route="matrix_generation", master="lp")
    assert mem.status == dsk.status == cp.INFEASIBLE


def test_triplet_operator_works_on_the_triples(rng):
    """Rows from index triples: the operator's passes gather rows of data @ U (or the selected
    rows only) and equal the in-memory operator's; the cut master's fused pass too."""
    X = rng.normal(size=(30, 4))
    T = rng.integers(0, 30, size=(57, 3))
    P, Q = triplet_rows(X, T, block_rows=11)
    op = DaskRowOperator([(1.0, P), (-1.0, Q)])
    assert isinstance(op._blocks[0][0], tuple) and op._blocks[0][0][0] == "trip"
    Pm, Qm = X[T[:, 0]] - X[T[:, 2]], X[T[:, 0]] - X[T[:, 1]]
    m = len(T)
    ref = FactoredOperator(np.vstack([Pm, Qm]), sp.hstack([sp.identity(m), -sp.identity(m)]))
    U, w = rng.normal(size=(4, 3)), rng.normal(size=m) * (rng.random(m) < 0.3)
    np.testing.assert_allclose(op.quad(U) @ np.ones(3), ref.quad(U).sum(1), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(op.quad_pairs(U)), ref.quad_pairs(U), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(op.adjoint_dense(w), ref.adjoint_dense(w), rtol=1e-12,
                               atol=1e-12)
    rows = np.array([0, 5, 11, 40, 56])
    H, sub = op.adjoint_take(w, rows)
    np.testing.assert_allclose(H, ref.adjoint_dense(w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sub.quad(U), ref.quad(U)[rows], rtol=1e-12)
    np.testing.assert_allclose(op.take_operator(rows).quad_pairs(U), ref.quad_pairs(U)[rows],
                               rtol=1e-12, atol=1e-12)
    # every row with one weight: blocks are shipped as (all rows, one scalar)
    wc = np.full(m, 0.7)
    np.testing.assert_allclose(op.adjoint_dense(wc), ref.adjoint_dense(wc), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(op.adjoint_matvec(wc, U), ref.adjoint_matvec(wc, U), rtol=1e-12,
                               atol=1e-12)
    H, sub = op.adjoint_take(wc, rows)
    np.testing.assert_allclose(H, ref.adjoint_dense(wc), rtol=1e-12, atol=1e-12)
    assert [len(i) if not isinstance(i, slice) else "all" for _, i, _ in op._split(wc, True)] \
        == ["all"] * op.n_blocks


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("where", ["V", "points"])
def test_dask_nonfinite_data_named_not_hung(rng, bad, where):
    """NaN / inf in Dask-backed rows (V itself, or the points triplet rows are built from): the
    finite check fused into the first pass over the data raises a ValueError naming the data,
    never a HiGHS failure or a hang; nothing is written."""
    m, d = 60, 4
    if where == "V":
        P, Q = rng.normal(size=(m, d)), rng.normal(size=(m, d))
        P[37, 2] = bad
        Pd, Qd = da.from_array(P, chunks=(16, d)), da.from_array(Q, chunks=(16, d))
    else:
        X = rng.normal(size=(30, d))
        X[11, 1] = bad
        T = np.column_stack([np.arange(30), (np.arange(30) + 1) % 30, (np.arange(30) + 2) % 30])
        Pd, Qd = triplet_rows(X, np.vstack([T, T[::-1]]), block_rows=16)
        m = Pd.shape[0]
    prob = _problem(Pd, Qd, m, d)
    for master in ("psd", "lp"):
        with pytest.raises(ValueError, match="NaN or inf"):
            specopt.solve(prob, route="matrix_generation", master=master, time_limit=30)
        assert prob.variables()[0].value is None and prob.status is None


@pytest.mark.parametrize("N", [40, 5000])
def test_triplet_block_cut_and_activities_match_the_rows(N):
    """The cut matrix of index-triple rows (the Laplacian form when the rows touch fewer points
    than they are: N = 40; the gathered rows otherwise: N = 5000) and their activities (one
    gather per triple column) equal the explicit difference rows' ``sum w_r s_j v v^T`` and
    ``sum s_j (v^T U)^2 theta``, with per-row weights, a row subset and signs per row."""
    from specopt.solvers.mg import dask_rows as dr

    rng = np.random.default_rng(N)
    m, D = 300, 6
    data = rng.normal(size=(N, D))
    T = rng.integers(0, N, (m, 3)).astype(np.int32)
    P, Q = data[T[:, 0]] - data[T[:, 2]], data[T[:, 0]] - data[T[:, 1]]
    sq = rng.choice([-1.0, 2.0], m)
    sv = (1.0, sq, ("trip", T, data, 0, 2), ("trip", T, data, 0, 1))
    calls = []
    orig = dr._trip_gram
    dr_gram = lambda *a: calls.append(orig(*a)) or calls[-1]  # noqa: E731
    for idx in (slice(None), np.sort(rng.choice(m, 120, replace=False))):
        w = rng.normal(size=m)[idx]
        ref = P[idx].T @ (w[:, None] * P[idx]) + Q[idx].T @ ((w * sq[idx])[:, None] * Q[idx])
        try:
            dr._trip_gram = dr_gram
            got = dr._blk_adjoint(idx, w, None, 2, *sv)
        finally:
            dr._trip_gram = orig
        assert np.allclose(got, ref, atol=1e-10 * np.abs(ref).max())
    assert (calls[-1] is None) == (N == 5000)  # which form ran
    U, th = rng.normal(size=(D, 3)), rng.random(3)
    act = ((P @ U) ** 2) @ th + sq * (((Q @ U) ** 2) @ th)
    assert np.allclose(dr._blk_rows_matvec("quad", U, 0.5, th, 2, *sv), 0.5 * act)
