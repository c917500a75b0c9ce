r"""L-BFGS with an exact line search for the factored augmented Lagrangian. No CVXPY here.

Along a direction ``D`` the augmented Lagrangian of :mod:`specopt.solvers.sdp.bm` is a
polynomial in the step ``tau`` (``A((Y + tau D)(Y + tau D)^T)`` is quadratic in ``tau``)::

    r(tau)   = r0 + tau q1 + tau^2 q2,    q1 = A(Y D^T + D Y^T),  q2 = A(D D^T)
    obj(tau) = <C, YY^T> + 2 tau <CY, D> + tau^2 <CD, D>
    L(tau)   = obj(tau) - y^T r(tau) + sigma/2 ||r(tau)||^2
               [+ (max(0, mu + sigma (tr(tau) - t))^2 - mu^2) / (2 sigma),
                tr(tau) = ||Y||^2 + 2 tau <Y, D> + tau^2 ||D||^2]

a quartic (piecewise with the trace bound), so the step is its exact global minimizer over
``tau > 0`` (the real roots of a cubic on each piece), at the cost of two kernel calls
(``q1``, ``q2``) and one product with ``C``: the line search of LoRADS (Han, Chen, Lin, Ge,
Ye; arXiv:2403.09133), written here from its description. The residual and ``CY`` are carried
along exactly as polynomials (recomputed every :data:`REFRESH` steps against drift), so a step
costs one ``A^*(w) Y`` for the gradient besides. The direction is the usual two-loop recursion
(Nocedal & Wright, Alg. 7.4) over the last ``memory`` pairs.

Why not scipy's L-BFGS-B: its bookkeeping (bounds, Cauchy point) costs about 1.3 ms per
iteration at 12000 unknowns, measured, against microseconds for the SDE kernels at that size,
and its line search spends extra evaluations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._data import Scaled

__all__ = ["LBFGSResult", "lbfgs_exact"]

#: steps between exact recomputations of the carried residual and ``C Y``
REFRESH = 50


@dataclass
class LBFGSResult:
    """``Y`` (projected), iterations, whether the gradient test was met."""

    Y: np.ndarray
    nit: int
    converged: bool


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """``<a, b>`` (BLAS on the flattened arrays: 4x ``np.sum(a * b)`` at n r = 4e4)."""
    return float(np.vdot(a, b))


def _gradient(P: Scaled, Y: np.ndarray, r: np.ndarray, CY: np.ndarray, y: np.ndarray,
              sigma: float, mu: float) -> tuple[np.ndarray, float, float]:
    """The augmented Lagrangian's gradient on ``P``'s subspace,
    ``P(2 (C Y - A^*(y - sigma r) Y + mu~ Y))``, with ``trace = <Y, Y>`` and
    ``mu~ = max(0, mu + sigma (trace - t))`` (both 0 without a trace bound); ``r`` and ``CY``:
    the residual and ``C Y`` at ``Y``. Returns ``(gradient, trace, mu~)``."""
    mut = 0.0
    trace = _dot(Y, Y) if P.t is not None else 0.0
    if P.t is not None:
        mut = max(0.0, mu + sigma * (trace - P.t))
    G = CY - P.A.pairs.adj_times(y - sigma * r, Y)
    if mut:
        G += mut * Y
    return P.project(2.0 * G), trace, mut


def _line_poly(P: Scaled, Y: np.ndarray, D: np.ndarray, r0: np.ndarray, CY: np.ndarray,
               CD: np.ndarray, y: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray,
                                                                    np.ndarray]:
    """Coefficients (highest first) of ``L(tau) - L(0)`` without the trace term, and
    ``q1, q2``."""
    q1 = P.A.pairs.ydt(Y, D)
    q2 = P.A.pairs.yyt(D)
    c1 = 2.0 * _dot(CY, D)
    c2 = _dot(CD, D)
    ry = r0 - y / sigma  # sigma/2 ||r||^2 - y^T r = sigma/2 ||r - y/sigma||^2 - const
    poly = sigma * np.array([0.5 * float(q2 @ q2), float(q1 @ q2),
                             0.5 * float(q1 @ q1) + float(ry @ q2), float(ry @ q1), 0.0])
    poly[2] += c2
    poly[3] += c1
    return poly, q1, q2


def _best_step(poly: np.ndarray, tr: tuple[float, float, float] | None, mu: float,
               sigma: float, t: float | None) -> float:
    """The global minimizer over ``tau >= 0`` of the polynomial ``poly`` plus, with a trace bound,
    ``(max(0, u(tau))^2 - mu^2) / (2 sigma)``, ``u = mu + sigma (tr(tau) - t)``, ``tr`` given as
    ``(tr0, 2 <Y, D>, ||D||^2)``."""
    pieces = [poly]
    u = None
    if t is not None and tr is not None:
        u = np.array([sigma * tr[2], sigma * tr[1], mu + sigma * (tr[0] - t)])
        pieces.append(np.polyadd(poly, np.polymul(u, u) / (2.0 * sigma)))

    u0 = max(0.0, float(u[2])) if u is not None else 0.0

    def value(tau: float) -> float:
        """``L(tau) - L(0)``, the trace term's change formed without cancellation."""
        v = float(np.polyval(poly, tau))
        if u is not None:
            du = tau * (float(u[1]) + float(u[0]) * tau)  # u(tau) - u(0)
            ut = float(u[2]) + du
            if ut > 0 and u0 > 0:
                v += du * (ut + u0) / (2.0 * sigma)
            else:
                v += (max(0.0, ut) ** 2 - u0 * u0) / (2.0 * sigma)
        return v

    cands = [0.0]
    for p in pieces:
        for rt in np.roots(np.polyder(p)) if np.any(p[:-1] != 0) else []:
            if abs(rt.imag) <= 1e-10 * max(1.0, abs(rt.real)) and rt.real > 0:
                cands.append(float(rt.real))
    vals = [value(c) for c in cands]
    return cands[int(np.argmin(vals))]


