"""Information-theoretic metric learning (ITML) and its kernel and low-rank forms.

Each learner solves (``specopt.solvers.bregman``, cyclic Bregman projections with a dual
certificate)::

    min_{W > 0, xi > 0}  D_ld(W, W0) + gamma * sum_c (xi_c/xi0_c - log(xi_c/xi0_c) - 1)
    s.t.  (x_i - x_j)^T W (x_i - x_j) <= xi_c   for similar pairs   (xi0_c = u)
          (x_i - x_j)^T W (x_i - x_j) >= xi_c   for dissimilar pairs (xi0_c = l)

gamma = inf gives hard constraints. Conventions follow metric-learn: ``get_mahalanobis_matrix()``
returns W, ``components_`` is L with W = L^T L, ``transform(X) = X L^T``, ``pair_distance`` is the
(unsquared) distance sqrt((x - x')^T W (x - x')), ``pair_score = -pair_distance``,
``get_metric()`` a function of two points.

Bounds. ``bounds=None`` takes u, l = the ``bound_percentiles`` (5th, 95th) percentiles of the
SQUARED prior distances between the distinct points of the constraints, i.e. in the units of the
constraint itself. metric-learn (<= 0.7) takes percentiles of the UNSQUARED distances and uses
them as bounds on squared distances; pass ``bounds=(u, l)`` explicitly to reproduce it.

* :class:`ITML`: weakly supervised, ``fit(pairs, y)`` with pairs of shape (n_pairs, 2, d) (or
  (n_pairs, 2) indices into ``preprocessor``) and y in {+1, -1}; on 2-D points with class labels
  it draws pairs as :class:`ITMLSupervised` (so it sits in a scikit-learn Pipeline).
* :class:`ITMLSupervised`: ``fit(X, y)``; draws ``n_constraints`` similar and as many dissimilar
  pairs from the labels.
* :class:`KernelITML`: ``fit(X, y)`` with a kernel k0; learns k(z, z') = k0(z, z') +
  k0(z, X_S) M k0(X_S, z') (Theorem 3.1 of Jain et al. 2012); ``kernel_matrix(Z1, Z2)`` and
  ``pairwise_distances(Z1, Z2)`` for new points (``kernel`` is the constructor parameter);
  ``transform`` is the kernel expansion on X_S (class docstring).
* :class:`LowRankITML`: ``fit(X, y)``; W = I + U (F - I) U^T with a basis U of ``rank`` columns
  (top singular vectors, class means or k-means centres): by default ITML with slack on the
  projected differences; ``gamma=np.inf`` the exact hard-constraint problem.

Every learner checks its parameter table (``_parameter_constraints``) first: a bad value (NaN,
inf where not meant, out of range) raises a ``ValueError`` naming it before any solve.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.cluster import KMeans
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_array, check_is_fitted, check_X_y, validate_data

from ..solvers.bregman import itml_kernel, itml_linear, itml_lowrank
from ._base import (
    COUNT,
    RANDOM_STATE,
    TOL,
    VERBOSE,
    Interval,
    MahalanobisMixin,
    Real,
    StrOptions,
    finish_progress,
    fit_context,
    progress_callback,
    require_y,
    summary_lines,
)

__all__ = ["ITML", "ITMLSupervised", "KernelITML", "LowRankITML", "draw_pairs"]


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------
def draw_pairs(
    y: np.ndarray, n_constraints: int, random_state: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Draw up to ``n_constraints`` similar and as many dissimilar index pairs from labels ``y``.

    Returns ``(pairs, sides)`` with pairs (m, 2) of indices and sides +1 (same label) / -1.
    Pairs are distinct and i != j; fewer are returned when the labels do not allow more.
    """
    rng = check_random_state(random_state)
    y = np.asarray(y)
    n = y.shape[0]
    out, sides = [], []
    for side in (1, -1):
        seen: set[tuple[int, int]] = set()
        tries = 0
        while len(seen) < n_constraints and tries < 20 * n_constraints + 100:
            tries += 1
            i = int(rng.randint(n))
            cand = np.flatnonzero((y == y[i]) if side > 0 else (y != y[i]))
            cand = cand[cand != i]
            if cand.size == 0:
                continue
            j = int(cand[rng.randint(cand.size)])
            key = (min(i, j), max(i, j))
            if key in seen:
                continue
            seen.add(key)
            out.append((i, j))
            sides.append(side)
    if not out:
        raise ValueError(f"could not draw any constraint pair from {n} sample(s) and their labels")
    return np.asarray(out, dtype=np.int64), np.asarray(sides, dtype=float)


