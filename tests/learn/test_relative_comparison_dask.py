"""RelativeComparisonMetric with Dask X or triplets: the QP on the Dask rows (no row comes to
the client), the same weights as the in-memory fit within the certified gaps, bad data named."""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is an optional extra (specopt[dask])")
import dask  # noqa: E402

from specopt.learn import RelativeComparisonMetric  # noqa: E402
from specopt.learn.relative_comparison import draw_triplets  # noqa: E402


def _data(seed, N=120, d=5, n_t=900):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, N)
    X = rng.normal(size=(3, d))[y] + rng.normal(size=(N, d)) * rng.uniform(0.3, 2, d)
    return X, draw_triplets(y, n_t, seed).astype(np.int32)


@pytest.mark.parametrize("seed,C,with_A", [(0, 1.0, False), (1, 0.2, True)])
def test_dask_fit_equals_in_memory(seed, C, with_A, capsys):
    X, T = _data(seed)
    A = np.random.default_rng(seed).normal(size=(X.shape[1], 3)) if with_A else None
    mem = RelativeComparisonMetric(C=C, A=A, tol=1e-8).fit(X, triplets=T)
    with dask.config.set(scheduler="threads"):
        est = RelativeComparisonMetric(C=C, A=A, tol=1e-6, verbose=True).fit(
            da.from_array(X, chunks=(50, -1)), triplets=da.from_array(T, chunks=(200, 3)))
    assert est.converged_ and est.gap_ <= 1e-6 * max(1.0, est.objective_)
    assert abs(est.objective_ - mem.objective_) <= est.gap_ + mem.gap_ + 1e-12
    assert est.n_features_in_ == X.shape[1]
    # P is L-strongly convex in w: |w - w*|_L <= sqrt(2 gap) for each fit
    AtA = est.transform_matrix_.T @ est.transform_matrix_
    dw = est.w_ - mem.w_
    assert np.sqrt(dw @ (AtA * AtA) @ dw) <= np.sqrt(2 * est.gap_) + np.sqrt(2 * mem.gap_) + 1e-9
    out = capsys.readouterr().out
    assert "RelativeComparisonMetric on Dask: 900 triplets in 5 blocks" in out
    assert "data passes" in out and "Summary" in out


def test_numpy_points_with_dask_triplets_and_bad_data_named():
    X, T = _data(2, N=60, n_t=300)
    with dask.config.set(scheduler="sync"):
        est = RelativeComparisonMetric(tol=1e-5).fit(X, triplets=da.from_array(T, chunks=100))
        assert est.converged_
        Xb = X.copy()
        Xb[7, 1] = np.nan
        with pytest.raises(ValueError, match="Input X contains NaN or infinity"):
            RelativeComparisonMetric().fit(da.from_array(Xb, chunks=30), triplets=T)
        with pytest.raises(ValueError, match=r"in \[0, 60\)"):
            RelativeComparisonMetric().fit(X, triplets=da.from_array(T + 60, chunks=100))
        with pytest.raises(ValueError, match="integers"):
            RelativeComparisonMetric().fit(X, triplets=da.from_array(T * 1.0, chunks=100))


def test_dask_fit_with_a_coarse_warm_start(monkeypatch):
    """From ``2 * COARSE_ROWS`` triplets on the learner warm-starts on every s-th triplet
    (``COARSE_ROWS`` lowered here): same certified optimum as in memory."""
    import specopt.learn.relative_comparison as rc

    monkeypatch.setattr(rc, "COARSE_ROWS", 200)
    X, T = _data(3)
    mem = RelativeComparisonMetric(C=0.5, tol=1e-8).fit(X, triplets=T)
    with dask.config.set(scheduler="sync"):
        est = RelativeComparisonMetric(C=0.5, tol=1e-6).fit(
            da.from_array(X, chunks=(50, -1)), triplets=da.from_array(T, chunks=(200, 3)))
    assert est.converged_ and est.gap_ <= 1e-6 * max(1.0, est.objective_)
    assert abs(est.objective_ - mem.objective_) <= est.gap_ + mem.gap_ + 1e-12
