"""Kernel-form ITML (Theorem 3.1 of Jain et al.): sweeps on the learned kernel of the support,
or the equivalent linear ITML on a factor of K0 (``factored``). Input is validated by the front
end (:func:`specopt.solvers.bregman.itml_kernel`)."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import scipy.linalg as sla

from .._status import SolverStatus
from ._certificate import RayWatch, burg, logdet_pd, slack_terms
from ._data import BregmanResult, KernelData, linear_data
from ._kernels import (
    kernel_block,
    m_closed_form,
    m_closed_form_factored,
    sweep_args,
    sweeps_kernel,
    sweeps_kernel_K,
    sym_from_lower,
)
from ._loop import Certified, Loop, LoopOutcome, Stages
from .linear import LinearOptions, solve_linear


def _learned_kernel(data: KernelData, Ms: np.ndarray, full_kernel: bool) -> np.ndarray | None:
    """K = K0 + K0[:, S] M K0[S, :] on all points (None unless ``full_kernel``)."""
    if not full_kernel:
        return None
    B = data.K0[:, data.support]
    Kfull = data.K0 + B @ Ms @ B.T
    return 0.5 * (Kfull + Kfull.T)


class _KernelIterate:
    """Kernel K on the support, coefficients M (tracked or recovered from lam), slacks and
    multipliers; the stages of the loop act on them in place."""

    def __init__(self, data: KernelData, track_M: bool, block: int) -> None:
        s, mk = data.support.size, data.I.size
        self.data = data
        self.K = data.K0s.copy()
        self.M = np.zeros((s, s))
        self.lam = np.zeros(mk)
        self.xi = data.cons.xi0.copy()
        self.track_M = track_M
        self.M_stale = False
        self.args = sweep_args(data.cons.gamma)
        self.block = block
        self.lower_only = not track_M and block > 1  # blocked sweeps keep only the lower K
        self.Ubuf = np.empty((min(block, s), s)) if self.lower_only else np.empty((0, s))
        self.bet = np.empty(self.Ubuf.shape[0])
        self.rays = RayWatch(np.zeros(mk))

    def stages(self) -> Stages:
        return Stages(self.sweep, self.violation, self.certificate, self.infeasible)

    def _flush(self, nb: int) -> None:
        # K += U^T diag(bet) U on the lower triangle of K (upper of the F-ordered view K.T),
        # in place, split by the sign of bet into two symmetric rank-k updates (half a GEMM)
        b = self.bet[:nb]
        for sign in (1.0, -1.0):
            sel = sign * b > 0
            if np.any(sel):
                A = np.asfortranarray((self.Ubuf[:nb][sel] * np.sqrt(sign * b[sel])[:, None]).T)
                sla.blas.dsyrk(sign, A, 1.0, self.K.T, lower=0, overwrite_c=1)

    def _blocked_sweep(self) -> None:
        d, mk = self.data, self.lam.size
        c = nb = 0
        while c < mk:
            nb, c = kernel_block(self.K, self.Ubuf, self.bet, nb, d.I, d.J, d.cons.delta,
                                 self.xi, self.lam, *self.args, c)
            if nb == self.Ubuf.shape[0]:
                self._flush(nb)
                nb = 0
        self._flush(nb)

    def sweep(self, nn: int) -> None:
        d = self.data
        dk = d.cons.delta
        if self.track_M:
            sweeps_kernel(self.K, self.M, d.K0s, d.I, d.J, dk, self.xi, self.lam, *self.args, nn)
            return
        self.M_stale = True
        if self.block <= 1:
            sweeps_kernel_K(self.K, d.I, d.J, dk, self.xi, self.lam, *self.args, nn)
            return
        for _ in range(nn):
            self._blocked_sweep()

    def refresh_M(self) -> None:
        if self.M_stale:
            d = self.data
            self.M[:] = m_closed_form(d.K0s, d.I, d.J, d.cons.delta * self.lam)
            self.M_stale = False

    def violation(self) -> tuple[float, float]:
        I, J, K, dk, xi = self.data.I, self.data.J, self.K, self.data.cons.delta, self.xi  # noqa: E741
        p = K[I, I] + K[J, J] - 2 * K[np.maximum(I, J), np.minimum(I, J)]
        viol = float(np.max(np.maximum(0.0, dk * (p - xi)) / xi))
        return viol, abs(float(np.sum(self.lam * dk * (p - xi))))

    def _C_congruent(self, weights: np.ndarray) -> np.ndarray:
        d = self.data
        nz = weights != 0  # zero weights add nothing
        D = d.R[d.I[nz]] - d.R[d.J[nz]]  # rows R^T (e_i - e_j)
        return (D.T * (d.cons.delta[nz] * weights[nz])) @ D

    def certificate(self) -> tuple[float, float]:
        self.refresh_M()
        d, c = self.data, self.data.cons
        Rm = d.R
        r = Rm.shape[1]
        Ms = 0.5 * (self.M + self.M.T)
        G = np.eye(r) + Rm.T @ Ms @ Rm  # I + R^T M R, same spectrum as I + M K0 (plus ones)
        ld = logdet_pd(G)
        primal = float(np.sum(Ms * d.K0s)) - ld if math.isfinite(ld) else math.inf
        if not math.isinf(c.gamma):
            primal += c.gamma * burg(self.xi, c.xi0)
        dual = logdet_pd(np.eye(r) + self._C_congruent(self.lam))
        return primal, dual + slack_terms(self.lam, c.delta, c.xi0, c.gamma)

    def infeasible(self) -> np.ndarray | None:
        d, c = self.data, self.data.cons
        if not math.isinf(c.gamma):
            return None
        return self.rays.find(d.R[d.I] - d.R[d.J], self.lam, c.delta, c.xi0)

    def K_support(self) -> np.ndarray:
        return sym_from_lower(self.K) if self.lower_only else 0.5 * (self.K + self.K.T)


def solve_kernel(data: KernelData, full_kernel: bool, track_M: bool, block: int,
                 opts: LinearOptions) -> BregmanResult:
    """Plain kernel form: cyclic sweeps on K (and M when ``track_M``) over the support
    (``opts.method`` and ``opts.seed`` are not used)."""
    c = data.cons
    it = _KernelIterate(data, track_M, block)
    t0 = time.perf_counter()
    s, mk = data.support.size, it.lam.size
    loop = Loop(opts.tol, opts.max_sweeps, opts.time_limit, opts.check_every, growth=4,
                sweep_work=4.0 * mk * s * s, callback=opts.callback)
    if it.lam.size == 0:
        out = LoopOutcome(SolverStatus.OPTIMAL, 0, Certified(0.0, 0.0, 0.0, 0.0))
    else:
        out = loop.run(it.stages())
    it.refresh_M()
    Ms = 0.5 * (it.M + it.M.T)
    res = BregmanResult(
        status=out.status, form="kernel", lam=c.scatter(it.lam),
        xi=c.scatter(it.xi, c.xi0_all), primal=out.cert.primal, dual=out.cert.dual,
        gap=out.cert.gap, max_violation=out.cert.violation, iterations=out.sweeps,
        solve_time=time.perf_counter() - t0, K=_learned_kernel(data, Ms, full_kernel), M=Ms,
        support=data.support, dropped=c.dropped, history=loop.hist,
        extra={"K_support": it.K_support(), "factored": False},
    )
    return c.attach_ray(res, out.ray)


def solve_factored(data: KernelData, full_kernel: bool, opts: LinearOptions) -> BregmanResult:
    """Kernel form as linear ITML on the rows of G (K0_SS = G G^T), W0 = I_r; see itml_kernel."""
    t0 = time.perf_counter()
    c, G = data.cons, data.R
    D = np.ascontiguousarray(G[data.I] - G[data.J])  # rows G^T (e_i - e_j)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # pairs already screened by the caller
        sub = solve_linear(linear_data(D, c.xi0, c.delta, None, c.gamma), opts)
    Ms = m_closed_form_factored(G, data.I, data.J, c.delta * sub.lam)
    Ks = G @ sub.W @ G.T
    res = BregmanResult(
        status=sub.status, form="kernel", lam=c.scatter(sub.lam), xi=c.scatter(sub.xi, c.xi0_all),
        primal=sub.primal, dual=sub.dual, gap=sub.gap, max_violation=sub.max_violation,
        iterations=sub.iterations, solve_time=time.perf_counter() - t0,
        K=_learned_kernel(data, Ms, full_kernel), M=Ms, support=data.support,
        dropped=c.dropped, history=sub.history,
        extra={"K_support": 0.5 * (Ks + Ks.T), "factored": True, "rank": G.shape[1]},
    )
    return c.attach_ray(res, sub.extra.get("farkas_ray"))
