"""MVE / SDE / kernel PCA learners: energy on hubs-and-spokes and a spiral, constraints, API."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from specopt.learn.embedding import (
    KernelPCAEmbedding,
    MinimumVolumeEmbedding,
    SemidefiniteEmbedding,
    _sq_dist,
    eigen_energy,
    make_hubs_and_spokes,
    make_spiral,
)


@pytest.fixture(scope="module")
def spokes():
    X, adj = make_hubs_and_spokes(n_spokes=4, points_per_spoke=5, noise=0.2, random_state=0)
    kw = dict(n_components=2, n_neighbors=2)
    return {
        "mve": MinimumVolumeEmbedding(**kw).fit(X),
        "sde": SemidefiniteEmbedding(**kw).fit(X),
        "kpca": KernelPCAEmbedding(**kw).fit(X),
        "X": X,
    }


@pytest.fixture(scope="module")
def spiral():
    X = make_spiral(24, turns=1.5)
    kw = dict(n_components=1, n_neighbors=2)
    return {
        "mve": MinimumVolumeEmbedding(**kw).fit(X),
        "sde": SemidefiniteEmbedding(**kw).fit(X),
        "kpca": KernelPCAEmbedding(**kw).fit(X),
        "X": X,
    }


def test_spokes_energy_mve_beats_sde_and_kpca_beats_sde(spokes):
    mve, sde, kpca = spokes["mve"].energy_, spokes["sde"].energy_, spokes["kpca"].energy_
    assert mve >= 0.95
    assert mve > sde + 0.05  # seed: 100 / 29.9 / 95.0
    assert kpca > sde


def test_spiral_energy_1d(spiral):
    mve, sde, kpca = spiral["mve"].energy_, spiral["sde"].energy_, spiral["kpca"].energy_
    assert mve >= 0.95
    assert mve >= sde - 1e-3  # seed: 99.9 / 99.9 / 45.8 (both unfold the spiral)
    assert sde > kpca + 0.2


@pytest.mark.parametrize("data", ["spokes", "spiral"])
def test_fitted_kernel_is_feasible_and_mve_trace_monotone(data, request):
    fits = request.getfixturevalue(data)
    for key in ("mve", "sde"):
        m = fits[key]
        K, A, C = m.kernel_, m.affinity_, m.connectivity_
        scale = np.max(_sq_dist(A))
        assert np.linalg.eigvalsh(K)[0] >= -1e-5 * scale
        assert abs(K.sum()) <= 1e-4 * scale * K.shape[0]
        i, j = np.nonzero(np.triu(C, 1))
        assert np.allclose(_sq_dist(K)[i, j], _sq_dist(A)[i, j], atol=1e-4 * scale)
        assert m.embedding_.shape == (K.shape[0], m.n_components)
        assert m.energy_ == pytest.approx(eigen_energy(m.eigenvalues_, m.n_components))
    hist = np.array(fits["mve"].history_["objective"])
    # monotone but at the extrapolated step that increased the cost (extrapolation then off)
    rejected = fits["mve"].certificate_.extra["extrapolation_rejected"]
    assert len(rejected) <= 1
    assert np.sum(np.diff(hist) > 1e-5 * max(1.0, abs(hist[0]))) <= len(rejected)
    assert fits["mve"].n_iter_ == len(hist)
    assert fits["mve"].certificate_.status == "stationary_point"


def test_nonshrink_and_spanning_tree_and_graph_modes():
    X, adj = make_hubs_and_spokes(n_spokes=3, points_per_spoke=3, noise=0.1, random_state=1)
    m = MinimumVolumeEmbedding(connectivity="spanning_tree", preserve="edges+nonshrink").fit(X)
    D0, D1 = _sq_dist(m.affinity_), _sq_dist(m.kernel_)
    assert np.all(D1 >= D0 - 1e-4 * D0.max())  # no distance shrinks
    assert m.connectivity_.sum() == 2 * (X.shape[0] - 1)  # a tree
    g = MinimumVolumeEmbedding(connectivity="graph").fit(adj)
    assert np.array_equal(g.connectivity_, adj != 0)
    assert g.energy_ >= 0.95


def test_sklearn_conventions_and_errors():
    X = make_spiral(12)
    m = MinimumVolumeEmbedding(n_components=1, n_neighbors=2, max_iter=3)
    assert clone(m).get_params() == m.get_params()
    with pytest.raises(NotFittedError):
        m.score()
    assert m.fit(X) is m and m.n_iter_ <= 3
    Y = KernelPCAEmbedding(n_components=1).fit_transform(X)
    assert Y.shape == (12, 1)
    two_blobs = np.r_[np.zeros((5, 2)), np.ones((5, 2)) * 100] + np.arange(10)[:, None] * 0.01
    with pytest.raises(ValueError, match="connected components"):
        SemidefiniteEmbedding(n_neighbors=1).fit(two_blobs)
    with pytest.raises(ValueError, match="n_components"):
        MinimumVolumeEmbedding(n_components=0).fit(X)
    with pytest.raises(ValueError, match="connectivity"):
        MinimumVolumeEmbedding(connectivity="bogus").fit(X)
    with pytest.raises(ValueError, match="adjacency"):
        MinimumVolumeEmbedding(connectivity="graph").fit(X)
    with pytest.raises(ValueError, match="kernel"):
        KernelPCAEmbedding(kernel="poly").fit(X)


def test_mve_init_sde(spokes):
    """init='sde' starts MM at the SDE kernel: at least the SDE's energy, same set, same cost."""
    X = spokes["X"]
    m = MinimumVolumeEmbedding(n_components=2, n_neighbors=2, init="sde").fit(X)
    assert m.energy_ >= spokes["sde"].energy_ - 1e-6
    assert m.certificate_.extra["init"] == "trace" and m.certificate_.extra["monotone"]
    assert m.energy_ >= 0.95
    with pytest.raises(ValueError, match="The 'init' parameter of MinimumVolumeEmbedding must be"):
        MinimumVolumeEmbedding(n_components=2, n_neighbors=2, init="bogus").fit(X)


