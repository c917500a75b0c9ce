r"""PSDBoost: large-margin Mahalanobis metric learning from triplets (Shen, Welsh, Wang 2008).

For triplets (i, j, k) ("a_i is closer to a_j than to a_k") the metric ``M`` solves::

    max_{rho, M, xi}  rho - C sum_r xi_r
    s.t.  <A_r, M> >= rho - xi_r,  xi >= 0,  M PSD,  tr M = 1,
          A_r = (a_i - a_k)(a_i - a_k)^T - (a_i - a_j)(a_i - a_j)^T,

solved by ``specopt``'s matrix-generation route (``route="matrix_generation"``, the default) or
any other route/solver (``route="conic", solver="CLARABEL"`` solves the same SDP generically).
The margins are written with ``row_quad_forms`` so the route keeps the data factored
(O(|S| d) memory). ``C`` defaults to ``10 / |S|`` (``C |S| >= 1`` is needed for a bounded
problem).
"""

from __future__ import annotations

from typing import Any

import cvxpy as cp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_array, check_X_y

from ..atoms import row_quad_forms
from ..solve import certificate, solve
from ._base import MahalanobisMixin, components_from_matrix


def nearest_neighbour_triplets(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """One triplet per point: (i, nearest same-class j, nearest other-class k).

    Points without a same-class or other-class neighbour are skipped.
    """
    sq = np.einsum("ij,ij->i", X, X)
    d2 = sq[:, None] + sq[None, :] - 2.0 * X @ X.T
    np.fill_diagonal(d2, np.inf)
    same = y[:, None] == y[None, :]
    ds = np.where(same, d2, np.inf)
    do = np.where(~same, d2, np.inf)
    j, k = np.argmin(ds, axis=1), np.argmin(do, axis=1)
    ok = np.isfinite(ds[np.arange(len(y)), j]) & np.isfinite(do[np.arange(len(y)), k])
    i = np.flatnonzero(ok)
    return np.column_stack([i, j[i], k[i]])


class PSDBoostMetric(MahalanobisMixin, BaseEstimator):
    """Mahalanobis metric learned by PSDBoost (module docstring).

    Parameters
    ----------
    C : slack penalty; None means ``10 / |S|``.
    n_triplets : subsample this many triplets (None: all, one per training point).
    tol : relative gap at which the route stops (default 1e-4: held-out 1-NN accuracy does not
        move below 1e-3 on wine and breast cancer, docs/learners.md; ``certificate_`` reports
        the gap reached).
    route, solver : passed to ``specopt.solve`` (default: the matrix-generation route).
    route_options : extra options for the route (e.g. ``{"master": "lp"}``).
    random_state : seed of the triplet subsampling.
    verbose : print the route's progress (CVXPY-style header, one line per round, certificate).

    Attributes
    ----------
    mahalanobis_ : (d, d) learned metric (PSD, trace 1); components_ : (r, d) with
    ``components_.T @ components_ = mahalanobis_``; triplets_ ; certificate_ ; n_iter_.
    """

    _matrix_attr = "mahalanobis_"

    def __init__(
        self,
        C: float | None = None,
        n_triplets: int | None = None,
        tol: float = 1e-4,
        route: str = "matrix_generation",
        solver: str | None = None,
        route_options: dict | None = None,
        random_state: int | None = None,
        verbose: bool = False,
    ) -> None:
        self.C = C
        self.n_triplets = n_triplets
        self.tol = tol
        self.route = route
        self.solver = solver
        self.route_options = route_options
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X: Any, y: Any) -> PSDBoostMetric:
        """Learn the metric from nearest same-class / other-class neighbour triplets."""
        X, y = check_X_y(X, y, dtype=float)
        if np.unique(y).size < 2:
            raise ValueError("PSDBoostMetric needs at least two classes")
        T = nearest_neighbour_triplets(X, y)
        if self.n_triplets is not None and self.n_triplets < len(T):
            rng = np.random.default_rng(self.random_state)
            T = T[np.sort(rng.choice(len(T), self.n_triplets, replace=False))]
        return self.fit_triplets(X, T)

    def fit_triplets(self, X: Any, triplets: Any) -> PSDBoostMetric:
        """Learn the metric from given triplets (i, j, k): a_i closer to a_j than to a_k."""
        X = check_array(X, dtype=float)
        T = np.asarray(triplets)
        if T.ndim != 2 or T.shape[1] != 3 or len(T) == 0:
            raise ValueError("triplets must be a non-empty (n, 3) integer array")
        if not np.issubdtype(T.dtype, np.integer) or T.min() < 0 or T.max() >= len(X):
            raise ValueError(f"triplet indices must be integers in [0, {len(X)})")
        self.n_features_in_ = X.shape[1]
        m, d = len(T), X.shape[1]
        C = 10.0 / m if self.C is None else float(self.C)
        if C * m < 1:
            raise ValueError(f"C * n_triplets = {C * m:g} < 1 makes the problem unbounded")
        P = X[T[:, 0]] - X[T[:, 2]]
        Q = X[T[:, 0]] - X[T[:, 1]]
        M = cp.Variable((d, d), PSD=True)
        rho, xi = cp.Variable(), cp.Variable(m)
        prob = cp.Problem(
            cp.Maximize(rho - C * cp.sum(xi)),
            [cp.trace(M) == 1, row_quad_forms(P, M) - row_quad_forms(Q, M) >= rho - xi, xi >= 0],
        )
        opts = dict(self.route_options or {})
        if self.route == "matrix_generation":
            opts.setdefault("tol", self.tol)
        solve(prob, route=self.route, solver=self.solver, verbose=bool(self.verbose), **opts)
        if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            raise RuntimeError(f"PSDBoost solve ended with status {prob.status}")
        Mv = np.asarray(M.value, dtype=float)
        Mv = 0.5 * (Mv + Mv.T)
        self.mahalanobis_ = Mv
        self.components_ = components_from_matrix(Mv, rtol=1e-10)
        self.triplets_ = T
        self.margin_ = float(rho.value)
        self.certificate_ = certificate(prob)
        self.n_iter_ = self.certificate_.iterations if self.certificate_ is not None else None
        return self
