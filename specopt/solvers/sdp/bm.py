r"""Burer-Monteiro augmented Lagrangian on ``K = Y Y^T`` (solver units). No CVXPY here.

The problem (:class:`~specopt.solvers.sdp._data.Scaled`, minimizing)::

    min_K  <C, K>   s.t.   A(K) = b,  K PSD   [1^T K 1 = 0]   [tr K <= t]

``K = Y Y^T`` with ``Y`` of shape ``n x r`` and the augmented Lagrangian

    L(Y; y, sigma) = <C, YY^T> - y^T (A(YY^T) - b) + sigma/2 ||A(YY^T) - b||^2
                     [+ (max(0, mu + sigma (||Y||_F^2 - t))^2 - mu^2) / (2 sigma)]

whose gradient is ``2 S(y~) Y`` with ``S(y) = C - A^*(y) (+ mu~ I)`` and ``y~ = y - sigma r``.
The centering row is ``Y^T 1 = 0`` (``Y`` and the gradient projected on column means zero).
Each outer iteration (:func:`run_bm`) is five stages on a :class:`BMState`:

- :func:`_inner_solve`: minimize ``L`` over ``Y`` with L-BFGS (scipy's L-BFGS-B, the evaluation
  in compiled kernels for ``A(YY^T)`` and ``A^*(w) Y``, O(nnz r)), or truncated Newton (CG on
  exact Hessian-vector products, the exact quartic step; :func:`~.lbfgs.newton_exact`) once
  ``sigma >= 1e3``;
- :func:`_update_multipliers`: ``y <- y - sigma r``, ``mu <- mu~``;
- :func:`_certify`: smallest eigenpairs of the dual slack ``S(y)`` and the certificate
  (:mod:`specopt.solvers.sdp._certificate`), with the least-squares dual when it is closer;
- :func:`_check_termination`: certified, or polished onto the rows and certified, or the time
  limit; the best point so far is kept;
- :func:`_grow_rank`: a negative eigenvalue means the factored problem stalled at a non-optimal
  point of the convex problem in ``K``; ``Y`` grows by the eigenvectors, each with the step that
  minimizes ``L`` exactly along ``K + alpha^2 v v^T``; then the penalty grows by
  ``sigma_factor`` when the residual did not drop by 4x.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.optimize as so

from ._certificate import SDPCertificate, certificate, ls_dual, min_eigs, polish
from ._data import INACCURATE, OPTIMAL, Scaled
from .lbfgs import al_hessp, lbfgs_exact, newton_exact

__all__ = ["BMOptions", "BMState", "run_bm"]

#: the penalty cap of the complementarity-driven mode (``BMOptions.ls_mode``): measured on SDE
#: digits N = 1000 from the plain method's point (residual 6.9e-7, gap 8.6e-4 after 65 s CPU,
#: sigma 2.6e4 with Newton-Krylov inner steps of 44 s): at sigma = 1e3 with L-BFGS inner solves
#: and the least-squares multipliers, gap 1.4e-4 / 5.4e-6 / 5.6e-7 after 3 / 4 / 5 outer
#: iterations (rank 19 -> 40)
LS_SIGMA_MAX = 1e3
#: the mode starts once the relative residual is within this factor of ``tol``
LS_RES = 10.0
#: outer iterations the mode may go without halving ``max(residual, gap)`` before the plain
#: method takes over again (a degenerate spiral SDE at n = 20 stalled at residual 8e-5 with the
#: penalty held at 1e3)
LS_PATIENCE = 5
#: the inner solver at ``sigma >= 1e3`` under ``inner="auto"``
HIGH_SIGMA_INNER = "newton-exact"
#: conjugate-gradient products per Newton direction of ``inner="newton-exact"``
NEWTON_CG_ITERS = 50


@dataclass(frozen=True)
class BMOptions:
    """Options of :func:`run_bm` (validated by the front end)."""

    tol: float
    max_iters: int
    inner_max_iters: int = 2000
    inner: str = "auto"
    newton_max_iters: int = 100
    sigma_factor: float = 4.0
    sigma_max: float = 1e6
    eig_k: int = 4
    dense_threshold: int = 2500
    max_rank: int = 1
    time_limit: float | None = None
    t_start: float = 0.0
    verbose: bool = False
    callback: Callable | None = None
    #: the printed objective is ``scale * objective + offset`` (the caller's own objective)
    objective_scale: float = 1.0
    objective_offset: float = 0.0
    #: complementarity-driven multipliers (:func:`_certify`): once nearly feasible, the next
    #: multipliers are the least-squares complementarity dual and the rank grows along its
    #: slack's negative eigenvectors; the penalty drops to at most ``LS_SIGMA_MAX`` and the inner
    #: solver is the exact-step L-BFGS from then on (the front end turns it on when
    #: ``C <= -c I``: SDE/MVU)
    ls_mode: bool = False

    def out_of_time(self) -> bool:
        return self.time_limit is not None and time.perf_counter() - self.t_start > self.time_limit


@dataclass
class BMState:
    """The iterate of the factored method (solver units) and its bookkeeping."""

    Y: np.ndarray
    y: np.ndarray
    mu: float
    sigma: float
    it: int = 0
    gtol: float = 1e-2
    prev_res: float = math.inf
    lam: float = -math.inf
    cert: SDPCertificate | None = None
    inner_total: int = 0
    growths: int = 0
    status: str = INACCURATE
    #: ``(score, Y, y, mu, lam, cert)`` of the best point by ``max(residual, gap)``
    best: tuple | None = None
    #: the complementarity-driven mode (``BMOptions.ls_mode``): its best score and the
    #: iterations since it improved 2x; off for good after ``LS_PATIENCE`` without
    ls_best: float = math.inf
    ls_wait: int = 0
    ls_off: bool = False
    hist: dict[str, list[float]] = field(default_factory=lambda: {
        k: [] for k in ("objective", "primal_residual", "lambda_min", "sigma", "rank",
                        "inner_iterations", "gap", "time_inner", "time_eig", "polish",
                        "ls_dual_gap")})

    def keep_if_best(self, res: float) -> None:
        score = max(res, self.cert.gap)
        if self.best is None or score < self.best[0]:
            self.best = (score, self.Y, self.y, self.mu, self.lam, self.cert)


def al_value_grad(Y: np.ndarray, P: Scaled, y: np.ndarray, sigma: float, mu: float):
    """``(L, grad L, r, mu~)`` at ``Y``."""
    r = P.residual(Y)
    ytil = y - sigma * r
    CY = P.C.matmat(Y)
    val = float(np.sum(CY * Y)) - float(y @ r) + 0.5 * sigma * float(r @ r)
    G = CY - P.A.pairs.adj_times(ytil, Y)
    mut = 0.0
    if P.t is not None:
        tr = float(np.sum(Y * Y))
        mut = max(0.0, mu + sigma * (tr - P.t))
        val += (mut**2 - mu**2) / (2 * sigma)
        G += mut * Y
    return val, 2.0 * G, r, mut


def grow(P: Scaled, Y: np.ndarray, y: np.ndarray, sigma: float, mu: float,
         V: np.ndarray) -> np.ndarray:
    """Append columns ``alpha_j v_j``, each with the exact minimizing step of ``L``."""
    for j in range(V.shape[1]):
        v = P.project(V[:, j:j + 1])[:, 0]
        nv = float(np.linalg.norm(v))
        if nv == 0:
            continue
        v = v / nv
        r0 = P.residual(Y)
        av = P.A.pairs.yyt(np.ascontiguousarray(v[:, None]))
        cv = float(v @ P.C.matmat(v[:, None])[:, 0])
        # L(u) = const + u (cv - y.av) + sigma/2 ||r0 + u av||^2 (+ trace term, linearized by mu)
        slope = cv - float(y @ av) + sigma * float(r0 @ av) + mu
        curv = sigma * float(av @ av)
        if slope >= 0:
            continue
        u = -slope / curv if curv > 0 else 1.0
        if P.t is not None:
            u = min(u, max(P.t - float(np.sum(Y * Y)), 0.0) + 1e-3 * P.t)
        Y = np.c_[Y, math.sqrt(max(u, 0.0)) * v]
    return np.ascontiguousarray(Y)


def run_bm(P: Scaled, st: BMState, opts: BMOptions, rng: np.random.Generator) -> BMState:
    """Up to ``opts.max_iters`` outer iterations from ``st`` (its count continues ``st.it``);
    ``st.status`` becomes ``"optimal"`` when a point is certified."""
    first = st.it + 1
    for it in range(first, first + opts.max_iters):
        st.it = it
        t_in = time.perf_counter()
        nit, inner_ok = _inner_solve(P, st, opts)
        res, obj = _update_multipliers(P, st)
        t_eig = time.perf_counter()
        lamv, vecs, err, obj = _certify(P, st, obj, res, opts, rng)
        st.hist["time_inner"].append(t_eig - t_in)
        st.hist["time_eig"].append(time.perf_counter() - t_eig)
        record_iteration(P, st, obj, res, nit, opts)
        if _check_termination(P, st, res, obj, opts):
            break
        _grow_rank(P, st, lamv, vecs, err, res, inner_ok, opts)
        _update_penalty(st, res, opts)
    return st


def _inner_solve(P: Scaled, st: BMState, opts: BMOptions) -> tuple[int, bool]:
    """Minimize ``L(.; y, sigma)`` from ``st.Y``; returns ``(iterations, converged)``."""
    n, r_ = st.Y.shape
    y, sigma, mu = st.y, st.sigma, st.mu

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        Yx = P.project(x.reshape(n, r_))
        val, G, _, _ = al_value_grad(np.ascontiguousarray(Yx), P, y, sigma, mu)
        return val, P.project(G).ravel()

    def deadline(intermediate_result: Any = None) -> None:
        """Stop at the time limit (scipy ends ``minimize`` on StopIteration)."""
        if opts.out_of_time():
            raise StopIteration

    scale_g = max(1.0, float(np.linalg.norm(P.C.matmat(st.Y))))
    method = opts.inner if opts.inner != "auto" else (
        "lbfgs-exact" if sigma < 1e3 or (opts.ls_mode and not st.ls_off
                                         and sigma <= LS_SIGMA_MAX)
        else HIGH_SIGMA_INNER)
    if method == "newton-exact":
        cap = min(opts.inner_max_iters, opts.newton_max_iters)
        out = newton_exact(P, st.Y, y, sigma, mu, st.gtol * scale_g, cap,
                           cg_iters=NEWTON_CG_ITERS, out_of_time=opts.out_of_time)
        st.inner_total += out.nit
        st.Y = out.Y
        return out.nit, out.nit < cap
    if method == "lbfgs-exact":
        cap = opts.inner_max_iters
        out = lbfgs_exact(P, st.Y, y, sigma, mu, st.gtol * scale_g / math.sqrt(st.Y.size), cap,
                          out_of_time=opts.out_of_time)
        st.inner_total += out.nit
        st.Y = out.Y
        return out.nit, out.nit < cap
    if method == "lbfgs":
        cap = opts.inner_max_iters
        opt = so.minimize(fun, st.Y.ravel(), jac=True, method="L-BFGS-B", callback=deadline,
                          options={"maxiter": cap, "ftol": 1e-15, "maxcor": 20,
                                   "gtol": st.gtol * scale_g / math.sqrt(st.Y.size)})
    else:
        cap = min(opts.inner_max_iters, opts.newton_max_iters)

        def hessp(x: np.ndarray, d: np.ndarray) -> np.ndarray:
            Yx = np.ascontiguousarray(P.project(x.reshape(n, r_)))
            Dx = np.ascontiguousarray(P.project(d.reshape(n, r_)))
            rr = P.residual(Yx)
            mt = max(0.0, mu + sigma * (float(np.sum(Yx * Yx)) - P.t)) if P.t is not None \
                else 0.0
            return P.project(al_hessp(Yx, Dx, P, y - sigma * rr, sigma, mt)).ravel()

        opt = so.minimize(fun, st.Y.ravel(), jac=True, hessp=hessp, method=method,
                          callback=deadline, options={"maxiter": cap, "gtol": st.gtol * scale_g})
    st.inner_total += int(opt.nit)
    st.Y = np.ascontiguousarray(P.project(opt.x.reshape(n, r_)))
    return int(opt.nit), bool(opt.nit < cap)


def _update_multipliers(P: Scaled, st: BMState) -> tuple[float, float]:
    """``y <- y - sigma r`` and ``mu <- mu~``; returns ``(relative residual, objective)``."""
    _, _, r, mut = al_value_grad(st.Y, P, st.y, st.sigma, st.mu)
    st.y = st.y - st.sigma * r
    st.mu = mut
    res = float(np.linalg.norm(r)) / (1.0 + float(np.linalg.norm(P.b)))
    return res, float(np.sum(P.C.matmat(st.Y) * st.Y))


def _ls_active(st: BMState, opts: BMOptions, res: float) -> bool:
    """The complementarity-driven mode is on at this residual (and has not been given up)."""
    return opts.ls_mode and not st.ls_off and res <= LS_RES * opts.tol


def _certify(P: Scaled, st: BMState, obj: float, res: float, opts: BMOptions,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The dual slack's smallest eigenpairs at ``st.y`` and the certificate; near feasibility
    the complementarity dual (``y`` minimizing ``||P (C - A^*(y) + mu I) Y||_F``, LSQR) replaces
    ``st.y`` when its gap is smaller, and always with ``opts.ls_mode`` unless ``st.y`` is
    already certified (its negative eigenvectors then drive the rank growth: at a point that is
    not optimal they are the directions the factor lacks). Returns ``(eigenvalues,
    eigenvectors, error, objective)``."""
    k = max(opts.eig_k, 8) if opts.ls_mode else opts.eig_k
    lamv, vecs, err = min_eigs(P, st.y, st.mu, k, opts.dense_threshold, rng)
    st.lam = float(lamv[0]) - err
    st.cert = certificate(P, st.y, st.mu, obj, st.lam)
    if res <= 100 * opts.tol and not st.cert.ok(opts.tol) and not opts.out_of_time():
        y_ls = ls_dual(P, st.Y, st.y, st.mu)
        lam_ls_v, vecs_ls, err_ls = min_eigs(P, y_ls, st.mu, k, opts.dense_threshold, rng)
        lam_ls = float(lam_ls_v[0]) - err_ls
        cert_ls = certificate(P, y_ls, st.mu, obj, lam_ls)
        st.hist["ls_dual_gap"].append(cert_ls.gap)
        if cert_ls.gap < st.cert.gap or _ls_active(st, opts, res):
            st.y, st.lam, st.cert = y_ls, lam_ls, cert_ls
            lamv, vecs, err = lam_ls_v, vecs_ls, err_ls
    return lamv, vecs, err, obj