def lbfgs_exact(P: Scaled, Y0: np.ndarray, y: np.ndarray, sigma: float, mu: float,
                gtol: float, max_iters: int, memory: int = 10,
                out_of_time: Callable[[], bool] = lambda: False) -> LBFGSResult:
    """Minimize the augmented Lagrangian ``L(.; y, sigma, mu)`` of
    :func:`~specopt.solvers.sdp.bm.al_value_grad` from ``Y0`` (solver units): L-BFGS directions
    (projected on ``P``'s subspace: zero column means with centering, the face) and the exact
    step of the module docstring. Stops when ``max |grad| <= gtol``, after ``max_iters`` steps,
    when a step no longer decreases ``L`` (relative ``1e-15``), or at ``out_of_time()``."""
    Y = np.ascontiguousarray(P.project(Y0))
    S_hist: list[np.ndarray] = []
    G_hist: list[np.ndarray] = []
    rho: list[float] = []
    r = P.residual(Y)
    CY = P.C.matmat(Y)
    G = None
    converged = False
    it = 0
    for it in range(max_iters + 1):
        if it % REFRESH == 0 and it:
            r = P.residual(Y)
            CY = P.C.matmat(Y)
        Gn, trace, _ = _gradient(P, Y, r, CY, y, sigma, mu)
        if G is not None:
            s_k, g_k = S_hist[-1], Gn - G
            sg = _dot(s_k, g_k)
            if sg > 1e-12 * math.sqrt(_dot(s_k, s_k) * _dot(g_k, g_k)):
                G_hist.append(g_k)
                rho.append(1.0 / sg)
            else:
                S_hist.pop()
            if len(S_hist) > memory:
                S_hist.pop(0)
                G_hist.pop(0)
                rho.pop(0)
        G = Gn
        if float(np.max(np.abs(G))) <= gtol:
            converged = True
            break
        if it == max_iters or out_of_time():
            break
        D = _two_loop(G, S_hist, G_hist, rho)
        if _dot(D, G) >= 0:  # not a descent direction: restart from the gradient
            S_hist.clear()
            G_hist.clear()
            rho.clear()
            D = -G
        for attempt in range(2):
            D = np.ascontiguousarray(D)
            CD = P.C.matmat(D)
            poly, q1, q2 = _line_poly(P, Y, D, r, CY, CD, y, sigma)
            tr = (trace, 2.0 * _dot(Y, D), _dot(D, D)) \
                if P.t is not None else None
            tau = _best_step(poly, tr, mu, sigma, P.t)
            if tau > 0.0 or attempt:
                break
            # no decrease along the quasi-Newton direction (rounding near the minimum): once
            # more along the gradient with the memory cleared
            S_hist.clear()
            G_hist.clear()
            rho.clear()
            D = -G
        if tau <= 0.0:
            break
        Y = np.ascontiguousarray(Y + tau * D)
        r = r + tau * q1 + tau * tau * q2
        CY = CY + tau * CD
        S_hist.append(tau * D)
    return LBFGSResult(Y=Y, nit=it, converged=converged)


def _two_loop(G: np.ndarray, S_hist: list[np.ndarray], G_hist: list[np.ndarray],
              rho: list[float]) -> np.ndarray:
    """``-H G`` for the L-BFGS inverse-Hessian approximation ``H`` of the stored pairs (the
    last pair may be an unpaired step: skipped)."""
    k = len(G_hist)
    q = G.copy()
    alpha = np.empty(k)
    for i in range(k - 1, -1, -1):
        alpha[i] = rho[i] * _dot(S_hist[i], q)
        q -= alpha[i] * G_hist[i]
    if k:
        q *= 1.0 / (rho[-1] * _dot(G_hist[-1], G_hist[-1]))
    for i in range(k):
        beta = rho[i] * _dot(G_hist[i], q)
        q += (alpha[i] - beta) * S_hist[i]
    return -q