def test_mve_init_sde_on_the_engine_loose_start(spokes, monkeypatch):
    """On the engine, init='sde' solves the SDE start loosely (SDE_START_TOL): it only gives the
    first linearization, so the certified stationary point is that of the tight SDE start to the
    stationarity tolerance, and both keep at least the SDE's energy."""
    import specopt.learn.embedding as emb

    X = spokes["X"]
    kw = dict(n_components=2, n_neighbors=2, init="sde", solver="LOW_RANK")
    loose = MinimumVolumeEmbedding(**kw).fit(X)
    monkeypatch.setattr(emb, "SDE_START_TOL", 1e-6)
    tight = MinimumVolumeEmbedding(**kw).fit(X)
    for est in (loose, tight):
        assert est.certificate_.status == "stationary_point"
        assert est.energy_ >= spokes["sde"].energy_ - 1e-6
    tol = loose.certificate_.extra["stationarity"][2]
    assert loose.objective_ == pytest.approx(tight.objective_, rel=tol)


def test_sde_low_rank_engine_matches_conic_on_digits():
    """SemidefiniteEmbedding with the low-rank engine: the same SDE optimum as Clarabel (digits
    kNN graph, a well-posed instance), a certificate, and a feasible kernel."""
    from sklearn.datasets import load_digits

    X, _ = load_digits(return_X_y=True)
    X = X[np.random.default_rng(0).choice(len(X), 40, replace=False)]
    lr = SemidefiniteEmbedding(n_components=2, n_neighbors=5, solver="LOW_RANK",
                               solver_options={"tol": 1e-6}).fit(X)
    cl = SemidefiniteEmbedding(n_components=2, n_neighbors=5, solver="CLARABEL").fit(X)
    assert lr.certificate_.route == "low_rank_sdp"
    assert np.trace(lr.kernel_) == pytest.approx(np.trace(cl.kernel_), rel=1e-4)
    assert lr.energy_ == pytest.approx(cl.energy_, abs=1e-3)
    assert abs(lr.kernel_.sum()) <= 1e-6 * np.trace(lr.kernel_)
    C = lr.connectivity_
    i, j = np.nonzero(np.triu(C, 1))
    A = lr.affinity_
    d_fit = np.diag(lr.kernel_)[i] + np.diag(lr.kernel_)[j] - 2 * lr.kernel_[i, j]
    d_data = np.diag(A)[i] + np.diag(A)[j] - 2 * A[i, j]
    assert np.max(np.abs(d_fit - d_data)) <= 1e-3 * np.max(d_data)


def test_low_rank_engine_refuses_nonshrink():
    from sklearn.datasets import load_digits

    X, _ = load_digits(return_X_y=True)
    with pytest.raises(ValueError, match="preserve='edges' only"):
        SemidefiniteEmbedding(solver="LOW_RANK", preserve="edges+nonshrink").fit(X[:20])