def _default_bounds(sq: np.ndarray, percentiles: tuple[float, float]) -> tuple[float, float]:
    """u, l = percentiles of the positive squared distances ``sq``."""
    sq = sq[sq > 0]
    if sq.size == 0:
        raise ValueError("all constrained points coincide: cannot set default bounds")
    u, l = np.percentile(sq, percentiles)
    return float(u), float(l)


def _check_bounds(bounds) -> tuple[float, float]:
    b = np.asarray(bounds, dtype=float).ravel()
    if b.shape != (2,) or not np.all(np.isfinite(b)):
        raise ValueError("bounds must be (u, l): two finite numbers")
    if np.any(b <= 0):
        raise ValueError(f"bounds must be > 0 (squared distances), got {tuple(b)}")
    return float(b[0]), float(b[1])


def _prior_matrix(prior, X: np.ndarray) -> np.ndarray:
    d = X.shape[1]
    if isinstance(prior, str):  # "identity" or "covariance" (the parameter table)
        if prior == "identity":
            return np.eye(d)
        C = np.atleast_2d(np.cov(X, rowvar=False))
        return np.linalg.pinv(C, hermitian=True) + 1e-10 * np.eye(d)
    W0 = np.asarray(prior, dtype=float)
    if W0.shape != (d, d):
        raise ValueError(f"prior must be {d} x {d}, got {W0.shape}")
    if not np.all(np.isfinite(W0)):
        raise ValueError("prior contains NaN or inf entries")
    scale = max(1.0, float(np.max(np.abs(W0))))
    if np.max(np.abs(W0 - W0.T)) > 1e-8 * scale:
        raise ValueError("prior must be a symmetric matrix")
    lam_min = float(np.linalg.eigvalsh(0.5 * (W0 + W0.T))[0])
    if lam_min <= 1e-12 * scale:
        raise ValueError(
            f"prior must be symmetric positive definite (ITML's LogDet divergence needs W0 > 0); "
            f"its smallest eigenvalue is {lam_min:.3g}"
        )
    return W0


def _sides(y) -> np.ndarray:
    y = np.asarray(y, dtype=float).ravel()
    if np.any(np.isnan(y)):
        raise ValueError("pair labels y contain NaN")
    if not np.all(np.isin(y, (-1.0, 1.0))):
        raise ValueError("pair labels y must be +1 (similar) or -1 (dissimilar)")
    return y


def _status_warning(res, what: str) -> None:
    if res.status == "infeasible":
        why = res.extra.get("reason", "a Farkas certificate was found")
        raise ValueError(
            f"{what}: the hard constraints admit no positive definite metric ({why}); loosen "
            "the bounds or use a finite gamma"
        )
    if res.status != "optimal":
        warnings.warn(
            f"{what} stopped before certified convergence: relative gap {res.gap:.2e}, "
            f"violation {res.max_violation:.2e} after {res.iterations} sweeps",
            UserWarning,
            stacklevel=3,
        )


class _MahalanobisMixin(MahalanobisMixin):
    """metric-learn's API on a learned W (``W_``, ``components_``): see ``_base``."""

    _matrix_attr = "W_"

    def _set_metric(self, W: np.ndarray) -> None:
        W = 0.5 * (W + W.T)
        self.W_ = W
        ev, U = np.linalg.eigh(W)
        self.components_ = (U * np.sqrt(np.maximum(ev, 0.0))).T  # W = L^T L


def _summary(res) -> str:
    return summary_lines(("status", res.status), ("objective", f"{res.primal:.6g}"),
                         ("bound", f"{res.dual:.6g}"), ("relative gap", f"{res.gap:.3g}"),
                         ("max violation", f"{res.max_violation:.3g}"),
                         ("iterations", res.iterations))


