"""PSDBoost on a dask.distributed LocalCluster (2 worker processes, 1 thread each): the Dask-backed
problem from index triples gives the in-memory certified objective, its tasks run on the
workers, and no task returns an array with |S| rows."""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is an optional extra (specopt[dask])")
distributed = pytest.importorskip("distributed", reason="distributed is in specopt[dask]")

import cvxpy as cp  # noqa: E402

from specopt.learn import PSDBoostMetric  # noqa: E402
from specopt.learn.psdboost import nearest_neighbour_triplets  # noqa: E402
from specopt.solvers.mg._dask_hinge import SELECT_BINS  # noqa: E402
from tests._helpers import checked_reference  # noqa: E402


def _shape_recorder():
    """A worker plugin recording (key, shape) of every result a worker holds (pickled by value)."""

    class ShapeRecorder(distributed.WorkerPlugin):
        name = "shape-recorder"

        def setup(self, worker):
            self.worker, self.shapes = worker, []

        def transition(self, key, start, finish, **kwargs):
            if finish == "memory" and key in self.worker.data:
                v = self.worker.data[key]
                self.shapes.append((str(key), tuple(np.shape(v)) if hasattr(v, "shape") else ()))

    return ShapeRecorder()


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", memory_limit="2GiB")
    cl = distributed.Client(cluster)
    cl.register_plugin(_shape_recorder())
    cl.run(lambda: __import__("specopt.solvers.mg.dask_rows"))  # workers import specopt up front
    yield cl
    cl.close()
    cluster.close()


def _instance(seed, N=150, D=6, extra=250):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, N)
    X = rng.normal(size=(3, D))[y] * 1.5 + rng.normal(size=(N, D)) * rng.uniform(0.5, 2, D)
    T = nearest_neighbour_triplets(X, y)
    # random extra triplets (same class closer than other class by label only: many violated)
    i = rng.integers(0, N, 4 * extra)
    j, k = rng.integers(0, N, 4 * extra), rng.integers(0, N, 4 * extra)
    ok = (y[i] == y[j]) & (y[i] != y[k]) & (i != j)
    T = np.vstack([T, np.column_stack([i, j, k])[ok][:extra]]).astype(np.int32)
    return X / np.sqrt(D), T


@pytest.mark.parametrize("seed,C_scale", [(0, 10.0), (1, 40.0)])
def test_dask_psdboost_equals_in_memory_on_cluster(client, seed, C_scale):
    X, T = _instance(seed)
    m = len(T)
    C = C_scale  # per-triplet normalized (the solve weighs each slack C / m)
    mem = PSDBoostMetric(C=C, tol=1e-8).fit_triplets(X, T)
    block = 64
    client.run(lambda dask_worker: dask_worker.plugins["shape-recorder"].shapes.clear())
    with distributed.get_task_stream(client) as ts:
        est = PSDBoostMetric(C=C, tol=1e-8).fit(
            da.from_array(X, chunks=(50, -1)), triplets=da.from_array(T, chunks=(block, 3)))
    cert, cert_mem = est.certificate_, mem.certificate_
    print(f"dask fit {cert.total_time:.2f} s, {len(ts.data)} tasks, {cert.iterations} rounds; "
          f"in memory {cert_mem.total_time:.2f} s")
    assert cert.status == cert_mem.status == cp.OPTIMAL
    assert cert.gap <= 1e-8 and cert.max_violation <= 1e-8
    assert abs(cert.objective - cert_mem.objective) <= 1e-6 * max(1.0, abs(cert_mem.objective))
    np.testing.assert_allclose(est.mahalanobis_, mem.mahalanobis_, atol=1e-3)
    # the tasks ran on the cluster's workers, both of them
    workers = set(client.scheduler_info()["workers"])
    ours = ("_blk_", "_gather_diff", "_tree_add")
    ran = [r for r in ts.data if any(s in str(r["key"]) for s in ours)]
    assert {r["worker"] for r in ran} == workers
    kinds = {str(r["key"]).split("-")[0].strip("('") for r in ran}
    # (the gathers of the difference rows are fused into the tasks that use them)
    # margins (also the final violation check), cut masks kept on the workers, cut matrices
    # (+ band rows fetched), the hinge and cut sums: the cut master on the row operator
    # directly, its per-row state on the workers
    assert {"_blk_rows_matvec", "_blk_packmask", "_blk_cut", "_blk_sep_near"} <= kinds
    # no task ever held an array with |S| rows (results recorded on the workers)
    shapes = [s for ws in client.run(
        lambda dask_worker: dask_worker.plugins["shape-recorder"].shapes).values() for s in ws]
    assert len(shapes) >= len(ran)
    # (block rows, the points, or the bins of the distributed selection of rho)
    assert max(s[1][0] for s in shapes if s[1]) <= max(block, X.shape[0], SELECT_BINS)
    assert all(not s[1] or s[1][0] < m for s in shapes)


