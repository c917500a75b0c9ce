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


def psdboost_triplet_factors(D: int, S: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Factors (P, Q) of PSDBoost triplets on 3 Gaussian classes: A_r = p_r p_r^T - q_r q_r^T with
    p = x_i - x_k (nearest other-class), q = x_i - x_j (nearest same-class), scaled by 1/sqrt(D)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, S)
    X = rng.normal(size=(3, D))[y] + rng.normal(size=(S, D)) * rng.uniform(0.5, 2, D)
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    same = y[:, None] == y[None]
    j = np.argmin(np.where(same, d2, np.inf), 1)
    k = np.argmin(np.where(~same, d2, np.inf), 1)
    return (X - X[k]) / np.sqrt(D), (X - X[j]) / np.sqrt(D)
