"""Low-rank matrix completion: the spectral (iterated-SDP) cost and the nuclear-norm baseline.

Both complete a partially observed ``m x n`` matrix ``M`` (missing entries ``NaN``) through the
PSD embedding ``K = [[Y, X], [X^T, Z]] >= 0`` (then ``||X||_* <= (tr Y + tr Z) / 2``):

* :class:`NuclearNormCompletion` (Fazel's trace heuristic): ``min tr(K) / 2``;
* :class:`SpectralMatrixCompletion` (Jebara, Shaw & Howard): the linear-spectral cost
  ``min -sum_{i<=d} lambda_i(K) + sum_{i>d} lambda_i(K) = tr K - 2 f_d(K)`` (``mve_cost``), which
  rewards putting the energy of K in d eigenvalues; solved by iterated SDP from the nuclear-norm
  solution, subject to ``tr K <= tau``.

Observations: ``X_ij = M_ij`` on the observed entries, or, with ``C`` given, the slackened form
``|X_ij - M_ij| <= s_ij`` with the linear cost ``C sum s_ij``.

Why ``tr K <= tau``: without a bound the spectral cost is unbounded below (adding ``t u u^T`` to
``Y`` lowers it by about ``t``). Every rank-d ``K`` with ``tr K = tau`` consistent with the data
attains the bound's optimum ``-tau``, and such ``K`` exist for every ``tau >= 2 ||X||_*`` of a
rank-d completion ``X``; ``tau = trace_scale * 2 * ||X_nn||_*`` (nuclear-norm solution) by default.
"""

from __future__ import annotations

import time
from typing import Any

import cvxpy as cp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

__all__ = ["NuclearNormCompletion", "SpectralMatrixCompletion", "make_low_rank"]


