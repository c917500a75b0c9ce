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

Two solvers (``solver=``):

* the low-rank SDP engine (:mod:`specopt.solvers.sdp`, ``K = F F^T`` with ``F`` of
  ``(m + n) x r``), ``solver="LOW_RANK"``, and the default (``solver=None``) from
  ``m + n >= LOW_RANK_MIN_ORDER`` (measured: ``benchmarks/completion.py --timing``,
  docs/routes/low_rank_sdp.md). The observations are the entry rows ``K[i, m + j] = M_ij``.
  Nuclear norm: one engine solve of ``min tr(K) / 2``; spectral: ``low_rank_mm`` on
  ``<I, K> - 2 sum_{i<=d} lambda_i(K)`` with the constraint ``tr K <= tau``, started from the
  nuclear-norm factor, each step warm-started. Only exact observations (``C=None``): the
  slackened form adds the inequality rows ``|X_ij - M_ij| <= s_ij``, which are not in the
  engine's form (equality rows and one trace bound), so ``C`` keeps the conic path;
* the conic path (Clarabel for ``m + n <= 30``, SCS above, or the ``solver`` named): CVXPY model
  on the blocks ``Y, Z, X``, route ``"conic"`` / ``"iterated_sdp"``.
"""

from __future__ import annotations

import time
from typing import Any

import cvxpy as cp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from ..solvers.sdp import SparseRows, SymOp, solve_low_rank_sdp
from ._base import (
    COUNT,
    POSITIVE,
    SOLVER_OPTIONS,
    TOL,
    VERBOSE,
    Integral,
    Interval,
    Real,
    SDPSolverMixin,
    closed_form_certificate,
    finish_progress,
    fit_context,
    progress_callback,
    solve_certified,
)
from ._low_rank import (
    LOW_RANK,
    low_rank_certificate,
    mm_certificate,
    mm_stationarity,
    use_low_rank,
)

__all__ = ["LOW_RANK_MIN_ORDER", "NuclearNormCompletion", "SpectralMatrixCompletion",
           "make_low_rank"]

#: From this matrix order ``m + n`` on, both learners use the low-rank engine with
#: ``solver=None`` (exact observations, ``C=None``); below it the conic solvers. Measured in
#: ``benchmarks/completion.py --timing`` (docs/routes/low_rank_sdp.md, "Completion").
LOW_RANK_MIN_ORDER = 60
#: The engine's interior-point stage (``method="auto"``) for the nuclear norm and the spectral
#: fit's steps only up to this many observed entries, the factored method above: its dense
#: steps cost O(rows^3). Measured (docs/routes/low_rank_sdp.md, "Completion"): the interior
#: point 0.05-0.35 s vs 0.26-15 s at 348-855 entries, 5.4-10.4 s vs 0.46-0.53 s at 3182-3869
#: entries (nuclear norm); spectral fits, square 60-100, 1818-4014 entries: 1.8-13.0 s vs
#: 0.18-0.43 s CPU, all ``stationary_point``.
_IP_MAX_OBSERVED = 1000
#: Singular values of the nuclear-norm completion below this fraction of the largest are left out
#: of the fold-in basis (the solves are accurate to ~1e-4, LOW_RANK_TOL: below is solver noise).
_FOLD_IN_RTOL = 1e-3
#: The low-rank spectral fit starts from the nuclear-norm factor with its row blocks rescaled
#: ``[a F_Y; F_Z / a]``, ``a^2 = _UNBALANCE`` (the same X; module docstring).
_UNBALANCE = 1.1


def _engine_method(n_observed: int) -> str:
    """The engine's method for completion rows (single entries): ``"auto"`` (the interior point
    at these sizes) up to ``_IP_MAX_OBSERVED`` observed entries, the factored method above."""
    return "auto" if n_observed <= _IP_MAX_OBSERVED else "bm"


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


def _check_partial(est: BaseEstimator, X: Any) -> tuple[np.ndarray, np.ndarray]:
    """The partially observed matrix (NaN = missing; inf refused, sparse refused: its implicit
    zeros would read as observations) and its mask of observed entries; sets n_features_in_."""
    X = validate_data(est, X, dtype=float, ensure_all_finite="allow-nan")
    mask = ~np.isnan(X)
    if not mask.any():
        raise ValueError("X has no observed entry")
    return X, mask


def _from_factor(F: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The completion ``X = F_Y F_Z^T`` (F's first m rows and the rest) and ``K = F F^T``."""
    return F[:m] @ F[m:].T, F @ F.T


