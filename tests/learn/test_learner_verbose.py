"""``verbose`` on the embedding and completion learners: progress through the shared printer
(specopt._progress) when True, nothing at all (no third-party banners either) when False, and a
plain scikit-learn parameter (get_params / clone)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from specopt.learn.completion import (
    NuclearNormCompletion,
    SpectralMatrixCompletion,
    make_low_rank,
)
from specopt.learn.embedding import (
    KernelPCAEmbedding,
    MinimumVolumeEmbedding,
    SemidefiniteEmbedding,
    make_spiral,
)

X_SPIRAL = make_spiral(20)
_M, _MASK = make_low_rank(6, 6, rank=1, observed=0.6, random_state=1)
M_PARTIAL = np.where(_MASK, _M, np.nan)


def _table_rows(out: str, unit: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split()[:1] == [unit.split()[0]]
                 and "objective" in ln)
    rows = []
    for ln in lines[start + 1:]:
        if ln.startswith("-"):
            break
        rows.append(ln.split())
    return rows


CASES = [
    (KernelPCAEmbedding, {}, X_SPIRAL, "route kernel_pca", None),
    (SemidefiniteEmbedding, {}, X_SPIRAL, "route: conic", None),
    (SemidefiniteEmbedding, {"solver": "LOW_RANK", "solver_options": {"max_iters": 4}},
     X_SPIRAL, "route low_rank_sdp", "iteration"),
    (MinimumVolumeEmbedding, {"max_iter": 3}, X_SPIRAL, "route iterated_sdp", "MM step"),
    (MinimumVolumeEmbedding, {"max_iter": 2, "solver": "LOW_RANK",
                              "solver_options": {"inner_max_iters": 50}},
     X_SPIRAL, "route low_rank_sdp", "MM step"),
    (NuclearNormCompletion, {}, M_PARTIAL, "route: conic", None),
    (SpectralMatrixCompletion, {"max_iter": 3}, M_PARTIAL, "route iterated_sdp", "MM step"),
    (NuclearNormCompletion, {"solver": "LOW_RANK"}, M_PARTIAL, "route low_rank_sdp",
     "iteration"),
    (SpectralMatrixCompletion, {"max_iter": 3, "solver": "LOW_RANK"}, M_PARTIAL,
     "route low_rank_sdp", "MM step"),
]


@pytest.mark.parametrize(("cls", "kw", "X", "marker", "unit"), CASES)
def test_verbose_prints_progress_and_quiet_prints_nothing(capfd, cls, kw, X, marker, unit):
    est = cls(verbose=True, **kw)
    assert est.get_params()["verbose"] is True
    est.fit(X)
    out = capfd.readouterr().out
    assert marker in out
    assert "Summary" in out or "status:" in out  # the printer's summary or the certificate
    if unit is not None:
        rows = _table_rows(out, unit)
        rows = [r for r in rows if r[0] != "result"]  # the returned point's line (_progress)
        assert len(rows) >= 1
        assert all(r[0].isdigit() for r in rows)
        assert [int(r[0]) for r in rows] == sorted(int(r[0]) for r in rows)
    quiet = clone(est).set_params(verbose=False)
    assert quiet.get_params()["verbose"] is False and est.verbose is True
    quiet.fit(X)
    captured = capfd.readouterr()
    assert captured.out == ""
    assert "HiGHS" not in captured.err and "SCS" not in captured.err


@pytest.mark.parametrize("cls", [KernelPCAEmbedding, SemidefiniteEmbedding,
                                 MinimumVolumeEmbedding, NuclearNormCompletion,
                                 SpectralMatrixCompletion])
def test_verbose_default_off_and_cloned(cls):
    est = cls()
    assert est.get_params()["verbose"] is False
    c = clone(cls(verbose=True))
    assert c.verbose is True and c.get_params()["verbose"] is True
