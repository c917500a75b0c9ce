"""Shared test fixtures: single-threaded BLAS, seeded data, MOSEK detection."""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

import specopt  # noqa: E402,F401  (registers atoms and method="specopt")

# CI runs a fixed, reproducible set of hypothesis examples (a red CI must be re-runnable); local
# runs explore new random examples each time.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture
def mosek_or_skip():
    ok, why = specopt.backends.mosek_status()
    if not ok:
        pytest.skip(f"MOSEK not usable: {why}")
    return "MOSEK"