def record_iteration(P: Scaled, st: BMState, obj: float, res: float, nit: int,
                     opts: BMOptions) -> None:
    """History, callback and the verbose line (in the caller's objective)."""
    h = st.hist
    h["objective"].append(P.user_objective(obj))
    h["primal_residual"].append(res)
    h["lambda_min"].append(st.lam * P.gamma)
    h["sigma"].append(st.sigma)
    h["rank"].append(st.Y.shape[1])
    h["inner_iterations"].append(nit)
    h["gap"].append(st.cert.gap)
    shown = opts.objective_scale * h["objective"][-1] + opts.objective_offset
    if opts.callback is not None:
        opts.callback(st.it, objective=shown, gap=st.cert.gap, violation=res)
    if opts.verbose:
        print(f"[sdp] it {st.it:3d} rank {st.Y.shape[1]:3d} obj {shown:.8g} res {res:.2e} "
              f"lam_min {st.lam:.2e} gap {st.cert.gap:.2e} sigma {st.sigma:.1e} inner {nit} "
              f"({h['time_inner'][-1]:.2f} s) eig {h['time_eig'][-1]:.2f} s")


def _check_termination(P: Scaled, st: BMState, res: float, obj: float,
                       opts: BMOptions) -> bool:
    """Certified (as it is, or after a Gauss-Newton polish onto ``A(YY^T) = b`` when nearly
    feasible with the gap closed), or out of time. Keeps the best point."""
    tol, cert = opts.tol, st.cert
    if res <= tol and cert.ok(tol) and cert.bound_side_ok(P, obj):
        st.status = OPTIMAL
        return True
    if res <= 20 * tol and cert.ok(tol) and not opts.out_of_time():
        Yp = polish(P, st.Y)
        res_p = float(np.linalg.norm(P.residual(Yp))) / (1.0 + float(np.linalg.norm(P.b)))
        obj_p = float(np.sum(P.C.matmat(Yp) * Yp))
        cert_p = certificate(P, st.y, st.mu, obj_p, st.lam)
        st.hist["polish"].append(res_p)
        if res_p < res:
            st.Y, res, obj, st.cert = Yp, res_p, obj_p, cert_p
            h = st.hist
            h["primal_residual"][-1], h["gap"][-1] = res, cert_p.gap
            h["objective"][-1] = P.user_objective(obj)
            if res <= tol and cert_p.ok(tol) and cert_p.bound_side_ok(P, obj):
                st.status = OPTIMAL
                return True
    st.keep_if_best(res)
    return opts.out_of_time()


