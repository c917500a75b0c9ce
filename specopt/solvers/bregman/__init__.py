"""LogDet (ITML) problems by cyclic Bregman projections: linear, kernel and low-rank forms.

Problem (linear form; points are columns, v_c = x_i - x_j, distances are SQUARED)::

    min_{W > 0, xi > 0}  D_ld(W, W0) + gamma * sum_c (xi_c/xi0_c - log(xi_c/xi0_c) - 1)
    s.t.  delta_c * (v_c^T W v_c - xi_c) <= 0          delta_c = +1 (similar, xi0 = u)
                                                       delta_c = -1 (dissimilar, xi0 = l)

with D_ld(W, W0) = tr(W W0^{-1}) - log det(W W0^{-1}) - d. gamma = inf means hard constraints
(xi = xi0). One Bregman projection on constraint c (Algorithm 1 of Jain et al., JMLR 2012, as
corrected in the implementer's notes)::

    p     = v^T W v
    alpha = min(lam_c, delta * gamma/(gamma+1) * (1/p - 1/xi_c))     (gamma/(gamma+1) := 1 if inf)
    beta  = delta*alpha / (1 - delta*alpha*p)
    xi_c  = gamma*xi_c / (gamma + delta*alpha*xi_c)                  (frozen if gamma = inf)
    lam_c = lam_c - alpha
    W     = W + beta (W v)(W v)^T

which keeps W^{-1} = W0^{-1} + sum_c delta_c lam_c v_c v_c^T and 1/xi = 1/xi0 - delta lam/gamma.

Certificate. The Lagrangian minimizer for multipliers lam >= 0 is exactly the iterate, and the
dual function is ::

    g(lam) = log det(I + W0 C(lam)) + gamma * sum_c log(1 - delta_c lam_c xi0_c / gamma),
    C(lam) = sum_c delta_c lam_c v_c v_c^T      (gamma = inf: the last sum is -sum delta lam xi0)

a lower bound on the optimum for every feasible lam, non-decreasing along the sweeps. We stop when
the relative gap |P - g| / max(1, |P|) and the maximum relative violation
max_c max(0, delta_c (p_c - xi_c)) / xi_c are both below ``tol``; g is computed from lam directly
(not from the iterate), so the bound is honest even after rounding drift.

Kernel form (Theorem 3.1): with K0 = X^T W0 X and v = e_i - e_j, the same projection acts on K
(O(n^2)), and W = W0 + W0 X M X^T W0 is tracked through M (w = v + M K0 v, M += beta w w^T),
never inverting K0 or C(lam). Only the points that appear in a constraint matter (C and M vanish
elsewhere), so the sweep runs on that support S: K_SS = K0_SS + K0_SS M K0_SS, and new points use
k(z1, z2) = k0(z1, z2) + k0(z1, x_S) M k0(x_S, z2).

Low-rank form (Sec. 3.6): W = W0^{1/2}(I + U L U^T)W0^{1/2} with orthonormal U (d x k) reduces to a
k x k ITML on v' = U^T v with shifted bounds b - ||(I - U U^T) v||^2; equivalent to the
restricted problem only with hard constraints, so slack is refused.

Layout: this front end checks the input (:mod:`._data`) and dispatches to the method modules
:mod:`.linear`, :mod:`.kernel`, :mod:`.lowrank`; they share the outer loop (:mod:`._loop`), the
certificate pieces (:mod:`._certificate`) and the compiled sweeps (:mod:`._kernels`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ._certificate import logdet_objective
from ._data import (
    ACTIVE_SWEEPS,
    NEWTON_MAX_CONSTRAINTS,
    BregmanResult,
    check_common,
    check_rows,
    drop_warning,
    kernel_data,
    linear_data,
    nonzero_rows,
)
from .kernel import solve_factored, solve_kernel
from .linear import LinearOptions, solve_linear
from .lowrank import infeasible_result, lift, orthonormal_basis, reduce

__all__ = [
    "ACTIVE_SWEEPS",
    "NEWTON_MAX_CONSTRAINTS",
    "BregmanResult",
    "itml_linear",
    "itml_kernel",
    "itml_lowrank",
    "logdet_objective",
]


def itml_linear(
    V: np.ndarray,
    bounds: np.ndarray,
    delta: np.ndarray,
    W0: np.ndarray | None = None,
    gamma: float = 1.0,
    *,
    tol: float = 1e-8,
    max_sweeps: int = 100_000,
    time_limit: float | None = None,
    check_every: int | None = None,
    method: str = "auto",
    seed: int = 0,
    callback: Callable[..., None] | None = None,
    slow_after: float | None = None,
) -> BregmanResult:
    """Solve the linear-form ITML problem (module docstring) by Bregman projections or by
    projected Newton on the dual.

    ``slow_after`` (seconds, None: never): from then on, stop with status ``"slow"`` when the
    convergence rate measured between two certificates says that ``max_sweeps`` would be
    reached before ``tol`` (``_loop.Loop._slow``); the caller can then switch methods.

    Parameters
    ----------
    V : (m, d) array, row c is v_c = x_i - x_j.
    bounds : (m,) xi0 (u for similar, l for dissimilar), squared-distance units, > 0.
    delta : (m,) +1 similar (v^T W v <= u), -1 dissimilar (v^T W v >= l).
    W0 : (d, d) symmetric positive definite prior (identity if None).
    gamma : slack weight, ``np.inf`` for hard constraints.
    tol : relative gap and relative violation to reach.
    check_every : compute the full certificate every this many sweeps (default: adaptive,
        whenever the violation is below tol and at sweeps 1, 2, 4, 8, ...).
    method : ``"newton"`` projected Newton on the dual (:func:`.linear._dual_newton`; slack
        form only, O(|F|^3) per iteration for |F| free multipliers, numpy only), then sweeps
        from its point if it did not certify; ``"cyclic"`` sweeps in the given order;
        ``"active"`` project and forget (Sonthalia & Gilbert): one full sweep, then
        ``ACTIVE_SWEEPS - 1`` sweeps over the constraints that were active (lam > 0) or
        violated at that full sweep, repeated; ``"random"`` sweeps in a fresh random order each
        sweep (``seed``). ``"auto"``: newton for gamma < inf and at most
        ``NEWTON_MAX_CONSTRAINTS`` constraints, else random
        (cyclic order can be pathological: on digits, similar pairs listed before dissimilar
        ones, cyclic sweeps need ~33k sweeps to 1e-8 where random orders need ~35).
        Whatever the method, the certificate (gap, violation) is computed on ALL constraints.
    callback : called at every full certificate as ``callback(sweeps, objective=primal,
        bound=dual, gap=rel. gap, violation=rel. violation)`` (``specopt._progress.Progress``).
    """
    opts = LinearOptions(tol=tol, max_sweeps=max_sweeps, time_limit=time_limit,
                         check_every=check_every, method=method, seed=seed, callback=callback,
                         slow_after=slow_after)
    return solve_linear(linear_data(V, bounds, delta, W0, gamma), opts)


def itml_kernel(
    K0: np.ndarray,
    pairs: np.ndarray,
    bounds: np.ndarray,
    delta: np.ndarray,
    gamma: float = 1.0,
    *,
    tol: float = 1e-8,
    max_sweeps: int = 100_000,
    time_limit: float | None = None,
    check_every: int | None = None,
    full_kernel: bool = True,
    track_M: bool | None = None,
    factored: bool | None = None,
    block: int | None = None,
    method: str = "cyclic",
    callback: Callable[..., None] | None = None,
) -> BregmanResult:
    """Kernel-form ITML: min D_ld(K, K0) [+ gamma burg(xi, xi0)], delta (K_ii+K_jj-2K_ij - xi) <= 0.

    ``K0`` (n x n) is the prior kernel X^T W0 X, PSD, possibly singular; ``pairs`` (m, 2) holds
    indices (i, j). Returns ``M`` on the support ``S`` (the points used by some constraint): the
    learned kernel is K = K0 + K0[:, S] M K0[S, :] (returned as ``K`` when ``full_kernel``) and
    the learned feature-space metric W = W0 + W0 X_S M X_S^T W0. ``track_M``: update M with each
    projection (w = v + M K0 v, M += beta w w^T) or, if False, sweep on K alone (less memory
    traffic) and recover M = -(I + C K0)^{-1} C from lam when a certificate needs it (default:
    False: the tracked M overflowed to NaN on a singular, ill-conditioned instance where the K
    sweep and the closed form stay accurate; see tests). Primal objective in kernel form:
    D_ld(W, W0) = tr(M K0_SS) - log det(I + M K0_SS); dual g = log det(I + K0 C(lam)) + slack terms.

    ``factored``: factor K0_SS = G G^T (eigendecomposition, eigenvalues below 1e-14 * the largest
    dropped, numerical rank r) and solve the EQUIVALENT linear ITML in R^r on g_i - g_j with
    W0 = I_r (O(r^2) per projection instead of O(s^2)); then K_SS = G W G^T, and M follows from
    lam in closed form, M = -(I + C K0_SS)^{-1} C = -C + C G (I_r + G^T C G)^{-1} G^T C
    (Woodbury; I_r + G^T C G = W^{-1}). Exact: K_SS = K0 + K0 M K0, D_ld(K, K0) = D_ld(W, I_r)
    on range(K0), and g(lam) is the same function of lam (same certificate: primal, dual, gap,
    violation). Default: factored when r <= s / 2.

    ``method``: the order of the factored form's linear ITML (:func:`itml_linear`); the default
    ``"cyclic"`` runs exactly the plain kernel form's iterates (tested), ``"auto"``/``"random"``/
    ``"newton"`` use that function's faster choices. The plain kernel form always sweeps
    cyclically.

    ``block``: without ``track_M``, the projections keep the last ``block`` rank-one updates
    of K aside (rows of K built on demand in O(s * block)) and fold them into K with one
    matrix product, the same iterates up to rounding at BLAS-3 speed (``block=1``: plain
    rank-one updates; default 64 when the support has at least 200 points, else 1).
    """
    data = kernel_data(K0, pairs, bounds, delta, gamma)
    s, mk = data.support.size, data.I.size
    if factored is None:
        factored = mk > 0 and data.R.shape[1] <= s // 2
    opts = LinearOptions(tol=tol, max_sweeps=max_sweeps, time_limit=time_limit,
                         check_every=check_every, method=method, callback=callback)
    if factored:
        return solve_factored(data, full_kernel, opts)
    if block is None:
        block = 64 if s >= 200 else 1
    return solve_kernel(data, full_kernel, bool(track_M), block, opts)


def itml_lowrank(
    V: np.ndarray,
    bounds: np.ndarray,
    delta: np.ndarray,
    U: np.ndarray,
    W0: np.ndarray | None = None,
    gamma: float = math.inf,
    **opts: Any,
) -> BregmanResult:
    """ITML restricted to W = W0^{1/2} (I + U L U^T) W0^{1/2}, hard constraints only.

    With W0 = R R^T (Cholesky) and F = I_k + L: D_ld(W, W0) = D_ld(F, I_k) and
    v^T W v = v'^T F v' + ||(I - U U^T) R^T v||^2 with v' = U^T R^T v, so the problem is a k x k
    ITML with bounds b - ||(I - U U^T) R^T v||^2 (``U`` is orthonormalized here). Equivalent to
    the restricted problem only for hard constraints: ``gamma`` must be inf. A shifted similarity
    bound <= 0 makes the problem infeasible; a shifted dissimilarity bound <= 0 is always met
    (the constraint is dropped). Returns ``W`` (d x d) and ``extra["F"]``, ``extra["U"]``.
    """
    if not math.isinf(float(gamma)):
        raise ValueError(
            "the identity-plus-low-rank form is only equivalent to the restricted problem with "
            "hard constraints (gamma = inf); with slack it is a different problem and shifted "
            "bounds can become <= 0. Use itml_linear / itml_kernel for slack problems."
        )
    V = check_rows(V)
    m, d = V.shape
    xi0, delta, _ = check_common(bounds, delta, math.inf, m)
    nonzero = nonzero_rows(V)
    if not np.all(nonzero):
        drop_warning(int(np.sum(~nonzero)))
    red = reduce(V, xi0, delta, nonzero, orthonormal_basis(U, d), W0)
    if red.bad:
        return infeasible_result(m, xi0, red.bad)
    a = red.active
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sub = itml_linear(red.Vp[a], red.b[a], delta[a], None, math.inf, **opts)
    return lift(sub, red, xi0)