def _fit_peak(X, T, client):
    """Peak of the client's Python allocations (tracemalloc) during a Dask fit of 6 rounds
    (triplets and points persisted on the cluster before: 4 blocks)."""
    import tracemalloc

    from sklearn.exceptions import ConvergenceWarning

    Td = client.persist(da.from_array(T, chunks=(-(-len(T) // 4), 3)))
    Xd = client.persist(da.from_array(X))
    distributed.wait([Td, Xd])
    tracemalloc.start()
    try:
        with pytest.warns(ConvergenceWarning):
            est = PSDBoostMetric(C=10, tol=1e-9, route_options={"max_iters": 6}).fit(
                Xd, triplets=Td)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return est, peak


@pytest.mark.slow
def test_client_memory_does_not_grow_with_the_number_of_triplets(client, monkeypatch):
    """The cut master's per-row state stays on the workers: with the same number of blocks, 8x
    the triplets cost the client less than 3 floats per added row (the in-memory state was
    about 250 bytes per row: 35 MB here); each peak is the smaller of two fits (the client's
    event loop adds a few MB of noise). The selection of rho gathers at most 1000 values here,
    so its order-statistics pass runs."""
    import specopt.solvers.mg._dask_hinge as dh

    monkeypatch.setattr(dh, "SELECT_GATHER", 1000)
    rng = np.random.default_rng(7)
    N, D = 300, 5
    y = rng.integers(0, 3, N)
    X = (rng.normal(size=(3, D))[y] * 1.5 + rng.normal(size=(N, D))) / np.sqrt(D)

    def trips(m):
        i, j, k = (rng.integers(0, N, 8 * m) for _ in range(3))
        ok = (y[i] == y[j]) & (y[i] != y[k]) & (i != j)
        return np.column_stack([i, j, k])[ok][:m].astype(np.int32)

    m1, m2 = 20_000, 160_000
    T1, T2 = trips(m1), trips(m2)
    (est1, p1), (_, p1b) = _fit_peak(X, T1, client), _fit_peak(X, T1, client)
    (est2, p2), (_, p2b) = _fit_peak(X, T2, client), _fit_peak(X, T2, client)
    p1, p2 = min(p1, p1b), min(p2, p2b)
    print(f"client peak {p1 / 1e6:.1f} MB at {m1} rows, {p2 / 1e6:.1f} MB at {m2} rows")
    for est in (est1, est2):  # stopped at the cap: feasible, bound above
        cert = est.certificate_
        assert cert.max_violation <= 1e-9 and cert.bound >= cert.objective
    assert p2 - p1 < 24 * (m2 - m1)


def test_distributed_selection_is_exact():
    """The k-th smallest value of a per-row vector kept on the workers (order statistics per
    block, bins, the last bracket gathered) equals numpy's, for continuous values and for a
    few values with many ties, with a gather limit far below the rows."""
    import dask

    import specopt.solvers.mg._dask_hinge as dh
    from specopt.solvers.mg.dask_rows import DaskRowOperator

    rng = np.random.default_rng(3)
    m = 2000
    for V in (rng.normal(size=(m, 3)), rng.integers(0, 3, (m, 3)).astype(float)):
        h = dh.dask_hinge(DaskRowOperator([(1.0, da.from_array(V, chunks=(300, 3)))]),
                          c_shared=np.ones(1), zlb=[-np.inf], zub=[np.inf], g_shared=[-1.0],
                          sign=1.0, b=0.0, weight=1e-3, gabs=1.0, trace=1.0, trace_eq=True)
        with dask.config.set(scheduler="synchronous"):
            act = h.activity(np.eye(3)[:, :2], np.array([0.7, 0.3]))
            full = np.concatenate(h._compute(h._tasks(dh._blk_vec, [act])))
            np.testing.assert_allclose(full, 0.7 * V[:, 0] ** 2 + 0.3 * V[:, 1] ** 2)
            for gather, bins in ((10, 16), (10, 1024), (100_000, 1024)):
                old = dh.SELECT_GATHER, dh.SELECT_BINS
                dh.SELECT_GATHER, dh.SELECT_BINS = gather, bins
                try:
                    for k in (1, 37, m // 2, m):
                        assert dh._kth_smallest(h, act, k) == np.partition(full, k - 1)[k - 1]
                finally:
                    dh.SELECT_GATHER, dh.SELECT_BINS = old


def test_dask_psdboost_agrees_with_clarabel_on_cluster(client):
    X, T = _instance(2, N=60, D=4, extra=60)
    m = len(T)
    ref = PSDBoostMetric(route="conic", solver="CLARABEL").fit_triplets(X, T)
    est = PSDBoostMetric(tol=1e-8, block_rows=32).fit(X, triplets=da.from_array(T))
    assert est.certificate_.status == cp.OPTIMAL
    assert abs(est.certificate_.objective - ref.certificate_.objective) <= 1e-5
    assert len(est.triplets_) == m
    with pytest.raises(ValueError, match=r"in \[0, 60\)"):
        PSDBoostMetric().fit(X, triplets=da.from_array(T + 60))
    with pytest.raises(ValueError, match="either labels y or triplets"):
        PSDBoostMetric().fit(X, np.zeros(len(X)), triplets=T)


def test_non_hinge_rows_start_from_a_top_k_on_the_cluster(client, monkeypatch):
    """Rows without hinge slacks on Dask: round 1's master holds the top-k rows found by a
    reduction on the cluster (not all rows), and the result equals the in-memory one and
    Clarabel's."""
    import specopt
    import specopt.solvers.mg.psd_master as mg

    rng = np.random.default_rng(5)
    m, n = 1500, 5
    V = rng.normal(size=(m, n)) * rng.uniform(0.3, 2, n)
    b = np.einsum("ij,ij->i", V, V) * rng.uniform(0.25, 0.6, m)  # X = I / n is feasible
    Cm = rng.normal(size=(n, n))
    Cm = Cm + Cm.T

    def problem(Vdata):
        X = cp.Variable((n, n), PSD=True)
        cons = [cp.trace(X) == 1, specopt.row_quad_forms(Vdata, X) <= b]
        return cp.Problem(cp.Maximize(cp.trace(Cm @ X)), cons)

    first = []
    orig = mg._psd_block_master

    def spy(Bs, *a, **k):
        first.append(Bs.shape[0])
        return orig(Bs, *a, **k)

    monkeypatch.setattr(mg, "_psd_block_master", spy)
    with distributed.get_task_stream(client) as ts:
        pd = problem(da.from_array(V, chunks=(200, -1)))
        specopt.solve(pd, route="matrix_generation", tol=1e-8)
    assert first[0] <= 1000 < m
    assert any("_blk_topk" in str(r["key"]) for r in ts.data)
    pm = problem(V)
    specopt.solve(pm, route="matrix_generation", tol=1e-8)
    ref = problem(V)
    checked_reference(ref, cp.CLARABEL)
    cd, cm = specopt.certificate(pd), specopt.certificate(pm)
    assert cd.status == cm.status == cp.OPTIMAL
    assert abs(cd.objective - cm.objective) <= 1e-6 * max(1.0, abs(cm.objective))
    assert abs(cd.objective - ref.value) <= 1e-5 * max(1.0, abs(ref.value))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_dask_x_with_nan_or_inf_is_named_before_the_solve(bad):
    """A NaN / inf in a Dask X used to hang the HiGHS master: now one reduction names X."""
    X, T = _instance(0)
    X = X.copy()
    X[3, 1] = bad
    with pytest.raises(ValueError, match="Input X contains NaN or infinity"):
        PSDBoostMetric().fit(da.from_array(X, chunks=(50, -1)),
                             triplets=da.from_array(T, chunks=(64, 3)))


def test_direct_fit_row_multipliers_rebuild_the_bound():
    """The lazy row multipliers of the direct fit (cut duals times the masks kept on the
    workers, band rows apart) are dual feasible for PSDBoost's rows (``-c <= y_r <= 0``, ``sum
    y = -1`` for the free rho) and give back the certified bound: ``lambda_max(-sum_r y_r
    A_r)`` with ``A_r = p_r p_r^T - q_r q_r^T``."""
    import dask

    from specopt.learn._dask_fit import _solve
    from specopt.solvers.mg.dask_rows import DaskRowOperator

    X, T = _instance(8, N=90, D=5, extra=200)
    P, Q = X[T[:, 0]] - X[T[:, 2]], X[T[:, 0]] - X[T[:, 1]]
    m, c = len(T), 10.0 / len(T)
    A = DaskRowOperator([(1.0, da.from_array(P, chunks=(60, -1))),
                         (-1.0, da.from_array(Q, chunks=(60, -1)))])
    with dask.config.set(scheduler="sync"):
        res = _solve(A, c, None, {"tol": 1e-8})
        y = np.asarray(res.y.compute())
    assert y.shape == (m,) and y.min() >= -c * (1 + 1e-9) and y.max() <= 1e-12
    assert abs(y.sum() + 1.0) <= 1e-6
    H = -(P.T @ (y[:, None] * P) - Q.T @ (y[:, None] * Q))
    assert np.linalg.eigvalsh(H)[-1] == pytest.approx(res.bound, abs=1e-6)
    assert res.bound >= res.objective - 1e-12


def test_direct_fit_makes_few_passes_per_round(monkeypatch):
    """A round of the direct fit blocks on the cluster three times (the polish's selection of
    both separation candidates, their sums / masks / nearest rows, the cut with its band bits),
    four when the selection needs its order-statistics pass; the start and the result add
    three. The round count and the objective do not depend on the selection's pass count."""
    import dask

    import specopt.solvers.mg._dask_hinge as dh
    from specopt.learn._dask_fit import _solve
    from specopt.solvers.mg.dask_rows import DaskRowOperator

    X, T = _instance(8, N=200, D=8, extra=1500)
    P, Q = X[T[:, 0]] - X[T[:, 2]], X[T[:, 0]] - X[T[:, 1]]
    m = len(T)
    calls = [0]
    compute = dask.compute

    def counted(*a, **k):
        calls[0] += 1
        return compute(*a, **k)

    monkeypatch.setattr(dask, "compute", counted)
    got = []
    for gather, per_round in ((dh.SELECT_GATHER, 3), (50, 4)):
        monkeypatch.setattr(dh, "SELECT_GATHER", gather)
        A = DaskRowOperator([(1.0, da.from_array(P, chunks=(300, -1))),
                             (-1.0, da.from_array(Q, chunks=(300, -1)))])
        calls[0] = 0
        with dask.config.set(scheduler="sync"):
            res = _solve(A, 100.0 / m, None, {"tol": 1e-8})
        assert res.iterations >= 4
        assert calls[0] <= per_round * res.iterations + 3
        got.append((res.iterations, res.objective))
    assert got[0] == got[1]


def test_dask_fit_builds_no_cvxpy_problem_and_prints_rounds(monkeypatch, capsys):
    """Dask triplets go to the solver on the row operator directly: no cp.Problem, no cp.Variable
    with |S| entries, no specopt.solve; verbose prints one CVXPY-style line per round whose last
    objective / bound are the certificate's; the fit equals the in-memory one within its gap."""
    import specopt.learn.psdboost as pb

    X, T = _instance(3, N=80, D=5, extra=120)
    mem = PSDBoostMetric(C=10, tol=1e-7).fit_triplets(X, T)

    def refuse(*a, **k):
        raise AssertionError("a CVXPY problem was built for Dask data")

    sizes = []
    orig_var = cp.Variable

    def variable(shape=(), *a, **k):
        sizes.append(int(np.prod(shape)))
        return orig_var(shape, *a, **k)

    monkeypatch.setattr(pb.cp, "Problem", refuse)
    monkeypatch.setattr(pb, "solve", refuse)
    monkeypatch.setattr(pb.cp, "Variable", variable)
    est = PSDBoostMetric(C=10, tol=1e-7, verbose=True).fit(
        X, triplets=da.from_array(T, chunks=(40, 3)))
    assert sizes == []
    cert = est.certificate_
    assert cert.status == cp.OPTIMAL and cert.gap <= 1e-7 and cert.max_violation <= 1e-9
    assert cert.extra["direct"] and cert.iterations >= 1
    # same problem: each objective is within the other's certified gap
    tol = (cert.gap + mem.certificate_.gap + 1e-9) * max(1.0, abs(cert.objective))
    assert abs(cert.objective - mem.certificate_.objective) <= tol
    assert abs(np.trace(est.mahalanobis_) - 1.0) <= 1e-9
    assert np.linalg.eigvalsh(est.mahalanobis_).min() >= -1e-9
    out = capsys.readouterr().out
    assert "route matrix_generation: PSDBoostMetric on Dask" in out and "Summary" in out
    rows = [ln.split() for ln in out.splitlines()
            if ln.split() and ln.split()[0].isdigit() and len(ln.split()) == 6]
    assert len(rows) == cert.iterations
    assert [int(r[0]) for r in rows] == list(range(1, cert.iterations + 1))
    assert float(rows[-1][2]) == pytest.approx(cert.bound, rel=1e-6)


def test_dask_fit_refuses_options_it_cannot_use():
    X, T = _instance(4, N=40, D=3, extra=20)
    with pytest.raises(ValueError, match=r"\['master'\] do not apply"):
        PSDBoostMetric(route_options={"master": "lp"}).fit(X, triplets=da.from_array(T))


def test_dask_fit_stopped_by_a_cap_warns_and_keeps_a_feasible_point():
    from sklearn.exceptions import ConvergenceWarning

    X, T = _instance(5, N=80, D=5, extra=120)
    with pytest.warns(ConvergenceWarning, match="stopped"):
        est = PSDBoostMetric(C=10, tol=1e-12, route_options={"max_iters": 1}).fit(
            X, triplets=da.from_array(T, chunks=(40, 3)))
    cert = est.certificate_
    assert cert.status == cp.OPTIMAL_INACCURATE and cert.extra["solver_status"] == "max_iters"
    assert cert.max_violation <= 1e-9 and cert.bound >= cert.objective
    assert abs(np.trace(est.mahalanobis_) - 1.0) <= 1e-9


def test_relative_comparison_on_the_cluster(client):
    """RelativeComparisonMetric with Dask triplets on the LocalCluster: its passes run on the
    workers (the persisted triples and points stay alive through the fit) and it equals the
    in-memory fit within the certified gaps."""
    from specopt.learn import RelativeComparisonMetric

    X, T = _instance(6, N=100, D=4, extra=300)
    mem = RelativeComparisonMetric(tol=1e-8).fit(X, triplets=T)
    with distributed.get_task_stream(client) as ts:
        est = RelativeComparisonMetric(tol=1e-6).fit(
            da.from_array(X, chunks=(50, -1)), triplets=da.from_array(T, chunks=(100, 3)))
    assert est.converged_
    assert abs(est.objective_ - mem.objective_) <= est.gap_ + mem.gap_ + 1e-12
    kinds = {str(r["key"]).split("-")[0].strip("('") for r in ts.data}
    # the kink polish: sample, bands, near rows, primal values
    assert {"_blk_sample", "_blk_bands", "_blk_near", "_blk_hinge"} <= kinds
