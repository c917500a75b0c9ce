"""Small helpers shared by the tests (import as ``from tests._helpers import ...``)."""

from __future__ import annotations

import numpy as np


def random_symmetric(rng: np.random.Generator, n: int) -> np.ndarray:
    A = rng.standard_normal((n, n))
    return (A + A.T) / 2


def random_spd(rng: np.random.Generator, n: int, cond: float = 10.0) -> np.ndarray:
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.geomspace(1.0, cond, n)
    return (Q * lam) @ Q.T
