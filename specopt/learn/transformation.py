"""Large-margin transformation learning: monotone ramp features and transformation SVMs.

Base transformations are truncated ramps applied elementwise (one shared function for every
input dimension), with J+1 knots ``z_0 < ... < z_J``::

    phi_j(x) = clip((x - z_{j-1}) / (z_j - z_{j-1}), 0, 1),    j = 1..J,

so ``sum_j m_j phi_j`` with ``m >= 0`` is any monotone piecewise-linear function through the
knots (up to a constant). The learners fit a linear SVM on the learned transformation:

* ``model="matrix"``: kernel ``k(x, x') = sum_ij M_ij phi_i(x)^T phi_j(x')`` with M on the
  spectraplex, the convex relaxation ``min_M max_alpha 2 1^T a - a^T Y K(M) Y a``; solvers
  ``"conic"`` (LMI of size J + D), ``"matrix_generation"`` (QCQP master over rank-one atoms,
  eigenvector pricing), ``"extragradient"``; all certified by the gap ``U(M, a) - D(a)``
  (see :mod:`specopt.solvers.transformation`).
* ``model="kernels"``: M diagonal (multiple kernel learning), one QCQP over the J atoms e_j.
* ``model="mixture"``: ``Phi(x) = sum_j m_j phi_j(x)`` learned greedily (SVM step / LP step;
  non-convex, monotone objective trace, ``gap_`` is None).

C convention: ``||w||^2 + 2C sum_n xi_n`` (equal to scikit-learn's ``SVC(C)``).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.metrics import accuracy_score
from sklearn.svm import SVC, LinearSVC
from sklearn.utils.multiclass import check_classification_targets, unique_labels
from sklearn.utils.validation import check_is_fitted, validate_data

from ..solvers.extragradient import extragradient
from ..solvers.transformation import (
    greedy_mixture,
    make_tasks,
    matrix_generation,
    top_eigvec,
)
from ._base import (
    COUNT,
    POSITIVE,
    TOL,
    VERBOSE,
    StrOptions,
    finish_progress,
    fit_context,
    progress_callback,
    summary_lines,
)
from ._transformation_cvx import face_polish, qcqp_master, solve_conic

__all__ = ["RampFeatures", "TransformationSVM", "MultitaskTransformationSVM"]

_MODELS = ("matrix", "mixture", "kernels")
_SOLVERS = ("auto", "conic", "matrix_generation", "extragradient")


class RampFeatures(TransformerMixin, BaseEstimator):
    """Truncated-ramp features ``phi_j(x)`` applied elementwise (see module docstring).

    Parameters
    ----------
    n_ramps : int
        Number of ramps J (J + 1 knots). Repeated knots (sparse data) are merged, so the fitted
        number ``n_ramps_`` can be smaller.
    scaling : {"global", "per_feature"}
        ``"global"``: min-max scale all entries with the global training min and max, knots at
        the quantiles of all scaled training entries. ``"per_feature"``: map every feature through
        its empirical training CDF, knots uniform on [0, 1].

    Notes
    -----
    Test data is clipped to the training range. ``transform`` returns ``(N, n_ramps_ * D)``
    (ramp-major: columns ``j*D:(j+1)*D`` are ``phi_j(X)``); ``transform_tensor`` returns
    ``(N, n_ramps_, D)``.
    """

    _parameter_constraints = {
        "n_ramps": [COUNT],
        "scaling": [StrOptions({"global", "per_feature"})],
    }

    def __init__(self, n_ramps: int = 10, scaling: str = "global"):
        self.n_ramps = n_ramps
        self.scaling = scaling

    @fit_context(threads=False)  # no solver: quantiles of X
    def fit(self, X, y=None) -> RampFeatures:
        X = validate_data(self, X, dtype=float)
        if self.scaling == "global":
            lo, hi = float(X.min()), float(X.max())
            if hi <= lo:
                raise ValueError("all training entries are equal: cannot place ramp knots")
            self.scale_ = (lo, hi)
            Xs = (X - lo) / (hi - lo)
            knots = np.quantile(Xs.ravel(), np.linspace(0.0, 1.0, self.n_ramps + 1))
        else:
            self.cdf_ = []
            for d in range(X.shape[1]):
                v, counts = np.unique(X[:, d], return_counts=True)
                c = np.cumsum(counts) / counts.sum()
                self.cdf_.append((v, c))
            knots = np.linspace(0.0, 1.0, self.n_ramps + 1)
        knots = np.unique(knots)
        if knots.size < 2:
            raise ValueError("the training data give fewer than two distinct knots")
        self.knots_ = knots
        self.n_ramps_ = knots.size - 1
        return self

    def _scaled(self, X: np.ndarray) -> np.ndarray:
        if self.scaling == "global":
            lo, hi = self.scale_
            return np.clip((X - lo) / (hi - lo), 0.0, 1.0)
        out = np.empty_like(X)
        for d, (v, c) in enumerate(self.cdf_):
            out[:, d] = np.interp(X[:, d], v, c)  # interp clips to the training range
        return out

    def ramps_of_scaled(self, s: np.ndarray) -> np.ndarray:
        """``phi_j`` at scaled values s (any shape) -> shape ``s.shape + (n_ramps_,)``."""
        z = self.knots_
        s = np.asarray(s, dtype=float)[..., None]
        return np.clip((s - z[:-1]) / (z[1:] - z[:-1]), 0.0, 1.0)

    def transform_tensor(self, X) -> np.ndarray:
        """``F[n, j, d] = phi_j(x_{n,d})``, shape (N, n_ramps_, D)."""
        check_is_fitted(self, "knots_")
        X = validate_data(self, X, dtype=float, reset=False)
        return np.ascontiguousarray(np.moveaxis(self.ramps_of_scaled(self._scaled(X)), 2, 1))

    def transform(self, X) -> np.ndarray:
        F = self.transform_tensor(X)
        return F.reshape(F.shape[0], -1)

    def ramp_values(self, t) -> np.ndarray:
        """``phi_j(t)`` for raw scalar inputs t (global scaling) or CDF values (per_feature)."""
        check_is_fitted(self, "knots_")
        t = np.asarray(t, dtype=float)
        if self.scaling == "global":
            lo, hi = self.scale_
            t = np.clip((t - lo) / (hi - lo), 0.0, 1.0)
        return self.ramps_of_scaled(t)


def _is_task_list(v) -> bool:
    """A list / tuple of per-task arrays (not one array, nor a list of scalar labels)."""
    return isinstance(v, list | tuple) and len(v) > 0 and all(np.ndim(t) >= 1 for t in v)


def _fit_matrix(tasks, model, solver, bias, tol, max_iter, conic_solver, verbose=False):
    """Run one of the matrix-mixture solvers; returns (M, alphas, biases, gap, info).
    ``verbose`` prints the progress of matrix generation (one line per round)."""
    cb = progress_callback(verbose, "transformation matrix generation",
                           f"{len(tasks)} task(s), {tasks[0].J} ramps", "round")

    if model == "kernels":
        if solver not in ("auto", "conic", "matrix_generation"):
            raise ValueError("model='kernels' is solved by one QCQP over the atoms e_j; use "
                             "solver='auto', 'conic' or 'matrix_generation'")
        r = matrix_generation(tasks, qcqp_master(conic_solver), bias=bias, diagonal=True,
                              callback=cb)
        finish_progress(cb, _mg_summary(r))
        return r.M, r.alphas, r.biases, r.gap, {"iterations": r.iterations, "solver": "qcqp"}
    if solver in ("auto", "conic"):
        r = solve_conic(tasks, bias=bias, solver=conic_solver)
        return r.M, r.alphas, r.biases, r.gap, {"iterations": 1, "solver": "conic"}
    if solver == "matrix_generation":
        r = matrix_generation(tasks, qcqp_master(conic_solver), bias=bias, tol=tol,
                              max_iter=max_iter or 200, callback=cb,
                              polish=face_polish(conic_solver))
        finish_progress(cb, _mg_summary(r))
    else:
        r = extragradient(tasks, bias=bias, tol=tol, max_iter=max_iter or 50_000)
    return r.M, r.alphas, r.biases, r.gap, {"iterations": r.iterations, "solver": solver}


def _mg_summary(r) -> str:
    return summary_lines(("converged", r.converged), ("upper", f"{r.upper:.6g}"),
                         ("lower", f"{r.lower:.6g}"), ("relative gap", f"{r.gap:.3g}"),
                         ("rounds", r.iterations))


def _sklearn_svm(Z: np.ndarray, y: np.ndarray, C: float, bias: bool) -> tuple[np.ndarray, float]:
    """SVM step of the greedy mixture: ``min ||w||^2 + 2C sum xi`` (= libsvm's ``SVC(C)``)."""
    if bias:
        est = SVC(kernel="linear", C=C, tol=1e-8).fit(Z, y)
        return est.coef_.ravel(), float(est.intercept_[0])
    est = LinearSVC(C=C, loss="hinge", fit_intercept=False, tol=1e-10, max_iter=100_000).fit(Z, y)
    return est.coef_.ravel(), 0.0


def _binary_labels(y) -> tuple[np.ndarray, np.ndarray]:
    check_classification_targets(y)
    classes = unique_labels(y)
    if classes.size != 2:
        raise ValueError(f"Only binary classification is supported. TransformationSVM is a "
                         f"binary classifier (per task); got {classes.size} classes")
    return classes, np.where(np.asarray(y) == classes[1], 1.0, -1.0)


class _TransformationBase(ClassifierMixin, BaseEstimator):
    """The parameters (one table, one constructor) and the learned transformation of the
    transformation SVMs (parameters: :class:`TransformationSVM`)."""

    _parameter_constraints = {
        "n_ramps": [COUNT],
        "model": [StrOptions(set(_MODELS))],
        "solver": [StrOptions(set(_SOLVERS))],
        "C": [POSITIVE],
        "bias": ["boolean"],
        "scaling": [StrOptions({"global", "per_feature"})],
        "tol": TOL,
        "max_iter": [COUNT, None],
        "conic_solver": [str],
        "verbose": VERBOSE,
    }

    def __init__(self, n_ramps: int = 10, model: str = "matrix", solver: str = "auto",
                 C: float = 1.0, bias: bool = True, scaling: str = "global", tol: float = 1e-4,
                 max_iter: int | None = None, conic_solver: str = "CLARABEL",
                 verbose: bool = False):
        self.n_ramps = n_ramps
        self.model = model
        self.solver = solver
        self.C = C
        self.bias = bias
        self.scaling = scaling
        self.tol = tol
        self.max_iter = max_iter
        self.conic_solver = conic_solver
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # binary tasks only
        return tags

    def _transformation_weights(self) -> np.ndarray:
        check_is_fitted(self, "M_")
        if self.model == "mixture":
            return self.m_
        lam, u = top_eigvec(self.M_)
        return np.sqrt(max(lam, 0.0)) * u

    def transformation_(self, t) -> np.ndarray:
        """The learned monotone function ``g(t) = sum_j m_j phi_j(t)``.

        ``m`` is the mixture (``model="mixture"``) or ``sqrt(lambda_1) u_1`` from the top
        eigenpair of ``M_`` (sign fixed so that ``sum(u_1) >= 0``). t is on the raw input scale
        (global scaling) or the CDF scale [0, 1] (per-feature scaling).
        """
        return self.ramps_.ramp_values(t) @ self._transformation_weights()


class TransformationSVM(_TransformationBase):
    """Linear SVM on a learned monotone transformation of the inputs (binary).

    Parameters
    ----------
    n_ramps : number of ramp functions J; ``scaling`` as in :class:`RampFeatures`.
    model : "matrix" (convex matrix mixture), "mixture" (greedy), "kernels" (diagonal M, MKL).
    solver : "auto" (= "conic", the fastest in ``benchmarks/transformation.py``), "conic",
        "matrix_generation" or "extragradient" (model="matrix").
    C : box bound of the dual (objective ``||w||^2 + 2C sum xi``, as ``SVC(C)``).
    bias : learn an intercept (adds ``y^T alpha = 0`` to the dual).
    tol : relative certified gap for the iterative solvers.
    verbose : print the progress of ``solver="matrix_generation"`` (and ``model="kernels"``):
        one line per round (upper and lower bound, gap, time), then the summary.

    Attributes
    ----------
    M_ : (J, J) learned mixing matrix (``m m^T`` for the greedy mixture).
    coef_ : (J, D) weights: ``f(x) = sum_j phi_j(x)^T coef_[j] + intercept_``.
    intercept_ : the bias (0 without ``bias``).
    gap_ : certified relative gap ``(U - D) / max(1, |U|)`` (None for ``model="mixture"``).
    classes_ : the two classes; ramps_ : the fitted :class:`RampFeatures`; n_iter_ : iterations
    (rounds / steps) of the solver.
    dual_coef_ : ``y * alpha`` (not for ``model="mixture"``); m_ and objective_history_ :
    the greedy mixture's weights and objective trace (``model="mixture"`` only).
    """

    @fit_context()
    def fit(self, X, y) -> TransformationSVM:
        X, y = validate_data(self, X, y, dtype=float)
        self.classes_, ys = _binary_labels(y)
        self.ramps_ = RampFeatures(self.n_ramps, self.scaling).fit(X)
        F = self.ramps_.transform_tensor(X)
        if self.model == "mixture":
            if self.solver != "auto":
                raise ValueError("model='mixture' is learned greedily; use solver='auto'")
            g = greedy_mixture(F, ys, self.C, bias=self.bias, max_iter=self.max_iter or 30,
                               svm=_sklearn_svm)
            self.m_, self.M_ = g.m, np.outer(g.m, g.m)
            self.coef_ = np.outer(g.m, g.w)
            self.intercept_ = g.b
            self.gap_ = None
            self.objective_history_ = g.history["objective"]
            self.n_iter_ = g.iterations
            return self
        tasks = make_tasks(F, ys, self.C)
        M, alphas, biases, gap, info = _fit_matrix(tasks, self.model, self.solver, self.bias,
                                                   self.tol, self.max_iter, self.conic_solver,
                                                   self.verbose)
        Bt = (tasks[0].F2.T @ (ys * alphas[0])).reshape(tasks[0].J, tasks[0].D)
        self.M_, self.dual_coef_ = M, ys * alphas[0]
        self.coef_ = M @ Bt
        self.intercept_ = float(biases[0])
        self.gap_ = gap
        self.n_iter_ = info["iterations"]
        return self

    def decision_function(self, X) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, dtype=float, reset=False)
        F = self.ramps_.transform_tensor(X)
        return F.reshape(F.shape[0], -1) @ self.coef_.ravel() + self.intercept_

    def predict(self, X) -> np.ndarray:
        f = self.decision_function(X)
        return self.classes_[(f > 0).astype(int)]


