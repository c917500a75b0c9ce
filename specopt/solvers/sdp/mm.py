"""Majorize-minimize for linear-spectral costs on the factored iterate (MVE), each step one
engine solve warm-started from the previous. No CVXPY here."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._mm_trace import MMTrace
from ..iterated_sdp import check_extrapolation, extrapolate_next
from ._data import OPTIMAL, LowRankSDPResult, SparseRows, SymOp
from ._solve import mm_step_method, solve_low_rank_sdp

__all__ = ["LowRankMMResult", "extrapolated_top",
           "linear_spectral_factored", "low_rank_mm", "step_tolerance", "top_eig_factor"]


@dataclass
class LowRankMMResult(MMTrace):
    """Result of :func:`low_rank_mm`: the factor of the best iterate and the MM trace."""

    Y: np.ndarray
    inner: list[LowRankSDPResult]
    inner_iterations: int
    #: the inner method of each step ("ip": cold interior point, "bm": warm-started factored)
    methods: list[str] = field(default_factory=list)
    #: with ``stationarity_tol``: the measure of the returned iterate (None if not certified)
    stationarity: float | None = None
    #: the tolerance each step's subproblem was solved and certified to (the inexact schedule)
    step_tols: list[float] = field(default_factory=list)
    #: per step: whether it linearized at the extrapolated point (``extrapolation``)
    extrapolated: list[bool] = field(default_factory=list)
    #: the extrapolated steps that increased the objective (extrapolation off after the first)
    extrapolation_rejected: list[int] = field(default_factory=list)

    @property
    def claim_steps(self) -> list[LowRankSDPResult]:
        """The steps a ``stationary_point`` claim rests on: after the stationarity stop, the
        step that produced the returned iterate ``K_{t-1}`` (its feasibility) and the certifying
        step ``t`` (the proven bound of the measure); earlier steps only supplied
        linearization points. Otherwise every step."""
        return self.inner[-2:] if self.stop_reason == "stationary" else self.inner

    @property
    def inner_certified(self) -> bool:
        """The solves of :attr:`claim_steps` certified ``optimal`` (gap and residual within
        their tolerance)."""
        return bool(self.inner) and all(r.status == OPTIMAL for r in self.claim_steps)

    @property
    def stationary(self) -> bool:
        """The claim ``stationary_point`` is backed: the MM test passed and every step's
        subproblem was certified."""
        return self.converged and self.inner_certified


def top_eig_factor(Y: np.ndarray, q: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``q`` eigenpairs of ``Y Y^T`` from a thin SVD of ``Y`` (O(n r^2))."""
    U, s, _ = np.linalg.svd(Y, full_matrices=False)
    lam = s**2
    if U.shape[1] < q:  # pad with orthonormal directions of eigenvalue 0
        extra = np.linalg.qr(np.c_[U, np.random.default_rng(0).standard_normal(
            (Y.shape[0], q - U.shape[1]))])[0][:, U.shape[1]:]
        U, lam = np.c_[U, extra], np.r_[lam, np.zeros(q - lam.size)]
    return lam[:q], U[:, :q]


def linear_spectral_factored(C0: SymOp, beta: np.ndarray, Y: np.ndarray) -> float:
    """``<C0, Y Y^T> + sum_{i<q} beta_i lambda_i(Y Y^T)`` (``beta`` zero beyond its length q)."""
    lam, _ = top_eig_factor(Y, beta.size)
    return float(np.sum(C0.matmat(Y) * Y)) + float(beta @ lam)


def step_tolerance(prev_tol: float | None, measure: float, inner_tol: float,
                   loose_tol: float, stationarity_tol: float = 0.0,
                   factor: float = 0.1) -> float:
    """The inexact MM schedule: the next step's accuracy ``min(prev_tol, factor * measure)``,
    capped at ``loose_tol``; ``inner_tol`` once that is within 3x of it or the measure within 3x
    of ``stationarity_tol`` (the stop is then a step or two away, and it needs two steps at
    ``inner_tol``).

    ``measure`` is the last step's stationarity measure (the decrease a linearized step can still
    make, relative). MM converges linearly, so the measures and with them the tolerances decrease
    geometrically: the errors are summable, the early steps cheap, and the schedule is
    nonincreasing, so once a step is at ``inner_tol`` every later one is too (the last steps,
    those the stationarity claim rests on, are certified to ``inner_tol``)."""
    t = loose_tol if not math.isfinite(measure) else min(loose_tol, factor * measure)
    if prev_tol is not None:
        t = min(t, prev_tol)
    near = math.isfinite(measure) and measure <= 3.0 * stationarity_tol
    return inner_tol if t <= 3.0 * inner_tol or near else t


