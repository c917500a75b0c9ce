r"""Dual coordinate descent for the relative-comparison metric QP (Nguyen, Morell, De Baets).

Primal (Schultz-Joachims QP (2.3), optionally without the sign constraint)::

    min_{w, xi}  1/2 w^T L w + sum_i C_i xi_i
    s.t.         w^T z_i >= 1 - xi_i,  xi_i >= 0  (i = 1..n),   w_j >= 0  (j in J)

with ``L`` symmetric positive definite, ``Z = [z_1 ... z_n]^T`` of shape (n, m) and ``J`` the
sign-constrained coordinates (all, none or a mask). Dual (3.8), written with ``f`` to minimize::

    min_{lam, t}  f(lam, t) = 1/2 (Z^T lam + t)^T L^{-1} (Z^T lam + t) - sum_i lam_i
    s.t.          0 <= lam_i <= C_i,   t_j >= 0 (j in J),   t_j = 0 (j not in J)

with ``w = L^{-1}(Z^T lam + t)``. (The paper prints ``+ sum lam``; the sign is ``-``.)

Implementation (Algorithm 2, in Cholesky coordinates). With ``L = R^T R`` and ``v = R w``::

    v = Y^T lam + S^T t,  Y = Z R^{-1} (rows y_i = R^{-T} z_i),  S = R^{-1} (rows R^{-T} e_j)

so ``z_i^T w = y_i^T v``, ``z_i^T L^{-1} z_i = |y_i|^2``, ``(L^{-1})_jj = |s_j|^2`` and
``1/2 w^T L w = 1/2 |v|^2``. One coordinate step is O(m)::

    lam_i <- clip(lam_i - (y_i^T v - 1) / |y_i|^2, 0, C_i),   v += (lam_i - lam_old) y_i
    t_j   <- max(t_j - (s_j^T v) / |s_j|^2, 0),               v += (t_j - t_old) s_j

(``s_j^T v = w_j``). Only ``Y`` (n x m, replacing Z) and the m x m ``R^{-1}`` are formed; no
``L^{-1}`` and no extra n x m product. Each pass visits the coordinates in a fresh random order
(seeded) and shrinks variables stuck at a bound (LIBLINEAR's rule on the projected gradient).

Certificate, evaluated over ALL constraints (unshrunk) at checks: the dual value
``D = sum lam - 1/2 |v|^2`` of the current dual-feasible (lam, t), the primal value
``P = 1/2 wp^T L wp + sum C_i max(0, 1 - wp^T z_i)`` of the primal-feasible
``wp = w`` with its sign-constrained entries clipped at 0, and ``gap = P - D >= 0``
(weak duality). The solver stops when ``gap / max(1, P) <= tol``; then ``P - P* <= gap`` and,
as the primal is L-strongly convex in w, ``|w - w*|_L <= sqrt(2 gap)``.

Layout: this front end checks the input (:mod:`._data`) and dispatches: the Newton path
(:mod:`._newton`, numpy only) first when it pays, then coordinate descent (:mod:`.cd`, compiled
passes in :mod:`._kernels`) from its point.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ._data import DualCDResult, problem
from ._newton import newton_stage
from .cd import CDOptions, solve_cd

__all__ = ["DualCDResult", "dual_cd"]


def dual_cd(
    L: np.ndarray,
    Z: np.ndarray,
    C: float | np.ndarray = 1.0,
    *,
    nonneg: bool | np.ndarray = True,
    tol: float = 1e-8,
    max_passes: int = 2000,
    seed: int = 0,
    shrinking: bool = True,
    ridge: float = 0.0,
    check_every: int = 10,
    polish: bool = True,
    time_limit: float | None = None,
    verbose: bool = False,
    newton: bool | None = None,
    callback: Callable[..., None] | None = None,
) -> DualCDResult:
    """Solve ``min 1/2 w^T L w + sum C_i xi_i s.t. Z w >= 1 - xi, xi >= 0, w_J >= 0``.

    Parameters
    ----------
    L : (m, m) symmetric positive definite matrix.
    Z : (n, m) array, row i is z_i.
    C : positive scalar or (n,) array of per-constraint weights.
    nonneg : True (w >= 0), False (w free, the linear-SVM-like case) or a boolean mask.
    tol : stop when ``(P - D) / max(1, P) <= tol`` (P primal, D dual value).
    max_passes : limit on outer passes; if reached, the status is ``MAX_ITERS``.
    seed : seed of the per-pass random permutations.
    shrinking : drop variables stuck at a bound from passes (re-checked before stopping).
    ridge : solve with ``L + ridge * I`` (for singular or indefinite L); 0 means L must be PD.
    check_every : evaluate the full certificate at least every this many passes.
    polish : at certificate checks (backing off geometrically) also try the candidates of
        :func:`._newton.polish_candidates` (KKT pair of the current partition; projected
        Newton on the Huber-smoothed primal with decreasing smoothing). A candidate is used
        only when it improves the certified primal or dual value, so the certificate stays
        rigorous;
        ``polish=False`` is plain Algorithm 2.
    time_limit : seconds; stop (status ``TIME_LIMIT``) after this much solve time.
    newton : first try the numpy-only primal path (:func:`._newton._newton_first`: projected
        Newton on the Huber-smoothed primal with decreasing smoothing, then the KKT pair of
        the identified partition), certified exactly like the passes; if it does not reach
        ``tol``, coordinate descent continues from its best dual point. It needs no compiled
        kernel (no numba start-up cost) and costs a few O(n m) sweeps plus m x m solves.
        Default (None): on when ``polish`` is on and n >= 10 m, m <= 500 (many rows per
        feature).
    callback : called at every certificate check as ``callback(passes, objective=P,
        bound=D, gap=rel. gap, violation=0.0, time=seconds)`` (e.g. ``specopt._progress``).
    """
    t0 = time.perf_counter()
    prob = problem(L, Z, C, nonneg, float(ridge), tol)
    n, m = prob.Z.shape
    if newton is None:
        newton = polish and n >= 10 * m and m <= 500
    warm = None
    if newton:
        warm, done = newton_stage(prob, tol, time_limit, callback, verbose, t0)
        if done is not None:
            return done
    opts = CDOptions(tol=tol, max_passes=max_passes, shrinking=shrinking,
                     check_every=check_every, polish=polish, time_limit=time_limit,
                     verbose=verbose, callback=callback)
    return solve_cd(prob, opts, seed, warm, t0)
