"""Linear-form ITML: Bregman sweeps (cyclic, random, active-set) and projected Newton on the
dual, certified over all constraints. Input is validated by the front end
(:func:`specopt.solvers.bregman.itml_linear`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from .._status import SolverStatus
from ._certificate import RayWatch, burg, logdet_objective, logdet_pd, slack_terms
from ._data import ACTIVE_SWEEPS, NEWTON_MAX_CONSTRAINTS, BregmanResult, LinearData
from ._kernels import sweep_args, sweeps_linear, sweeps_linear_idx
from ._loop import INACCURATE, Certified, Loop, LoopOutcome, Stages, record

METHODS = ("auto", "newton", "cyclic", "active", "random")


@dataclass(frozen=True)
class LinearOptions:
    """Options of :func:`solve_linear` (see :func:`specopt.solvers.bregman.itml_linear`)."""

    tol: float = 1e-8
    max_sweeps: int = 100_000
    time_limit: float | None = None
    check_every: int | None = None
    method: str = "auto"
    seed: int = 0
    callback: Callable[..., None] | None = None
    slow_after: float | None = None


# --------------------------------------------------------------------------------------------
# Projected Newton on the dual (slack form, gamma < inf)
# --------------------------------------------------------------------------------------------
def _dual_value(VL, xi0, delta, gamma, lm):
    """g(lam) and its factors (Cholesky of S(lam), slack terms t), or (-inf, None) outside the
    domain."""
    d = VL.shape[1]
    S = np.eye(d) + (VL.T * (delta * lm)) @ VL
    t = 1.0 - delta * lm * xi0 / gamma
    if np.any(t <= 0):
        return -math.inf, None
    try:
        Lc = np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        return -math.inf, None
    return 2.0 * float(np.sum(np.log(np.diag(Lc)))) + gamma * float(np.sum(np.log(t))), (Lc, t)


def _newton_direction(B, p, xi, grad, lam, delta, gamma):
    """Newton step on the free multipliers, scaled gradient on the epsilon-binding ones."""
    eps = min(1e-8, 1e-3 * float(np.abs(grad).max()))
    bind = (lam <= eps) & (grad < 0)
    F = np.flatnonzero(~bind)
    hdiag = p * p + xi * xi / gamma
    step = np.where(bind, grad / hdiag, 0.0)
    if F.size:
        BF = B[:, F]
        H = BF.T @ BF
        H *= H
        H *= np.outer(delta[F], delta[F])
        H[np.diag_indices_from(H)] += xi[F] ** 2 / gamma
        try:
            step[F] = sla.cho_solve(sla.cho_factor(H, lower=True, check_finite=False),
                                    grad[F], check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            step[F] = grad[F] / hdiag[F]
    return step


def _arc_search(VL, xi0, delta, gamma, lam, g, grad, step):
    """Armijo search along the projection arc; (trial, g(trial), factors) or None (stalled)."""
    a = 1.0
    for _ in range(60):
        trial = np.maximum(lam + a * step, 0.0)
        gt, auxt = _dual_value(VL, xi0, delta, gamma, trial)
        if auxt is not None and gt >= g + 1e-4 * float(grad @ (trial - lam)):
            return trial, gt, auxt
        if a == 1.0 and auxt is not None and abs(gt - g) <= 1e-13 * max(1.0, abs(g)):
            return trial, gt, auxt  # full step, change below rounding: quadratic region
        a *= 0.5
    return None


def _dual_newton(VL, xi0, delta, gamma, lam, tol, max_iter=300, time_limit=None,
                 on_step=None):
    """Projected Newton (Bertsekas 1982) for the concave dual of the slack problem::

        max_{lam >= 0}  g(lam) = log det S(lam) + gamma sum_c log(1 - delta_c lam_c xi0_c / gamma),
        S(lam) = I + sum_c delta_c lam_c u_c u_c^T        (u_c = rows of VL = L0^T v_c)

    with gradient ``delta_c (p_c - xi_c)`` (p_c = u_c^T S^{-1} u_c = v_c^T W v_c, xi_c =
    xi0_c / (1 - delta_c lam_c xi0_c / gamma): the iterate's W and slacks) and Hessian
    ``-(delta delta^T) o (P o P) - diag(xi^2 / gamma)``, P = U S^{-1} U^T: negative definite for
    gamma < inf. Each iteration: Newton step on the free multipliers (Cholesky of the |F| x |F|
    block), scaled gradient step on the epsilon-binding ones (lam_c <= eps, gradient < 0), Armijo
    search along the projection arc inside the domain (S PD, slack logs finite).

    ``lam`` is updated in place. Stops when the relative violation and the complementarity
    |sum lam grad| / max(1, |g|) are <= tol (the caller certifies), at ``max_iter``, at the time
    limit, or when the line search stalls. Returns (iterations, converged flag). ``on_step(k)``
    (if given) is called after the k-th accepted step (``lam`` holds its multipliers).
    """
    t0 = time.perf_counter()
    g, aux = _dual_value(VL, xi0, delta, gamma, lam)
    if aux is None:
        return 0, False
    for it in range(1, max_iter + 1):
        Lc, t = aux
        B = sla.solve_triangular(Lc, VL.T, lower=True, check_finite=False)  # p = |B[:, c]|^2
        p = np.einsum("ij,ij->j", B, B)
        xi = xi0 / t
        grad = delta * (p - xi)
        viol = float(np.max(np.maximum(0.0, delta * (p - xi)) / xi))
        comp = abs(float(lam @ grad))
        if viol <= 0.1 * tol and comp <= 0.1 * tol * max(1.0, abs(g)):
            return it - 1, True
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            return it - 1, False
        found = _arc_search(VL, xi0, delta, gamma, lam, g, grad,
                            _newton_direction(B, p, xi, grad, lam, delta, gamma))
        if found is None:
            return it - 1, False
        trial, gt, auxt = found
        if not (gt > g) and np.array_equal(trial, lam):
            return it - 1, False
        lam[:] = trial
        g, aux = gt, auxt
        if on_step is not None:
            on_step(it)
    return max_iter, False


# --------------------------------------------------------------------------------------------
# Sweeps and certificate on one iterate
# --------------------------------------------------------------------------------------------
class _LinearIterate:
    """The iterate (W as ``A``, slacks ``xi``, multipliers ``lam``) and the stages acting on it."""

    def __init__(self, data: LinearData, order: str, seed: int) -> None:
        self.data = data
        c = data.cons
        self.A = data.W0.copy()
        self.lam = np.zeros(c.delta.size)
        self.xi = c.xi0.copy()
        self.order = order
        self.rng = np.random.default_rng(seed)
        self.args = sweep_args(c.gamma)
        self.active = np.arange(c.delta.size, dtype=np.int64)  # method "active"
        self.swept = 0
        self.rays = RayWatch(np.zeros(c.delta.size))

    def stages(self) -> Stages:
        return Stages(self.sweep, self.violation, self.certificate, self.infeasible)

    def sweep(self, n: int) -> None:
        V, dk = self.data.V, self.data.cons.delta
        A, xi, lam = self.A, self.xi, self.lam
        if self.order == "cyclic":
            sweeps_linear(A, V, dk, xi, lam, *self.args, n)
        elif self.order == "random":
            for _ in range(n):
                sweeps_linear_idx(A, V, dk, xi, lam, *self.args,
                                  self.rng.permutation(lam.size).astype(np.int64), 1)
        else:  # active: full sweep every ACTIVE_SWEEPS, else only the active constraints
            for _ in range(n):
                if self.swept % ACTIVE_SWEEPS == 0:
                    sweeps_linear(A, V, dk, xi, lam, *self.args, 1)
                    self.active = np.flatnonzero((lam > 0) | (dk * (self.p_all() - xi) > 0))
                else:
                    sweeps_linear_idx(A, V, dk, xi, lam, *self.args, self.active, 1)
                self.swept += 1

    def p_all(self) -> np.ndarray:
        V = self.data.V
        return np.einsum("ij,ij->i", V @ self.A, V)

    def violation(self) -> tuple[float, float]:
        dk, xi = self.data.cons.delta, self.xi
        p = self.p_all()
        viol = float(np.max(np.maximum(0.0, dk * (p - xi)) / xi))
        return viol, abs(float(np.sum(self.lam * dk * (p - xi))))

    def certificate(self) -> tuple[float, float]:
        data, c = self.data, self.data.cons
        primal = logdet_objective(0.5 * (self.A + self.A.T), data.W0, data.W0_inv)
        if not math.isinf(c.gamma):
            primal += c.gamma * burg(self.xi, c.xi0)
        VL = data.VL
        S = np.eye(VL.shape[1]) + (VL.T * (c.delta * self.lam)) @ VL
        return primal, logdet_pd(S) + slack_terms(self.lam, c.delta, c.xi0, c.gamma)

    def infeasible(self) -> np.ndarray | None:
        c = self.data.cons
        if not math.isinf(c.gamma):
            return None
        return self.rays.find(self.data.VL, self.lam, c.delta, c.xi0)

    def newton_point(self) -> Certified:
        """Set (W, xi) to the iterate of the current multipliers and certify it:
        W = L0 S^{-1} L0^T, 1/xi = 1/xi0 - delta lam / gamma."""
        data, c = self.data, self.data.cons
        VL = data.VL
        S = np.eye(VL.shape[1]) + (VL.T * (c.delta * self.lam)) @ VL
        Li = sla.solve_triangular(np.linalg.cholesky(S), data.L0.T, lower=True,
                                  check_finite=False)
        self.A[:] = Li.T @ Li
        self.xi[:] = c.xi0 / (1.0 - c.delta * self.lam * c.xi0 / c.gamma)
        viol, _ = self.violation()
        primal, dual = self.certificate()
        return Certified(primal, dual, abs(primal - dual) / max(1.0, abs(primal)), viol)


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------
def choose_method(method: str, mk: int, hard: bool) -> tuple[bool, str]:
    """(use Newton first, sweep order) for ``method``; errors name the bad option."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: auto, newton, cyclic, active or random")
    use_newton = method == "newton" or (
        method == "auto" and mk <= NEWTON_MAX_CONSTRAINTS and not hard
    )
    if use_newton and hard:
        raise ValueError("method='newton' needs the slack form (gamma < inf)")
    return use_newton, {"auto": "random", "newton": "cyclic"}.get(method, method)