def test_mve_low_rank_engine_close_to_conic(spokes):
    """MVE with the factored majorize-minimize loop: same start (affinity) and tolerance as the
    conic iterated SDP; energies and final costs agree (the same stationary point)."""
    X = spokes["X"]
    lr = MinimumVolumeEmbedding(n_components=2, n_neighbors=2, solver="LOW_RANK", tol=1e-5,
                                solver_options={"tol": 1e-6}).fit(X)
    cl = MinimumVolumeEmbedding(n_components=2, n_neighbors=2, solver="CLARABEL",
                                tol=1e-5).fit(X)
    assert lr.energy_ == pytest.approx(cl.energy_, abs=2e-3)
    assert lr.objective_ == pytest.approx(cl.objective_, rel=1e-3)


def test_mve_factored_steps_agree_with_interior_point_steps(spokes):
    """The learner's defaults on the engine with every MM step on the warm-started factored
    method (``method="bm"``, the path above the interior point's size range) against the
    interior-point steps: both certified stationary, the same cost to the stationarity
    tolerance (same start and tolerances), inner methods reported."""
    X = spokes["X"]
    res = {m: MinimumVolumeEmbedding(n_components=2, n_neighbors=2, solver="LOW_RANK",
                                     solver_options={"method": m}).fit(X) for m in ("ip", "bm")}
    for m, est in res.items():
        cert = est.certificate_
        assert cert.status == "stationary_point", m
        assert set(cert.extra["inner_methods"]) == {m}
        assert cert.extra["stationarity"][0]
    tol = res["ip"].certificate_.extra["stationarity"][2]
    assert res["bm"].objective_ == pytest.approx(res["ip"].objective_, rel=tol)


def test_sde_engine_switch_both_sides():
    from specopt.learn.embedding import LOW_RANK_MIN_N, SemidefiniteEmbedding

    est = SemidefiniteEmbedding()
    assert not est._use_low_rank(LOW_RANK_MIN_N - 1)
    assert est._use_low_rank(LOW_RANK_MIN_N)
    assert SemidefiniteEmbedding(solver="LOW_RANK")._use_low_rank(10)
    assert not SemidefiniteEmbedding(solver="SCS")._use_low_rank(10 * LOW_RANK_MIN_N)


def test_sparse_x_is_densified_and_adjacency_graph_accepted():
    """Issue 23: a sparse X raised "setting an array element with a sequence"."""
    import scipy.sparse as sp

    X, adj = make_hubs_and_spokes(n_spokes=3, points_per_spoke=4, noise=0.1, random_state=1)
    kw = dict(n_components=2, n_neighbors=2)
    dense = SemidefiniteEmbedding(**kw).fit(X)
    sparse = SemidefiniteEmbedding(**kw).fit(sp.csr_matrix(X))
    np.testing.assert_allclose(sparse.kernel_, dense.kernel_, atol=1e-8)
    g = SemidefiniteEmbedding(connectivity="graph").fit(sp.csr_array(adj))
    assert g.certificate_.status == "optimal" and g.n_features_in_ == adj.shape[0]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_inf_named_before_any_solve(bad):
    X = make_spiral(12)
    X[2, 0] = bad
    for est in (SemidefiniteEmbedding(), MinimumVolumeEmbedding(), KernelPCAEmbedding()):
        with pytest.raises(ValueError, match="Input X contains"):
            est.fit(X)


def test_every_pair_constrained_is_closed_form_and_agrees_with_the_solver():
    """n_neighbors >= N - 1: the SDE set is the single point J A J (no solve); Clarabel on the
    same model (every pair, via the graph connectivity) finds the same kernel and value."""
    X = make_spiral(10, noise=0.05)
    fast = SemidefiniteEmbedding(n_neighbors=50).fit(X)
    assert fast.certificate_.route == "closed_form" and fast.certificate_.gap == 0.0
    import cvxpy as cp

    from specopt.learn.embedding import sde_feasible_set

    K, cons = sde_feasible_set(X @ X.T, ~np.eye(10, dtype=bool))
    prob = cp.Problem(cp.Maximize(cp.trace(K)), cons)
    prob.solve(solver="CLARABEL")
    assert prob.status == cp.OPTIMAL
    np.testing.assert_allclose(fast.kernel_, K.value, atol=1e-6 * np.abs(K.value).max())
    assert abs(np.trace(fast.kernel_) - prob.value) <= 1e-6 * prob.value
    mve = MinimumVolumeEmbedding(n_neighbors=50).fit(X)
    np.testing.assert_allclose(mve.kernel_, fast.kernel_, atol=1e-12)
    assert mve.converged_ and mve.certificate_.status == "optimal"