def _nuclear_norm(X: np.ndarray) -> float:
    return float(np.linalg.svd(X, compute_uv=False).sum())


def _entry_rows(M: np.ndarray, mask: np.ndarray):
    """The observations as entry rows of the embedding: ``K[i, m + j] = M_ij``."""
    m, n = M.shape
    ii, jj = np.nonzero(mask)
    return SparseRows.from_entries(ii, m + jj, m + n), M[ii, jj]


class _CompletionBase(SDPSolverMixin, BaseEstimator):
    """``fit(X)`` completes X (``completion_``); ``predict()`` returns that completion and
    ``predict(X)`` completes the rows of a new partially observed X (same columns) by fold-in:
    with ``row_basis_`` V (n x r, orthonormal, the top right singular vectors of the
    completion: r = ``rank`` for the spectral completion, the singular values above
    ``_FOLD_IN_RTOL`` of the largest for the nuclear norm), each row x gets
    ``c = argmin ||V_O c - x_O||`` (least squares on its observed entries O, minimum norm) and its
    missing entries ``(V c)_j``; observed entries are kept. Rows are completed independently;
    on the fitted matrix this gives back ``completion_`` wherever its observations are met
    exactly and ``V_O`` has full column rank. ``score`` judges the fitted completion against a
    matrix of the fitted shape."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN marks a missing entry
        return tags

    def _fold_in_rank(self) -> int | None:
        return None

    def _same_matrix(self, X: Any) -> np.ndarray:
        X = validate_data(self, X, dtype=float, ensure_all_finite="allow-nan", reset=False)
        if X.shape != self.completion_.shape:
            raise ValueError(
                f"completion is transductive: X must be the fitted {self.completion_.shape[0]} x "
                f"{self.completion_.shape[1]} matrix (or None), got shape {X.shape}")
        return X

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
            s = cp.Variable(idx.size, nonneg=True, name="slack")
            cons += [obs - target <= s, target - obs <= s]
            penalty = self.C * cp.sum(s)
        return Y, Z, X, K, cons, penalty

    def _use_low_rank(self, size: int, applicable: bool = True) -> bool:
        """The engine with ``solver="LOW_RANK"`` (an error where it does not apply), or by
        default from ``LOW_RANK_MIN_ORDER`` where it applies."""
        use = use_low_rank(self.solver, size, LOW_RANK_MIN_ORDER, applicable)
        if use and self.C is not None:
            raise ValueError(
                "solver='LOW_RANK' needs exact observations (C=None): the slackened form "
                "|X_ij - M_ij| <= s_ij has inequality rows, not in the low-rank engine's form; "
                "use a conic solver (solver=None, 'CLARABEL' or 'SCS') with C")
        return use

    def _nuclear_low_rank(self, M: np.ndarray, mask: np.ndarray, opts: dict):
        """``min tr(K) / 2`` s.t. ``K[i, m + j] = M_ij`` (observed), one engine solve."""
        m, n = M.shape
        rows, b = _entry_rows(M, mask)
        cb = progress_callback(self.verbose, "low_rank_sdp", f"{type(self).__name__}: nuclear "
                               f"norm, {m} x {n}, {rows.m} observed", "iteration")
        opts = dict(opts)
        opts.setdefault("method", _engine_method(rows.m))
        res = solve_low_rank_sdp(SymOp.identity(m + n, 0.5), rows, b, sense="min",
                                 callback=cb, **opts)
        cert = low_rank_certificate(res, "min")
        finish_progress(cb, cert)
        return rows, b, res, cert

    def _store(self, completion: np.ndarray, kernel: np.ndarray, certificate: Any,
               mask: np.ndarray, factor: np.ndarray | None = None) -> None:
        """The fitted attributes every completion has: ``completion_``, ``kernel_``,
        ``factor_`` (F with ``kernel_ = F F^T``, where the fit has one), ``certificate_``,
        ``mask_`` and ``row_basis_``."""
        self.completion_ = completion
        self.kernel_ = kernel
        if factor is not None:
            self.factor_ = factor
        self.certificate_ = certificate
        self.mask_ = mask
        self._set_row_basis(self._fold_in_rank())

    def _set_row_basis(self, rank: int | None) -> None:
        """``row_basis_``: V of the class docstring (``rank`` columns, or by ``_FOLD_IN_RTOL``)."""
        _, sv, Vt = np.linalg.svd(self.completion_, full_matrices=False)
        r = rank if rank is not None else int(np.sum(sv > _FOLD_IN_RTOL * sv[:1].max(initial=0)))
        self.row_basis_ = Vt[: max(1, min(r, Vt.shape[0]))].T

    def predict(self, X: Any = None) -> np.ndarray:
        """``completion_`` (no X), or the rows of X completed by fold-in (class docstring)."""
        check_is_fitted(self, "completion_")
        if X is None:
            return self.completion_
        X = validate_data(self, X, dtype=float, ensure_all_finite="allow-nan", reset=False)
        V = self.row_basis_
        out = X.copy()
        for i, x in enumerate(X):
            obs = ~np.isnan(x)
            if obs.all():
                continue
            c = np.linalg.lstsq(V[obs], x[obs], rcond=None)[0] if obs.any() else np.zeros(
                V.shape[1])
            out[i, ~obs] = V[~obs] @ c
        return out

    def score(self, X: Any, y: Any = None) -> float:
        """Minus the relative error ``-||X_hat - X||_F / ||X||_F`` over the entries of ``X`` that
        are not NaN (a full matrix: every entry; held-out entries: those). ``X`` has the fitted
        matrix's shape."""
        check_is_fitted(self, "completion_")
        X = self._same_matrix(X)
        obs = ~np.isnan(X)
        if not obs.any():
            raise ValueError("X has no entry to score (all NaN)")
        err = np.linalg.norm((self.completion_ - X)[obs])
        return -float(err / max(np.linalg.norm(X[obs]), 1e-300))


