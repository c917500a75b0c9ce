"""Shared test fixtures: single-threaded BLAS, seeded data, MOSEK detection."""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import specopt  # noqa: E402,F401  (registers atoms and method="specopt")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture
def mosek_or_skip():
    ok, why = specopt.backends.mosek_status()
    if not ok:
        pytest.skip(f"MOSEK not usable: {why}")
    return "MOSEK"