class _ITMLBase(BaseEstimator):
    """The parameters every ITML learner has, and the stages of its fit: the bounds (u, l)
    and one Bregman solve."""

    def __init__(self, gamma: float, n_constraints: int | None, bounds: Any,
                 bound_percentiles: tuple[float, float], tol: float, max_iter: int,
                 random_state: Any, verbose: bool) -> None:
        self.gamma = gamma
        self.n_constraints = n_constraints
        self.bounds = bounds
        self.bound_percentiles = bound_percentiles
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose

    def _targets(self, sides: np.ndarray, squared: Callable[[], np.ndarray]) -> np.ndarray:
        """The target of each pair (u similar, l dissimilar); (u, l) are ``bounds`` or the
        ``bound_percentiles`` of the squared distances ``squared()``, stored as ``bounds_``."""
        if self.bounds is None:
            u, l = _default_bounds(squared(), tuple(self.bound_percentiles))
        else:
            u, l = _check_bounds(self.bounds)
        self.bounds_ = np.array([u, l])
        return np.where(sides > 0, u, l)

    def _bregman(self, solver: Callable, what: str, *args: Any, **options: Any):
        """``solver(*args, tol, max_sweeps, callback, **options)`` with the progress printer
        (header ``what``), RuntimeWarnings of coinciding points (dropped) silenced; an
        infeasible status raises, an uncertified one warns. Stores ``n_iter_``, ``result_``."""
        cb = progress_callback(self.verbose, "bregman", f"{type(self).__name__}: {what}, "
                               f"gamma={self.gamma:g}", "iter")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = solver(*args, tol=self.tol, max_sweeps=self.max_iter, callback=cb, **options)
        finish_progress(cb, _summary(res))
        _status_warning(res, type(self).__name__)
        self.n_iter_ = res.iterations
        self.result_ = res
        return res


def _linear_fit(est, X_pairs_diff, sides, W0, sq_prior):
    b = est._targets(sides, lambda: sq_prior)
    res = est._bregman(itml_linear, f"d={W0.shape[0]}, {len(b)} pairs", X_pairs_diff, b, sides,
                       W0, est.gamma)
    est._set_metric(res.W)
    return est


# --------------------------------------------------------------------------------------------
# ITML on pairs
# --------------------------------------------------------------------------------------------
_BOUNDS = {
    "bounds": ["array-like", None],
    "bound_percentiles": ["array-like"],
    "tol": TOL,
    "max_iter": [COUNT],
    "verbose": VERBOSE,
}
_DRAW = {"n_constraints": [COUNT, None], "random_state": RANDOM_STATE}
#: ``gamma``: slack weight, finite > 0, or ``np.inf`` for hard constraints (never NaN)
_GAMMA = [Interval(Real, 0, math.inf, closed="right")]
_PRIOR = [StrOptions({"identity", "covariance"}), "array-like"]