def extrapolated_top(Y: np.ndarray, Yp: np.ndarray, theta: float, q: int) -> np.ndarray:
    """Top-``q`` eigenvectors of the extrapolated point ``K_e = K + theta (K - K_p)``, ``K = Y
    Y^T``, ``K_p = Yp Yp^T`` (dense ``eigh`` up to ``n = 300``, Lanczos on the factors above)."""
    n = Y.shape[0]
    if n <= 300 or q >= n - 1:
        Ke = (1.0 + theta) * (Y @ Y.T) - theta * (Yp @ Yp.T)
        _, V = np.linalg.eigh(0.5 * (Ke + Ke.T))
        return V[:, ::-1][:, :q]
    from scipy.sparse.linalg import LinearOperator, eigsh

    op = LinearOperator((n, n), dtype=float, matvec=lambda x: (1.0 + theta) * (Y @ (Y.T @ x))
                        - theta * (Yp @ (Yp.T @ x)))
    w, V = eigsh(op, k=q, which="LA", tol=1e-10)
    return V[:, np.argsort(w)[::-1]]


def _rel_change_factored(Y: np.ndarray, Yp: np.ndarray) -> float:
    """``||Y Y^T - Yp Yp^T||_F / max(1, ||Yp Yp^T||_F)`` without forming n x n matrices."""
    a = float(np.sum((Y.T @ Y) ** 2))
    b = float(np.sum((Yp.T @ Yp) ** 2))
    c = float(np.sum((Y.T @ Yp) ** 2))
    return math.sqrt(max(a + b - 2 * c, 0.0)) / max(1.0, math.sqrt(b))


@dataclass(frozen=True)
class _StepSetup:
    """What every MM step's engine solve shares (the rows, the options)."""

    A: SparseRows
    b: np.ndarray
    centered: bool
    trace_bound: float | None
    implied_trace_bound: float | None
    method: str
    max_iters: int
    warm_ip: bool
    tight_ip_tol: float
    ip_accept: bool
    solver_opts: dict
    first_ip_max_iters: int | None = None


#: The first MM step's interior point (cold, when the later ones are warm-started) starts at
#: ``X = 3 xi I`` (``ip_sparse``'s ``xi``). Measured on the first MVE step (digits seed 0, kNN
#: 5 / 6, loose tol 1e-2), IP steps at the default start / 3x / 10x: N = 100 56 / 10 / 43,
#: N = 200 11 / 11 / 12, N = 400 13 / 13 / 14, N = 1000 36 (59 s CPU) / 19 (29 s) / 17.
FIRST_STEP_START_SCALE = 3.0

#: With the inexact schedule, the cold first step's interior point stops after this many steps
#: (HKM only, no factored continuation): that step only supplies the second linearization point
#: (the stationarity claim rests on the last two steps, :attr:`LowRankMMResult.claim_steps`).
#: Cold first MVE steps took 16-31 interior-point steps on digits and most spokes sets, and 74 on
#: one (hubs and spokes, N = 1000, seed 1: 86 s of a 132 s fit), where an indefinite objective and
#: a far infeasible dual make the iterates lose centrality and crawl.
FIRST_STEP_IP_MAX_ITERS = 15


def _solve_step(cfg: _StepSetup, C0: SymOp, beta: np.ndarray, prev: tuple, step_tol: float,
                tight: bool, time_left: float | None,
                V: np.ndarray | None = None) -> LowRankSDPResult:
    """One MM step: ``min <C0 + V diag(beta) V^T, K>`` over the set, ``V`` the top eigenvectors
    of the previous ``K = Y Y^T``; warm-started from ``prev = (Y, y, sigma, mu)`` (the factored
    method always, the interior point with ``warm_ip``), certified to ``step_tol``."""
    Y, y, sigma, mu = prev
    if V is None:
        _, V = top_eig_factor(Y, beta.size)
    Ct = SymOp(C0.n, sparse=C0.sparse, dense=C0.dense,
               U=V if C0.U is None else np.c_[C0.U, V],
               w=beta if C0.U is None else np.r_[C0.w, beta])
    warm = cfg.method == "bm" or (cfg.warm_ip and y is not None)
    return solve_low_rank_sdp(Ct, cfg.A, cfg.b, sense="min", centered=cfg.centered,
                              trace_bound=cfg.trace_bound,
                              implied_trace_bound=cfg.implied_trace_bound,
                              Y0=Y if warm else None, y0=y if warm else None,
                              sigma0=sigma if warm else None,
                              mu0=mu if warm and cfg.trace_bound is not None else 0.0,
                              tol=step_tol, method=cfg.method,
                              time_limit=time_left, max_iters=cfg.max_iters, ip_warm=cfg.warm_ip,
                              ip_tol=cfg.tight_ip_tol if tight else 0.1 * step_tol,
                              ip_start_scale=FIRST_STEP_START_SCALE if cfg.warm_ip and y is None
                              else 1.0, ip_accept=cfg.ip_accept,
                              ip_max_iters=cfg.first_ip_max_iters if y is None else None,
                              **cfg.solver_opts)


