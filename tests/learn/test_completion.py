"""Spectral matrix completion vs the nuclear-norm heuristic on the same random masks."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from specopt.learn.completion import (
    NuclearNormCompletion,
    SpectralMatrixCompletion,
    make_low_rank,
)


@pytest.mark.parametrize("rank", [1, 2])
def test_spectral_beats_nuclear_norm_on_average(rank):
    nn_err, sp_err = [], []
    for seed in range(3):
        M, mask = make_low_rank(20, 20, rank, observed=0.45, random_state=100 * rank + seed)
        Xo = np.where(mask, M, np.nan)
        nn = NuclearNormCompletion().fit(Xo)
        sp = SpectralMatrixCompletion(rank=rank).fit(Xo)
        nn_err.append(-nn.score(M))
        sp_err.append(-sp.score(M))
        # data consistency and a monotone objective trace
        assert np.allclose(sp.completion_[mask], M[mask], atol=1e-4 * np.abs(M).max())
        hist = np.array(sp.history_["objective"])
        assert np.all(np.diff(hist) <= 1e-4 * max(1.0, abs(hist[0])))
        assert np.trace(sp.kernel_) <= sp.trace_bound_ * (1 + 1e-4)
    assert np.mean(sp_err) < np.mean(nn_err)
    assert np.mean(sp_err) < 1e-2


def test_slackened_observations_and_api():
    M, mask = make_low_rank(8, 7, 1, observed=0.6, random_state=3)
    Xo = np.where(mask, M, np.nan)
    sp = SpectralMatrixCompletion(rank=1, C=10.0)
    assert clone(sp).get_params() == sp.get_params()
    with pytest.raises(NotFittedError):
        sp.predict()
    assert sp.fit(Xo) is sp
    assert sp.predict().shape == M.shape
    assert -sp.score(M) < 0.1
    with pytest.raises(ValueError, match="no observed"):
        NuclearNormCompletion().fit(np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match="rank"):
        SpectralMatrixCompletion(rank=0).fit(Xo)
    with pytest.raises(ValueError, match="C must be positive"):
        NuclearNormCompletion(C=-1.0).fit(Xo)
    with pytest.raises(ValueError, match="2-D"):
        NuclearNormCompletion().fit(np.ones(4))