def make_low_rank(
    m: int = 20, n: int = 20, rank: int = 1, observed: float = 0.5, random_state: int | None = 0
) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian rank-``rank`` matrix ``M`` and a random mask with a fraction ``observed`` set.

    Every row and column keeps at least one observed entry.
    """
    rng = np.random.default_rng(random_state)
    M = rng.standard_normal((m, rank)) @ rng.standard_normal((rank, n))
    while True:
        mask = rng.random((m, n)) < observed
        if mask.any(axis=0).all() and mask.any(axis=1).all():
            return M, mask


def _check_partial(X: Any) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array with NaN for missing entries, got ndim={X.ndim}")
    mask = ~np.isnan(X)
    if np.isinf(X[mask]).any():
        raise ValueError("X has infinite entries")
    if not mask.any():
        raise ValueError("X has no observed entry")
    return X, mask


class _CompletionBase(BaseEstimator):
    def _model(self, M: np.ndarray, mask: np.ndarray):
        m, n = M.shape
        Y = cp.Variable((m, m), symmetric=True, name="Y")
        Z = cp.Variable((n, n), symmetric=True, name="Z")
        X = cp.Variable((m, n), name="X")
        K = cp.bmat([[Y, X], [X.T, Z]])
        idx = np.flatnonzero(mask.ravel(order="F"))
        obs = cp.vec(X, order="F")[idx]
        target = M.ravel(order="F")[idx]
        cons = [K >> 0]
        penalty: cp.Expression = cp.Constant(0.0)
        if self.C is None:
            cons.append(obs == target)
        else:
            if not self.C > 0:
                raise ValueError(f"C must be positive or None, got {self.C!r}")
            s = cp.Variable(idx.size, nonneg=True, name="slack")
            cons += [obs - target <= s, target - obs <= s]
            penalty = self.C * cp.sum(s)
        return Y, Z, X, K, cons, penalty

    def _solver(self, size: int) -> tuple[str, dict]:
        opts = dict(self.solver_options or {})
        return (self.solver or ("CLARABEL" if size <= 30 else "SCS")).upper(), opts

    def predict(self, X: Any = None) -> np.ndarray:
        """The completed matrix (``X`` is ignored; completion is transductive)."""
        check_is_fitted(self, "completion_")
        return self.completion_

    def score(self, X: Any, y: Any = None) -> float:
        """Minus the relative error ``-||X_hat - X||_F / ||X||_F`` against a full matrix ``X``."""
        check_is_fitted(self, "completion_")
        X = np.asarray(X, dtype=float)
        return -float(np.linalg.norm(self.completion_ - X) / max(np.linalg.norm(X), 1e-300))


class NuclearNormCompletion(_CompletionBase):
    """Trace heuristic: ``min (tr Y + tr Z) / 2 (+ C sum s)`` over the PSD embedding."""

    def __init__(self, C: float | None = None, solver: str | None = None,
                 solver_options: dict | None = None, verbose: bool = False) -> None:
        self.C = C
        self.solver = solver
        self.solver_options = solver_options
        self.verbose = verbose

    def fit(self, X: Any, y: Any = None) -> NuclearNormCompletion:
        M, mask = _check_partial(X)
        Yv, Zv, Xv, K, cons, penalty = self._model(np.nan_to_num(M), mask)
        prob = cp.Problem(cp.Minimize(0.5 * cp.trace(K) + penalty), cons)
        solver, opts = self._solver(sum(M.shape))
        import specopt

        t0 = time.perf_counter()
        specopt.solve(prob, route="conic", solver=solver, verbose=bool(self.verbose), **opts)
        self.fit_time_ = time.perf_counter() - t0
        if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            raise cp.error.SolverError(f"nuclear-norm completion failed: status {prob.status}")
        self.completion_ = np.asarray(Xv.value)
        self.kernel_ = np.asarray(K.value)
        self.nuclear_norm_ = float(np.linalg.svd(self.completion_, compute_uv=False).sum())
        self.mask_ = mask
        return self


class SpectralMatrixCompletion(_CompletionBase):
    """Spectral completion: ``min mve_cost(K, rank) (+ C sum s)`` s.t. ``tr K <= tau``.

    Iterated SDP (route ``"iterated_sdp"``) started from the nuclear-norm solution; each step
    solves ``min tr(K (I - 2 V_d V_d^T))`` with ``V_d`` the top-d eigenvectors of the last K.
    ``tau = trace_scale * 2 * ||X_nn||_*`` unless ``trace_bound`` is given (module docstring).
    """

    def __init__(
        self,
        rank: int = 1,
        C: float | None = None,
        trace_scale: float = 2.0,
        trace_bound: float | None = None,
        max_iter: int = 100,
        tol: float = 1e-6,
        restarts: int = 0,
        random_state: int | None = 0,
        solver: str | None = None,
        solver_options: dict | None = None,
        verbose: bool = False,
    ) -> None:
        self.rank = rank
        self.C = C
        self.trace_scale = trace_scale
        self.trace_bound = trace_bound
        self.max_iter = max_iter
        self.tol = tol
        self.restarts = restarts
        self.random_state = random_state
        self.solver = solver
        self.solver_options = solver_options
        self.verbose = verbose

    def fit(self, X: Any, y: Any = None) -> SpectralMatrixCompletion:
        import specopt
        from specopt.atoms import mve_cost

        M, mask = _check_partial(X)
        m, n = M.shape
        d = self.rank
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 1 <= d < m + n:
            raise ValueError(f"rank must be an integer in [1, {m + n - 1}], got {d!r}")
        t0 = time.perf_counter()
        base = NuclearNormCompletion(C=self.C, solver=self.solver,
                                     solver_options=self.solver_options,
                                     verbose=self.verbose).fit(X)
        tau = self.trace_bound
        if tau is None:
            if not self.trace_scale >= 1:
                raise ValueError(f"trace_scale must be >= 1, got {self.trace_scale!r}")
            tau = self.trace_scale * 2.0 * base.nuclear_norm_
        Yv, Zv, Xv, K, cons, penalty = self._model(np.nan_to_num(M), mask)
        cons.append(cp.trace(K) <= tau)
        prob = cp.Problem(cp.Minimize(mve_cost(K, d) + penalty), cons)
        Kb = base.kernel_
        Yv.value, Zv.value, Xv.value = 0.5 * (Kb[:m, :m] + Kb[:m, :m].T), 0.5 * (
            Kb[m:, m:] + Kb[m:, m:].T), base.completion_
        solver, opts = self._solver(m + n)
        specopt.solve(prob, route="iterated_sdp", solver=solver, max_iters=self.max_iter,
                      tol=self.tol, restarts=self.restarts, seed=self.random_state,
                      verbose=bool(self.verbose), **opts)
        self.fit_time_ = time.perf_counter() - t0
        cert = specopt.certificate(prob)
        self.completion_ = np.asarray(Xv.value)
        self.kernel_ = np.asarray(K.value)
        self.baseline_ = base
        self.trace_bound_ = float(tau)
        self.certificate_ = cert
        self.history_ = cert.history
        self.n_iter_ = cert.iterations
        self.mask_ = mask
        return self
