"""Extragradient for the matrix-mixture saddle problem, with exact projections.

Saddle function (see :mod:`specopt.solvers.transformation`; tasks share M)::

    S(M, alpha) = sum_t 2 1^T a_t - a_t^T Y_t K_t(M) Y_t a_t,
    M in {M PSD, tr M <= 1},   a_t in [0, C_t]^N  (and y_t^T a_t = 0 with a bias).

Correct gradients (the thesis prints both with the wrong sign)::

    dS/dM_ij = -sum_t a_t^T Y K_ij Y a_t = -sum_t G_t(a_t)_ij,
    grad_{a_t} S = 2 * 1 - 2 Y K(M) Y a_t.

Iteration (Korpelevich extragradient, descent in M, ascent in alpha, one step beta)::

    M_bar = P_M(M - beta dS/dM(x)),          a_bar = P_a(a + beta grad_a S(x)),
    M+    = P_M(M - beta dS/dM(x_bar)),      a+    = P_a(a + beta grad_a S(x_bar)).

Step rule: ``r = beta ||g(x) - g(x_bar)|| / ||x - x_bar||``; if ``r > nu`` the step is redone
with ``beta <- (2/3) beta min(1, 1/r)``; if ``r < grow_below`` the next step is ``grow * beta``
(the thesis never grows beta, which makes it very slow). The M block is measured in a weighted
norm (``M`` scaled by ``m_scale``, a diagonal preconditioner balancing the two blocks).
Stopping: the certified relative gap ``(U(M, alpha) - D(alpha)) / max(1, |U|)`` of
:func:`specopt.solvers.transformation.upper_bound` / ``lower_bound``.

Projections are exact: onto the spectraplex by projecting the eigenvalues onto the capped simplex
``{l >= 0, sum l <= 1}``; onto the box (with ``y^T a = 0``) by solving the monotone piecewise
linear equation in the multiplier exactly over its sorted breakpoints.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._status import SolverStatus
from .transformation import (
    SaddleResult,
    SaddleTask,
    b_matrix,
    kernel_margins,
    lower_bound,
    record_bounds,
    relative_gap,
    upper_bound,
)

__all__ = [
    "project_capped_simplex",
    "project_spectraplex",
    "project_box",
    "ExtragradientResult",
    "extragradient",
]


def project_capped_simplex(v: np.ndarray, cap: float = 1.0) -> np.ndarray:
    """Euclidean projection of v onto ``{l >= 0, sum l <= cap}``.

    If ``sum(max(v, 0)) <= cap`` the answer is ``max(v, 0)``; otherwise the constraint is
    active and the answer is ``max(v - tau, 0)`` with tau from the sorted-threshold rule.
    """
    v = np.asarray(v, dtype=float)
    p = np.maximum(v, 0.0)
    if p.sum() <= cap:
        return p
    s = np.sort(v)[::-1]
    cs = np.cumsum(s) - cap
    k = np.arange(1, v.size + 1)
    rho = np.nonzero(s - cs / k > 0)[0][-1]
    tau = cs[rho] / (rho + 1.0)
    return np.maximum(v - tau, 0.0)


def project_spectraplex(A: np.ndarray) -> np.ndarray:
    """Frobenius projection of a symmetric matrix onto ``{M PSD, tr M <= 1}``.

    ``A = V diag(l) V^T``  ->  ``V diag(P(l)) V^T`` with P the capped-simplex projection (exact,
    since the set is unitarily invariant).
    """
    A = 0.5 * (np.asarray(A, dtype=float) + np.asarray(A, dtype=float).T)
    lam, V = np.linalg.eigh(A)
    p = project_capped_simplex(lam)
    M = (V * p) @ V.T
    return 0.5 * (M + M.T)


def project_box(v: np.ndarray, C: float, y: np.ndarray | None = None) -> np.ndarray:
    """Projection onto ``[0, C]^N`` (and ``{y^T a = 0}`` when y is given, y in {-1, 1}^N).

    With y: ``a(nu) = clip(v - nu y, 0, C)``; ``g(nu) = y^T a(nu)`` is non-increasing piecewise
    linear with breakpoints ``y_n v_n`` and ``y_n (v_n - C)``; the root is found exactly by
    locating the bracketing breakpoints and interpolating.
    """
    v = np.asarray(v, dtype=float)
    if y is None:
        return np.clip(v, 0.0, C)

    def g(nu: float) -> float:
        return float(y @ np.clip(v - nu * y, 0.0, C))

    bps = np.unique(np.concatenate([y * v, y * (v - C)]))
    vals = np.array([g(b) for b in bps]) if bps.size <= 64 else None
    if vals is None:  # binary search over the sorted breakpoints (g non-increasing)
        lo, hi = 0, bps.size - 1
        if g(bps[lo]) < 0 or g(bps[hi]) > 0:  # cannot happen for y with both signs
            raise ValueError("y^T a = 0 has no solution in the box (labels of one class only?)")
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if g(bps[mid]) >= 0:
                lo = mid
            else:
                hi = mid
        n0, n1 = bps[lo], bps[hi]
        g0, g1 = g(n0), g(n1)
    else:
        if vals[0] < 0 or vals[-1] > 0:
            raise ValueError("y^T a = 0 has no solution in the box (labels of one class only?)")
        k = int(np.searchsorted(-vals, 0.0, side="right")) - 1  # last index with vals >= 0
        k = min(max(k, 0), bps.size - 2) if bps.size > 1 else 0
        if bps.size == 1:
            return np.clip(v - bps[0] * y, 0.0, C)
        n0, n1, g0, g1 = bps[k], bps[k + 1], vals[k], vals[k + 1]
    nu = n0 if g0 == g1 else n0 + (n1 - n0) * g0 / (g0 - g1)
    return np.clip(v - nu * y, 0.0, C)


@dataclass(kw_only=True)
class ExtragradientResult(SaddleResult):
    """Result of :func:`extragradient` (:class:`SaddleResult`; use ``(M, alphas, biases)`` to
    predict): ``dual_alphas`` attains the best lower bound ``D``, ``step`` the last step.
    ``status``: ``SolverStatus.OPTIMAL`` (gap <= tol), ``TIME_LIMIT`` or ``MAX_ITERS``.
    """

    dual_alphas: list[np.ndarray]
    step: float


def _grads(tasks, M, alphas):
    """(dS/dM, [grad_{a_t} S], [B_t^T]) at (M, alphas)."""
    gM = np.zeros_like(M)
    ga = []
    Bts = []
    for task, a in zip(tasks, alphas, strict=True):
        Bt = b_matrix(task, a)
        gM -= Bt @ Bt.T
        f = kernel_margins(task, M, Bt)
        ga.append(2.0 - 2.0 * task.y * f)
        Bts.append(Bt)
    return gM, ga, Bts


def extragradient(
    tasks: Sequence[SaddleTask],
    *,
    bias: bool = False,
    tol: float = 1e-4,
    max_iter: int = 20000,
    step: float | None = None,
    nu: float = 0.9,
    grow: float = 1.5,
    grow_below: float = 0.4,
    m_scale: float | None = None,
    check_every: int = 5,
    M0: np.ndarray | None = None,
    alphas0: Sequence[np.ndarray] | None = None,
    time_limit: float | None = None,
) -> ExtragradientResult:
    """Solve ``min_{M in spectraplex} max_alpha S(M, alpha)`` by extragradient (see module doc).

    ``m_scale`` weights the M block (the iteration runs on ``(M / sqrt(m_scale), alpha)``, i.e.
    the M step is ``m_scale * beta``); by default it balances the two gradient norms at the start.
    The best upper and lower bounds seen are kept; the result pairs the M of the best upper bound
    with the alpha of the best lower bound.
    """
    t0 = time.perf_counter()
    J = tasks[0].J
    M = np.eye(J) / J if M0 is None else project_spectraplex(M0)
    ys = [t.y if bias else None for t in tasks]
    if alphas0 is None:
        alphas = [project_box(np.full(t.n, 0.5 * t.C), t.C, yy)
                  for t, yy in zip(tasks, ys, strict=True)]
    else:
        alphas = [project_box(np.asarray(a, float), t.C, yy)
                  for a, t, yy in zip(alphas0, tasks, ys, strict=True)]
    gM, ga, _ = _grads(tasks, M, alphas)
    if m_scale is None:  # balance the blocks: typical gradient sizes of alpha vs M entries
        n_tot = sum(t.n for t in tasks)
        na = np.sqrt(sum(float(g @ g) for g in ga) / n_tot)
        m_scale = max(1.0, na) / max(1.0, float(np.max(np.abs(gM))))
    if step is None:  # 1 / (crude Lipschitz estimate of the alpha block)
        L = sum(float(np.linalg.norm(t.F2, 2)) ** 2 for t in tasks) if sum(
            t.n for t in tasks) <= 2000 else sum(float(np.sum(t.F2 * t.F2)) for t in tasks)
        step = 0.5 / max(L, 1e-12)
    beta = float(step)
    hist: dict[str, list[float]] = {"upper": [], "lower": [], "gap": [], "step": []}
    best_u, best_l = np.inf, -np.inf
    best_M, best_alphas, best_biases = M, alphas, [0.0] * len(tasks)
    best_alphas_u = alphas
    status = SolverStatus.MAX_ITERS
    it = 0
    n_eval = 0
    for it in range(1, max_iter + 1):
        while True:
            Mb = project_spectraplex(M - m_scale * beta * gM)
            ab = [project_box(a + beta * g, t.C, yy)
                  for a, g, t, yy in zip(alphas, ga, tasks, ys, strict=True)]
            gMb, gab, _ = _grads(tasks, Mb, ab)
            n_eval += 1
            dx2 = np.sum((M - Mb) ** 2) / m_scale + sum(
                float(np.sum((a - b) ** 2)) for a, b in zip(alphas, ab, strict=True))
            dg2 = m_scale * np.sum((gM - gMb) ** 2) + sum(
                float(np.sum((g - h) ** 2)) for g, h in zip(ga, gab, strict=True))
            if dx2 <= 0.0:
                r = 0.0
                break
            r = beta * np.sqrt(dg2 / dx2)
            if r <= nu:
                break
            beta = (2.0 / 3.0) * beta * min(1.0, 1.0 / r)
        M = project_spectraplex(M - m_scale * beta * gMb)
        alphas = [project_box(a + beta * g, t.C, yy)
                  for a, g, t, yy in zip(alphas, gab, tasks, ys, strict=True)]
        if r < grow_below:
            beta *= grow
        gM, ga, _ = _grads(tasks, M, alphas)
        if it % check_every == 0 or it == max_iter:
            ub, biases = upper_bound(tasks, M, alphas, bias)
            lb = lower_bound(tasks, alphas)
            if ub < best_u:
                best_u, best_M, best_biases, best_alphas_u = ub, M, biases, alphas
            if lb > best_l:
                best_l, best_alphas = lb, alphas
            gap = record_bounds(hist, best_u, best_l, step=beta)
            if gap <= tol:
                status = SolverStatus.OPTIMAL
                break
            if time_limit is not None and time.perf_counter() - t0 > time_limit:
                status = SolverStatus.TIME_LIMIT
                break
    return ExtragradientResult(
        M=best_M, alphas=best_alphas_u, dual_alphas=best_alphas, biases=best_biases,
        upper=best_u, lower=best_l,
        gap=relative_gap(best_u, best_l), iterations=it, status=status,
        solve_time=time.perf_counter() - t0, step=beta, history=hist,
    )
