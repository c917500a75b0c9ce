"""The numpy-only primal path of dual CD: projected Newton on the Huber-smoothed primal with
decreasing smoothing, and the KKT pair of the partition it identifies. Used first (the Newton
path, no compiled kernel) and as polish candidates during coordinate descent; every candidate
enters only through the certificate."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from .._status import SolverStatus
from ._data import DualCDResult, Problem


def _exact_step(r, sd, C, mu, wLd, dLd, a_max):
    """Minimizer of the convex piecewise quadratic ``phi(a) = P_mu(w + a d)`` on [0, a_max]
    (see :func:`_huber_newton`): root of the increasing, piecewise linear ::

        phi'(a) = w^T L d + a d^T L d - sum_i C_i sd_i clip((r_i - a sd_i) / mu, 0, 1)

    by safeguarded Newton steps inside a bracket (exact once the iterate lies on the root's
    linear piece). numpy only: each probe is O(n)."""
    Csd = C * sd
    Csd2 = Csd * sd / mu

    def dphi(a):
        x = (r - a * sd) / mu
        g = wLd + a * dLd - float(Csd @ np.clip(x, 0.0, 1.0))
        h = dLd + float(Csd2 @ ((x > 0.0) & (x < 1.0)))
        return g, h

    g, h = dphi(0.0)
    if g >= 0.0:
        return 0.0
    lo, hi = 0.0, a_max
    a = min(1.0, a_max)
    for _ in range(100):
        g, h = dphi(a)
        if g == 0.0:
            return a
        if g < 0.0:
            lo = a
            if lo >= a_max:
                return a_max
        else:
            hi = a
        if hi - lo <= 1e-12 * hi:
            break
        nxt = a - g / h if h > 0 else np.inf
        if abs(nxt - a) <= 1e-13 * a:  # on the root's linear piece: Newton step is exact
            return nxt if lo < nxt < hi else a
        if not (lo < nxt < hi):
            nxt = 0.5 * (lo + hi) if np.isfinite(hi) else 2.0 * max(a, lo)
        a = nxt
    return a


def _kkt_polish(L, Z, C, mask, lam, t):
    """Exact primal-dual pair for the active-set partition of the current dual iterate.

    With U = {lam_i = C_i}, F = {0 < lam_i < C_i} and T = {j in J: t_j > 0} (w_j held at 0)
    it solves (least squares) the KKT system of that partition::

        L w - Z_U^T C_U - Z_F^T lam_F - t = 0,   Z_F w = 1,   w_T = 0

    and returns ``w`` (w_J clipped at 0) and the dual point (lam, t) clipped to the dual-feasible
    set. Once coordinate descent has identified the partition this pair is optimal to rounding;
    before that it is just a candidate, and the caller uses it only through the certificate.
    """
    n, m = Z.shape
    U = np.flatnonzero(lam >= C)
    F = np.flatnonzero((lam > 0) & (lam < C))
    T = np.flatnonzero(mask & (t > 0))
    if F.size > 4 * m:  # partition not identified yet: the system would be overdetermined
        return None
    free = np.setdiff1d(np.arange(m), T)
    c_u = Z[U].T @ C[U]
    ZF = Z[np.ix_(F, free)]
    nfr, nf = free.size, F.size
    K = np.zeros((nfr + nf, nfr + nf))
    K[:nfr, :nfr] = L[np.ix_(free, free)]
    K[:nfr, nfr:] = -ZF.T
    K[nfr:, :nfr] = ZF
    sol = np.linalg.lstsq(K, np.concatenate([c_u[free], np.ones(nf)]), rcond=None)[0]
    w = np.zeros(m)
    w[free] = sol[:nfr]
    lam_k = np.zeros(n)
    lam_k[U] = C[U]
    lam_k[F] = np.clip(sol[nfr:], 0.0, C[F])
    t_k = np.zeros(m)
    t_k[T] = np.maximum(L[T] @ w - c_u[T] - Z[np.ix_(F, T)].T @ lam_k[F], 0.0)
    w[mask] = np.maximum(w[mask], 0.0)
    return w, lam_k, t_k


def polish_candidates(prob: Problem, lam, t, w, mu0=1e-2, mu_min=1e-9):
    """Primal-dual candidates for the certificate (a generator; the caller stops it early).

    First the KKT pair of the current dual partition; then, for mu = mu0, mu0/10, ..., a
    projected Newton solve (warm-started) of the Huber-smoothed primal::

        P_mu(w) = 1/2 w^T L w + sum_i C_i h_mu(1 - z_i^T w),
        h_mu(r) = 0 (r <= 0),  r^2 / (2 mu) (0 < r < mu),  r - mu/2 (r >= mu),

    over w_J >= 0, yielding its primal point with the dual-feasible pair
    ``lam_i = C_i clip((1 - z_i^T w) / mu, 0, 1)``, ``t_J = max(0, (L w - Z^T lam)_J)``, and the
    KKT pair of the partition that pair defines (exact once the partition is right).
    """
    cand = _kkt_polish(prob.L, prob.Z, prob.C, prob.mask, lam, t)
    if cand is not None:
        yield cand
    mu = mu0
    while mu >= mu_min:
        w = _huber_newton(prob.L, prob.Z, prob.C, prob.mask, w, mu)
        r = 1.0 - prob.Z @ w
        yield _smoothed_pair(prob, w, r, mu)
        cand = _partition_pair(prob, w, r, mu)
        if cand is not None:
            yield cand
        mu *= 0.1


def _huber_value(L, C, mu, w, r, q=None):
    h = np.where(r <= 0, 0.0, np.where(r < mu, r * r / (2 * mu), r - 0.5 * mu))
    val = 0.5 * w @ L @ w + C @ h
    return val if q is None else val - q @ w


def _huber_newton(L, Z, C, mask, w, mu, max_iter=50, q=None, info=None):
    """Projected Newton (Bertsekas) for min P_mu(w) - q^T w s.t. w_J >= 0 (q: optional linear
    term, the rows of a shrunk problem fixed in the linear part of h_mu).

    Direction: Newton on the free coordinates with the generalized Hessian
    ``L + sum_{0 < r_i < mu} (C_i / mu) z_i z_i^T``; coordinates at 0 (within eps) with a
    positive gradient are held. Step: the exact minimizer of the convex piecewise-quadratic
    ``P_mu(w + a d)`` along the ray (bisection on its derivative, O(n) per probe), then
    projected on w_J >= 0; if the projection undoes the decrease, backtrack along the arc.
    """
    w = w.copy()
    w[mask] = np.maximum(w[mask], 0.0)
    r = 1.0 - Z @ w
    f = _huber_value(L, C, mu, w, r, q)
    for _ in range(max_iter):
        lam = C * np.clip(r / mu, 0.0, 1.0)
        Lw = L @ w
        g = Lw - Z.T @ lam
        if q is not None:
            g -= q
        pg = np.where(mask & (w <= 0.0), np.minimum(g, 0.0), g)
        if np.abs(pg).max() <= 1e-12 * max(1.0, np.abs(Lw).max()):
            break
        d = _huber_direction(L, Z, C, mask, w, r, g, mu)
        sd = Z @ d
        wLd = float(w @ L @ d) - (0.0 if q is None else float(q @ d))
        step = _exact_step(r, sd, C, mu, wLd, float(d @ L @ d), np.inf)
        found = _arc_backtrack(L, Z, C, mask, mu, q, w, r, f, d, sd, step)
        if found is None or f - found[2] <= 1e-16 * abs(f):
            if found is not None:
                w = found[0]
            break
        w, r, f = found
    else:  # max_iter reached without a stopping test: not converged
        if info is not None:
            info["converged"] = False
    return w


def _huber_direction(L, Z, C, mask, w, r, g, mu):
    """Newton direction on the free coordinates (generalized Hessian of P_mu); coordinates at
    0 (within eps) with a positive gradient are held."""
    wp = np.where(mask, np.maximum(w - g, 0.0), w - g)
    eps = min(1e-6, float(np.abs(w - wp).max()))
    bound = mask & (w <= eps) & (g > 0)
    Q = np.flatnonzero((r > 0) & (r < mu))
    ZQ = Z[Q]
    H = L + (ZQ.T * (C[Q] / mu)) @ ZQ
    free = ~bound
    d = np.zeros_like(w)
    d[free] = -np.linalg.solve(H[np.ix_(free, free)], g[free])
    return d


def _arc_backtrack(L, Z, C, mask, mu, q, w, r, f, d, sd, step):
    """The step projected on w_J >= 0, halved along the arc until P_mu decreases;
    (w, r, P_mu) of the accepted point, or None (no decrease: converged)."""
    for _ in range(40):
        wn = w + step * d
        bent = mask & (wn < 0)
        if bent.any():
            wn[bent] = 0.0
            rn = 1.0 - Z @ wn
        else:
            rn = r - step * sd
        fn = _huber_value(L, C, mu, wn, rn, q)
        if fn < f:
            return wn, rn, fn
        if not bent.any():  # the exact step along the ray does not decrease: converged
            return None
        step *= 0.5
    return None


# --------------------------------------------------------------------------------------------
# The Newton path (before any coordinate descent)
# --------------------------------------------------------------------------------------------
@dataclass
class _Best:
    """Best primal point and best dual point seen, each certified on ALL rows."""

    prob: Problem
    tol: float
    on_step: Callable[[int, float, float], None] | None
    w: np.ndarray
    P: float
    lam: np.ndarray
    t: np.ndarray
    D: float = 0.0
    k: int = 0

    @classmethod
    def start(cls, prob: Problem, tol: float, on_step) -> _Best:
        n, m = prob.Z.shape  # w = 0: every row at xi = 1; lam = 0, t = 0: D = 0
        return cls(prob, tol, on_step, np.zeros(m), float(prob.C.sum()), np.zeros(n),
                   np.zeros(m))

    def certify(self, wk, lam_k, t_k) -> bool:
        """Take the candidate pair (made feasible) if better; True when the gap is <= tol."""
        L, Z, C, mask = self.prob.L, self.prob.Z, self.prob.C, self.prob.mask
        self.k += 1
        wk = np.where(mask, np.maximum(wk, 0.0), wk)
        Pk = float(0.5 * wk @ L @ wk + C @ np.maximum(0.0, 1.0 - Z @ wk))
        if Pk < self.P:
            self.w, self.P = wk, Pk
        lam_k = np.clip(lam_k, 0.0, C)
        t_k = np.where(mask, np.maximum(t_k, 0.0), 0.0)
        u = sla.solve_triangular(self.prob.R, Z.T @ lam_k + t_k, trans="T", lower=False,
                                 check_finite=False)  # |R^{-T} u|^2 = u^T L^{-1} u
        Dk = float(lam_k.sum() - 0.5 * u @ u)
        if Dk > self.D:
            self.lam, self.t, self.D = lam_k, t_k, Dk
        if self.on_step is not None:
            self.on_step(self.k, self.P, self.D)
        return (self.P - self.D) / max(1.0, self.P) <= self.tol


def _smoothed_pair(prob: Problem, w, r, mu):
    """The dual-feasible pair of a smoothed solution: lam = C clip(r / mu, 0, 1), t_J >= 0."""
    lam_mu = prob.C * np.clip(r / mu, 0.0, 1.0)
    return w, lam_mu, np.where(prob.mask, np.maximum(prob.L @ w - prob.Z.T @ lam_mu, 0.0), 0.0)


def _partition_pair(prob: Problem, w, r, mu):
    """KKT pair of the partition read from r with a symmetric band (rows within mu of the
    margin are in F); None if the partition is not identified yet."""
    C = prob.C
    lam_part = np.where(r >= mu, C, np.where(np.abs(r) < mu, 0.5 * C, 0.0))
    t_part = np.where(prob.mask & (w <= 0.0), 1.0, 0.0)
    return _kkt_polish(prob.L, prob.Z, C, prob.mask, lam_part, t_part)


@dataclass
class _Rows:
    """Rows of the smoothed problem (``act``, None: all) and the linear term ``q`` of the rows
    fixed in the linear part of h_mu."""

    act: np.ndarray | None = None
    q: np.ndarray | None = None

    def smooth(self, prob: Problem, w, mu, info):
        L, Z, C, mask = prob.L, prob.Z, prob.C, prob.mask
        if self.act is None:
            return _huber_newton(L, Z, C, mask, w, mu, info=info)
        return _huber_newton(L, Z[self.act], C[self.act], mask, w, mu, q=self.q, info=info)

    def shrink(self, prob: Problem, r, limit: float) -> None:
        """Shrink once, when fewer than half the rows have |r| < limit."""
        keep = np.abs(r) < limit
        if self.act is None and keep.sum() < 0.5 * r.size:
            self.act = np.flatnonzero(keep)
            up = r >= limit
            self.q = prob.Z[up].T @ prob.C[up]


def _newton_first(prob: Problem, tol, time_limit, mu0=1e-1, mu_min=1e-9, band=2.0,
                  on_step=None) -> _Best:
    """numpy-only primal path, certified on ALL rows.

    For mu = mu0, mu0/10, ..., mu_min: projected Newton (:func:`_huber_newton`, warm-started) on
    the Huber-smoothed primal P_mu, then two candidates: the dual-feasible pair of the smoothed
    solution (``lam = C clip(r / mu, 0, 1)``) and the KKT pair of the partition it identifies
    (:func:`_kkt_polish`, exact once the partition is right). After the first level the smoothed
    problem is SHRUNK to the rows with ``|r| < band * mu0`` (r = 1 - z^T w): rows with larger r
    sit in the linear part of h_mu (they enter as the linear term ``q = sum C_i z_i``), rows with
    r <= -band mu0 in its flat part. The shrinking is a heuristic; the certificate is not: every
    candidate's primal value ``P(w)`` and dual value ``D(lam, t)`` are computed on all rows, and
    a wrong guess only shows as a gap (then coordinate descent takes over). Stops at the first
    relative gap <= tol.

    Returns the best primal point and value and the best dual point and its value (a lower
    bound on the optimum). ``on_step(k, P, D)`` (if given) is called after the k-th candidate
    with the best values so far.
    """
    n, m = prob.Z.shape
    t0 = time.perf_counter()
    best = _Best.start(prob, tol, on_step)
    rows = _Rows()
    w = np.zeros(m)
    if n >= 80 * m:  # warm start from a 1-in-8 row sample (weights scaled by 8)
        sub = np.arange(0, n, 8)
        w = _huber_newton(prob.L, prob.Z[sub], 8.0 * prob.C[sub], prob.mask, w, mu0)
    mu = mu0
    while mu >= mu_min:
        info = {"converged": True}
        w = rows.smooth(prob, w, mu, info)
        r = 1.0 - prob.Z @ w
        if not info["converged"]:
            # badly scaled data: the smoothed solve did not converge, so neither its partition
            # nor a shrink can be trusted; hand over to coordinate descent
            best.certify(*_smoothed_pair(prob, w, r, mu))
            break
        cand = _partition_pair(prob, w, r, mu)
        if cand is not None and best.certify(*cand):
            break
        if cand is None or mu < 10 * mu_min:  # the smoothed pair: fallback dual point
            if best.certify(*_smoothed_pair(prob, w, r, mu)):
                break
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            break
        rows.shrink(prob, r, band * mu0)
        mu *= 0.1
    return best


@dataclass(frozen=True)
class NewtonStart:
    """What the Newton path hands to coordinate descent: its best primal point and value, its
    best dual point (lam, t) and value, and how many candidates it certified."""

    w: np.ndarray
    P: float
    lam: np.ndarray
    t: np.ndarray
    D: float
    n_candidates: int
    history: dict[str, list[float]] = field(default_factory=dict)


def newton_stage(prob: Problem, tol: float, time_limit, callback, verbose: bool,
                 t0: float) -> tuple[NewtonStart, DualCDResult | None]:
    """Run the Newton path; the result when it certified (or spent the time), else None."""
    t_n = time.perf_counter()

    def candidate(k: int, P: float, D: float) -> None:  # progress: one line per candidate
        callback(k, objective=P, bound=D, gap=(P - D) / max(1.0, P), violation=0.0,
                 time=time.perf_counter() - t0)

    b = _newton_first(prob, tol, time_limit, on_step=callback and candidate)
    hist = {"dual": [b.D], "primal": [b.P], "gap": [b.P - b.D], "pass": [0],
            "time": [time.perf_counter() - t0]}
    rel = (b.P - b.D) / max(1.0, b.P)
    if verbose:
        print(f"newton  P={b.P:.10g}  D={b.D:.10g}  rel.gap={rel:.3e}  candidates={b.k}")
    if callback is not None and b.k == 0:  # else the last candidate printed it
        callback(0, objective=b.P, bound=b.D, gap=rel, violation=0.0,
                 time=time.perf_counter() - t0)
    start = NewtonStart(b.w, b.P, b.lam, b.t, b.D, b.k, hist)
    out_of_time = time_limit is not None and time.perf_counter() - t_n > time_limit
    if not (rel <= tol or out_of_time):
        return start, None
    status = SolverStatus.OPTIMAL if rel <= tol else SolverStatus.TIME_LIMIT
    return start, DualCDResult(
        w=b.w, xi=np.maximum(0.0, 1.0 - prob.Z @ b.w), lam=b.lam, t=b.t, primal=b.P, dual=b.D,
        gap=b.P - b.D, rel_gap=rel, status=status, iterations=0, setup_time=t_n - t0,
        solve_time=time.perf_counter() - t_n, history=hist, n_polish=b.k, method="newton",
    )