def _grow_rank(P: Scaled, st: BMState, lamv: np.ndarray, vecs: np.ndarray, err: float,
               res: float, inner_ok: bool, opts: BMOptions) -> None:
    """Grow ``Y`` along the slack's negative eigenvectors after a converged inner solve, or at
    once when the slack is far from PSD (an unconverged inner solve at too low a rank otherwise
    never ends: digits N = 1797 stayed at rank 8 with lambda_min ~ -3 for 20 outer iterations)."""
    grow_tol = max(opts.tol, 0.1 * res)
    ls_grow = _ls_active(st, opts, res)  # the multipliers are the LS dual's
    if ls_grow:
        grow_tol = 0.1 * opts.tol
    if st.lam < -grow_tol and st.Y.shape[1] < opts.max_rank and (
            inner_ok or ls_grow or st.lam < -100 * grow_tol or res <= opts.tol):
        neg = lamv < -max(err, grow_tol if ls_grow else 1e-10)
        V = vecs[:, neg][:, : opts.max_rank - st.Y.shape[1]]
        st.Y = grow(P, st.Y, st.y, st.sigma, st.mu, V)
        st.growths += 1


def _update_penalty(st: BMState, res: float, opts: BMOptions) -> None:
    """Raise ``sigma`` when the residual did not drop 4x (unless it is already below
    ``0.1 tol``: a larger penalty then only slows the inner solves, measured on SDE digits
    N = 300 where ``sigma`` climbed to 1e6 at residual 1e-10); tighten the inner tolerance."""
    if _ls_active(st, opts, res):
        # the multipliers are the complementarity dual's: a moderate penalty suffices and keeps
        # the inner solves (L-BFGS) well conditioned; given up when it stalls
        score = max(res, st.cert.gap)
        if score <= 0.5 * st.ls_best:
            st.ls_best, st.ls_wait = score, 0
        else:
            st.ls_wait += 1
            st.ls_off = st.ls_wait >= LS_PATIENCE
        if not st.ls_off:
            st.sigma = min(st.sigma, LS_SIGMA_MAX)
    if not _ls_active(st, opts, res) and res > 0.25 * st.prev_res and res > 0.1 * opts.tol:
        st.sigma = min(st.sigma * opts.sigma_factor, opts.sigma_max)
    st.prev_res = res
    st.gtol = max(min(0.5 * st.gtol, 0.1 * res), 0.1 * opts.tol)