class NuclearNormCompletion(_CompletionBase):
    """Trace heuristic: ``min (tr Y + tr Z) / 2 (+ C sum s)`` over the PSD embedding.

    ``solver``: ``None`` (the low-rank engine from ``m + n >= LOW_RANK_MIN_ORDER`` with exact
    observations, else Clarabel / SCS by size), ``"LOW_RANK"``, or a conic solver name.
    ``solver_options`` go to that solver (the engine: ``tol`` (default 1e-4), ``max_iters``,
    ``time_limit``, ...). ``certificate_.status`` is ``optimal`` only when the solver's
    certificate backs it (engine: relative primal residual and gap within ``tol``).
    """

    _parameter_constraints = {
        "C": [POSITIVE, None],
        "solver": [str, None],
        "solver_options": SOLVER_OPTIONS,
        "verbose": VERBOSE,
    }

    def __init__(self, C: float | None = None, solver: str | None = None,
                 solver_options: dict | None = None, verbose: bool = False) -> None:
        self.C = C
        self.solver = solver
        self.solver_options = solver_options
        self.verbose = verbose

    @fit_context()
    def fit(self, X: Any, y: Any = None) -> NuclearNormCompletion:
        M, mask = _check_partial(self, X)
        if mask.all() and self.C is None:
            return self._fit_observed(M, mask)
        if self._use_low_rank(sum(M.shape), self.C is None):
            m = M.shape[0]
            t0 = time.perf_counter()
            _, _, res, cert = self._nuclear_low_rank(M, mask, self._low_rank_opts())
            self.fit_time_ = time.perf_counter() - t0
            self._store(*_from_factor(res.Y, m), cert, mask, factor=res.Y)
            self.nuclear_norm_ = _nuclear_norm(self.completion_)
            return self
        Yv, Zv, Xv, K, cons, penalty = self._model(np.nan_to_num(M), mask)
        prob = cp.Problem(cp.Minimize(0.5 * cp.trace(K) + penalty), cons)
        solver, opts = self._conic_solver(sum(M.shape))
        t0 = time.perf_counter()
        cert = solve_certified(prob, "nuclear-norm completion failed: status {}", route="conic",
                               solver=solver, verbose=bool(self.verbose), **opts)
        self.fit_time_ = time.perf_counter() - t0
        self._store(np.asarray(Xv.value), np.asarray(K.value), cert, mask)
        self.nuclear_norm_ = _nuclear_norm(self.completion_)
        return self

    def _fit_observed(self, M: np.ndarray, mask: np.ndarray) -> NuclearNormCompletion:
        """Every entry observed (exact): X = M is the only feasible block, and with
        ``M = U S V^T`` the optimum is ``K = [U; V] S [U; V]^T`` (PSD, ``tr K / 2 = ||M||_*``,
        and ``tr K / 2 >= ||X||_*`` for every feasible K): closed form, no solve."""
        t0 = time.perf_counter()
        U, sv, Vt = np.linalg.svd(M, full_matrices=False)
        F = np.vstack([U, Vt.T]) * np.sqrt(sv)
        val = float(sv.sum())
        cert = closed_form_certificate(
            val, "every entry observed: K = [U; V] S [U; V]^T from the SVD")
        self._store(M.copy(), F @ F.T, cert, mask, factor=F)
        self.nuclear_norm_ = val
        self.fit_time_ = time.perf_counter() - t0
        return self