class ITML(_MahalanobisMixin, _ITMLBase):
    """ITML on labelled pairs (module docstring), or on points with class labels.

    ``fit(X, y)`` takes, as ``X``:

    * pairs, shape (n_pairs, 2, n_features), with ``y`` in {+1 (similar), -1 (dissimilar)};
    * with ``preprocessor`` (an (n, d) array): index pairs, shape (n_pairs, 2), and ``y`` +-1;
    * points, shape (n_samples, n_features), with class labels ``y``: ``n_constraints`` similar
      and as many dissimilar pairs are drawn from the labels (:class:`ITMLSupervised`'s rule),
      which is how ITML sits in a scikit-learn Pipeline.

    Parameters: ``gamma`` slack weight (``np.inf``: hard constraints); ``prior`` W0
    ("identity", "covariance" = inverse covariance, or a matrix); ``bounds`` (u, l) in squared
    units or None; ``bound_percentiles`` for the default bounds; ``tol`` relative duality gap
    and violation (default 1e-4: held-out 1-NN accuracy stops moving at 1e-3 on wine and breast
    cancer, docs/learners.md; ``result_`` reports the gap and violation reached); ``max_iter``
    sweeps; ``preprocessor`` an (n, d) array when pairs are indices; ``n_constraints`` and
    ``random_state`` for pairs drawn from class labels; ``verbose`` prints the Bregman sweeps'
    progress.
    """

    _parameter_constraints = {"gamma": _GAMMA, "prior": _PRIOR, **_BOUNDS,
                              "preprocessor": ["array-like", None], **_DRAW}

    def __init__(
        self,
        gamma: float = 1.0,
        prior: Any = "identity",
        bounds: Any = None,
        bound_percentiles: tuple[float, float] = (5.0, 95.0),
        tol: float = 1e-4,
        max_iter: int = 100_000,
        preprocessor: Any = None,
        n_constraints: int | None = None,
        random_state: Any = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(gamma, n_constraints, bounds, bound_percentiles, tol, max_iter,
                         random_state, verbose)
        self.prior = prior
        self.preprocessor = preprocessor

    def _pairs(self, pairs) -> np.ndarray:
        if self.preprocessor is not None:
            Xp = check_array(self.preprocessor, input_name="preprocessor")
            P = check_array(pairs, ensure_2d=True, dtype=None, input_name="pairs")
            if P.shape[1] != 2 or P.dtype.kind not in "iu":
                raise ValueError("with a preprocessor, pairs must be (n_pairs, 2) integer indices")
            if P.min() < 0 or P.max() >= Xp.shape[0]:
                raise ValueError(f"pair indices must lie in [0, {Xp.shape[0]})")
            return Xp[P]
        P = check_array(pairs, allow_nd=True, dtype=float, input_name="pairs")
        if P.ndim != 3 or P.shape[1] != 2:
            raise ValueError(f"pairs must have shape (n_pairs, 2, n_features), got {P.shape}")
        return P

    @fit_context()
    def fit(self, X, y) -> ITML:
        """Fit on pairs (3-D ``X`` or index pairs with ``preprocessor``) or on points with class
        labels (2-D ``X``): class docstring."""
        if self.preprocessor is None and (sp.issparse(X) or np.asarray(X).ndim != 3):
            return _fit_points(self, X, y)
        P = self._pairs(X)
        sides = _sides(y)
        if sides.shape[0] != P.shape[0]:
            raise ValueError("pairs and y have different lengths")
        pts = np.unique(P.reshape(-1, P.shape[2]), axis=0)
        W0 = _prior_matrix(self.prior, pts)
        self.n_features_in_ = P.shape[2]
        iu = np.triu_indices(pts.shape[0], 1)
        sq = _sq_dists(pts, W0)[iu]
        return _linear_fit(self, P[:, 0] - P[:, 1], sides, W0, sq)


def _sq_dists(Z: np.ndarray, W0: np.ndarray) -> np.ndarray:
    """All squared distances (z_a - z_b)^T W0 (z_a - z_b)."""
    G = Z @ W0 @ Z.T
    g = np.diag(G)
    return np.maximum(g[:, None] + g[None, :] - 2 * G, 0.0)


def _fit_points(est, X, y):
    """ITML on pairs drawn from class labels (ITMLSupervised, ITML on 2-D X)."""
    X = validate_data(est, X, reset=True)
    X, y, pairs, sides = _constraints(est, X, y)
    W0 = _prior_matrix(est.prior, X)
    idx = np.unique(pairs)
    iu = np.triu_indices(idx.size, 1)
    sq = _sq_dists(X[idx], W0)[iu]
    est.pairs_, est.sides_ = pairs, sides
    return _linear_fit(est, X[pairs[:, 0]] - X[pairs[:, 1]], sides, W0, sq)


def _constraints(est, X, y):
    """Checked (X, y) and the pairs drawn from the labels (``est.n_constraints`` of each side,
    default 20 n_classes^2 as metric-learn)."""
    require_y(est, y)
    y = np.asarray(y)
    if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):  # before sklearn casts it
        raise ValueError("y contains NaN or infinity: class labels must be finite")
    kind = type_of_target(y, input_name="y", raise_unknown=True)
    if kind not in ("binary", "multiclass"):
        raise ValueError(f"y must hold class labels (binary or multiclass), got {kind} target")
    X, y = check_X_y(X, y, dtype="numeric")
    n_classes = np.unique(y).size
    nc = est.n_constraints if est.n_constraints is not None else 20 * n_classes**2
    pairs, sides = draw_pairs(y, int(nc), est.random_state)
    return X, y, pairs, sides


# --------------------------------------------------------------------------------------------
# Supervised
# --------------------------------------------------------------------------------------------
class _SupervisedBase(_ITMLBase):
    def _constraints(self, X, y):
        return _constraints(self, X, y)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


