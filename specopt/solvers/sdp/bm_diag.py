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
from ._certificate import certificate, min_eigs, relative_residual
from ._data import OPTIMAL, Scaled, SparseRows
from .bm import BMOptions, BMState, record_iteration

__all__ = ["diagonal_targets", "run_bm_diag"]


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
    returns the largest row change of the last pass."""
    n, r = X.shape
    g = np.zeros(r)
    delta = 0.0
    for _ in range(sweeps):
        delta = 0.0
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
            for c in range(r):
                nrm += g[c] * g[c]
            nrm = math.sqrt(nrm)
            if nrm == 0.0:
                continue
            ch = 0.0
            for c in range(r):
                new = -g[c] / nrm
                ch += (new - X[i, c]) ** 2
                X[i, c] = new
            if ch > delta:
                delta = ch
    return math.sqrt(delta)


def _normalize(X: np.ndarray) -> np.ndarray:
    nr = np.linalg.norm(X, axis=1, keepdims=True)
    nr[nr == 0] = 1.0
    return X / nr


def _tangent(X: np.ndarray, V: np.ndarray) -> np.ndarray:
    return V - np.sum(V * X, axis=1, keepdims=True) * X


class _Sphere:
    """``f``, gradient and Hessian of ``<C~, X X^T>`` on unit-row ``X`` (C~ sparse CSR)."""

    def __init__(self, Ct: sp.csr_array) -> None:
        self.Ct = Ct

    def at(self, X: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """``(f, z, rgrad)`` at ``X``."""
        CX = self.Ct @ X
        z = np.sum(CX * X, axis=1)
        return float(z.sum()), z, 2.0 * (CX - z[:, None] * X)

    def hess(self, X: np.ndarray, z: np.ndarray, Z: np.ndarray) -> np.ndarray:
        return 2.0 * _tangent(X, self.Ct @ Z - z[:, None] * Z)


def _tcg(M: _Sphere, X: np.ndarray, z: np.ndarray, g: np.ndarray, radius: float,
         max_iters: int, kappa: float = 0.1, theta: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Steihaug-Toint truncated CG for ``min <g, e> + <e, H e>/2``, ``||e|| <= radius``;
    returns ``(e, H e)``."""
    e = np.zeros_like(X)
    He = np.zeros_like(X)
    r = g.copy()
    gn = math.sqrt(float(np.sum(g * g)))
    d = -r
    rr = float(np.sum(r * r))
    for _ in range(max_iters):
        Hd = M.hess(X, z, d)
        dHd = float(np.sum(d * Hd))
        alpha = rr / dHd if dHd > 0 else math.inf
        en = e + (alpha if math.isfinite(alpha) else 0.0) * d
        if dHd <= 0 or float(np.sum(en * en)) >= radius**2:
            # to the boundary along d
            ed, dd, ee = float(np.sum(e * d)), float(np.sum(d * d)), float(np.sum(e * e))
            tau = (-ed + math.sqrt(max(ed * ed + dd * (radius**2 - ee), 0.0))) / dd
            return e + tau * d, He + tau * Hd
        e, He = en, He + alpha * Hd
        r = r + alpha * Hd
        rr_new = float(np.sum(r * r))
        if math.sqrt(rr_new) <= gn * min(gn**theta, kappa):
            break
        d = -r + (rr_new / rr) * d
        rr = rr_new
    return e, He


def _rtr(M: _Sphere, X: np.ndarray, gtol: float, max_iters: int, opts: BMOptions,
         radius: float) -> tuple[np.ndarray, int, float]:
    """Riemannian trust-region Newton until ``||rgrad|| <= gtol``; returns
    ``(X, iterations, radius)``."""
    f, z, g = M.at(X)
    it = 0
    for it in range(1, max_iters + 1):
        gn = math.sqrt(float(np.sum(g * g)))
        if gn <= gtol or opts.out_of_time():
            return X, it - 1, radius
        e, He = _tcg(M, X, z, g, radius, max_iters=200)
        Xn = _normalize(X + e)
        fn, zn, gn_ = M.at(Xn)
        pred = -(float(np.sum(g * e)) + 0.5 * float(np.sum(e * He)))
        rho = (f - fn) / pred if pred > 0 else -1.0
        # accept ties at rounding level (near convergence f - fn is noise)
        if rho < 0.25 and not (abs(f - fn) <= 1e-14 * max(1.0, abs(f)) and pred <= 1e-14 * abs(f)):
            radius *= 0.25
        elif rho > 0.75 and abs(math.sqrt(float(np.sum(e * e))) - radius) < 1e-12 * radius + 1e-15:
            radius = min(2.0 * radius, 10.0 * math.sqrt(X.shape[0]))
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
    indptr = Ct.indptr.astype(np.int64)
    indices = Ct.indices.astype(np.int64)
    data = Ct.data.astype(float)
    scale = 1.0 + float(np.abs(Ct.data).sum()) / max(n, 1)  # ~ |f| / n
    radius = math.sqrt(n) / 8.0
    h = st.hist
    for _ in range(opts.max_iters):
        st.it += 1
        t0 = time.perf_counter()
        # mixing sweeps while they make progress (cheap), then Newton
        for _sweep in range(40):
            if _mix_sweeps(indptr, indices, data, X, 5) < 1e-3 or opts.out_of_time():
                break
        X, nit, radius = _rtr(M, X, 1e-9 * scale * math.sqrt(n), 100, opts, radius)
        st.inner_total += nit
        f, z, _ = M.at(X)
        t1 = time.perf_counter()
        st.Y = X * sq[:, None]
        # multipliers in solver units: A^*(y) = Diag(s y) on K, z on X (K = D^1/2 X X^T D^1/2)
        st.y = _row_multipliers(P, z / d)
        lamv, vecs, err = min_eigs(P, st.y, 0.0, opts.eig_k, opts.dense_threshold, rng)
        st.lam = float(lamv[0]) - err
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
        # grow along the negative eigenvectors (in X coordinates: D^{1/2} v), or tighten Newton
        neg = lamv < -max(err, 1e-12)
        if np.any(neg) and X.shape[1] < opts.max_rank:
            V = (vecs[:, neg] * sq[:, None])[:, : max(1, min(2, opts.max_rank - X.shape[1]))]
            V /= np.max(np.abs(V), axis=0, keepdims=True)
            X = np.ascontiguousarray(_normalize(np.c_[X, 1e-2 * V]))
            st.growths += 1
    return st


def _row_multipliers(P: Scaled, w: np.ndarray) -> np.ndarray:
    """Row multipliers ``y`` with ``A^*(y) = Diag(w)`` (row ``r`` is ``s_r K_ii``)."""
    y = np.zeros(P.m)
    y[P.A.rows] = w[P.A.ii] / P.A.vals
    return y
