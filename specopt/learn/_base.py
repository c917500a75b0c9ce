"""What every learner in :mod:`specopt.learn` shares.

* Parameter tables: each estimator declares ``_parameter_constraints`` (``{name: [constraint,
  ...]}`` in scikit-learn's vocabulary: :class:`Interval`, :class:`StrOptions`,
  :class:`HasMethods`, None, a type, ``callable``, "array-like", "boolean", "verbose",
  "random_state"), checked by :func:`check_params` as the first step of every ``fit``
  (:func:`fit_context`); a bad value raises :class:`InvalidParameterError` naming it.
* :func:`fit_context`: that check, and the thread limit around fits that call a solver.
* :func:`labelled_data`, :func:`require_y`, :func:`triplets_given`, :func:`reject_dask_nan`:
  input checks shared by several learners.
* :class:`SDPSolverMixin`: ``solver`` / ``solver_options`` of the learners that solve SDPs
  (embeddings, completion), :func:`solve_certified` for their conic solves.
* :func:`closed_form_certificate`, :func:`summary_lines`, :func:`progress_callback` /
  :func:`finish_progress`: the result and progress of a fit.
* :class:`MahalanobisMixin` (ITML*, RelativeComparisonMetric, PSDBoostMetric).

A fitted Mahalanobis learner has ``components_`` L (r x d) with learned squared distances
``d(x, x')^2 = (x - x')^T M (x - x')``, ``M = L^T L``. The API follows metric-learn:
``get_mahalanobis_matrix()`` (M), ``transform(X) = X L^T`` (Euclidean distances there are the
learned ones), ``pair_distance(pairs)`` (unsquared), ``pair_score = -pair_distance`` and
``get_metric()`` (a function of two points). Inputs are checked once, here, with scikit-learn's
``validate_data`` (wrong number of features, NaN/inf, non-numeric data: ``ValueError`` saying
what was expected).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, TypeVar

import cvxpy as cp
import numpy as np
from sklearn.base import TransformerMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._progress import Progress, progress_for, take_current
from .._threads import limited
from ..certificate import Certificate
from ..solve import certificate, solve
from ._low_rank import LOW_RANK_TOL

_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = [
    "COUNT",
    "NONNEG",
    "POSITIVE",
    "RANDOM_STATE",
    "SDPSolverMixin",
    "SOLVER_OPTIONS",
    "TOL",
    "VERBOSE",
    "HasMethods",
    "Integral",
    "Interval",
    "InvalidParameterError",
    "MahalanobisMixin",
    "Real",
    "StrOptions",
    "check_params",
    "closed_form_certificate",
    "components_from_matrix",
    "finish_progress",
    "fit_context",
    "labelled_data",
    "progress_callback",
    "reject_dask_nan",
    "require_y",
    "solve_certified",
    "summary_lines",
    "triplets_given",
]


# --------------------------------------------------------------------------------------------
# Parameter tables: scikit-learn's ``_parameter_constraints`` vocabulary, checked here
# (scikit-learn's own validator, sklearn.utils._param_validation, is private)
# --------------------------------------------------------------------------------------------
class InvalidParameterError(ValueError, TypeError):
    """A constructor parameter outside its table: a ``ValueError`` and a ``TypeError``, as
    scikit-learn's, with the same message ("The 'C' parameter of PSDBoostMetric must be ...")."""


@dataclass(frozen=True)
class Interval:
    """Numbers of ``type`` (``Integral`` or ``Real``) in the interval from ``left`` to ``right``
    (None: unbounded), ``closed`` "left", "right", "both" or "neither". NaN is never inside, and
    an infinite end is inside only when given as a number and closed (``Interval(Real, 0,
    math.inf, closed="right")`` holds inf; ``Interval(Real, 0, None, ...)`` does not)."""

    type: type
    left: float | None
    right: float | None
    closed: str = field(kw_only=True)

    def accepts(self, value: Any) -> bool:
        if not isinstance(value, self.type):
            return False
        if not isinstance(value, Integral) and math.isnan(value):
            return False
        lo = -math.inf if self.left is None else self.left
        hi = math.inf if self.right is None else self.right
        above = value >= lo if self.closed in ("left", "both") else value > lo
        below = value <= hi if self.closed in ("right", "both") else value < hi
        return bool(above and below)

    def __str__(self) -> str:
        real = self.type is not Integral
        lo = "-inf" if self.left is None else float(self.left) if real else self.left
        hi = "inf" if self.right is None else float(self.right) if real else self.right
        return (f"{'a float' if real else 'an int'} in the range "
                f"{'[' if self.closed in ('left', 'both') else '('}{lo}, "
                f"{hi}{']' if self.closed in ('right', 'both') else ')'}")


