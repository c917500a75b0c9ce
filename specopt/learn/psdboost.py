r"""PSDBoost: large-margin Mahalanobis metric learning from triplets (Shen, Welsh, Wang 2008).

For triplets (i, j, k) ("a_i is closer to a_j than to a_k") the metric ``M`` solves::

    max_{rho, M, xi}  rho - (C / |S|) sum_r xi_r
    s.t.  <A_r, M> >= rho - xi_r,  xi >= 0,  M PSD,  tr M = 1,
          A_r = (a_i - a_k)(a_i - a_k)^T - (a_i - a_j)(a_i - a_j)^T,

solved by ``specopt``'s matrix-generation route (``route="matrix_generation"``, the default) or
any other route/solver (``route="conic", solver="CLARABEL"`` solves the same SDP generically).
The margins are written with ``row_quad_forms`` so the route keeps the data factored
(O(|S| d) memory).

``C`` weighs the MEAN slack (per-triplet normalized): the same value means the same trade-off for
any number of triplets |S|, so one ``C`` is valid on every cross-validation fold. The dual is
``min_u lambda_max(sum_r u_r A_r)`` over distributions ``u`` on the triplets (``sum_r u_r = 1``)
with ``0 <= u_r <= C / |S|``: feasible (the primal bounded) exactly when ``C >= 1``, whatever
|S|. At ``C = 1`` the dual weights
are uniform (the margin averaged over all triplets); every triplet with ``xi_r > 0`` has
``u_r = C / |S|``, so at most a fraction ``1 / C`` of the triplets violate the margin (the
nu-SVM property, ``nu = 1 / C``); ``C -> inf`` is the hard margin. Default ``C = 10`` (the former
default ``10 / |S|`` in the unnormalized form). ``C < 1``, NaN or inf raise a ``ValueError``
naming ``C`` before any solve.

Beyond one machine: ``fit(X, triplets=T)`` (or ``fit_triplets``) with ``X`` or ``T`` a
``dask.array`` keeps only the index triples (12 bytes each as int32) and forms the difference rows
``a_i - a_k``, ``a_i - a_j`` block by block on the Dask cluster (see
``specopt.solvers.mg.dask_rows``); the metric is learned by the matrix-generation route with every
full-data pass on the active Dask scheduler.
"""

from __future__ import annotations

from typing import Any

import cvxpy as cp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_array, validate_data

