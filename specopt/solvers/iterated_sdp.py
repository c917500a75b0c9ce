"""Iterated SDP (majorize-minimize) for concave / DC linear-spectral costs. No CVXPY here.

A linear-spectral cost ``g(K) = sum_i alpha_i lambda_i(K)`` (eigenvalues sorted decreasing) splits
through the breakpoint identity

    g(K) = alpha_n tr(K) + sum_{i<n} c_i f_i(K),   c_i = alpha_i - alpha_{i+1},
    f_i(K) = lambda_1(K) + ... + lambda_i(K)  (convex),

into a convex part (the terms with ``c_i > 0`` and the trace) and a concave part
``h(K) = sum_{i<n} min(c_i, 0) f_i(K) = sum_i beta_i lambda_i(K)`` whose weights
``beta_i = sum_{j >= i, j < n} min(c_j, 0)`` are nondecreasing (:func:`concave_weights`).

For nondecreasing ``beta`` the variational form ``h(K) = min_{V orthonormal} tr(K sum_i beta_i
v_i v_i^T)`` (Ky Fan) gives the majorizer

    h(K) <= tr(K B_t),   B_t = sum_i beta_i v_i v_i^T,   v_i = eigenvectors of K_t,

tight at ``K = K_t``. Minimizing ``convex part + tr(K B_t)`` over the feasible set (the callback
``solve_subproblem(B_t)``) therefore never increases the true objective: the trace
``F(K_1) >= F(K_2) >= ...`` is monotone up to the accuracy of the inner solver. A limit point is a
stationary point of the non-convex problem (not, in general, a global minimum).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ._mm_trace import MMTrace

__all__ = [
    "EXTRAPOLATION_MIN_RATE",
    "MM_EXTRAPOLATION",
    "IteratedSDPResult",
    "RunResult",
    "check_extrapolation",
    "concave_weights",
    "extrapolate_next",
    "iterated_sdp",
    "linear_spectral_value",
    "linearization",
    "majorizer_gap",
    "random_psd",
    "slow_contraction",
]


#: The default extrapolation ``theta`` of the MM loops with a stationarity stop (the route's
#: ``extrapolation`` option; the MVE learner's engine loop, ``sdp.mm.low_rank_mm``): step t
#: linearizes at ``K_{t-1} + theta (K_{t-1} - K_{t-2})`` once MM contracts slowly (see
#: :func:`iterated_sdp`). theta = 0 / 0.5 / 1 / 1.5 / 2 on the MVE learner, digits N = 400
#: seed 1 (extrapolating from step 3): 13 / 11 / 9 / 8 / 8 MM steps. Final rule, extrapolation
#: on / off in one run (benchmarks/iterated_sdp.py --extrapolation 1.5 0): user-written models
#: N = 60 (30 cases) 381 / 535 MM steps, 21 / 15 under 10 s, S-curve 4.7-4.8 / 13.5-13.7 s,
#: spiral 7.7-8.1 / 17.1-22.8 s, values within 1e-4 on 24 and 1.4 % on all; eigengap N = 30
#: 70 / 82 steps; the MVE learner N = 100-400 the same or fewer steps (13 -> 11 on digits).
MM_EXTRAPOLATION = 1.5

#: Extrapolation starts only where MM contracts slowly: the last three step measures plain,
#: positive, each at least this times the one before. Where the measures fall fast (swiss roll
#: and S-curve kNN sets: 0.16 -> 6.4e-3) an extrapolated step gained nothing and was often
#: rejected, costing a step (atom_sum swiss N = 45: 6 -> 9 steps, 6.0 -> 9.4 s); digits sets
#: contract at 0.4-1 per step (0.18, 0.079, 0.082, 0.063, ...).
EXTRAPOLATION_MIN_RATE = 0.4


def slow_contraction(measures: Sequence[float], rate: float = EXTRAPOLATION_MIN_RATE) -> bool:
    """True when the last three stationarity measures are finite, positive and each at least
    ``rate`` times the one before: MM is in its slow linear phase, where extrapolating the
    linearization point pays (see :func:`iterated_sdp`)."""
    if len(measures) < 3:
        return False
    a, b, c = (float(v) for v in measures[-3:])
    if not all(math.isfinite(v) and v > 0.0 for v in (a, b, c)):
        return False
    return b >= rate * a and c >= rate * b


def check_extrapolation(theta: Any) -> float:
    """``theta`` as a float; ``ValueError`` unless it is a finite number ``>= 0``."""
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) \
            or not 0.0 <= float(theta) < math.inf:
        raise ValueError(f"extrapolation must be a finite number >= 0 (0: plain MM), "
                         f"got {theta!r}")
    return float(theta)


def extrapolate_next(extrapolated: Sequence[bool], measures: Sequence[float], progress: float,
                     stationarity_tol: float) -> bool:
    """Whether the next MM step linearizes at the extrapolated point (for a loop that has two
    iterates and has not rejected an extrapolated step): far from the stop (``progress``, the
    last measure or the last extrapolated step's relative decrease, above 3
    ``stationarity_tol``) and either going on from an extrapolated step or MM contracting
    slowly (:func:`slow_contraction` of the ``measures``)."""
    going_on = bool(extrapolated) and bool(extrapolated[-1])
    return progress > 3.0 * stationarity_tol and (going_on or slow_contraction(measures))


def linear_spectral_value(K: np.ndarray, alpha: np.ndarray) -> float:
    """``sum_i alpha_i lambda_i(K)`` with eigenvalues sorted decreasing (K symmetrized)."""
    K = np.asarray(K, dtype=float)
    lam = np.linalg.eigvalsh(0.5 * (K + K.T))[::-1]
    return float(np.dot(np.asarray(alpha, dtype=float), lam))


def concave_weights(alpha: np.ndarray) -> np.ndarray:
    """Weights ``beta`` of the concave part of ``g(K) = sum_i alpha_i lambda_i(K)``.

    ``beta_i = sum_{j=i}^{n-1} min(alpha_j - alpha_{j+1}, 0)`` (so ``beta_n = 0``); ``beta`` is
    nondecreasing and ``alpha - beta`` is nonincreasing: ``g = g_{alpha-beta} + g_beta`` with the
    first part convex and the second concave. ``beta == 0`` exactly when ``g`` is convex.
    """
    alpha = np.asarray(alpha, dtype=float).ravel()
    c = np.minimum(alpha[:-1] - alpha[1:], 0.0)
    beta = np.zeros_like(alpha)
    beta[:-1] = np.cumsum(c[::-1])[::-1]
    return beta


def linearization(K: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """``B = sum_i beta_i v_i v_i^T``, ``v_i`` the eigenvectors of ``K`` (eigenvalues decreasing).

    For nondecreasing ``beta``, ``tr(X B) >= sum_i beta_i lambda_i(X)`` for every symmetric X, with
    equality at ``X = K``: the linear majorizer of the concave part used by the iteration.
    """
    K = np.asarray(K, dtype=float)
    beta = np.asarray(beta, dtype=float).ravel()
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] != beta.size:
        raise ValueError(f"need a square K of size {beta.size}, got shape {K.shape}")
    _, V = np.linalg.eigh(0.5 * (K + K.T))
    V = V[:, ::-1]
    B = (V * beta) @ V.T
    return 0.5 * (B + B.T)


def random_psd(n: int, rng: np.random.Generator) -> np.ndarray:
    """A random PSD matrix (Wishart, Haar-distributed eigenvectors): a seeded random start."""
    G = rng.standard_normal((n, n))
    return G @ G.T / n


@dataclass
class RunResult(MMTrace):
    """One majorize-minimize run from one start."""

    point: Any
    K: list[np.ndarray]
    start: str
    #: with ``stationarity_tol``: (the solve that certified ``point``, its surrogate value)
    last_step: tuple[Any, float] | None = None
    #: per step: linearized at the extrapolated point (``extrapolation``)
    extrapolated: list[bool] = field(default_factory=list)
    #: the extrapolated step that increased F (extrapolation off after it)
    extrapolation_rejected: list[int] = field(default_factory=list)


@dataclass
class IteratedSDPResult(MMTrace):
    """Result of :func:`iterated_sdp` (best run over all starts).

    ``history`` is the objective trace of the best run (``objective``, ``rel_change_objective``,
    ``rel_change_K``); ``monotone`` is False when some iterate increased the objective by more than
    ``monotone_tol`` (each ``(iteration, increase)`` in ``monotone_violations``; the best iterate
    is returned regardless). With restarts, ``run_values`` holds every run's final value and
    ``spread = max - min`` of them.
    """

    point: Any
    K: list[np.ndarray]
    monotone: bool
    runs: list[RunResult] = field(default_factory=list)
    run_values: list[float] = field(default_factory=list)
    spread: float = 0.0
    best_run: int = 0
    total_iterations: int = 0
    last_step: tuple[Any, float] | None = None
    extrapolated: list[bool] = field(default_factory=list)
    extrapolation_rejected: list[int] = field(default_factory=list)


def _as_list(K: np.ndarray | Sequence[np.ndarray]) -> list[np.ndarray]:
    if isinstance(K, np.ndarray) and K.ndim == 2:
        return [K]
    return [np.asarray(k, dtype=float) for k in K]


def _rel_change_K(new: list[np.ndarray], old: list[np.ndarray]) -> float:
    num = math.sqrt(sum(float(np.sum((a - b) ** 2)) for a, b in zip(new, old, strict=True)))
    den = math.sqrt(sum(float(np.sum(b**2)) for b in old))
    return num / max(1.0, den)


def majorizer_gap(K: list[np.ndarray], Bs: list[np.ndarray], betas: list[np.ndarray]) -> float:
    """``sum_j tr(K_j B_j) - h_j(K_j)`` (``>= 0``): how far the linear majorizers built with
    ``B_j`` lie above the concave parts ``h_j = sum_i beta_ji lambda_i`` at ``K``. The majorized
    (surrogate) objective at a point is ``F + majorizer_gap``."""
    gap = 0.0
    for k, B, b in zip(K, Bs, betas, strict=True):
        ks = 0.5 * (k + k.T)
        gap += float(np.sum(B * ks)) - float(np.dot(b, np.linalg.eigvalsh(ks)[::-1]))
    return gap


def _single_run(
    solve_subproblem: Callable[[Any], Any],
    objective: Callable[[Any], float],
    get_K: Callable[[Any], Any],
    K0: list[np.ndarray],
    betas: list[np.ndarray],
    single: bool,
    tol: float,
    tol_K: float,
    max_iters: int,
    monotone_tol: float,
    start: str,
    callback: Callable[..., None] | None = None,
    stationarity_tol: float | None = None,
    first_point: Any = None,
    refine: Any = None,
    extrapolation: float = 0.0,
) -> RunResult:
    K = K0
    hist: dict[str, list[float]] = {"objective": [], "rel_change_objective": [], "rel_change_K": [],
                                    "time": [], "stationarity": []}
    t0 = time.perf_counter()
    violations: list[tuple[int, float]] = []
    best_point, best_K, best_val = None, K, math.inf
    prev_val: float | None = None
    prev_point: Any = None
    if first_point is not None:  # a feasible start (a subproblem solution): testable at step 1
        prev_point, prev_val = first_point, float(objective(first_point))
        best_point, best_K, best_val = first_point, K, prev_val
        for key, v in (("objective", prev_val), ("rel_change_objective", math.inf),
                       ("rel_change_K", math.inf), ("time", 0.0), ("stationarity", math.inf)):
            hist[key].append(v)  # the start is the trace's first entry
    stop, converged, it = "max_iters", False, 0
    last_step: tuple[Any, float] | None = None
    # extrapolated linearization points (see ``iterated_sdp``): on until one increases F
    extrapolating = extrapolation > 0 and stationarity_tol is not None
    K_older: list[np.ndarray] | None = None
    progress = math.inf  # the last measure, or an extrapolated step's decrease
    extrapolated: list[bool] = []
    rejected: list[int] = []
    for it in range(1, max_iters + 1):
        ext = extrapolating and K_older is not None and prev_point is not None \
            and extrapolate_next(extrapolated, hist["stationarity"], progress, stationarity_tol)
        at = [k + extrapolation * (k - ko) for k, ko in zip(K, K_older, strict=True)] \
            if ext else K
        extrapolated.append(ext)
        Bs = [linearization(k, b) for k, b in zip(at, betas, strict=True)]
        point = solve_subproblem(Bs[0] if single else Bs)
        K_new = _as_list(get_K(point))
        val = float(objective(point))
        if not math.isfinite(val):
            raise ValueError(f"objective is not finite at iteration {it} ({val})")
        # stationarity measure of the previous point: the decrease its majorizer allows,
        # F(K_{t-1}) - min S_{t-1} (S_{t-1} = F + majorizer_gap, tight at K_{t-1})
        surrogate = val + majorizer_gap(K_new, Bs, betas)
        # a step solved to a proven bound only (``point["gap_abs"]``: its value minus that bound)
        # certifies its majorizer's minimum down to the bound: the measure then counts the gap
        if isinstance(point, dict):
            surrogate -= float(point.get("gap_abs", 0.0))
        hist["objective"].append(val)
        hist["time"].append(time.perf_counter() - t0)
        if callback is not None:
            callback(it, objective=val)
        dK = _rel_change_K(K_new, K) if it > 1 else math.inf
        hist["rel_change_K"].append(dK)
        measure = math.inf
        if prev_val is None:
            hist["rel_change_objective"].append(math.inf)
        else:
            scale = max(1.0, abs(prev_val))
            rel = (prev_val - val) / scale
            hist["rel_change_objective"].append(abs(rel))
            if ext and rel < 0:
                # the extrapolated majorizer is not tight at K_{t-1}: no descent guarantee;
                # the point is dropped, plain MM from K_{t-1} (below)
                extrapolating = False
                rejected.append(it)
            elif -rel > monotone_tol:
                violations.append((it, val - prev_val))
            if prev_point is not None and not ext:
                measure = max(prev_val - surrogate, 0.0) / (1.0 + abs(prev_val))
            progress = max(prev_val - val, 0.0) / (1.0 + abs(prev_val)) if ext else measure
        hist["stationarity"].append(measure)
        if val < best_val:
            best_point, best_K, best_val = point, K_new, val
        if stationarity_tol is not None:
            if refine is not None:
                refine.measure = measure  # the measure of this call (the refiner may use it)
            if refine is not None and measure <= max(stationarity_tol, refine.tol) \
                    and refine(prev_point, point):
                pass  # the steps were not accurate enough to stop: now they are, go on
            elif measure <= stationarity_tol:
                # the previous point is certified (its majorizer's minimum is within tol):
                # returned with the step that certifies it (the stationarity check reuses it)
                stop, converged = "stationary", True
                best_point, best_K, best_val = prev_point, K, prev_val
                last_step = (point, surrogate)
                break
        elif prev_val is not None and hist["rel_change_objective"][-1] <= tol and dK <= tol_K:
            stop, converged = "converged", True
            break
        if rejected and rejected[-1] == it:
            continue  # the next step linearizes at K_{t-1} again, plain
        K_older = K if prev_point is not None else None
        K, prev_val, prev_point = K_new, val, point
    return RunResult(
        point=best_point,
        K=best_K,
        objective=best_val,
        iterations=it,
        converged=converged,
        stop_reason=stop,
        history=hist,
        monotone_violations=violations,
        start=start,
        last_step=last_step,
        extrapolated=extrapolated,
        extrapolation_rejected=rejected,
    )


def iterated_sdp(
    solve_subproblem: Callable[[Any], Any],
    objective: Callable[[Any], float],
    K0: np.ndarray | Sequence[np.ndarray],
    beta: np.ndarray | Sequence[np.ndarray],
    *,
    get_K: Callable[[Any], Any] | None = None,
    tol: float = 1e-6,
    tol_K: float = 1e-4,
    max_iters: int = 50,
    monotone_tol: float = 1e-6,
    restarts: int = 0,
    random_start: Callable[[np.random.Generator], Any] | None = None,
    seed: int | None = 0,
    callback: Callable[..., None] | None = None,
    stationarity_tol: float | None = None,
    first_point: Any = None,
    refine: Any = None,
    extrapolation: float = 0.0,
) -> IteratedSDPResult:
    """Minimize ``F(K) = convex(K) + sum_j h_j(K_j)`` with ``h_j(K) = sum_i beta_ji lambda_i(K)``.

    Parameters
    ----------
    solve_subproblem:
        ``solve_subproblem(B) -> point``: a minimizer of ``convex(K) + sum_j tr(K_j B_j)`` over the
        feasible set. ``B`` is one array when a single matrix is linearized, else a list.
    objective:
        ``objective(point) -> F`` (the true non-convex objective at the point).
    K0, beta:
        Initial matrix (or list of matrices, one per concave term) and the nondecreasing weights
        of each concave part (:func:`concave_weights`). K0 only supplies the first eigenvectors;
        it need not be feasible.
    get_K:
        Extracts the matrix (or list) from a point; identity by default.
    tol, tol_K:
        Without ``stationarity_tol``: stop when ``|F_t - F_{t-1}| / max(1, |F_{t-1}|) <= tol``
        and ``||K_t - K_{t-1}||_F / max(1, ||K_{t-1}||_F) <= tol_K``.
    stationarity_tol:
        Stop when the stationarity measure of the previous iterate,
        ``(F(K_{t-1}) - S_{t-1}(K_t)) / (1 + |F(K_{t-1})|)`` with ``S_{t-1} = F +
        majorizer_gap`` the majorizer built at ``K_{t-1}`` (tight there) and ``K_t`` its
        minimizer, is ``<= stationarity_tol``: no linearized step from ``K_{t-1}`` decreases the
        objective by more (up to the inner solver's accuracy); ``K_{t-1}`` is returned
        (``stop_reason="stationary"``) with the certifying step in ``last_step``. ``max_iters``
        is then only a safety cap (``stop_reason="max_iters"``, ``converged=False``).
    first_point:
        A feasible point at ``K0`` (a previous subproblem solution): then ``K0`` itself can be
        certified by the first step.
    monotone_tol:
        Relative increase of ``F`` tolerated as inner-solver inaccuracy; larger increases are
        recorded in ``monotone_violations`` and ``monotone`` becomes False.
    restarts, random_start, seed:
        ``restarts`` extra runs from ``random_start(rng)`` (default: Wishart matrices of each
        K0's size) with ``rng = np.random.default_rng(seed)``; the best run is returned.
    callback:
        Called after every MM step as ``callback(step, objective=F)`` (progress printing).
    refine:
        Inexact early steps (with ``stationarity_tol``): an object with a tolerance
        ``refine.tol`` and ``refine(prev_point, point) -> bool``, called when the measure is
        ``<= max(stationarity_tol, refine.tol)``; True means the two points were not solved
        accurately enough to back a claim and the inner solver has been made more accurate
        (the run goes on from ``point``), False that the stop test applies as usual.
    extrapolation:
        ``theta >= 0`` (with ``stationarity_tol`` only): once MM contracts slowly
        (:func:`slow_contraction` of the measures) and while the last measure (or the last
        extrapolated step's relative decrease) is above 3 ``stationarity_tol``, step t
        linearizes at ``K_{t-1} + theta (K_{t-1} - K_{t-2})`` instead of ``K_{t-1}`` (the
        accelerated DCA idea, Nhat Phan, Le and Le Thi 2018). That majorizer is not tight at
        ``K_{t-1}``: the step has no stationarity measure (``inf`` in the history) and need not
        descend; the first one that increases ``F`` switches extrapolation off for the run
        (``extrapolation_rejected``, not a monotonicity violation) and its point is dropped:
        the next step is the plain one from ``K_{t-1}``. The stop always rests on a plain
        step.
    """
    single = isinstance(K0, np.ndarray) and np.ndim(K0) == 2
    K0_list = _as_list(K0)
    betas = [np.asarray(beta, dtype=float).ravel()] if single else [
        np.asarray(b, dtype=float).ravel() for b in beta
    ]
    if len(betas) != len(K0_list):
        raise ValueError(f"{len(K0_list)} start matrices but {len(betas)} weight vectors")
    for k, b in zip(K0_list, betas, strict=True):
        if k.ndim != 2 or k.shape != (b.size, b.size):
            raise ValueError(f"start matrix of shape {k.shape} does not match {b.size} weights")
        if np.any(np.diff(b) < -1e-12):
            raise ValueError("concave weights beta must be nondecreasing (see concave_weights)")
    if max_iters < 1:
        raise ValueError(f"max_iters must be >= 1, got {max_iters}")
    if restarts < 0:
        raise ValueError(f"restarts must be >= 0, got {restarts}")
    extrapolation = check_extrapolation(extrapolation)
    get_K = get_K or (lambda p: p)
    rng = np.random.default_rng(seed)
    if random_start is None:
        def random_start(r: np.random.Generator) -> list[np.ndarray]:
            return [random_psd(k.shape[0], r) for k in K0_list]

    runs: list[RunResult] = []
    for r in range(restarts + 1):
        start = K0_list if r == 0 else _as_list(random_start(rng))
        runs.append(
            _single_run(
                solve_subproblem, objective, get_K, start, betas, single,
                tol, tol_K, max_iters, monotone_tol, "initial" if r == 0 else f"random {r}",
                callback=callback, stationarity_tol=stationarity_tol,
                first_point=first_point if r == 0 else None, refine=refine,
                extrapolation=extrapolation,
            )
        )
    values = [run.objective for run in runs]
    best = int(np.argmin(values))
    b = runs[best]
    best_fields = {f.name: getattr(b, f.name) for f in fields(RunResult) if f.name != "start"}
    return IteratedSDPResult(
        **best_fields,
        monotone=not b.monotone_violations,
        runs=runs,
        run_values=values,
        spread=float(max(values) - min(values)),
        best_run=best,
        total_iterations=sum(run.iterations for run in runs),
    )