class StrOptions:
    """One of a set of strings."""

    def __init__(self, options: Iterable[str]) -> None:
        self.options = frozenset(options)

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.options

    def __str__(self) -> str:
        return f"a str among {{{', '.join(repr(o) for o in sorted(self.options))}}}"


class HasMethods:
    """Any object with these (callable) methods, e.g. ``HasMethods(["integers"])`` for a numpy
    ``Generator``."""

    def __init__(self, methods: Iterable[str]) -> None:
        self.methods = tuple(methods)

    def accepts(self, value: Any) -> bool:
        return all(callable(getattr(value, m, None)) for m in self.methods)

    def __str__(self) -> str:
        return f"an object implementing {' and '.join(repr(m) for m in self.methods)}"


@dataclass(frozen=True)
class _Rule:
    """A named constraint of the vocabulary (None, a type, ``callable``, "array-like", ...)."""

    test: Callable[[Any], bool]
    text: str

    def accepts(self, value: Any) -> bool:
        return bool(self.test(value))

    def __str__(self) -> str:
        return self.text


def _is_array_like(value: Any) -> bool:
    """scikit-learn's "array-like": has a length, a shape or ``__array__``, and is not a scalar
    (a string is not array-like)."""
    return (hasattr(value, "__len__") or hasattr(value, "shape")
            or hasattr(value, "__array__")) and not np.isscalar(value)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool | np.bool_)


_SEED = Interval(Integral, 0, 2**32 - 1, closed="both")
_NAMED = {
    "array-like": _Rule(_is_array_like, "an array-like"),
    "boolean": _Rule(_is_bool, "an instance of 'bool' or an instance of 'numpy.bool'"),
    "verbose": _Rule(lambda v: _is_bool(v) or Interval(Integral, 0, None, closed="left")
                     .accepts(v), "an int in the range [0, inf) or a bool"),
    "random_state": _Rule(lambda v: v is None or isinstance(v, np.random.RandomState)
                          or _SEED.accepts(v), f"{_SEED}, an instance of "
                          "'numpy.random.RandomState' or None"),
}


def _rule(constraint: Any) -> Any:
    """The constraint object for one entry of a table (scikit-learn's shorthands: None, a
    type, ``callable``, "array-like", "boolean", "verbose", "random_state")."""
    if constraint is None:
        return _Rule(lambda v: v is None, "None")
    if constraint is callable:
        return _Rule(callable, "a callable")
    if isinstance(constraint, type):
        return _Rule(lambda v: isinstance(v, constraint),
                     f"an instance of {constraint.__name__!r}")
    if isinstance(constraint, str):
        return _NAMED[constraint]
    return constraint


#: Shared parameter constraints.
POSITIVE = Interval(Real, 0, None, closed="neither")  # finite and > 0: NaN and inf rejected
NONNEG = Interval(Real, 0, None, closed="left")
TOL = [POSITIVE]
COUNT = Interval(Integral, 1, None, closed="left")
VERBOSE = ["verbose"]
RANDOM_STATE = ["random_state"]  # None, an int or a numpy RandomState (check_random_state)
SOLVER_OPTIONS = [dict, None]


def check_params(est: Any) -> None:
    """Check ``est``'s constructor parameters against its table ``_parameter_constraints``
    (``{name: [constraint, ...]}``: a value is valid when one constraint accepts it).

    Raises :class:`InvalidParameterError` naming the parameter, what it must be and the value
    given, before any solve: NaN and infinite numbers fall outside every interval here
    (``Interval(Real, 0, None)`` is finite; ``gamma=np.inf`` is allowed by ITML's table
    explicitly). A parameter without an entry is not checked.
    """
    table = type(est)._parameter_constraints
    for name, value in est.get_params(deep=False).items():
        if name not in table:
            continue
        rules = [_rule(c) for c in table[name]]
        if any(r.accepts(value) for r in rules):
            continue
        what = str(rules[0]) if len(rules) == 1 else (
            f"{', '.join(str(r) for r in rules[:-1])} or {rules[-1]}")
        raise InvalidParameterError(f"The {name!r} parameter of {type(est).__name__} must be "
                                    f"{what}. Got {value!r} instead.")


