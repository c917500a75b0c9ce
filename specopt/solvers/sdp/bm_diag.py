r"""Burer-Monteiro on a product of spheres: SDPs whose rows fix the diagonal (max-cut). No CVXPY.

Problem (solver units, :class:`~specopt.solvers.sdp._data.Scaled`, minimizing)::

    min_K <C, K>   s.t.   K_ii = d_i  (i = 1..n, d > 0),   K PSD

With ``K = D^{1/2} X X^T D^{1/2}`` and ``C~ = D^{1/2} C D^{1/2}`` the feasible factors are the
``X`` (``n x r``) with unit rows, a product of spheres, so every iterate is exactly feasible and
the method is unconstrained on that manifold (no penalty, no multiplier drift):

    f(X) = <C~, X X^T>,   grad f = 2 P_X(C~ X),   Hess f[Z] = 2 P_X((C~ - Diag(z)) Z),

with ``z_i = <(C~ X)_i, X_i>`` and ``P_X`` the row-wise projection on the tangent spaces.
Stages (each O(nnz(C) r) per sweep or product, memory O(nnz + n r)):

1. **mixing sweeps** (Wang, Chang & Kolter's coordinate method): ``X_i <- -g_i / ||g_i||`` with
   ``g_i = sum_{j != i} C~_ij X_j``, each the exact minimizer over row ``i`` (compiled kernel);
   they reach a few digits fast from a random start;
2. **Riemannian trust-region Newton** (truncated CG, Steihaug-Toint) with the row-normalizing
   retraction: quadratic convergence to a second-order critical point, where the sweeps crawl;
3. **certificate**: the multipliers ``z`` make ``<C~, XX^T> = sum z`` exactly, and
   ``S = C~ - Diag(z)`` is the dual slack; for any feasible ``K`` (``tr X X^T = n``)
   ``<C~, XX^T> >= sum z + n min(0, lambda_min(S))``, so the relative gap is
   ``n max(0, -lambda_min(S)) / (1 + |f|)`` (Lanczos on ``S``, dense for small ``n``,
   :func:`~specopt.solvers.sdp._certificate.min_eigs`);
4. **rank growth**: a negative ``lambda_min`` with eigenvector ``v`` means a saddle of the
   factored problem; ``X <- normalize([X, eps v])`` leaves it along the negative curvature
   (Boumal, Voroninski & Bandeira: second-order points with ``r(r+1)/2 > n`` are optimal).

The result is returned in the common state of :mod:`specopt.solvers.sdp.bm` (``Y``, ``y``, the
certificate), so the front end reports it as it does the general method.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from .._jit import lazy_njit
from ._certificate import certificate, min_eig_lower_bound, relative_residual
from ._data import OPTIMAL, Scaled, SparseRows
from .bm import BMOptions, BMState, record_iteration

__all__ = ["diagonal_targets", "run_bm_diag"]

#: mixing sweeps (in groups of 5) until the objective decreases by less than SWEEP_RTOL
#: (relative) over a group, at most MAX_SWEEPS, before the Newton stage
SWEEP_RTOL = 1e-8
MAX_SWEEPS = 1000
#: the Newton stage stops at ``||rgrad|| <= GTOL_START * (typical gradient norm)``, then 100x
#: tighter after each certificate that does not close
GTOL_START = 1e-6


def diagonal_targets(A: SparseRows, b: np.ndarray) -> np.ndarray | None:
    """``d`` when the rows are exactly ``a_r K_ii = b_r`` with every ``i`` fixed once and
    ``d_i = b_r / a_r > 0``; else None."""
    if A.m != A.n or A.rows.size != A.m or np.any(A.ii != A.jj):
        return None
    if not np.array_equal(np.sort(A.rows), np.arange(A.m)):
        return None
    d = np.zeros(A.n)
    idx = A.ii
    if np.unique(idx).size != A.n:
        return None
    d[idx] = b[A.rows] / A.vals
    return d if np.all(d > 0) and np.all(np.isfinite(d)) else None


@lazy_njit(cache=True, fastmath=True)
def _mix_sweeps(indptr, indices, data, X, sweeps):  # pragma: no cover - compiled
    """``sweeps`` passes of ``X_i <- -g_i / ||g_i||``, ``g_i = sum_{j != i} C_ij X_j``;
    returns the decrease of ``f = <C, X X^T>`` over the last pass (``2 (<g, x_old> + ||g||)``
    per row)."""
    n, r = X.shape
    g = np.zeros(r)
    dec = 0.0
    for _ in range(sweeps):
        dec = 0.0
        for i in range(n):
            for c in range(r):
                g[c] = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                j = indices[k]
                if j == i:
                    continue
                v = data[k]
                for c in range(r):
                    g[c] += v * X[j, c]
            nrm = 0.0
            old = 0.0
            for c in range(r):
                nrm += g[c] * g[c]
                old += g[c] * X[i, c]
            nrm = math.sqrt(nrm)
            if nrm == 0.0:
                continue
            dec += 2.0 * (old + nrm)
            for c in range(r):
                X[i, c] = -g[c] / nrm
    return dec


@lazy_njit(cache=True, fastmath=True)
def _value_grad(indptr, indices, data, X):  # pragma: no cover - compiled
    """``(f, z, rgrad)``: ``z_i = <(C X)_i, X_i>``, ``f = sum z``, ``rgrad = 2 (C X - z X)``
    (the tangent product below with ``Z = X`` and no shift)."""
    z = np.empty(X.shape[0])
    G = _hess_kernel(indptr, indices, data, X, np.zeros(X.shape[0]), X, z)
    return z.sum(), z, G


@lazy_njit(cache=True, fastmath=True)
def _tcg_kernel(indptr, indices, data, X, z, g, minv, radius, max_iters, kappa,
                theta):  # pragma: no cover - compiled
    """Preconditioned Steihaug-Toint CG (see :func:`_tcg`); returns ``(e, He, on boundary)``."""
    n, r = X.shape
    e = np.zeros_like(X)
    He = np.zeros_like(X)
    res = g.copy()
    gn = math.sqrt(np.sum(g * g))
    zv = np.empty_like(X)
    d = np.empty_like(X)
    scratch = np.empty(n)
    rz = 0.0
    for i in range(n):
        for c in range(r):
            zv[i, c] = minv[i] * res[i, c]
            d[i, c] = -zv[i, c]
            rz += res[i, c] * zv[i, c]
    e_e, e_d, d_d = 0.0, 0.0, rz
    alpha, e_e_new = 0.0, 0.0
    stop = gn * min(gn ** theta, kappa)
    for _ in range(max_iters):
        Hd = _hess_kernel(indptr, indices, data, X, z, d, scratch)
        dHd = np.sum(d * Hd)
        if dHd > 0:
            alpha = rz / dHd
            e_e_new = e_e + 2.0 * alpha * e_d + alpha * alpha * d_d
        if dHd <= 0 or e_e_new >= radius * radius:
            tau = (-e_d + math.sqrt(max(e_d * e_d + d_d * (radius * radius - e_e), 0.0))) / d_d
            return e + tau * d, He + tau * Hd, True
        rr = 0.0
        for i in range(n):
            for c in range(r):
                e[i, c] += alpha * d[i, c]
                He[i, c] += alpha * Hd[i, c]
                res[i, c] += alpha * Hd[i, c]
                rr += res[i, c] * res[i, c]
        e_e = e_e_new
        if math.sqrt(rr) <= stop:
            break
        rz_new = 0.0
        for i in range(n):
            for c in range(r):
                zv[i, c] = minv[i] * res[i, c]
                rz_new += res[i, c] * zv[i, c]
        beta = rz_new / rz
        for i in range(n):
            for c in range(r):
                d[i, c] = -zv[i, c] + beta * d[i, c]
        e_d = beta * (e_d + alpha * d_d)
        d_d = rz_new + beta * beta * d_d
        rz = rz_new
    return e, He, False


@lazy_njit(cache=True, fastmath=True)
def _hess_kernel(indptr, indices, data, X, z, Z, p):  # pragma: no cover - compiled
    """``2 P_X((C - Diag(z)) Z)`` row by row (one pass over ``C``); ``p[i]`` receives
    ``<((C - Diag(z)) Z)_i, X_i>``."""
    n, r = X.shape
    out = np.empty_like(Z)
    v = np.zeros(r)
    for i in range(n):
        for c in range(r):
            v[c] = -z[i] * Z[i, c]
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            a = data[k]
            for c in range(r):
                v[c] += a * Z[j, c]
        pi = 0.0
        for c in range(r):
            pi += v[c] * X[i, c]
        p[i] = pi
        for c in range(r):
            out[i, c] = 2.0 * (v[c] - pi * X[i, c])
    return out


def _normalize(X: np.ndarray) -> np.ndarray:
    nr = np.linalg.norm(X, axis=1, keepdims=True)
    nr[nr == 0] = 1.0
    return X / nr


class _Sphere:
    """``f``, gradient and Hessian of ``<C~, X X^T>`` on unit-row ``X`` (C~ sparse CSR)."""

    def __init__(self, Ct: sp.csr_array) -> None:
        self.Ct = Ct
        self.csr = (Ct.indptr.astype(np.int64), Ct.indices.astype(np.int64),
                    Ct.data.astype(float))

    def at(self, X: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """``(f, z, rgrad)`` at ``X``."""
        f, z, G = _value_grad(*self.csr, np.ascontiguousarray(X))
        return float(f), z, G

    def hess(self, X: np.ndarray, z: np.ndarray, Z: np.ndarray) -> np.ndarray:
        return _hess_kernel(*self.csr, X, z, np.ascontiguousarray(Z), np.empty(X.shape[0]))


def _tcg(M: _Sphere, X: np.ndarray, z: np.ndarray, g: np.ndarray, radius: float,
         max_iters: int, kappa: float = 0.1,
         theta: float = 1.0) -> tuple[np.ndarray, np.ndarray, bool]:
    """Preconditioned Steihaug-Toint truncated CG for ``min <g, e> + <e, H e>/2`` with
    ``||e||_M <= radius``, ``M`` the Jacobi preconditioner ``diag(C~ - Diag(z))`` per row (it keeps
    rows tangent); returns ``(e, H e, on the boundary)`` (Conn, Gould & Toint, Alg. 7.5.1)."""
    dS = M.Ct.diagonal() - z
    floor = 1e-3 * max(float(np.mean(np.abs(dS))), 1e-300)
    minv = 1.0 / np.maximum(dS, floor)
    return _tcg_kernel(*M.csr, X, z, g, minv, float(radius), int(max_iters), float(kappa),
                       float(theta))


def _rtr(M: _Sphere, X: np.ndarray, gtol: float, max_iters: int, opts: BMOptions,
         radius: float) -> tuple[np.ndarray, int, float]:
    """Riemannian trust-region Newton until ``||rgrad|| <= gtol``; returns
    ``(X, iterations, radius)``."""
    f, z, g = M.at(X)
    max_radius = 10.0 * math.sqrt(float(np.sum(np.abs(M.Ct.diagonal() - z))) + 1.0)
    it = 0
    for it in range(1, max_iters + 1):
        gn = math.sqrt(float(np.vdot(g, g)))
        if gn <= gtol or opts.out_of_time():
            return X, it - 1, radius
        e, He, hit = _tcg(M, X, z, g, radius, max_iters=200)
        Xn = _normalize(X + e)
        fn, zn, gn_ = M.at(Xn)
        pred = -(float(np.vdot(g, e)) + 0.5 * float(np.vdot(e, He)))
        rho = (f - fn) / pred if pred > 0 else -1.0
        # accept ties at rounding level (near convergence f - fn is noise)
        if rho < 0.25 and not (abs(f - fn) <= 1e-14 * max(1.0, abs(f)) and pred <= 1e-14 * abs(f)):
            radius *= 0.25
        elif rho > 0.75 and hit:
            radius = min(2.0 * radius, max_radius)
        if rho > 0.05 or (fn <= f and pred <= 1e-14 * max(1.0, abs(f))):
            X, f, z, g = Xn, fn, zn, gn_
    return X, it, radius


def run_bm_diag(P: Scaled, d: np.ndarray, st: BMState, opts: BMOptions,
                rng: np.random.Generator, r0: int | None = None) -> BMState:
    """Solve the diagonal-row SDP ``P`` (``K_ii = d_i`` in solver units) from ``st.Y``; fills
    ``st`` (``Y``, ``y``, ``lam``, ``cert``, ``status``, history) for the front end."""
    n = P.n
    sq = np.sqrt(d)
    Cs = P.C.sparse if P.C.sparse is not None else sp.csr_array((n, n))
    if P.C.U is not None or P.C.dense is not None:
        Cs = sp.csr_array(P.C.to_dense())
    Ct = sp.csr_array(Cs.multiply(sq[:, None]).multiply(sq[None, :]))
    Ct.sum_duplicates()
    Ct.sort_indices()
    M = _Sphere(Ct)
    X = st.Y / sq[:, None]
    if r0 is not None and X.shape[1] < r0:
        X = np.c_[X, 1e-3 * rng.standard_normal((n, r0 - X.shape[1]))]
    X = np.ascontiguousarray(_normalize(X + (np.linalg.norm(X, axis=1, keepdims=True) == 0)))
    scale = 1.0 + float(np.abs(Ct.data).sum()) / max(n, 1)  # ~ |f| / n
    radius = math.sqrt(n) / 8.0
    gscale = scale * math.sqrt(n)  # ~ the gradient norm at a random point
    gtol = GTOL_START * gscale
    fresh = True
    h = st.hist
    for _ in range(opts.max_iters):
        st.it += 1
        t0 = time.perf_counter()
        if fresh:  # mixing sweeps while they make progress (cheap, O(nnz r) each), then Newton
            _mix(M, X, opts)
        X, nit, radius = _rtr(M, X, gtol, 100, opts, radius)
        st.inner_total += nit
        f, z, g = M.at(X)
        t1 = time.perf_counter()
        st.Y = X * sq[:, None]
        # multipliers in solver units: A^*(y) = Diag(s y) on K, z on X (K = D^1/2 X X^T D^1/2)
        st.y = _row_multipliers(P, z / d)
        st.lam, vecs = min_eig_lower_bound(P, st.y, 0.0, st.Y, opts.dense_threshold, rng,
                                           out_of_time=opts.out_of_time)
        st.cert = certificate(P, st.y, 0.0, f, st.lam)
        h["time_inner"].append(t1 - t0)
        h["time_eig"].append(time.perf_counter() - t1)
        res = relative_residual(P, st.Y)
        record_iteration(P, st, f, res, nit, opts)
        st.keep_if_best(res)
        if st.cert.ok(opts.tol) and st.cert.bound_side_ok(P, f):
            st.status = OPTIMAL
            break
        if opts.out_of_time():
            break
        # a converged point with a clearly negative slack is a saddle of the factored problem:
        # grow along the negative eigenvectors (in X coordinates: D^{1/2} v); else tighten Newton
        converged = float(np.linalg.norm(g)) <= gtol
        fresh = False
        if converged and st.cert.gap > 10 * opts.tol and st.lam < 0 \
                and X.shape[1] < opts.max_rank and np.any(vecs):
            V = vecs * sq[:, None]
            V /= np.max(np.abs(V), axis=0, keepdims=True)
            X = np.ascontiguousarray(_normalize(np.c_[X, 1e-2 * V]))
            st.growths += 1
            fresh = True
        else:
            gtol = max(0.01 * gtol, 1e-13 * gscale)
    return st


def _mix(M: _Sphere, X: np.ndarray, opts: BMOptions) -> None:
    """Mixing sweeps on ``X`` (in place) in groups of 5 until the objective decreases by less
    than ``SWEEP_RTOL`` (relative) over a group, at most ``MAX_SWEEPS``."""
    indptr, indices, data = M.csr
    f = abs(M.at(X)[0])
    for _ in range(MAX_SWEEPS // 5):
        if _mix_sweeps(indptr, indices, data, X, 5) <= SWEEP_RTOL * f or opts.out_of_time():
            break


def _row_multipliers(P: Scaled, w: np.ndarray) -> np.ndarray:
    """Row multipliers ``y`` with ``A^*(y) = Diag(w)`` (row ``r`` is ``s_r K_ii``)."""
    y = np.zeros(P.m)
    y[P.A.rows] = w[P.A.ii] / P.A.vals
    return y
