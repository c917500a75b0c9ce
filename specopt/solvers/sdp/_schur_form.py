r"""The Schur complement's structure in the sparse-row interior point
(:mod:`specopt.solvers.sdp.ip_sparse`): every row matrix as a sum of sparse rank-one terms
``A_r = sum_t w_t f_t f_t^T`` (:func:`row_factors`), so that the HKM / NT Schur complement

    M_rs = <A_r, X A_s Z> = O^T [ (w w^T) o (F^T X F) o (F^T Z F) ] O

is formed in ``O(R n s + R^2 s)`` (:func:`schur_complement`, compiled with a NumPy twin). No
CVXPY.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .._jit import lazy_njit

__all__ = ["padded_factors", "row_factors", "schur_complement"]

def row_factors(rows: np.ndarray, ii: np.ndarray, jj: np.ndarray, vals: np.ndarray, m: int,
                n: int) -> tuple[sp.csc_array, np.ndarray, sp.csr_array]:
    """Sparse rank-one factors of the symmetrized rows: ``(A_r + A_r^T)/2 = sum_t w_t f_t f_t^T``.

    Returns ``F`` (n x R, unit columns supported on the row's indices), ``w`` (R) and the owner
    matrix ``O`` (R x m, ``O[t, r] = 1`` when term t belongs to row r). Rows with the common
    shapes are factored in closed form (vectorized): ``a (e_i - e_j)(e_i - e_j)^T`` (distance),
    ``a e_i e_i^T`` (diagonal entry), ``a sym(e_i e_j^T)`` (off-diagonal entry:
    ``a/2 [(u u^T) - (v v^T)]`` with ``u, v = (e_i +- e_j)/sqrt 2``); any other row by the
    eigen-decomposition of its small symmetric matrix on its support.
    """
    order = np.argsort(rows, kind="stable")
    rows, ii, jj, vals = rows[order], ii[order], jj[order], vals[order]
    # merge duplicates of the same unordered pair within a row
    lo, hi = np.minimum(ii, jj), np.maximum(ii, jj)
    key = (rows * n + lo) * n + hi
    uk, inv = np.unique(key, return_inverse=True)
    v = np.bincount(inv, weights=vals)
    rows, lo, hi = uk // (n * n), (uk // n) % n, uk % n
    keep = v != 0
    rows, lo, hi, v = rows[keep], lo[keep], hi[keep], v[keep]
    cnt = np.bincount(rows, minlength=m)
    start = np.r_[0, np.cumsum(cnt)]
    Fi: list[np.ndarray] = []   # (term, index, value) triples
    Fr: list[np.ndarray] = []
    Fv: list[np.ndarray] = []
    W: list[np.ndarray] = []
    owner: list[np.ndarray] = []
    nterm = 0

    def add(idx_pairs: np.ndarray, coef: np.ndarray, weights: np.ndarray, own: np.ndarray):
        # idx_pairs (T, s), coef (T, s): term t = sum_s coef[t, s] e_{idx[t, s]}
        nonlocal nterm
        T = idx_pairs.shape[0]
        if T == 0:
            return
        tid = nterm + np.arange(T)
        Fi.append(np.repeat(tid, idx_pairs.shape[1]))
        Fr.append(idx_pairs.ravel())
        Fv.append(coef.ravel())
        W.append(weights)
        owner.append(own)
        nterm += T

    done = np.zeros(m, dtype=bool)
    # single-entry rows
    one = np.flatnonzero(cnt == 1)
    s1 = start[one]
    diag = lo[s1] == hi[s1]
    r_d, r_o = one[diag], one[~diag]
    add(lo[start[r_d]][:, None], np.ones((r_d.size, 1)), v[start[r_d]], r_d)
    so = start[r_o]
    c = 1.0 / math.sqrt(2.0)
    a = v[so]  # a * sym-part: the stored value is the coefficient of K_ij (i < j) in <A_r, K>
    # <A_r, K> = a K_ij  =>  A_r = a/2 (e_i e_j^T + e_j e_i^T) = a/2 (u u^T - v v^T)
    add(np.c_[lo[so], hi[so]], np.tile([c, c], (so.size, 1)), 0.5 * a, r_o)
    add(np.c_[lo[so], hi[so]], np.tile([c, -c], (so.size, 1)), -0.5 * a, r_o)
    done[one] = True
    # distance rows: a K_ii + a K_jj - 2a K_ij  =  a (e_i - e_j)(e_i - e_j)^T
    three = np.flatnonzero(cnt == 3)
    if three.size:
        s3 = start[three][:, None] + np.arange(3)[None, :]
        L3, H3, V3 = lo[s3], hi[s3], v[s3]
        isd = L3 == H3
        ok = isd.sum(axis=1) == 2
        # entries sorted by (lo, hi): (i,i), (i,j), (j,j) for i < j
        ok &= isd[:, 0] & ~isd[:, 1] & isd[:, 2]
        ok &= (L3[:, 0] == L3[:, 1]) & (H3[:, 1] == H3[:, 2])
        ok &= np.isclose(V3[:, 0], V3[:, 2]) & np.isclose(V3[:, 1], -2 * V3[:, 0])
        r3 = three[ok]
        if r3.size:
            add(np.c_[L3[ok, 0], H3[ok, 2]], np.tile([c, -c], (r3.size, 1)), 2.0 * V3[ok, 0], r3)
            done[r3] = True
    # anything else: eigen-decomposition on the support
    for r in np.flatnonzero(~done & (cnt > 0)):
        s = slice(start[r], start[r + 1])
        sup, loc = np.unique(np.r_[lo[s], hi[s]], return_inverse=True)
        k = sup.size
        Ms = np.zeros((k, k))
        li, hj = loc[: cnt[r]], loc[cnt[r]:]
        np.add.at(Ms, (li, hj), 0.5 * v[s])
        np.add.at(Ms, (hj, li), 0.5 * v[s])
        ev, U = np.linalg.eigh(Ms)
        nz = np.abs(ev) > 1e-14 * max(1.0, float(np.abs(ev).max()))
        add(np.tile(sup, (int(nz.sum()), 1)), U[:, nz].T, ev[nz], np.full(int(nz.sum()), r))
    if nterm == 0:
        return (sp.csc_array((n, 0)), np.zeros(0), sp.csr_array((0, m)))
    F = sp.csc_array((np.concatenate(Fv), (np.concatenate(Fr), np.concatenate(Fi))),
                     shape=(n, nterm))
    own = np.concatenate(owner)
    O = sp.csr_array((np.ones(nterm), (np.arange(nterm), own)), shape=(nterm, m))
    return F, np.concatenate(W), O


def padded_factors(F: sp.csc_array, w: np.ndarray, O: sp.csr_array
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The factors as padded arrays sorted by owner row: ``idx`` (R x s, -1 padded), ``coef``,
    ``w``, ``own`` (nondecreasing) for :func:`_schur_kernel`."""
    own = np.asarray(O.tocoo().col)[np.argsort(np.asarray(O.tocoo().row), kind="stable")]
    order = np.argsort(own, kind="stable")
    Fc = sp.csc_array(F)[:, order]
    Fc.sort_indices()
    cnt = np.diff(Fc.indptr)
    smax = int(cnt.max(initial=1))
    R = Fc.shape[1]
    idx = np.full((R, smax), -1, dtype=np.int64)
    coef = np.zeros((R, smax))
    pos = np.arange(Fc.nnz) - np.repeat(Fc.indptr[:-1], cnt)
    col = np.repeat(np.arange(R), cnt)
    idx[col, pos] = Fc.indices
    coef[col, pos] = Fc.data
    return idx, coef, np.ascontiguousarray(w[order]), np.ascontiguousarray(own[order])


@lazy_njit(cache=True, fastmath=True)
def _schur_kernel(idx, coef, w, own, X, Z, m):  # pragma: no cover - compiled
    """Lower triangle of ``M = O^T [(w w^T) o (F^T X F) o (F^T Z F)] O`` (terms sorted by
    owner): row ``t`` of ``F^T X`` is formed once (``O(n s)``), each pair then costs ``O(s)``."""
    R, s = idx.shape
    n = X.shape[0]
    M = np.zeros((m, m))
    tx = np.empty(n)
    tz = np.empty(n)
    for t in range(R):
        for k in range(n):
            tx[k] = 0.0
            tz[k] = 0.0
        for a in range(s):
            ia = idx[t, a]
            if ia < 0:
                break
            ca = coef[t, a]
            for k in range(n):
                tx[k] += ca * X[ia, k]
                tz[k] += ca * Z[ia, k]
        rt = own[t]
        wt = w[t]
        for u in range(t + 1):
            gx = 0.0
            gz = 0.0
            for c in range(s):
                ic = idx[u, c]
                if ic < 0:
                    break
                gx += coef[u, c] * tx[ic]
                gz += coef[u, c] * tz[ic]
            v = wt * w[u] * gx * gz
            ru = own[u]
            if ru == rt and u != t:
                v *= 2.0
            M[rt, ru] += v
    return M


@_schur_kernel.twin
def _schur_numpy(idx, coef, w, own, X, Z, m):
    """:func:`_schur_kernel` with dense products: ``G = F^T X F`` for all terms at once
    (``O(R n^2 + R^2 n)``; small problems, no compiled code)."""
    R, n = idx.shape[0], X.shape[0]
    live = idx >= 0
    cols = np.repeat(np.arange(R), live.sum(axis=1))
    F = sp.csc_array((coef[live], (idx[live], cols)), shape=(n, R))
    Ft = F.T.tocsr()
    # F^T X F = F^T (X F), X symmetric: (F^T X)^T = X F
    H = np.asarray(Ft @ np.asarray(Ft @ X).T) * np.asarray(Ft @ np.asarray(Ft @ Z).T)
    H *= np.outer(w, w)
    O = sp.csr_array((np.ones(R), (own, np.arange(R))), shape=(m, R))
    M = np.asarray(O @ np.asarray(O @ H).T)
    return np.tril(M)


def schur_complement(pf: tuple, X: np.ndarray, Z: np.ndarray, m: int) -> np.ndarray:
    """The lower triangle of ``M_rs = <A_r, X A_s Z>`` for the rows of :func:`padded_factors`
    (all a lower Cholesky factorization reads; the strict upper triangle is zero)."""
    idx, coef, w, own = pf
    return _schur_kernel(idx, coef, w, own, np.ascontiguousarray(X), np.ascontiguousarray(Z), m)