class ITMLSupervised(_MahalanobisMixin, _SupervisedBase):
    """ITML from class labels: ``n_constraints`` similar and dissimilar pairs drawn at random
    (default 20 * n_classes^2 each, as metric-learn), then :class:`ITML`'s problem."""

    _parameter_constraints = {"gamma": _GAMMA, **_DRAW, "prior": _PRIOR, **_BOUNDS}

    def __init__(
        self,
        gamma: float = 1.0,
        n_constraints: int | None = None,
        prior: Any = "identity",
        bounds: Any = None,
        bound_percentiles: tuple[float, float] = (5.0, 95.0),
        tol: float = 1e-4,
        max_iter: int = 100_000,
        random_state: Any = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(gamma, n_constraints, bounds, bound_percentiles, tol, max_iter,
                         random_state, verbose)
        self.prior = prior

    @fit_context()
    def fit(self, X, y) -> ITMLSupervised:
        return _fit_points(self, X, y)


# --------------------------------------------------------------------------------------------
# Kernel ITML
# --------------------------------------------------------------------------------------------
class KernelITML(TransformerMixin, _SupervisedBase):
    """Kernel ITML (inductive): learns k(z, z') = k0(z, z') + k0(z, X_S) M k0(X_S, z').

    ``kernel`` is "rbf", "linear", "poly" (with ``kernel_params``, passed to
    :func:`sklearn.metrics.pairwise.pairwise_kernels`) or a callable k0(A, B) -> matrix.
    The problem is min D_ld(K, K0) [+ gamma burg] over the training kernel, solved in kernel
    form on the points used by a constraint (support S, stored as ``X_support_``, with ``M_``).
    Bounds are percentiles of the squared kernel distances k0(x,x) + k0(y,y) - 2 k0(x,y).

    ``transform(Z)`` is the kernel expansion on the support, so that a Pipeline
    (``KernelITML`` then ``KNeighborsClassifier``) classifies in the learned kernel distance.
    With ``K_S = k0(X_S, X_S) = V diag(w) V^T`` (eigenvalues ``w > 1e-10 max w`` kept, r of
    them) and ``a(z) = k0(X_S, z)``::

        transform(z) = G^{1/2} diag(w)^{-1/2} V^T a(z)  in R^r,
        G = I_r + diag(w)^{1/2} V^T M V diag(w)^{1/2}   (PSD: K = K0 + K0 M K0 is)

    so ``||transform(z) - transform(z')||^2 = (a - a')^T (K_S^+ + P M P) (a - a')`` (P the
    projector on range K_S): the learned kernel distance of the Nystrom approximation
    ``k0(z, z') ~ a(z)^T K_S^+ a(z')`` of k0 on X_S. It equals the learned distance
    (:meth:`pairwise_distances`) exactly when the feature maps of z, z' lie in the span of those
    of X_S (every support point; every point for the linear kernel when X_S spans the data);
    otherwise the component outside that span, ``k0(z, z) - a^T K_S^+ a``, which learning
    leaves unchanged, is dropped. ``expansion_`` holds ``V diag(w)^{-1/2} G^{1/2}``
    (|S| x r): ``transform(Z) = k0(Z, X_S) @ expansion_``.
    """

    _parameter_constraints = {
        "kernel": [StrOptions({"rbf", "linear", "poly"}), callable],
        "kernel_params": [dict, None],
        "gamma": _GAMMA,
        **_DRAW,
        **_BOUNDS,
    }

    def __init__(
        self,
        kernel: Any = "rbf",
        kernel_params: dict | None = None,
        gamma: float = 1.0,
        n_constraints: int | None = None,
        bounds: Any = None,
        bound_percentiles: tuple[float, float] = (5.0, 95.0),
        tol: float = 1e-4,
        max_iter: int = 100_000,
        random_state: Any = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(gamma, n_constraints, bounds, bound_percentiles, tol, max_iter,
                         random_state, verbose)
        self.kernel = kernel
        self.kernel_params = kernel_params

    def _k0(self, A, B) -> np.ndarray:
        if callable(self.kernel):
            return np.asarray(self.kernel(A, B), dtype=float)
        return pairwise_kernels(A, B, metric=self.kernel, **(self.kernel_params or {}))

    @fit_context()
    def fit(self, X, y) -> KernelITML:
        X = validate_data(self, X, reset=True)
        X, y, pairs, sides = self._constraints(X, y)
        support, inv = np.unique(pairs.ravel(), return_inverse=True)
        Xs = X[support]
        K0 = self._k0(Xs, Xs)
        K0 = 0.5 * (K0 + K0.T)
        local = inv.reshape(-1, 2).astype(np.int64)
        b = self._targets(sides, lambda: _sq_dists_of_kernel(K0))
        res = self._bregman(itml_kernel, f"{len(Xs)} support points, {len(b)} pairs", K0, local,
                            b, sides, self.gamma, full_kernel=False)
        # M lives on the points that ended up in a constraint (res.support indexes Xs)
        self.X_support_ = Xs[res.support]
        self.M_ = res.M
        self.expansion_ = _kernel_expansion(self._k0(self.X_support_, self.X_support_), res.M)
        self.pairs_, self.sides_ = pairs, sides
        return self

    def transform(self, X) -> np.ndarray:
        """The kernel expansion ``k0(X, X_S) @ expansion_`` (class docstring)."""
        check_is_fitted(self, "expansion_")
        X = validate_data(self, X, reset=False)
        return self._k0(X, self.X_support_) @ self.expansion_

    def kernel_matrix(self, Z1, Z2=None) -> np.ndarray:
        """Learned kernel k(Z1, Z2) = k0(Z1, Z2) + k0(Z1, X_S) M k0(X_S, Z2)."""
        check_is_fitted(self, "M_")
        Z1 = validate_data(self, Z1, reset=False)
        Z2 = Z1 if Z2 is None else validate_data(self, Z2, reset=False)
        A = self._k0(Z1, self.X_support_)
        B = A if Z2 is Z1 else self._k0(Z2, self.X_support_)
        return self._k0(Z1, Z2) + A @ self.M_ @ B.T

    def pairwise_distances(self, Z1, Z2=None, squared: bool = False) -> np.ndarray:
        """Learned distances sqrt(k(z,z) + k(z',z') - 2 k(z,z')) between rows of Z1 and Z2."""
        check_is_fitted(self, "M_")
        Z1 = validate_data(self, Z1, reset=False)
        Z2v = Z1 if Z2 is None else validate_data(self, Z2, reset=False)
        A1 = self._k0(Z1, self.X_support_)
        A2 = A1 if Z2 is None else self._k0(Z2v, self.X_support_)
        d1 = np.array([self._k0(z[None], z[None])[0, 0] for z in Z1]) + np.einsum(
            "ij,jk,ik->i", A1, self.M_, A1
        )
        d2 = (
            d1
            if Z2 is None
            else np.array([self._k0(z[None], z[None])[0, 0] for z in Z2v])
            + np.einsum("ij,jk,ik->i", A2, self.M_, A2)
        )
        K12 = self._k0(Z1, Z2v) + A1 @ self.M_ @ A2.T
        D = np.maximum(d1[:, None] + d2[None, :] - 2 * K12, 0.0)
        return D if squared else np.sqrt(D)


def _sq_dists_of_kernel(K: np.ndarray) -> np.ndarray:
    """The squared kernel distances ``k(a, a) + k(b, b) - 2 k(a, b)`` of the pairs a < b."""
    g = np.diag(K)
    sq = np.maximum(g[:, None] + g[None, :] - 2 * K, 0.0)
    return sq[np.triu_indices(len(g), 1)]


def _kernel_expansion(Ks: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``V diag(w)^{-1/2} G^{1/2}`` of KernelITML's docstring (|S| x r)."""
    w, V = np.linalg.eigh(0.5 * (Ks + Ks.T))
    keep = w > 1e-10 * max(float(w.max(initial=0.0)), 1e-300)
    w, V = w[keep], V[:, keep]
    sw = np.sqrt(w)
    G = np.eye(w.size) + sw[:, None] * (V.T @ M @ V) * sw[None, :]
    g, Q = np.linalg.eigh(0.5 * (G + G.T))
    Gh = (Q * np.sqrt(np.maximum(g, 0.0))) @ Q.T
    return (V / sw) @ Gh


# --------------------------------------------------------------------------------------------
# Low-rank ITML
# --------------------------------------------------------------------------------------------
def lowrank_basis(X: np.ndarray, y: np.ndarray, rank: int, basis: str, random_state=None):
    """Orthonormal d x k basis: top singular vectors of the centred data, class means, or
    k-means centres (Sec. 3.6 of Jain et al. 2012)."""
    d = X.shape[1]
    if basis == "svd":
        Xc = X - X.mean(axis=0)
        _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
        B = Vt[: min(rank, Vt.shape[0])].T
    elif basis == "class_means":
        B = np.stack([X[y == c].mean(axis=0) for c in np.unique(y)], axis=1)
    elif basis == "clusters":
        km = KMeans(n_clusters=min(rank, X.shape[0]), n_init=3, random_state=random_state).fit(X)
        B = km.cluster_centers_.T
    else:
        raise ValueError(f"basis must be 'svd', 'class_means' or 'clusters', got {basis!r}")
    B = B[:, : min(rank, d)] if basis != "svd" else B
    U, s, _ = np.linalg.svd(B, full_matrices=False)
    U = U[:, s > 1e-10 * max(s.max(initial=0.0), 1e-300)]
    k = min(rank, d)
    if U.shape[1] < k:
        # centres of centred data are linearly dependent: complete the basis with the top
        # singular directions of the data outside span(U)
        R = X - X.mean(axis=0)
        R = R - (R @ U) @ U.T
        _, sr, Vt = np.linalg.svd(R, full_matrices=False)
        extra = Vt[sr > 1e-10 * max(sr.max(initial=0.0), 1e-300)][: k - U.shape[1]].T
        U = np.linalg.qr(np.hstack([U, extra]))[0]
    if U.shape[1] == 0:
        raise ValueError("the low-rank basis is empty (all basis vectors vanish)")
    return U


class LowRankITML(_MahalanobisMixin, _SupervisedBase):
    """ITML in a rank-``rank`` subspace: W = I + U (F - I) U^T with U orthonormal (d x k).

    ``basis``: "svd" (top ``rank`` right singular vectors of the centred data), "class_means",
    "clusters" (k-means centres, ``rank`` clusters); U is orthonormalized (``basis_``) and, when
    the centres are linearly dependent (centred data), completed to ``rank`` columns with the top
    singular directions of the data outside their span.

    * ``gamma`` finite (default 1.0, as :class:`ITML`): F (k x k) is ITML's metric, with slack,
      of the PROJECTED differences ``U^T (x_i - x_j)``, with default bounds the
      ``bound_percentiles`` of the projected squared distances between the constrained points;
      the complement of span U keeps the Euclidean metric. Always feasible, and a k x k problem
      (fast for any d). ``bounds`` are then in projected squared units.
    * ``gamma=np.inf``: the exact restricted problem with hard constraints on the full squared
      distances, ``(x_i - x_j)^T W (x_i - x_j) <= u`` / ``>= l`` (bounds from full distances).
      It is often infeasible (the part of ``x_i - x_j`` outside span U cannot shrink):
      ``ValueError`` then (loosen ``bounds`` / ``bound_percentiles`` or use a finite gamma).

    ``tol`` (default 1e-4 as ITML) is the relative gap / violation of the Bregman solve
    (``result_``; with finite gamma ``result_.W`` is F).
    """

    _parameter_constraints = {
        "rank": [COUNT],
        "basis": [StrOptions({"svd", "class_means", "clusters"})],
        "gamma": _GAMMA,
        **_DRAW,
        **_BOUNDS,
    }

    def __init__(
        self,
        rank: int = 5,
        basis: str = "svd",
        gamma: float = 1.0,
        n_constraints: int | None = None,
        bounds: Any = None,
        bound_percentiles: tuple[float, float] = (5.0, 95.0),
        tol: float = 1e-4,
        max_iter: int = 100_000,
        random_state: Any = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(gamma, n_constraints, bounds, bound_percentiles, tol, max_iter,
                         random_state, verbose)
        self.rank = rank
        self.basis = basis

    @fit_context()
    def fit(self, X, y) -> LowRankITML:
        X = validate_data(self, X, reset=True)
        X, y, pairs, sides = self._constraints(X, y)
        U = lowrank_basis(X, y, int(self.rank), self.basis, self.random_state)
        hard = math.isinf(self.gamma)
        idx = np.unique(pairs)
        Z = X[idx] if hard else X[idx] @ U  # bounds in the units of the constraints
        b = self._targets(
            sides, lambda: _sq_dists(Z, np.eye(Z.shape[1]))[np.triu_indices(idx.size, 1)])
        V = X[pairs[:, 0]] - X[pairs[:, 1]]
        what = f"rank {U.shape[1]}, {len(b)} pairs"
        if hard:
            res = self._bregman(itml_lowrank, what, V, b, sides, U)
        else:
            res = self._bregman(itml_linear, what, V @ U, b, sides, None, self.gamma)
        self.basis_ = U
        W = res.W if hard else np.eye(X.shape[1]) + U @ (res.W - np.eye(U.shape[1])) @ U.T
        self._set_metric(W)
        self.pairs_, self.sides_ = pairs, sides
        return self
