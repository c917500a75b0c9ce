"""A worker killed in the middle of a Dask fit costs time, not the answer: on a LocalCluster of
2 worker processes (restarted by their nannies) the PSDBoost direct fit (cut master with its
per-row state persisted on the workers) and the relative-comparison QP (dual_cd_dask) still
certify the in-memory optimum after one worker is killed with SIGKILL between two passes."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is an optional extra (specopt[dask])")
distributed = pytest.importorskip("distributed", reason="distributed is in specopt[dask]")

import cvxpy as cp  # noqa: E402

from specopt.learn import PSDBoostMetric  # noqa: E402
from specopt.solvers.dual_cd import dual_cd  # noqa: E402
from specopt.solvers.dual_cd.dask import dual_cd_dask  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", memory_limit="2GiB")
    cl = distributed.Client(cluster)
    cl.run(lambda: __import__("specopt.solvers.mg.dask_rows"))
    yield cl
    cl.close()
    cluster.close()


def _kill_one_worker(client) -> int:
    """SIGKILL one worker process (its nanny starts a new one); returns its pid."""
    pid = sorted(client.run(os.getpid).values())[0]
    os.kill(pid, signal.SIGKILL)
    return pid


def _instance(seed, N=200, D=5, m=6000):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, N)
    X = (rng.normal(size=(3, D))[y] * 1.5 + rng.normal(size=(N, D))) / np.sqrt(D)
    i, j, k = (rng.integers(0, N, 8 * m) for _ in range(3))
    ok = (y[i] == y[j]) & (y[i] != y[k]) & (i != j)
    return X, np.column_stack([i, j, k])[ok][:m].astype(np.int32)


def test_psdboost_direct_fit_survives_a_killed_worker(client, monkeypatch):
    import specopt.solvers.mg._dask_hinge as dh

    X, T = _instance(0)
    mem = PSDBoostMetric(C=100, tol=1e-7).fit_triplets(X, T)
    killed, calls = [], []
    orig = dh.DaskHinge.make_cut

    def make_cut(self, *a, **k):  # the kill after the 3rd cut: masks / activities lost
        calls.append(1)
        if len(calls) == 3:
            killed.append(_kill_one_worker(client))
        return orig(self, *a, **k)

    monkeypatch.setattr(dh.DaskHinge, "make_cut", make_cut)
    # a band narrower than the rows, so that the fit takes more than 3 cuts
    est = PSDBoostMetric(C=100, tol=1e-7, route_options={"band_rows": 100}).fit(
        da.from_array(X), triplets=da.from_array(T, chunks=(1000, 3)))
    assert killed and killed[0] not in client.run(os.getpid).values()
    assert len(calls) > 3  # the fit went on after the kill
    cert, ref = est.certificate_, mem.certificate_
    assert cert.status == cp.OPTIMAL and cert.max_violation <= 1e-9
    assert abs(cert.objective - ref.objective) <= (cert.gap + ref.gap + 1e-9) * max(
        1.0, abs(ref.objective))


def test_dual_cd_dask_survives_a_killed_worker(client, monkeypatch):
    """The kill after the first polish round; the polish is held back (3 near rows) so the
    Newton passes run on the restarted cluster."""
    import specopt.solvers.dual_cd.dask as dd

    monkeypatch.setattr(dd, "NEAR_ROWS", 3)
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(6000, 6)) + 0.3
    L = np.eye(6)
    ref = dual_cd(L, Z, 1.0, tol=1e-10)
    Zd = client.persist(da.from_array(Z, chunks=(1000, 6)))
    distributed.wait(Zd)
    killed = []

    def cb(step, **kw):
        if not killed:
            killed.append(_kill_one_worker(client))

    res = dual_cd_dask(L, Zd, 1.0, tol=1e-6, callback=cb)
    assert killed and killed[0] not in client.run(os.getpid).values()
    assert res.converged and res.rel_gap <= 1e-6
    assert abs(res.primal - ref.primal) <= res.gap + 1e-9
