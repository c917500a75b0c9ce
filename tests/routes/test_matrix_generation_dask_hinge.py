"""A user's CVXPY model with a hinge over Dask-backed ``row_quad_forms`` rows in the objective:
the analysis keeps the hinge as one symbolic term and lifts it with a slack symbol (no CVXPY
variable of size |S|), and the matrix-generation route certifies the optimum of the same
model on numpy rows."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is an optional extra (specopt[dask])")
import dask  # noqa: E402

import specopt  # noqa: E402
from specopt.reductions.analysis import HingeTerm, analyze  # noqa: E402


def _model(P, Q, C):
    D = P.shape[1]
    M, rho = cp.Variable((D, D), PSD=True), cp.Variable()
    margins = specopt.row_quad_forms(P, M) - specopt.row_quad_forms(Q, M)
    return cp.Problem(cp.Maximize(rho - C / P.shape[0] * cp.sum(cp.pos(rho - margins))),
                      [cp.trace(M) == 1])


def _rows(seed, m=600, D=4):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(m, D)) + 0.2, rng.normal(size=(m, D))


def test_dask_hinge_is_one_term_and_builds_no_variable_of_size_m(monkeypatch):
    P, Q = _rows(0)
    m = P.shape[0]
    ref = _model(P, Q, 10.0)
    specopt.solve(ref, route="matrix_generation", tol=1e-8)
    sizes = []
    orig = cp.Variable.__init__

    def record(self, shape=(), *a, **k):
        sizes.append(int(np.prod(shape)))
        orig(self, shape, *a, **k)

    prob = _model(da.from_array(P, chunks=(150, -1)), da.from_array(Q, chunks=(150, -1)), 10.0)
    monkeypatch.setattr(cp.Variable, "__init__", record)
    desc = analyze(prob)
    hinges = [t for t in desc.terms if isinstance(t, HingeTerm)]
    assert len(hinges) == 1 and len(desc.terms) == 1
    with dask.config.set(scheduler="sync"):
        specopt.solve(prob, route="matrix_generation", tol=1e-8)
    assert all(s < m for s in sizes), sizes
    cert = specopt.certificate(prob)
    assert prob.status == cp.OPTIMAL and cert.gap <= 1e-8
    assert abs(prob.value - ref.value) <= 1e-7 * max(1.0, abs(ref.value))


def _lazy_model(m, D=8, psd_con=False):
    """The PSDBoost hinge model over lazy Dask rows (never computed by the extraction)."""
    rng = da.random.default_rng(0)
    P = rng.normal(size=(m, D), chunks=(-(-m // 4), D))
    Q = rng.normal(size=(m, D), chunks=(-(-m // 4), D))
    return _model_var(P, Q, 10.0, psd_con)


def _model_var(P, Q, C, psd_con):
    D = P.shape[1]
    M = cp.Variable((D, D), symmetric=True) if psd_con else cp.Variable((D, D), PSD=True)
    rho = cp.Variable()
    margins = specopt.row_quad_forms(P, M) - specopt.row_quad_forms(Q, M)
    cons = [cp.trace(M) == 1] + ([M >> 0] if psd_con else [])
    return cp.Problem(cp.Maximize(rho - C / P.shape[0] * cp.sum(cp.pos(rho - margins))), cons)


def test_route_reads_the_dask_hinge_without_per_row_arrays():
    """The route's extraction of a hinge over Dask rows (analysis, recognition, the cut master's
    problem) allocates no array with an entry per row: 40x the rows cost the client less than a
    byte per added row (the general path held about 60 bytes per row of LP arrays)."""
    import tracemalloc

    from specopt.reductions.matrix_generation import extract

    peaks = []
    for m in (100_000, 4_000_000):
        prob = _lazy_model(m)
        tracemalloc.start()
        try:
            data = extract(prob)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert data.hinge is not None and data.lp.G.shape[0] == 0 and data.lp.A.m == m
        peaks.append(peak)
    assert peaks[1] - peaks[0] < 3_900_000, peaks


def test_route_direct_hinge_certifies_with_duals():
    """``M >> 0`` written as a constraint: the direct path's PSD dual (``mu I - H`` from the
    bound's pricing matrix, no pass over the row multipliers) is PSD and complementary to M, and
    the value and the trace dual agree with the same model on numpy rows (general path)."""
    P, Q = _rows(3, m=500, D=5)
    ref = _model_var(P, Q, 20.0, True)
    specopt.solve(ref, route="matrix_generation", tol=1e-8)
    prob = _model_var(da.from_array(P, chunks=(125, -1)), da.from_array(Q, chunks=(125, -1)),
                      20.0, True)
    with dask.config.set(scheduler="sync"):
        specopt.solve(prob, route="matrix_generation", tol=1e-8)
    assert prob.status == cp.OPTIMAL and specopt.certificate(prob).gap <= 1e-8
    assert abs(prob.value - ref.value) <= 1e-7 * max(1.0, abs(ref.value))
    M = prob.variables()[0] if prob.variables()[0].ndim == 2 else prob.variables()[1]
    Z = prob.constraints[1].dual_value
    assert np.linalg.eigvalsh(Z).min() >= -1e-6 * max(1.0, np.abs(Z).max())
    assert abs(np.sum(Z * M.value)) <= 1e-5
    assert abs(prob.constraints[0].dual_value - ref.constraints[0].dual_value) <= 1e-4 * max(
        1.0, abs(ref.constraints[0].dual_value))


def test_route_direct_hinge_refuses_options_it_cannot_use():
    P, Q = _rows(1, m=100)
    prob = _model_var(da.from_array(P, chunks=(50, -1)), da.from_array(Q, chunks=(50, -1)),
                      5.0, False)
    with pytest.raises(ValueError, match="cut master"):
        specopt.solve(prob, route="matrix_generation", cuts=False)


@pytest.mark.slow
def test_route_client_memory_does_not_grow_with_the_rows():
    """The route (analysis, extraction, 6 rounds of the cut master, results mapped back) on
    rows persisted on a LocalCluster: 8x the rows cost the client less than 3 floats per added
    row (each peak the smaller of two solves: the event loop adds a few MB of noise). Not
    included: ``specopt.solve``'s check of the returned point, which evaluates the user's
    objective through CVXPY (``row_quad_forms(V, X).value``: m numbers per term, transiently)."""
    import time
    import tracemalloc

    from specopt.reductions.base import Match, RunContext
    from specopt.reductions.matrix_generation import MatrixGenerationRoute

    distributed = pytest.importorskip("distributed")
    import specopt.solvers.mg._dask_hinge as dh

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", memory_limit="2GiB")
    client = distributed.Client(cluster)
    try:
        client.run(lambda: __import__("specopt.solvers.mg.dask_rows"))
        old = dh.SELECT_GATHER
        dh.SELECT_GATHER = 1000  # the selection of rho runs its order-statistics pass

        def peak(m):
            P, Q = _rows(5, m=m, D=5)
            Pd = client.persist(da.from_array(P, chunks=(-(-m // 4), -1)))
            Qd = client.persist(da.from_array(Q, chunks=(-(-m // 4), -1)))
            distributed.wait([Pd, Qd])
            del P, Q
            prob = _model_var(Pd, Qd, 10.0, False)
            route = MatrixGenerationRoute()
            tracemalloc.start()
            try:
                data = route.extract(prob)
                ctx = RunContext(prob, Match(True, "", data), None, False, None,
                                 time.perf_counter())
                res = route.invert(route.run(data, ctx, tol=1e-9, max_iters=6), ctx)
                out = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert data.hinge is not None and res.bound >= res.objective - 1e-9
            return out

        m1, m2 = 20_000, 160_000
        p1, p2 = min(peak(m1), peak(m1)), min(peak(m2), peak(m2))
        print(f"client peak {p1 / 1e6:.1f} MB at {m1} rows, {p2 / 1e6:.1f} MB at {m2} rows")
        assert p2 - p1 < 24 * (m2 - m1)
    finally:
        dh.SELECT_GATHER = old
        client.close()
        cluster.close()


@pytest.mark.parametrize("tol,single", [(1e-4, True), (1e-8, False)])
def test_route_direct_hinge_single_precision_rounds_only_at_loose_tol(monkeypatch, tol, single):
    """The rounds' activities are single precision from ``tol = 1e-5`` on, double below; the
    certified value is the same as on numpy rows either way."""
    from specopt.solvers.mg import cuts

    seen = []
    orig = cuts.solve_hinge_cuts

    def spy(*a, hinge=None, **k):
        seen.append(hinge.single)
        return orig(*a, hinge=hinge, **k)

    monkeypatch.setattr(cuts, "solve_hinge_cuts", spy)
    P, Q = _rows(5, m=400, D=4)
    ref = _model(P, Q, 10.0)
    specopt.solve(ref, route="matrix_generation", tol=1e-8)
    prob = _model(da.from_array(P, chunks=(100, -1)), da.from_array(Q, chunks=(100, -1)), 10.0)
    with dask.config.set(scheduler="sync"):
        specopt.solve(prob, route="matrix_generation", tol=tol)
    assert seen == [single]
    assert prob.status == cp.OPTIMAL and specopt.certificate(prob).gap <= tol
    assert abs(prob.value - ref.value) <= 2 * tol * max(1.0, abs(ref.value))