def fit_context(threads: bool = True) -> Callable[[_F], _F]:
    """Decorator for a learner's fitting method: :func:`check_params` first, then the method,
    with ``threads=True`` under :func:`specopt._threads.limited` (one BLAS/OpenMP thread, a
    Ctrl-C reported by a compiled kernel as ``KeyboardInterrupt``) for the learners that call a
    solver directly; ``threads=False`` for those whose solve goes through ``specopt.solve``
    (it limits threads by problem size itself) or that run no solver."""

    def decorate(method: _F) -> _F:
        @functools.wraps(method)
        def checked(self, *args: Any, **kwargs: Any):
            check_params(self)
            return method(self, *args, **kwargs)

        return limited(checked) if threads else checked  # type: ignore[return-value]

    return decorate


def reject_dask_nan(X: Any, name: str = "X") -> None:
    """For a Dask array: one reduction over the blocks, ``ValueError`` naming ``name`` if it holds
    NaN or infinity (numpy inputs are checked by ``validate_data`` / ``check_array``)."""
    import dask.array as da

    bad = bool(da.any(~da.isfinite(X)).compute())
    if bad:
        raise ValueError(f"Input {name} contains NaN or infinity (Dask array checked block by "
                         "block before the solve)")


def components_from_matrix(M: np.ndarray, rtol: float = 0.0) -> np.ndarray:
    """L with ``L^T L = M`` (symmetrized; eigenvalues below ``rtol * max`` dropped, negatives
    clipped), rows in decreasing eigenvalue order."""
    M = 0.5 * (M + M.T)
    ev, U = np.linalg.eigh(M)
    keep = ev > rtol * max(float(ev.max(initial=0.0)), 1e-300) if rtol > 0 else np.ones_like(
        ev, dtype=bool)
    ev, U = ev[keep][::-1], U[:, keep][:, ::-1]
    return (U * np.sqrt(np.maximum(ev, 0.0))).T


class MahalanobisMixin(TransformerMixin):
    """metric-learn's Mahalanobis API on ``components_`` (and the learned matrix, if stored).

    ``_matrix_attr`` names the attribute holding M as learned (e.g. ``"W_"``); without it M is
    ``components_.T @ components_``.
    """

    _matrix_attr: str | None = None

    def get_mahalanobis_matrix(self) -> np.ndarray:
        """The learned M (d x d, PSD)."""
        check_is_fitted(self, "components_")
        if self._matrix_attr is not None:
            return getattr(self, self._matrix_attr)
        return self.components_.T @ self.components_

    def transform(self, X: Any) -> np.ndarray:
        """``X L^T``: squared Euclidean distances there are the learned distances."""
        check_is_fitted(self, "components_")
        X = validate_data(self, X, reset=False, dtype=float)
        return X @ self.components_.T

    def pair_distance(self, pairs: Any) -> np.ndarray:
        """Unsquared distances ``sqrt((x - x')^T M (x - x'))`` of pairs (n_pairs, 2, d)."""
        check_is_fitted(self, "components_")
        P = np.asarray(pairs, dtype=float)
        d = self.components_.shape[1]
        if P.ndim != 3 or P.shape[1] != 2 or P.shape[2] != d:
            raise ValueError(f"pairs must have shape (n_pairs, 2, {d}), got {P.shape}")
        if not np.all(np.isfinite(P)):
            raise ValueError("pairs contain NaN or infinity")
        D = (P[:, 0] - P[:, 1]) @ self.components_.T
        return np.sqrt(np.einsum("ij,ij->i", D, D))

    def pair_score(self, pairs: Any) -> np.ndarray:
        """``-pair_distance`` (larger means more similar)."""
        return -self.pair_distance(pairs)

    def get_metric(self) -> Callable[[np.ndarray, np.ndarray], float]:
        """The learned distance as a function of two points (for e.g. ``KNeighborsClassifier``)."""
        check_is_fitted(self, "components_")
        M = np.array(self.get_mahalanobis_matrix(), dtype=float)

        def metric(u, v):
            diff = np.asarray(u, dtype=float) - np.asarray(v, dtype=float)
            return float(np.sqrt(max(diff @ M @ diff, 0.0)))

        return metric


