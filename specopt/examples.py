"""Bundled example problems (real data from scikit-learn / networkx, or seeded random data).

Each builder returns an :class:`Example`: the CVXPY problem written with specopt atoms, a
one-line description, and the variables of interest. Used by ``specopt demo`` and
``specopt compare EXAMPLE``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np

from .atoms import burg_div, linear_spectral, logdet_div, mve_cost, row_quad_forms


@dataclass
class Example:
    name: str
    description: str
    problem: cp.Problem
    variables: dict[str, cp.Variable] = field(default_factory=dict)


def _standardized(loader: str, n_points: int | None, seed: int = 0):
    try:
        from sklearn import datasets
    except ImportError as exc:  # pragma: no cover - depends on extras
        raise ImportError(
            "this example uses scikit-learn's bundled data: pip install 'specopt[learn]'"
        ) from exc
    X, y = getattr(datasets, loader)(return_X_y=True)
    rng = np.random.default_rng(seed)
    if n_points is not None and n_points < len(y):
        idx = np.sort(rng.choice(len(y), size=n_points, replace=False))
        X, y = X[idx], y[idx]
    X = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    return X, y


def metric_learning(size: int = 178, C: float = 0.1, dataset: str = "load_wine") -> Example:
    """Large-margin metric learning from triplets (PSDBoost's SDP) on scikit-learn's wine data:

        max rho - C sum xi  s.t.  <A_r, X> >= rho - xi_r, xi >= 0, X PSD, tr X = 1,

    ``<A_r, X> = d_ik^T X d_ik - d_ij^T X d_ij`` written with ``row_quad_forms``."""
    from .learn.psdboost import nearest_neighbour_triplets

    X, y = _standardized(dataset, size)
    T = nearest_neighbour_triplets(X, y)
    d_ij, d_ik = X[T[:, 0]] - X[T[:, 1]], X[T[:, 0]] - X[T[:, 2]]
    D = X.shape[1]
    M = cp.Variable((D, D), PSD=True, name="M")
    rho = cp.Variable(name="rho")
    xi = cp.Variable(len(T), nonneg=True, name="xi")
    margins = row_quad_forms(d_ik, M) - row_quad_forms(d_ij, M)
    prob = cp.Problem(cp.Maximize(rho - C * cp.sum(xi)), [margins >= rho - xi, cp.trace(M) == 1])
    return Example(
        "metric",
        f"large-margin metric learning on {dataset[5:]} ({len(y)} points, {D} features, "
        f"{len(T)} triplets, C={C})",
        prob,
        {"M": M, "rho": rho, "xi": xi},
    )


def itml(size: int = 200, gamma: float = 1.0, dataset: str = "load_iris") -> Example:
    """Information-theoretic metric learning (LogDet divergence) on scikit-learn data:

        min D_ld(W, I) + gamma burg(xi, xi0)  s.t.  d_W(x_i, x_j) <= xi_c (similar pair c),
                                                   d_W(x_i, x_j) >= xi_c (dissimilar pair c),

    ``size`` random pairs, squared distances written with ``row_quad_forms``, one slack vector
    ``xi`` with reference ``xi0_c`` = u (similar) or l (dissimilar), the 5th / 95th percentiles
    of the squared Euclidean pair distances (ITML's defaults). One ``burg_div`` term, so the
    ``bregman`` route recognizes the model."""
    X, y = _standardized(dataset, None)
    rng = np.random.default_rng(0)
    pairs = rng.choice(len(y), size=(size, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    similar = y[pairs[:, 0]] == y[pairs[:, 1]]
    diffs = X[pairs[:, 0]] - X[pairs[:, 1]]
    sq = np.sum(diffs**2, axis=1)
    u, low = np.percentile(sq, 5), np.percentile(sq, 95)
    d = X.shape[1]
    sim, dis = np.flatnonzero(similar), np.flatnonzero(~similar)
    W = cp.Variable((d, d), symmetric=True, name="W")
    xi = cp.Variable(len(pairs), name="xi")
    xi0 = np.where(similar, u, low)
    objective = logdet_div(W, np.eye(d)) + gamma * burg_div(xi, xi0)
    cons = [row_quad_forms(diffs[sim], W) <= xi[sim], row_quad_forms(diffs[dis], W) >= xi[dis]]
    return Example(
        "itml",
        f"ITML (LogDet metric learning) on {dataset[5:]} ({len(pairs)} pairs, {d} features, "
        f"gamma={gamma})",
        cp.Problem(cp.Minimize(objective), cons),
        {"W": W, "xi": xi},
    )


def spectral(size: int = 12) -> Example:
    """Correlation matrix closest in spectrum to low rank: maximize the concave
    ``sum_i alpha_i lambda_i(K)`` (alpha nondecreasing: weight on the smallest eigenvalues
    negative) over correlation matrices within 0.1 of the sample correlation of digits pixels."""
    X, _ = _standardized("load_digits", 300)
    keep = np.argsort(-X.var(axis=0))[:size]
    Cm = np.corrcoef(X[:, keep].T)
    n = Cm.shape[0]
    K = cp.Variable((n, n), symmetric=True, name="K")
    alpha = np.concatenate([np.zeros(2), -np.ones(n - 2)])
    alpha = np.sort(alpha)
    prob = cp.Problem(
        cp.Maximize(linear_spectral(K, alpha)),
        [K >> 0, cp.diag(K) == 1, cp.abs(K - Cm) <= 0.1],
    )
    return Example("spectral", f"low-rank-seeking correlation matrix ({n}x{n}, digits)", prob,
                   {"K": K})


def mve(size: int = 20, d: int = 2) -> Example:
    """Minimum volume embedding (non-convex: needs method="specopt") of a ring of ``size``
    points with k-nearest-neighbour distance constraints."""
    t = np.linspace(0, 2 * np.pi, size, endpoint=False)
    P = np.c_[np.cos(t), np.sin(t), 0.3 * np.cos(3 * t)]
    A = P @ P.T
    K = cp.Variable((size, size), PSD=True, name="K")
    cons = [cp.sum(K) == 0]
    for i in range(size):
        for j in ((i + 1) % size, (i + 2) % size):
            dist = A[i, i] + A[j, j] - 2 * A[i, j]
            cons.append(K[i, i] + K[j, j] - 2 * K[i, j] == dist)
    prob = cp.Problem(cp.Minimize(mve_cost(K, d)), cons)
    return Example("mve", f"minimum volume embedding of a {size}-point ring in {d}D", prob,
                   {"K": K})


def relative_comparison(size: int = 5000, C: float = 1.0, dataset: str = "load_digits",
                        seed: int = 0) -> Example:
    """Schultz-Joachims metric learning from relative comparisons on scikit-learn's digits:
    ``size`` seeded random triplets (i, j, k), y_i = y_j != y_k, and the diagonal metric
    ``d_w(u, v) = sum_f w_f (u_f - v_f)^2`` solving the QP::

        min_{w >= 0}  1/2 ||w||^2 + C sum_t max(0, 1 - w^T z_t),
        z_t = (x_i - x_k)^2 - (x_i - x_j)^2   (elementwise)."""
    from .learn.relative_comparison import draw_triplets

    X, y = _standardized(dataset, None)
    T = draw_triplets(y, size, seed)
    Z = (X[T[:, 0]] - X[T[:, 2]]) ** 2 - (X[T[:, 0]] - X[T[:, 1]]) ** 2
    w = cp.Variable(X.shape[1], nonneg=True, name="w")
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * cp.sum(cp.pos(1 - Z @ w))))
    return Example(
        "relcomp",
        f"metric learning from relative comparisons on {dataset[5:]} ({len(y)} points, "
        f"{X.shape[1]} features, {size} triplets, C={C:g})",
        prob,
        {"w": w},
    )


EXAMPLES: dict[str, Callable[..., Example]] = {
    "relcomp": relative_comparison,
    "metric": metric_learning,
    "itml": itml,
    "spectral": spectral,
    "mve": mve,
}


#: ``--size`` of the small copy of each example that ``specopt demo`` / ``compare`` solve once
#: with every backend before the table, so that one-off costs (numba kernels loaded or compiled,
#: CVXPY's first canonicalization) land in no row
WARM_UP_SIZES: dict[str, int] = {"relcomp": 200, "metric": 20, "itml": 30, "spectral": 6,
                                 "mve": 8}


#: What ``specopt --help`` says about each example: problem, data, what ``--size`` counts, default.
EXAMPLE_HELP: dict[str, str] = {
    "relcomp": "metric learning from relative comparisons (a QP with hinge losses) on digits "
               "(1797 points, 64 features); --size = number of triplets, default 5000. "
               "auto picks the dual coordinate descent route (this is the demo).",
    "metric": "large-margin metric learning from triplets (PSDBoost's SDP, trace-one PSD "
              "matrix) on wine (13 features); --size = number of points/triplets, default 178 "
              "(all). Small: auto uses the conic route; try specopt:matrix_generation.",
    "itml": "information-theoretic metric learning (LogDet divergence, one Burg slack term) "
            "on iris (4 features); --size = number of random pairs, default 200; auto picks "
            "the bregman route.",
    "spectral": "correlation matrix with small trailing eigenvalues (concave linear_spectral "
                "maximized, convex) from digits pixels; --size = matrix order, default 12.",
    "mve": "minimum volume embedding of a ring of points (non-convex: only method='specopt', "
           "iterated SDP); --size = number of points, default 20.",
}


def build(name: str, size: int | None = None) -> Example:
    try:
        builder = EXAMPLES[name]
    except KeyError:
        raise ValueError(
            f"unknown example {name!r}; choose one of {', '.join(EXAMPLES)}"
        ) from None
    return builder() if size is None else builder(size)