def low_rank_mm(
    C0: SymOp,
    beta: np.ndarray,
    A: SparseRows,
    b: np.ndarray,
    Y0: np.ndarray,
    *,
    centered: bool = False,
    trace_bound: float | None = None,
    implied_trace_bound: float | None = None,
    tol: float = 1e-4,
    tol_K: float = 1e-2,
    max_iters: int = 50,
    monotone_tol: float = 1e-4,
    inner_tol: float = 1e-6,
    warm_sigma_max: float = 1e2,
    method: str = "auto",
    time_limit: float | None = None,
    step_max_iters: int | None = None,
    callback: Callable | None = None,
    stationarity_tol: float | None = None,
    inexact: bool = True,
    loose_tol: float = 1e-2,
    warm_ip: bool = True,
    y0: np.ndarray | None = None,
    extrapolation: float = 0.0,
    **solver_opts: Any,
) -> LowRankMMResult:
    """Minimize ``<C0, K> + sum_i beta_i lambda_i(K)`` over the SDP set, ``beta`` nondecreasing.

    The iterated-SDP majorize-minimize scheme (:mod:`specopt.solvers.iterated_sdp`) on the
    factor: ``beta`` (length q, the weights of the q largest eigenvalues; zero beyond) is the
    concave part's weights, ``B_t = V_q diag(beta) V_q^T`` with ``V_q`` the top eigenvectors of
    ``K_t = Y_t Y_t^T`` (thin SVD of ``Y_t``), and each step solves
    ``min <C0 + B_t, K>`` with :func:`solve_low_rank_sdp`, warm-started from the previous step's
    ``(Y, y, sigma)``. ``Y0`` is the start (it supplies the first eigenvectors; K0 need not be
    feasible). Stops when the relative objective change is ``<= tol`` and the relative change of
    ``K`` is ``<= tol_K``; the objective trace is monotone up to the inner accuracy (increases
    beyond ``monotone_tol`` are recorded). The best iterate is returned.

    ``method`` chooses each step's solver: ``"ip"`` the sparse-row interior point, cold (it does not
    warm-start; the previous ``Y`` only gives the eigenvectors), ``"bm"`` the factored method
    warm-started from the previous ``(Y, y, sigma)``, ``"auto"`` the interior point while ``n <=
    MM_IP_MAX_N`` and ``m <= MM_IP_MAX_M`` (:mod:`specopt.solvers.sdp._solve`), the factored method
    above (measured, see there). Every step is certified to ``inner_tol`` by
    :func:`solve_low_rank_sdp` whichever solver ran, so the iteration map, and the stationary point
    reached from a start, does not depend on it (up to ``inner_tol``). ``time_limit`` caps the whole
    loop (seconds; each step gets the remaining time; stop reason ``"time_limit"``).
    ``step_max_iters`` caps the factored method's outer iterations per step (default 5 after the
    interior point, when its point is not certified, and 40 for warm-started factored steps): a step
    that does not certify by then is taken as it is, and the result is not ``stationary``.
    Near-degenerate sets (swiss-roll kNN graphs: the interior point stalls near gap 1e-3 and the
    factored method does not close it either) otherwise spend 30-60 s per step at N = 40-100 for no
    certificate.

    ``stationarity_tol``: stop by the stationarity measure instead of ``tol``/``tol_K``. The step
    from ``K_{t-1}`` minimizes its majorizer ``<C0 + B_{t-1}, K>`` (tight at ``K_{t-1}``); the
    engine's proven lower bound ``L_t`` on that minimum gives ``measure = max(0, F(K_{t-1}) -
    L_t) / (1 + |F(K_{t-1})|)``, which bounds the decrease any linearized step from ``K_{t-1}``
    can make. When ``<= stationarity_tol`` (and the step is certified), ``K_{t-1}`` is returned
    (``stop_reason="stationary"``, the measure in ``history["stationarity"]`` and
    ``stationarity``); ``max_iters`` is then a safety cap.

    ``inexact`` (with ``stationarity_tol`` only): inexact MM. Step t is solved and certified to
    ``step_tolerance`` of the previous measure (``loose_tol`` first, then a tenth of the measure,
    nonincreasing, ``inner_tol`` once within 3x of it or of the stop; ``step_tols``), the
    interior point stopping at a tenth of that. A loose step only supplies the next
    linearization, and its bound is still a proven lower bound (a looser one: the measure is
    then larger, never smaller). The stationarity stop needs the certifying step *and* the step
    that produced the returned iterate at ``inner_tol``; the best iterate of an unfinished run
    is taken among ``inner_tol`` steps when there is one.

    ``warm_ip``: interior-point steps start near the previous step's ``(Y, y)`` (its ``y`` and
    the new slack, both shifted into the interior), and cold when that point does not certify.
    ``y0``: row multipliers for the first step's warm start (e.g. a previous solve's on the same
    rows; minimizing sign convention), else the first step is cold. With a ``trace_bound`` each
    step's warm start also carries the previous step's trace multiplier ``mu`` (``mu0``, a
    solver option, for the first).
    ``ip_accept`` (a solver option; default on with the inexact schedule): each step's interior
    point stops at the first iterate its certificate accepts at the step's tolerance instead
    of running on to ``ip_tol`` (the same claim; digits MVE N = 400 seed 0: 64 interior-point
    steps in all instead of 72, 7.0 s CPU instead of 7.4).

    ``extrapolation`` (``theta >= 0``, with ``stationarity_tol`` only): once the measures
    contract slowly (:func:`~specopt.solvers.iterated_sdp.slow_contraction`) and while the last
    measure (or extrapolated decrease) is above 3 ``stationarity_tol``, step t linearizes the
    concave part at ``K_e = K_{t-1} + theta (K_{t-1} - K_{t-2})`` instead of ``K_{t-1}`` (the
    accelerated DCA idea, Nhat Phan, Le and Le Thi 2018). Any linearization point gives a
    majorizer of the cost, but one tight at ``K_e``, not at ``K_{t-1}``: the step need not
    descend, and its bound is no stationarity measure of ``K_{t-1}``. So the first extrapolated
    step that increases the cost switches extrapolation off for the run
    (``extrapolation_rejected``), and the stop rests on a plain step as without it (an
    extrapolated step never certifies). ``extrapolated`` lists the steps that used it.
    """
    beta = np.asarray(beta, dtype=float).ravel()
    if np.any(np.diff(beta) < -1e-12):
        raise ValueError("beta must be nondecreasing (the concave part's weights)")
    if y0 is not None:
        y0 = np.asarray(y0, dtype=float).ravel()
        if y0.size != A.m:
            raise ValueError(f"y0 has {y0.size} entries for {A.m} rows")
    t_start = time.perf_counter()
    step_method = mm_step_method(method, A.n, A.m, mm=True)
    step_iters = step_max_iters if step_max_iters is not None else (
        5 if step_method == "ip" else 40)
    Y = np.asarray(Y0, dtype=float)
    hist: dict[str, list[float]] = {"objective": [], "rel_change_objective": [],
                                    "rel_change_K": [], "stationarity": []}
    viol: list[tuple[int, float]] = []
    inner: list[LowRankSDPResult] = []
    best_Y, best_val = Y, math.inf
    prev_val, prev_Y = None, Y
    y, sigma, mu = y0, solver_opts.pop("sigma0", None), solver_opts.pop("mu0", 0.0)
    methods: list[str] = []
    extrapolated: list[bool] = []
    stop, converged, it = "max_iters", False, 0
    stationarity: float | None = None
    schedule = inexact and stationarity_tol is not None
    # the interior point's own tolerance at inner_tol (the engine's default for one solve is
    # min(1e-7, 0.05 tol); measured on MVE steps, 0.01 tol certifies as well, a step earlier)
    tight_ip_tol = solver_opts.pop("ip_tol", 0.01 * inner_tol)
    step_tols: list[float] = []
    best_tight = False
    first_cap = solver_opts.pop("first_step_ip_max_iters", FIRST_STEP_IP_MAX_ITERS)
    cfg = _StepSetup(A, b, centered, trace_bound, implied_trace_bound, step_method, step_iters,
                     warm_ip, tight_ip_tol, solver_opts.pop("ip_accept", schedule), solver_opts,
                     first_cap if schedule and warm_ip and step_method == "ip" else None)
    # extrapolated linearization points (with the stationarity stop only): on while no
    # extrapolated step has increased the objective
    extrapolating = check_extrapolation(extrapolation) > 0 and stationarity_tol is not None
    Y_older = None
    rejected: list[int] = []
    #: what the schedule reads: each step's measure, or an extrapolated step's decrease
    progress: list[float] = []
    for it in range(1, max_iters + 1):
        step_tol = inner_tol if not schedule else step_tolerance(
            step_tols[-1] if step_tols else None,
            progress[-1] if progress else math.inf, inner_tol, loose_tol,
            stationarity_tol or 0.0)
        tight = step_tol <= inner_tol
        step_tols.append(step_tol)
        left = None if time_limit is None else time_limit - (time.perf_counter() - t_start)
        V = None
        if extrapolating and Y_older is not None and extrapolate_next(
                extrapolated, hist["stationarity"], progress[-1], stationarity_tol):
            # far from the stop: the step linearizes at K + theta (K - K_prev), not at K
            V = extrapolated_top(Y, Y_older, extrapolation, beta.size)
        extrapolated.append(V is not None)
        res = _solve_step(cfg, C0, beta, (Y, y, sigma, mu), step_tol, tight, left, V)
        inner.append(res)
        methods.append(step_method)
        # carry Y and y; the penalty restarts moderate (L-BFGS range) since y is already close
        Y_older = Y if it > 1 else None
        Y, y, sigma, mu = res.Y, res.y, min(res.sigma, warm_sigma_max), res.mu
        val = linear_spectral_factored(C0, beta, Y)
        hist["objective"].append(val)
        dK = _rel_change_factored(Y, prev_Y)
        hist["rel_change_K"].append(dK)
        if prev_val is None:
            hist["rel_change_objective"].append(math.inf)
        else:
            rel = (prev_val - val) / max(1.0, abs(prev_val))
            hist["rel_change_objective"].append(abs(rel))
            increased = -rel > max(monotone_tol, step_tol, step_tols[-2] if it > 1 else 0.0)
            if V is not None and rel < 0:
                # an extrapolated majorizer is not tight at K: no descent guarantee; the
                # following steps linearize at their iterate (plain MM, monotone)
                extrapolating = False
                rejected.append(it)
            elif increased:
                viol.append((it, val - prev_val))
        if (tight and not best_tight) or (val < best_val and tight >= best_tight):
            best_Y, best_val, best_tight = Y, val, tight
        if callback is not None:  # one line per MM step (inner gap and residual)
            callback(it, objective=val, gap=res.gap, violation=res.primal_residual)
        measure = math.inf
        if prev_val is not None and res.bound is not None and math.isfinite(res.bound):
            measure = max(0.0, prev_val - float(res.bound)) / (1.0 + abs(prev_val))
        if V is not None:
            # no measure; the schedule and the extrapolation's test go on the decrease made
            progress.append(max(0.0, prev_val - val) / (1.0 + abs(prev_val)))
            measure = math.inf
        else:
            progress.append(measure)
        hist["stationarity"].append(measure)
        if stationarity_tol is not None:
            prev_tight = len(step_tols) > 1 and step_tols[-2] <= inner_tol
            # (an extrapolated step has no measure, inf above: it never stops the loop)
            if measure <= stationarity_tol and res.status == OPTIMAL and tight and prev_tight:
                # the previous iterate is certified: returned (its step is the certificate)
                stop, converged = "stationary", True
                best_Y, best_val, stationarity = prev_Y, prev_val, measure
                break
        elif prev_val is not None and hist["rel_change_objective"][-1] <= tol and dK <= tol_K:
            stop, converged = "converged", True
            break
        prev_val, prev_Y = val, Y
        if time_limit is not None and time.perf_counter() - t_start >= time_limit:
            stop = "time_limit"
            break
    return LowRankMMResult(Y=best_Y, objective=best_val, iterations=it, converged=converged,
                           stop_reason=stop, history=hist, monotone_violations=viol, inner=inner,
                           inner_iterations=sum(r.inner_iterations for r in inner),
                           methods=methods, stationarity=stationarity, step_tols=step_tols,
                           extrapolated=extrapolated, extrapolation_rejected=rejected)