def al_hessp(Y: np.ndarray, D: np.ndarray, P: Scaled, ytil: np.ndarray, sigma: float,
             mut: float) -> np.ndarray:
    """Hessian of the augmented Lagrangian at ``Y`` applied to ``D`` (unprojected):
    ``2 (S(ytil) D + sigma A^*(A(Y D^T + D Y^T)) Y [+ mu~ D + 2 sigma <Y, D> Y])``."""
    pf = P.A.pairs
    dr = pf.ydt(Y, D)
    H = P.C.matmat(D) - pf.adj_times(ytil, D)
    H += sigma * pf.adj_times(dr, Y)
    if P.t is not None and mut > 0:
        H += mut * D + 2.0 * sigma * _dot(Y, D) * Y
    return 2.0 * H


def newton_exact(P: Scaled, Y0: np.ndarray, y: np.ndarray, sigma: float, mu: float,
                 gtol: float, max_iters: int, cg_iters: int = 50,
                 out_of_time: Callable[[], bool] = lambda: False) -> LBFGSResult:
    """Minimize the augmented Lagrangian from ``Y0`` by truncated Newton: each direction is
    conjugate gradients on ``H D = -G`` (Hessian products :func:`al_hessp`, on ``P``'s subspace)
    to the relative residual ``min(0.1, sqrt(||G|| / ||G_0||))`` or ``cg_iters`` products,
    stopped at negative curvature (Steihaug), and the step along it is the exact global minimizer
    of the quartic of the module docstring (no trust region: a direction with no decrease falls
    back to ``-G``). Stops when ``||G||_F <= gtol``, after ``max_iters`` directions, or at
    ``out_of_time()``. Replaces scipy's trust-krylov at large ``sigma``: its region bookkeeping
    and rejected steps cost a fifth of its time on SDE k-NN rows."""
    Y = np.ascontiguousarray(P.project(Y0))
    g0 = None
    converged = False
    it = 0
    for it in range(max_iters + 1):
        r = P.residual(Y)
        CY = P.C.matmat(Y)
        ytil = y - sigma * r
        G, trace, mut = _gradient(P, Y, r, CY, y, sigma, mu)
        gn = math.sqrt(_dot(G, G))
        g0 = gn if g0 is None else g0
        if gn <= gtol:
            converged = True
            break
        if it == max_iters or out_of_time():
            break

        def hess(X: np.ndarray, Y: np.ndarray = Y, ytil: np.ndarray = ytil,
                 mut: float = mut) -> np.ndarray:
            return P.project(al_hessp(Y, np.ascontiguousarray(X), P, ytil, sigma, mut))

        D = _steihaug(hess, G, min(0.1, math.sqrt(gn / g0)) * gn, cg_iters)
        tau = 0.0
        for D_ in (D, -G):
            D_ = np.ascontiguousarray(D_)
            poly, _, _ = _line_poly(P, Y, D_, r, CY, P.C.matmat(D_), y, sigma)
            tr = (trace, 2.0 * _dot(Y, D_), _dot(D_, D_)) if P.t is not None else None
            tau = _best_step(poly, tr, mu, sigma, P.t)
            if tau > 0.0:
                break
        if tau <= 0.0:
            break
        Y = np.ascontiguousarray(Y + tau * D_)
    return LBFGSResult(Y=Y, nit=it, converged=converged)


def _steihaug(hess: Callable[[np.ndarray], np.ndarray], G: np.ndarray, tol: float,
              max_iters: int) -> np.ndarray:
    """Conjugate gradients on ``H D = -G`` from ``D = 0`` until ``||H D + G|| <= tol``, at most
    ``max_iters`` products; at a direction of nonpositive curvature the current ``D`` (or that
    direction itself on the first step, a descent direction). Never returns 0 for ``G != 0``."""
    D = np.zeros_like(G)
    R = -G
    Pd = R.copy()
    rr = _dot(R, R)
    for k in range(max_iters):
        HP = hess(Pd)
        curv = _dot(Pd, HP)
        if curv <= 1e-14 * rr:
            return Pd if k == 0 else D
        a = rr / curv
        D = D + a * Pd
        R = R - a * HP
        rr_new = _dot(R, R)
        if math.sqrt(rr_new) <= tol:
            break
        Pd = R + (rr_new / rr) * Pd
        rr = rr_new
    return D
