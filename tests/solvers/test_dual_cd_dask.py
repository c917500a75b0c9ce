"""The relative-comparison QP with Z a Dask array (specopt.solvers.dual_cd.dask): certified on
all rows, same optimum as the in-memory dual CD and as Clarabel, bad data named."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is an optional extra (specopt[dask])")
import dask  # noqa: E402

from specopt.solvers.dual_cd import dual_cd  # noqa: E402
from specopt.solvers.dual_cd.dask import dual_cd_dask  # noqa: E402


def _instance(seed, n, m, corr):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, m)) + 0.3
    if corr:
        B = rng.normal(size=(m, m))
        return B @ B.T / m + 0.1 * np.eye(m), Z
    return np.eye(m), Z


@pytest.mark.parametrize("polish", [True, False])
@pytest.mark.parametrize("seed,n,m,C,nonneg,corr", [
    (0, 3000, 8, 1.0, True, False), (1, 2000, 5, 10.0, False, True),
    (2, 1500, 12, 0.1, True, True)])
def test_dask_qp_matches_in_memory_and_is_certified(seed, n, m, C, nonneg, corr, polish,
                                                     monkeypatch):
    """Both paths: the kink polish (here its near rows limited to 300 of the n rows, so the
    band is narrow and the rows above it are summed on the cluster) and the Newton passes."""
    import specopt.solvers.dual_cd.dask as dd

    monkeypatch.setattr(dd, "NEAR_ROWS", 300)
    L, Z = _instance(seed, n, m, corr)
    ref = dual_cd(L, Z, C, nonneg=nonneg, tol=1e-10)
    calls = []
    with dask.config.set(scheduler="threads"):
        res = dual_cd_dask(L, da.from_array(Z, chunks=(400, m)), C, nonneg=nonneg, tol=1e-6,
                           callback=lambda it, **kw: calls.append(kw), polish=polish)
    assert res.converged and res.rel_gap <= 1e-6
    # the certificate is real: the primal value recomputed here, the bound below the optimum
    w = res.w
    P = 0.5 * w @ L @ w + C * np.maximum(0.0, 1.0 - Z @ w).sum()
    assert P == pytest.approx(res.primal, rel=1e-12)
    assert res.dual <= ref.primal + 1e-9 * max(1.0, ref.primal)
    assert res.primal >= ref.dual - 1e-9 * max(1.0, ref.primal)
    slack = 1e-12 * max(1.0, abs(ref.primal))  # rounding: a gap can be -2e-13
    assert abs(res.primal - ref.primal) <= (res.gap + max(ref.gap, 0.0)) * 1.000001 + slack
    if nonneg:
        assert w.min() >= 0.0
    if polish:  # sample, then (bands, near rows, primal) per polish round
        assert res.iterations <= 1 + 3 * dd.POLISH_ROUNDS
    # one progress call per step, objective / bound monotone (best so far)
    assert len(calls) >= 1 and calls[-1]["gap"] <= 1e-6
    assert all(b["objective"] <= a["objective"] for a, b in zip(calls, calls[1:], strict=False))
    assert all(b["bound"] >= a["bound"] for a, b in zip(calls, calls[1:], strict=False))


def test_dask_qp_polish_that_cannot_certify_hands_over_to_newton_passes(monkeypatch):
    """Near rows limited to 3 (the band then holds almost no row and the reduced problem's
    partition is wrong): the polish rounds do not certify, the Newton passes continue from
    the best point and certify on all rows."""
    import specopt.solvers.dual_cd.dask as dd

    monkeypatch.setattr(dd, "NEAR_ROWS", 3)
    monkeypatch.setattr(dd, "SAMPLE_ROWS", 20)
    L, Z = _instance(7, 2000, 6, True)
    ref = dual_cd(L, Z, 1.0, tol=1e-10)
    with dask.config.set(scheduler="sync"):
        res = dual_cd_dask(L, da.from_array(Z, chunks=(500, 6)), 1.0, tol=1e-6)
    assert res.converged and res.rel_gap <= 1e-6
    assert res.iterations > 1 + 3 * dd.POLISH_ROUNDS
    assert abs(res.primal - ref.primal) <= res.gap + 1e-9


def test_dask_qp_agrees_with_clarabel():
    L, Z = _instance(3, 400, 6, True)
    C = 2.0
    w, xi = cp.Variable(6), cp.Variable(400)
    prob = cp.Problem(cp.Minimize(0.5 * cp.quad_form(w, cp.psd_wrap(L)) + C * cp.sum(xi)),
                      [Z @ w >= 1 - xi, xi >= 0, w >= 0])
    prob.solve(solver=cp.CLARABEL)
    with dask.config.set(scheduler="sync"):
        res = dual_cd_dask(L, da.from_array(Z, chunks=(64, 6)), C, tol=1e-6)
    assert res.converged
    assert abs(res.primal - prob.value) <= 1e-6 * max(1.0, abs(prob.value))
    np.testing.assert_allclose(res.w, w.value, atol=1e-3)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_dask_qp_names_nonfinite_z(bad):
    L, Z = _instance(4, 300, 4, False)
    Z[123, 2] = bad
    with dask.config.set(scheduler="sync"), pytest.raises(ValueError, match="Z contains NaN"):
        dual_cd_dask(L, da.from_array(Z, chunks=(50, 4)), 1.0)


def test_dask_qp_bad_arguments_named():
    L, Z = _instance(5, 100, 3, False)
    Zd = da.from_array(Z, chunks=(50, 3))
    with pytest.raises(ValueError, match=r"L must have shape \(3, 3\)"):
        dual_cd_dask(np.eye(4), Zd, 1.0)
    with pytest.raises(ValueError, match="C must be one finite number > 0"):
        dual_cd_dask(L, Zd, np.ones(100))
    with pytest.raises(ValueError, match="positive definite"):
        dual_cd_dask(np.zeros((3, 3)), Zd, 1.0)


def test_dask_qp_coarse_warm_start_certifies_the_full_problem(monkeypatch):
    """``coarse=`` (every 4th row standing for all): the warm start is the coarse problem's
    polish; the certificate is still over all rows and the optimum the in-memory one's, and the
    full data get no sample pass (one pass fewer than without, near rows limited to 5%)."""
    import specopt.solvers.dual_cd.dask as dd

    monkeypatch.setattr(dd, "NEAR_ROWS", 200)
    monkeypatch.setattr(dd, "SAMPLE_ROWS", 100)
    L, Z = _instance(4, 4000, 10, True)
    ref = dual_cd(L, Z, 1.0, tol=1e-10)
    seen = []
    orig = dd._Passes.__init__

    def record(self, Zd, *a):
        seen.append(int(Zd.shape[0]))
        orig(self, Zd, *a)

    monkeypatch.setattr(dd._Passes, "__init__", record)
    Zd = da.from_array(Z, chunks=(500, -1))
    with dask.config.set(scheduler="sync"):
        plain = dual_cd_dask(L, Zd, 1.0, tol=1e-6)
        seen.clear()
        res = dual_cd_dask(L, Zd, 1.0, tol=1e-6, coarse=Zd[::4])
    assert seen == [4000, 1000]  # the full rows, then the coarse ones
    assert res.converged and res.rel_gap <= 1e-6
    P = 0.5 * res.w @ L @ res.w + np.maximum(0.0, 1.0 - Z @ res.w).sum()
    assert P == pytest.approx(res.primal, rel=1e-12)
    assert abs(res.primal - ref.primal) <= res.gap + max(ref.gap, 0.0) + 1e-9
    assert res.iterations < plain.iterations