def progress_callback(verbose: bool, route: str, what: str, unit: str):
    """The progress printer for a learner that calls a solver directly (None unless verbose)."""
    return progress_for(bool(verbose), route, what, unit)


def finish_progress(callback, summary: Any = None) -> None:
    """Print the summary of a learner's progress printer (if any)."""
    take_current()
    if isinstance(callback, Progress):
        callback.finish(summary)


def summary_lines(*rows: tuple[str, Any]) -> str:
    """The summary a learner's progress printer ends with: one ``name: value`` line a row."""
    return "\n".join(f"{name:>15}: {value}" for name, value in rows)


def closed_form_certificate(value: float, reason: str, max_violation: float = 0.0,
                            history: dict | None = None, **extra: Any):
    """The certificate of a fit solved in closed form (no solver): ``optimal``, the value its
    own bound (gap 0), route ``"closed_form"``; ``extra`` holds ``reason`` and ``extra``."""
    return Certificate(route="closed_form", backend="numpy", status=cp.OPTIMAL, objective=value,
                       bound=value, gap=0.0, max_violation=max_violation, iterations=0,
                       history=history if history is not None else {}, is_global=True,
                       extra={"reason": reason, **extra})


def require_y(est: Any, y: Any, hint: str = "") -> None:
    """``ValueError`` in scikit-learn's words when a fit that needs labels got ``y=None``."""
    if y is None:
        raise ValueError(f"{type(est).__name__} requires y to be passed, but the target y is "
                         f"None{hint}")


def triplets_given(y: Any, triplets: Any) -> bool:
    """Whether ``fit(X, y, triplets=...)`` was given triplets (then not labels as well)."""
    if triplets is None:
        return False
    if y is not None:
        raise ValueError("give either labels y or triplets, not both")
    return True


def labelled_data(est: Any, X: Any, y: Any, **check: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` checked by ``validate_data`` (``check``: its options) with class labels ``y``
    of at least two classes (``ValueError`` naming the estimator otherwise)."""
    X, y = validate_data(est, X, y, **check)
    check_classification_targets(y)
    if np.unique(y).size < 2:
        raise ValueError(f"{type(est).__name__} needs at least two classes, got 1 class in y "
                         f"({len(y)} samples)")
    return X, y


class SDPSolverMixin:
    """``solver`` / ``solver_options`` of the learners that solve SDPs (embeddings, completion).

    ``solver=None`` takes Clarabel up to ``_clarabel_max`` (problem size: points, or ``m + n``)
    and SCS above, with ``eps_abs`` / ``eps_rel`` defaulting to ``_scs_eps`` when set; the
    low-rank engine's options default ``tol`` to ``LOW_RANK_TOL``.
    """

    _clarabel_max: int = 30
    _scs_eps: float | None = None

    def _conic_solver(self, size: int) -> tuple[str, dict]:
        """The conic solver's name and options for a problem of ``size``."""
        opts = dict(self.solver_options or {})
        solver = (self.solver or ("CLARABEL" if size <= self._clarabel_max else "SCS")).upper()
        if solver == "SCS" and self._scs_eps is not None:
            opts.setdefault("eps_abs", self._scs_eps)
            opts.setdefault("eps_rel", self._scs_eps)
        return solver, opts

    def _low_rank_opts(self) -> dict:
        """``solver_options`` for the low-rank engine (``tol`` default ``LOW_RANK_TOL``)."""
        opts = dict(self.solver_options or {})
        opts.setdefault("tol", LOW_RANK_TOL)
        return opts


def solve_certified(problem: Any, failure: str, **options: Any):
    """``specopt.solve(problem, **options)`` and its certificate; a CVXPY ``SolverError``
    (``failure`` formatted with the status) unless the status is optimal or
    optimal_inaccurate."""
    solve(problem, **options)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise cp.error.SolverError(failure.format(problem.status))
    return certificate(problem)