class SpectralMatrixCompletion(_CompletionBase):
    """Spectral completion: ``min mve_cost(K, rank) (+ C sum s)`` s.t. ``tr K <= tau``.

    Iterated SDP (route ``"iterated_sdp"``) started from the nuclear-norm solution; each step
    solves ``min tr(K (I - 2 V_d V_d^T))`` with ``V_d`` the top-d eigenvectors of the last K.
    ``tau = trace_scale * 2 * ||X_nn||_*`` unless ``trace_bound`` is given (module docstring).

    With the low-rank engine (``solver="LOW_RANK"``, or ``solver=None`` from
    ``m + n >= LOW_RANK_MIN_ORDER`` with ``C=None`` and ``restarts=0``) the same steps run on the
    factor (``low_rank_mm``), each solved to ``solver_options["tol"]`` (default 1e-4; the MM
    stops when the relative objective change is ``<= max(tol, inner tol)`` and the relative
    change of K ``<= max(1e-4, 10 inner tol)``: the steps are only that accurate). The status is
    ``stationary_point`` only when the MM converged, every step was certified ``optimal`` by the
    engine and the stationarity test passed (one more warm-started step at the returned point:
    its proven lower bound on the majorizer is within ``10 inner tol`` of the cost, tied
    eigenvalues included, see :func:`specopt.learn._low_rank.mm_stationarity`); otherwise
    ``optimal_inaccurate``.
    """

    _parameter_constraints = {
        "rank": [COUNT],
        "C": [POSITIVE, None],
        "trace_scale": [Interval(Real, 1, None, closed="left")],
        "trace_bound": [POSITIVE, None],
        "max_iter": [COUNT],
        "tol": TOL,
        "restarts": [Interval(Integral, 0, None, closed="left")],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
        "solver": [str, None],
        "solver_options": SOLVER_OPTIONS,
        "verbose": VERBOSE,
    }

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

    @fit_context()
    def fit(self, X: Any, y: Any = None) -> SpectralMatrixCompletion:
        import specopt
        from specopt.atoms import mve_cost

        M, mask = _check_partial(self, X)
        m, n = M.shape
        d = self.rank
        if not d < m + n:
            raise ValueError(f"rank must be an integer in [1, {m + n - 1}], got {d!r}")
        if self._use_low_rank(m + n, self.C is None and not self.restarts):
            if self.restarts:
                raise ValueError("restarts are not supported with the low-rank engine")
            return self._fit_low_rank(X, M, mask)
        t0 = time.perf_counter()
        # the conic path throughout (also its nuclear-norm start)
        base = NuclearNormCompletion(C=self.C, solver=self._conic_solver(m + n)[0],
                                     solver_options=self.solver_options,
                                     verbose=self.verbose).fit(X)
        tau = self._tau(base.nuclear_norm_)
        Yv, Zv, Xv, K, cons, penalty = self._model(np.nan_to_num(M), mask)
        cons.append(cp.trace(K) <= tau)
        prob = cp.Problem(cp.Minimize(mve_cost(K, d) + penalty), cons)
        Kb = base.kernel_
        Yv.value, Zv.value, Xv.value = 0.5 * (Kb[:m, :m] + Kb[:m, :m].T), 0.5 * (
            Kb[m:, m:] + Kb[m:, m:].T), base.completion_
        solver, opts = self._conic_solver(m + n)
        specopt.solve(prob, route="iterated_sdp", solver=solver, max_iters=self.max_iter,
                      tol=self.tol, restarts=self.restarts, seed=self.random_state,
                      verbose=bool(self.verbose), **opts)
        self.fit_time_ = time.perf_counter() - t0
        cert = specopt.certificate(prob)
        self._store(np.asarray(Xv.value), np.asarray(K.value), cert, mask)
        self.baseline_ = base
        self.trace_bound_ = float(tau)
        self.history_ = cert.history
        self.n_iter_ = cert.iterations
        return self

    def _fold_in_rank(self) -> int | None:
        return int(self.rank)

    def _tau(self, nuclear_norm: float) -> float:
        if self.trace_bound is not None:
            return float(self.trace_bound)
        return float(self.trace_scale * 2.0 * nuclear_norm)

    def _fit_low_rank(self, X: Any, M: np.ndarray, mask: np.ndarray) -> SpectralMatrixCompletion:
        """Majorize-minimize on the factor from the nuclear-norm factor (class docstring)."""
        from specopt.solvers.sdp import SymOp, low_rank_mm

        m, n = M.shape
        d = self.rank
        opts = self._low_rank_opts()
        if "max_iters" in opts:
            raise ValueError(
                "solver_options['max_iters'] is ambiguous on the low-rank path: max_iter caps the "
                "majorize-minimize steps; cap each engine solve with solver_options="
                "{'time_limit': seconds}")
        t0 = time.perf_counter()
        base = NuclearNormCompletion(solver=LOW_RANK, solver_options=opts,
                                     verbose=self.verbose).fit(X)
        tau = self._tau(base.nuclear_norm_)
        inner_tol = opts.pop("tol")
        rows, b = _entry_rows(M, mask)
        opts.setdefault("method", _engine_method(rows.m))
        N = m + n
        C0, beta = SymOp.identity(N), np.full(d, -2.0)
        cb = progress_callback(self.verbose, "low_rank_sdp", f"SpectralMatrixCompletion: "
                               f"{m} x {n}, {rows.m} observed, rank {d}", "MM step")
        # the balanced nuclear-norm factor is a saddle of the cost (module docstring): start
        # from the same X with the blocks rescaled [a F_Y; F_Z / a]
        # from [a F_Y; F_Z / a]; F truncated to its numerical rank (an interior-point factor
        # has full width with eigenvalues ~1e-9 of the largest: they only slow the steps)
        U, sv, _ = np.linalg.svd(base.factor_, full_matrices=False)
        keep = max(1, int(np.sum(sv**2 > 1e-8 * sv[0] ** 2))) if sv.size and sv[0] > 0 else 1
        F0 = U[:, :keep] * sv[:keep]
        a = np.sqrt(_UNBALANCE)
        Y0 = np.r_[a * F0[:m], F0[m:] / a]
        res = low_rank_mm(C0, beta, rows, b, Y0, trace_bound=tau,
                          tol=max(float(self.tol), inner_tol),
                          tol_K=max(1e-4, 10 * inner_tol), max_iters=self.max_iter,
                          monotone_tol=max(1e-4, 10 * inner_tol), inner_tol=inner_tol,
                          callback=cb, stationarity_tol=max(10 * inner_tol, 1e-6),
                          **{"inexact": False, **opts})  # few MM steps here: exact ones
        stat = mm_stationarity(C0, beta, rows, b, res, max(10 * inner_tol, 1e-6),
                               trace_bound=tau, seed=self.random_state or 0, **opts)
        cert = mm_certificate(res, stat, trace_bound=tau, inner_tol=inner_tol,
                              nuclear_norm_status=base.certificate_.status)
        finish_progress(cb, cert)
        self.fit_time_ = time.perf_counter() - t0
        self._store(*_from_factor(res.Y, m), cert, mask, factor=res.Y)
        self.baseline_ = base
        self.trace_bound_ = tau
        self.history_ = cert.history
        self.n_iter_ = res.iterations
        return self