from ..atoms import row_quad_forms
from ..solve import certificate, solve
from ..solvers.mg.dask_rows import is_dask_array, triplet_rows
from ._base import (
    COUNT,
    TOL,
    VERBOSE,
    HasMethods,
    Integral,
    Interval,
    MahalanobisMixin,
    Real,
    components_from_matrix,
    fit_context,
    labelled_data,
    reject_dask_nan,
    triplets_given,
)
from ._dask_fit import check_triplet_indices, psdboost_dask


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
    C : weight of the mean slack, ``>= 1`` (module docstring: per-triplet normalized, valid
        for any number of triplets; at most a fraction ``1 / C`` of the triplets violate the
        margin). Default 10.
    n_triplets : subsample this many triplets (None: all, one per training point).
    tol : relative gap at which the route stops (default 1e-4: held-out 1-NN accuracy does not
        move below 1e-3 on wine and breast cancer, docs/learners.md; ``certificate_`` reports
        the gap reached).
    route, solver : passed to ``specopt.solve`` (default: the matrix-generation route).
    route_options : extra options for the route (e.g. ``{"master": "lp"}``).
    random_state : seed of the triplet subsampling.
    block_rows : rows per Dask block when the triplets are Dask-backed (None: the triplets'
        own chunks, or 100 000 for a numpy index array with Dask data).
    verbose : print the route's progress (CVXPY-style header, one line per round, certificate).

    Attributes
    ----------
    mahalanobis_ : (d, d) learned metric (PSD, trace 1); components_ : (r, d) with
    ``components_.T @ components_ = mahalanobis_``; triplets_ : the (m, 3) triplets fitted;
    margin_ : the margin rho; certificate_ : the route's certificate; n_iter_ : its iterations;
    n_features_in_.
    """

    _matrix_attr = "mahalanobis_"
    _parameter_constraints = {
        "C": [Interval(Real, 1, None, closed="left")],
        "n_triplets": [COUNT, None],
        "tol": TOL,
        "route": [str],
        "solver": [str, None],
        "route_options": [dict, None],
        # np.random.default_rng: None, a seed or a Generator
        "random_state": [None, Interval(Integral, 0, None, closed="left"),
                         HasMethods(["integers"])],
        "block_rows": [COUNT, None],
        "verbose": VERBOSE,
    }

    def __init__(
        self,
        C: float = 10.0,
        n_triplets: int | None = None,
        tol: float = 1e-4,
        route: str = "matrix_generation",
        solver: str | None = None,
        route_options: dict | None = None,
        random_state: int | None = None,
        block_rows: int | None = None,
        verbose: bool = False,
    ) -> None:
        self.C = C
        self.n_triplets = n_triplets
        self.tol = tol
        self.route = route
        self.solver = solver
        self.route_options = route_options
        self.random_state = random_state
        self.block_rows = block_rows
        self.verbose = verbose

    # the solve goes through specopt.solve, which limits the threads by problem size
    @fit_context(threads=False)
    def fit(self, X: Any, y: Any = None, triplets: Any = None) -> PSDBoostMetric:
        """Learn the metric from nearest same-class / other-class neighbour triplets of ``(X, y)``,
        or from given index ``triplets`` (m, 3) into ``X`` (see :meth:`fit_triplets`)."""
        if triplets_given(y, triplets):
            return self.fit_triplets(X, triplets)
        if y is None:
            raise ValueError("PSDBoostMetric.fit needs labels y or triplets=")
        X, y = labelled_data(self, X, y, dtype=float)
        T = nearest_neighbour_triplets(X, y)
        if self.n_triplets is not None and self.n_triplets < len(T):
            rng = np.random.default_rng(self.random_state)
            T = T[np.sort(rng.choice(len(T), self.n_triplets, replace=False))]
        return self.fit_triplets(X, T)

    @fit_context(threads=False)
    def fit_triplets(self, X: Any, triplets: Any) -> PSDBoostMetric:
        """Learn the metric from given triplets (i, j, k): a_i closer to a_j than to a_k.

        With ``X`` or ``triplets`` a ``dask.array`` (e.g. ``da.from_zarr``), the
        difference rows are formed lazily per block on the Dask scheduler and the data never
        come to the client (module docstring); the route must then be matrix generation.
        """
        lazy = is_dask_array(X) or is_dask_array(triplets)
        X, T = self._triplet_data(X, triplets, lazy)
        self.n_features_in_ = X.shape[1]
        if lazy:
            P, Q = triplet_rows(X, T, block_rows=self.block_rows)
            if self.route == "matrix_generation":
                return self._fit_dask_direct(P, Q, T)
        else:
            P = X[T[:, 0]] - X[T[:, 2]]
            Q = X[T[:, 0]] - X[T[:, 1]]
        M, rho, prob = self._solve(P, Q)
        Mv = np.asarray(M.value, dtype=float)
        Mv = 0.5 * (Mv + Mv.T)
        self.mahalanobis_ = Mv
        self.components_ = components_from_matrix(Mv, rtol=1e-10)
        self.triplets_ = T
        self.margin_ = float(rho.value)
        self.certificate_ = certificate(prob)
        self.n_iter_ = self.certificate_.iterations if self.certificate_ is not None else None
        return self

    def _fit_dask_direct(self, P: Any, Q: Any, T: Any) -> PSDBoostMetric:
        """Dask rows: the solver on the row operator directly (``learn._dask_fit``; no CVXPY
        problem with ``|S|`` slacks)."""
        fit = psdboost_dask(P, Q, self.C, tol=self.tol, verbose=bool(self.verbose),
                            options=self.route_options)
        self.mahalanobis_ = fit.M
        self.components_ = components_from_matrix(fit.M, rtol=1e-10)
        self.triplets_ = T
        self.margin_ = fit.rho
        self.certificate_ = fit.certificate
        self.n_iter_ = fit.certificate.iterations
        return self

    def _triplet_data(self, X: Any, triplets: Any, lazy: bool) -> tuple[Any, Any]:
        """``X`` and the triplets checked (Dask arrays stay lazy: NaN / inf and the index range
        by one reduction each)."""
        if lazy:
            T = triplets if is_dask_array(triplets) else np.asarray(triplets)
            if X.ndim != 2 or not np.issubdtype(np.dtype(X.dtype), np.number):
                raise ValueError(f"X must be a numeric (N, D) array, got shape {X.shape}")
            N = X.shape[0]
            if is_dask_array(X):
                reject_dask_nan(X)  # before the solve: a NaN row would make HiGHS loop
            elif isinstance(X, np.ndarray):
                X = check_array(X, dtype=float)  # (a zarr array stays where it is)
        else:
            X = validate_data(self, X, dtype=float)
            T = np.asarray(triplets)
            N = len(X)
        check_triplet_indices(T, N)
        return X, T

    def _solve(self, P: Any, Q: Any):
        """The SDP of the module docstring on the difference rows ``P`` (a_i - a_k) and ``Q``
        (a_i - a_j), solved by ``route``; returns ``(M, rho, problem)``."""
        m, d = int(P.shape[0]), int(P.shape[1])
        c = float(self.C) / m  # weight of each slack: C is per-triplet normalized (C >= 1)
        M = cp.Variable((d, d), PSD=True)
        rho, xi = cp.Variable(), cp.Variable(m)
        prob = cp.Problem(
            cp.Maximize(rho - c * cp.sum(xi)),
            [cp.trace(M) == 1, row_quad_forms(P, M) - row_quad_forms(Q, M) >= rho - xi, xi >= 0],
        )
        opts = dict(self.route_options or {})
        if self.route == "matrix_generation":
            opts.setdefault("tol", self.tol)
        solve(prob, route=self.route, solver=self.solver, verbose=bool(self.verbose), **opts)
        if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            raise RuntimeError(f"PSDBoost solve ended with status {prob.status}")
        return M, rho, prob

