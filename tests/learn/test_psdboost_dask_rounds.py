"""Cheaper rounds of the direct Dask PSDBoost fit (issue 25): the coarse-to-fine warm start, the
rounds' activities in single precision and the Laplacian cut give the in-memory certified
result, and the certificate stays sound (its objective is that of the returned point, its bound
is above the optimum). Dask's synchronous scheduler: fast, no cluster."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

da = pytest.importorskip("dask.array", reason="dask is an optional extra (specopt[dask])")
dask = pytest.importorskip("dask")

import cvxpy as cp  # noqa: E402

from specopt.learn import PSDBoostMetric, _dask_fit  # noqa: E402
from specopt.solvers.mg import cuts  # noqa: E402
from specopt.solvers.mg._operators import FactoredOperator, zero_objective  # noqa: E402
from specopt.solvers.mg._problem import MGOptions, SpectraplexLP  # noqa: E402
from specopt.solvers.mg._result import RoundLog  # noqa: E402
from specopt.solvers.mg.dask_rows import _trip_gram, _TripBlock  # noqa: E402


def _instance(seed, N=80, D=4, S=1200):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, N)
    X = (rng.normal(size=(3, D))[y] * 1.5 + rng.normal(size=(N, D)) * rng.uniform(0.5, 2, D))
    i, j, k = (rng.integers(0, N, 8 * S) for _ in range(3))
    ok = (y[i] == y[j]) & (y[i] != y[k]) & (i != j)
    T = np.column_stack([i, j, k])[ok][:S].astype(np.int32)
    return X / np.sqrt(D), T


def _exact_objective(X, T, M, rho, C):
    """``rho - C/|S| sum max(0, rho - margin)`` at ``(M, rho)`` in double precision."""
    P, Q = X[T[:, 0]] - X[T[:, 2]], X[T[:, 0]] - X[T[:, 1]]
    marg = np.einsum("ri,ij,rj->r", P, M, P) - np.einsum("ri,ij,rj->r", Q, M, Q)
    return rho - C / len(T) * np.maximum(rho - marg, 0.0).sum()


def _fit(X, T, C, tol, **ro):
    with dask.config.set(scheduler="sync"):
        return PSDBoostMetric(C=C, tol=tol, route_options=ro).fit(
            da.from_array(X, chunks=X.shape), triplets=da.from_array(T, chunks=(500, 3)))


@pytest.fixture(scope="module")
def ref():
    """In-memory optimum (tight tolerance) of two instances."""
    out = {}
    for seed in (0, 1):
        X, T = _instance(seed)
        mem = PSDBoostMetric(C=20.0, tol=1e-8).fit_triplets(X, T)
        out[seed] = (X, T, mem.certificate_)
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_coarse_start_certified_as_in_memory(ref, seed):
    """Forced coarse level (every 3rd triplet) and a band smaller than the rows: certified at
    the tolerance, objective as in memory, certificate sound against the exact optimum."""
    X, T, cmem = ref[seed]
    est = _fit(X, T, 20.0, 1e-5, coarse=3, band_rows=100)
    cert = est.certificate_
    assert cert.extra["coarse"]["rows"] == len(T[::3]) and cert.extra["coarse"]["rounds"] >= 1
    assert cert.status == cp.OPTIMAL and cert.gap <= 1e-5
    opt = cmem.objective
    # sound: the point's value is at most the optimum, the bound at least
    assert cert.objective <= opt + 1e-7 and cert.bound >= opt - 1e-7
    assert abs(cert.objective - opt) <= 2e-5 * max(1.0, abs(opt))
    # the reported objective is the returned point's, measured exactly
    assert abs(_exact_objective(X, T, est.mahalanobis_, est.margin_, 20.0)
               - cert.objective) <= 1e-9


def test_single_precision_rounds_same_certified_result(ref, monkeypatch):
    """The rounds' activities in single precision (tol >= SINGLE_MIN_TOL) and in double give
    the same certified result (both optimal at the tolerance, objectives within it)."""
    X, T, cmem = ref[0]
    single = _fit(X, T, 20.0, 1e-5, band_rows=100, coarse=False).certificate_
    monkeypatch.setattr(_dask_fit, "SINGLE_MIN_TOL", 1.0)
    double = _fit(X, T, 20.0, 1e-5, band_rows=100, coarse=False).certificate_
    for c in (single, double):
        assert c.status == cp.OPTIMAL and c.gap <= 1e-5
        assert c.objective <= cmem.objective + 1e-7 and c.bound >= cmem.objective - 1e-7
    assert abs(single.objective - double.objective) <= 1e-5 * max(1.0, abs(cmem.objective))


def test_in_memory_cut_master_start_point(ref, monkeypatch):
    """``solve_hinge_cuts(start=...)`` in memory (no Dask): started at the fit on every 4th
    triplet, the same certified optimum as in memory from a cold start."""
    X, T, cmem = ref[1]
    start = PSDBoostMetric(C=20.0, tol=1e-4).fit_triplets(X, T[::4]).certificate_
    seen = []
    orig = cuts._start_state
    monkeypatch.setattr(cuts, "_start_state", lambda *a: seen.append(1) or orig(*a))
    m = len(T)
    P, Q = X[T[:, 0]] - X[T[:, 2]], X[T[:, 0]] - X[T[:, 1]]
    A = FactoredOperator(np.vstack([P, Q]),
                         sp.hstack([sp.identity(m), -sp.identity(m)], format="csr"))
    lp = _dask_fit.hinge_lp(m, 20.0 / m)
    prob = SpectraplexLP(*lp, A=A, C=zero_objective(X.shape[1]), trace=1.0, trace_eq=True)
    log = RoundLog(time.perf_counter(), 0.0, None, ("cuts",))
    res = cuts.solve_hinge_cuts(prob, MGOptions(tol=1e-6), cuts.hinge_structure(*lp), log,
                                start=(start.extra["U"], start.extra["theta"], np.zeros(1)),
                                band_rows=100)
    assert seen
    assert res.status == "optimal" and res.gap <= 1e-6
    assert abs(res.objective - cmem.objective) <= 2e-6 * max(1.0, abs(cmem.objective))
    assert res.bound >= cmem.objective - 1e-7


@pytest.mark.parametrize("repeat", [False, True])
def test_laplacian_cut_matches_the_rows(repeat):
    """``_trip_gram`` (presence table, ``diag(deg) - W - W^T``) equals the direct sum of
    ``w (p p^T - q q^T)`` over the rows, with repeated points and per-row weights."""
    rng = np.random.default_rng(3)
    N, D, m = 40, 6, 300
    data = rng.normal(size=(N, D))
    T = rng.integers(0, N if not repeat else 5, (m, 3)).astype(np.int32)
    idx = np.sort(rng.choice(m, 200, replace=False))
    w = rng.uniform(0.5, 2.0, idx.size)
    blocks = [_TripBlock(T, data, 0, 2), _TripBlock(T, data, 0, 1)]
    G = _trip_gram(blocks, idx, [w, -w])
    P, Q = data[T[idx, 0]] - data[T[idx, 2]], data[T[idx, 0]] - data[T[idx, 1]]
    direct = (P * w[:, None]).T @ P - (Q * w[:, None]).T @ Q
    if G is None:  # more points than rows: the caller goes direct
        assert not repeat
        return
    np.testing.assert_allclose(G, direct, atol=1e-10)