def _newton_stage(it: _LinearIterate, opts: LinearOptions) -> tuple[int, Certified]:
    """Projected Newton on the dual from lam = 0; the iterate is left at its multipliers."""
    cb = opts.callback

    def newton_step(k: int) -> None:  # progress: one line per Newton step (verbose only)
        c = it.newton_point()
        cb(k, objective=c.primal, bound=c.dual, gap=c.gap, violation=c.violation)

    c = it.data.cons
    its, _ = _dual_newton(it.data.VL, c.xi0, c.delta, c.gamma, it.lam, opts.tol,
                          time_limit=opts.time_limit, on_step=cb and newton_step)
    return its, it.newton_point()


def _run(it: _LinearIterate, opts: LinearOptions, use_newton: bool, t0: float):
    """Newton stage (if chosen), then sweeps unless it certified or spent the time.
    Returns (outcome, Newton iterations, history)."""
    mk, cb = it.lam.size, opts.callback
    newton_its, nt = _newton_stage(it, opts) if use_newton and mk else (0, None)
    left = (None if opts.time_limit is None
            else max(0.0, opts.time_limit - (time.perf_counter() - t0)))
    # sweeps after Newton steps are numbered on from them (iterations = Newton steps + sweeps)
    d = it.A.shape[0]
    loop = Loop(opts.tol, opts.max_sweeps, left, opts.check_every, sweep_work=4.0 * mk * d * d,
                callback=cb and (lambda k, **kw: cb(newton_its + k, **kw)),
                slow_after=opts.slow_after)
    if nt is not None:
        record(loop.hist, 0, nt, time.perf_counter() - t0)
        if cb is not None and newton_its == 0:  # else the last step printed it
            cb(0, objective=nt.primal, bound=nt.dual, gap=nt.gap, violation=nt.violation)
    if mk == 0:
        out = LoopOutcome(SolverStatus.OPTIMAL, 0, Certified(0.0, 0.0, 0.0, 0.0))
    elif nt is not None and nt.gap <= opts.tol and nt.violation <= opts.tol:
        out = LoopOutcome(SolverStatus.OPTIMAL, 0, nt)
    elif left is not None and left <= 0:
        out = LoopOutcome(INACCURATE, 0, nt)
    else:
        out = loop.run(it.stages())
    return out, newton_its, loop.hist


def solve_linear(data: LinearData, opts: LinearOptions) -> BregmanResult:
    """Linear-form ITML on checked data (see :func:`specopt.solvers.bregman.itml_linear`)."""
    c = data.cons
    use_newton, order = choose_method(opts.method, c.delta.size, sweep_args(c.gamma)[2])
    it = _LinearIterate(data, order, opts.seed)
    t0 = time.perf_counter()
    out, newton_its, hist = _run(it, opts, use_newton, t0)
    method = ("newton" if out.sweeps == 0 else f"newton+{order}") if use_newton else order
    res = BregmanResult(
        status=out.status, form="linear", lam=c.scatter(it.lam), xi=c.scatter(it.xi, c.xi0_all),
        primal=out.cert.primal, dual=out.cert.dual, gap=out.cert.gap,
        max_violation=out.cert.violation, iterations=out.sweeps + newton_its,
        solve_time=time.perf_counter() - t0, W=0.5 * (it.A + it.A.T), dropped=c.dropped,
        history=hist,
        extra={"logdet_W0": data.logdet_W0, "method": method,
               "newton_iterations": newton_its, "sweeps": out.sweeps},
    )
    return c.attach_ray(res, out.ray)