class MultitaskTransformationSVM(_TransformationBase):
    """Several binary tasks sharing one learned transformation (one M, one alpha per task).

    ``fit(X, y)`` takes lists (one array per task; all with the same number of features), or
    one ``X`` and ``y`` (a single task, as any scikit-learn classifier: ``classes_`` is then
    that task's classes). The ramp knots are fitted on all tasks together.
    ``predict(X, task=t)``, ``decision_function(X, task=t)`` and ``score(X, y, task=t)``
    address one task (default 0). ``task_classes_`` lists every task's classes.
    The objective is the sum of the task objectives; ``gap_`` certifies the joint problem.
    ``model`` is "matrix" or "kernels" (the greedy mixture is single-task only).
    """

    _parameter_constraints = {**_TransformationBase._parameter_constraints,
                              "model": [StrOptions({"matrix", "kernels"})]}

    @fit_context()
    def fit(self, X, y) -> MultitaskTransformationSVM:
        Xs, ys = X, y
        many = _is_task_list(ys)
        if many:
            if not _is_task_list(Xs) or len(Xs) != len(ys) or len(Xs) == 0:
                raise ValueError("need one label vector per task (non-empty lists of equal "
                                 "length)")
            D = {np.shape(X)[1] if np.ndim(X) == 2 else None for X in Xs}
            if len(D) != 1:
                raise ValueError(f"all tasks must have the same number of features, got "
                                 f"{sorted(map(str, D))}")
            first = validate_data(self, Xs[0], dtype=float)  # sets n_features_in_
            pairs = [validate_data(self, X, y, dtype=float, reset=False)
                     for X, y in zip([first, *Xs[1:]], ys, strict=True)]
        else:
            pairs = [validate_data(self, Xs, ys, dtype=float)]
        self.ramps_ = RampFeatures(self.n_ramps, self.scaling).fit(
            np.vstack([X for X, _ in pairs]))
        task_classes, Fs, Ys = [], [], []
        for X, y in pairs:
            cl, yy = _binary_labels(y)
            task_classes.append(cl)
            Fs.append(self.ramps_.transform_tensor(X))
            Ys.append(yy)
        self.task_classes_ = task_classes
        self.classes_ = task_classes if many else task_classes[0]
        tasks = make_tasks(Fs, Ys, self.C)
        M, alphas, biases, gap, info = _fit_matrix(tasks, self.model, self.solver, self.bias,
                                                   self.tol, self.max_iter, self.conic_solver,
                                                   self.verbose)
        self.M_ = M
        self.coefs_ = [M @ (t.F2.T @ (t.y * a)).reshape(t.J, t.D)
                       for t, a in zip(tasks, alphas, strict=True)]
        self.intercepts_ = [float(b) for b in biases]
        self.gap_ = gap
        self.n_iter_ = info["iterations"]
        return self

    def decision_function(self, X, task: int = 0) -> np.ndarray:
        check_is_fitted(self, "coefs_")
        if not 0 <= task < len(self.coefs_):
            raise ValueError(f"task must be in [0, {len(self.coefs_)}), got {task}")
        X = validate_data(self, X, dtype=float, reset=False)
        F = self.ramps_.transform_tensor(X)
        return F.reshape(F.shape[0], -1) @ self.coefs_[task].ravel() + self.intercepts_[task]

    def predict(self, X, task: int = 0) -> np.ndarray:
        f = self.decision_function(X, task)
        return self.task_classes_[task][(f > 0).astype(int)]

    def score(self, X, y, task: int = 0, sample_weight=None) -> float:
        return accuracy_score(y, self.predict(X, task), sample_weight=sample_weight)
