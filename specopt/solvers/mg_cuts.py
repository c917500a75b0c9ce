r"""One-slack cutting-plane master for hinge rows in matrix generation.

Rows of the spectraplex LP (:mod:`specopt.solvers.matrix_generation`) of the *hinge* form::

    s_r (<A_r, X> + g_r^T z) + |g_{r,j}| xi_j >= b_r,     xi_j in [0, inf),  cost -|c_j| xi_j

(``xi_j`` an LP variable in that row only, ``s_r = +1`` for a ``>=`` row, ``-1`` for a ``<=``
row written the other way round) are exactly the terms ``-C_r max(0, b_r - s_r (<A_r, X> +
g_r^T z))`` of the objective, ``C_r = |c_j| / |g_{r,j}|``. The 1-slack reformulation (Joachims,
Finley, Yu, "Cutting-plane training of structural SVMs", 2009) replaces every ``xi_j`` by one
variable ``xi_tot >= 0`` (cost -1) and the cuts, for masks ``c in {0, 1}^{m_h}``::

    sum_r c_r C_r s_r (<A_r, X> + g_r^T z) + xi_tot >= sum_r c_r C_r b_r.

With all masks this is the same problem; a few masks give a relaxation. The master (the PSD block
master of the matrix-generation module, over ``X = P W P^T + alpha Xbar``) holds the non-hinge
rows explicitly plus one row per cut: its size does not grow with the number of hinge rows.

Each cut is stored as ``S_c = sum_r c_r C_r s_r A_r`` (dense n x n, one pass
``A.adjoint_dense`` over the masked rows: a map over row blocks and a sum on a Dask cluster),
``b_c`` and ``g_c`` (LP coefficients), plus its mask packed to bits. A change of subspace ``P``
re-expresses every cut on the client (``P^T S_c P``), without a pass over the data.

**Bound.** With cut duals ``lambda_c <= 0`` (max-sense), ``sum_c |lambda_c| <= 1`` (scaled down
if the master returns more), the row multipliers ``y_r = s_r C_r sum_c lambda_c c_r`` are valid
for the original problem (the reduced cost of every ``xi_j`` is ``-|c_j| (1 - sum_c |lambda_c|
c_r) <= 0``), and ``sum_r y_r A_r = sum_c lambda_c S_c``: the Lagrangian bound of the module
``matrix_generation`` is evaluated in the cut space, with ``lambda_max`` of a dense ``n x n``
matrix built on the client.

**Lower bound.** At each master iterate ``(X, z)`` one full-data pass gives ``<A_r, X>`` for all
rows; the hinge slacks are set to their exact values, so the objective is that of an exactly
feasible point (up to the explicit rows, which the master satisfies). The violated rows of that
pass form the next cut. The gap is ``(best bound - best objective) / max(1, |best objective|)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

__all__ = ["HingeRows", "hinge_structure", "is_dask_backed", "solve_hinge_cuts"]

#: the cut master is used by default from this many hinge rows on (in-memory data; any number
#: for Dask-backed data). Measured in benchmarks/dask_triplets.py --part threshold: the row
#: master is faster at 1e3 rows (0.35-0.64x), even at 3e3, the cut master 1.9-5.2x at 1e4.
CUT_MIN_ROWS = 5000
#: hinge rows nearest their kink kept explicit in the cut master. Measured by hand on PSDBoost,
#: |S| = 1e5, D = 100, Clarabel master, 60 s: 200 rows reached gap 1e-4 in 36 rounds (38 s),
#: 500 rows gap 1.9e-4 in 23 rounds, 1000 rows 3.2e-4 in 17 rounds. Fewer rounds count more
#: when every round is two passes over a cluster, hence the middle.
BAND_ROWS = 500
#: cuts with a zero dual for this many consecutive rounds are dropped (the all-rows cut stays)
CUT_AGE = 20
#: the cut master keeps dense n x n cut matrices: above this n it is not used
CUT_MAX_N = 2000


@dataclass
class HingeRows:
    """Hinge structure of the rows (module docstring)."""

    rows: np.ndarray      # hinge row indices (m_h,)
    cols: np.ndarray      # their slack column j(r)
    sign: np.ndarray      # s_r
    b: np.ndarray         # signed right-hand side
    weight: np.ndarray    # C_r = |c_j| / |g_rj|
    gabs: np.ndarray      # |g_rj|
    shared: np.ndarray    # LP columns kept in the master (all but the slacks)
    explicit: np.ndarray  # non-hinge rows (explicit in the master)


def is_dask_backed(op) -> bool:
    """True if the operator (or a part of it) keeps its rows in Dask arrays."""
    from ._dask_rows import DaskRowOperator

    return isinstance(op, DaskRowOperator) or any(is_dask_backed(o) for o in getattr(op, "ops", []))


def hinge_structure(G, c, lb, ub, zlb, zub) -> HingeRows | None:
    """The hinge rows of ``lb <= A(X) + G z <= ub`` (module docstring), None if there are none.

    A column ``j`` is a slack when it has one nonzero ``g`` (in row ``r``), bounds ``[0, inf)``
    and cost ``c_j < 0``; the row is a hinge row when its only finite side is the one the slack
    relaxes (``lb`` for ``g > 0``, ``ub`` for ``g < 0``) and it has exactly one slack.
    """
    m, p = G.shape
    if p == 0 or m == 0:
        return None
    Gc = sp.csc_array(G)
    cnt = np.diff(Gc.indptr)
    cand = np.flatnonzero((cnt == 1) & (zlb == 0) & np.isposinf(zub) & (c < 0))
    if cand.size == 0:
        return None
    r = Gc.indices[Gc.indptr[cand]]
    g = Gc.data[Gc.indptr[cand]]
    ok = np.where(g > 0, np.isfinite(lb[r]) & np.isposinf(ub[r]),
                  np.isfinite(ub[r]) & np.isneginf(lb[r])) & (g != 0)
    cand, r, g = cand[ok], r[ok], g[ok]
    uniq, counts = np.unique(r, return_counts=True)
    single = np.isin(r, uniq[counts == 1])
    cand, r, g = cand[single], r[single], g[single]
    if r.size == 0:
        return None
    order = np.argsort(r)
    cand, r, g = cand[order], r[order], g[order]
    s = np.sign(g)
    b = np.where(s > 0, lb[r], -ub[r])
    shared = np.setdiff1d(np.arange(p), cand)
    explicit = np.setdiff1d(np.arange(m), r)
    return HingeRows(rows=r, cols=cand, sign=s, b=b, weight=-c[cand] / np.abs(g),
                     gabs=np.abs(g), shared=shared, explicit=explicit)


_SQRT2 = np.sqrt(2.0)


def _pairs(k: int):
    J, I = np.nonzero(np.tril(np.ones((k, k), dtype=bool)))
    return I, J


@dataclass
class _Cut:
    S: np.ndarray         # sum_r c_r C_r s_r A_r  (n, n)
    b: float              # sum_r c_r C_r b_r
    g: np.ndarray         # sum_r c_r C_r s_r g_r (shared columns)
    mask: np.ndarray      # packed bits over the hinge rows
    age: int = 0


def _svec(M, I, J, scale):
    return M[I, J] * scale


def row_subset(op, rows: np.ndarray):
    """The rows ``rows`` (sorted, unique) of a row operator as an in-memory operator (Dask-backed
    rows: one pass that returns only those rows)."""
    from ._dask_rows import DaskRowOperator
    from .matrix_generation import (
        DenseOperator,
        FactoredOperator,
        StackedOperator,
        _SumRowsOperator,
    )

    rows = np.asarray(rows, dtype=np.int64)
    if isinstance(op, DaskRowOperator):
        return op.take_operator(rows)
    if isinstance(op, FactoredOperator):
        Mb = sp.csr_array(op.M[rows])
        cols = np.unique(Mb.indices)
        return FactoredOperator(op.V[cols], Mb[:, cols])
    if isinstance(op, DenseOperator):
        out = object.__new__(DenseOperator)
        out.A = sp.csr_array(op.A[rows])
        out.AT = sp.csr_array(out.A.T)
        out.m, out.n = rows.size, op.n
        return out
    if isinstance(op, StackedOperator):
        parts = []
        for o, a, b in zip(op.ops, op._cuts[:-1], op._cuts[1:], strict=True):
            sel = rows[(rows >= a) & (rows < b)] - a
            parts.append(row_subset(o, sel))
        return StackedOperator(parts)
    if isinstance(op, _SumRowsOperator):
        return _SumRowsOperator([row_subset(o, rows) for o in op.ops])
    raise TypeError(f"no row subset for {type(op).__name__}")


def _bits(packed: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Entries ``idx`` of a mask packed with ``np.packbits`` (big-endian bit order)."""
    return ((packed[idx >> 3] >> (7 - (idx & 7))) & 1).astype(bool)


def _quad(Q, S, s2):
    """``<S, Q diag(s2) Q^T>``."""
    return float(np.einsum("ia,ij,ja->", Q, S, Q * s2))


def polish_shared(d, e, C, c0, lo, hi):
    """``argmax_{lo <= z <= hi}  c0 z - sum_r C_r max(0, d_r - e_r z)`` (one shared LP variable;
    concave and piecewise linear: the slope drops by ``C_r |e_r|`` at each breakpoint
    ``d_r / e_r``). None if the maximum is not attained (unbounded direction)."""
    nz = e != 0
    bp, drop = d[nz] / e[nz], C[nz] * np.abs(e[nz])
    order = np.argsort(bp, kind="stable")
    bp, drop = bp[order], drop[order]
    slope = c0 + float(C[nz][e[nz] > 0] @ e[nz][e[nz] > 0])   # slope left of every breakpoint
    after = slope - np.cumsum(drop)                            # slope right of breakpoint i
    if slope < 0:
        z = -np.inf
    elif slope == 0:  # flat left of the first breakpoint: attained there
        z = bp[0] if bp.size else 0.0
    else:
        i = int(np.argmax(after <= 0)) if (after <= 0).any() else -1
        z = bp[i] if i >= 0 else np.inf
    z = float(np.clip(z, lo, hi))
    return z if np.isfinite(z) else None


def solve_hinge_cuts(
    full, A, C, G, c, lb, ub, zlb, zub, t, trace_eq, hs: HingeRows, *, tol, max_iters,
    time_limit, cpr, max_rank, verbose, t0, offset, callback=None, cut_age: int = CUT_AGE,
    inout: float = 0.8, band_rows: int = BAND_ROWS, smoothing: float = 0.5,
):
    """Matrix generation with the 1-slack cut master (module docstring); returns a
    ``MatrixGenerationResult`` over the original rows and LP variables.

    ``band_rows`` hinge rows closest to their kink (smallest ``|b_r - s_r (...)|`` at the last
    separation point) are kept in the master with their own slack (the cuts then cover the other
    rows only); ``inout`` is the weight of the best point in the separation point;
    ``smoothing`` the Wentges weight of the best dual in the pricing point.
    """
    from .matrix_generation import (
        MatrixGenerationResult,
        _clip_duals,
        _psd_block_master,
        _top_eigs,
        iterate_factor,
        next_subspace,
        record_round,
    )

    n, m = A.n, A.m
    p = G.shape[1]
    G = sp.csr_array(G)
    sh, ex, hr = hs.shared, hs.explicit, hs.rows
    mh, ne, psh = hr.size, ex.size, sh.size
    Cw, sg = hs.weight, hs.sign
    Gsh = sp.csr_array(G[:, sh])
    Gh = sp.csr_array(sp.diags_array(sg) @ Gsh[hr])   # signed shared part of hinge rows
    Ge = sp.csr_array(Gsh[ex])
    AE = row_subset(A, ex) if ne else None
    Cd = C.adjoint_dense(np.ones(1))
    Cd = 0.5 * (Cd + Cd.T)
    lb_e, ub_e = lb[ex], ub[ex]
    # one shared LP variable in no explicit row (PSDBoost's rho, an SVM bias): polished exactly
    polish = psh == 1 and Ge.nnz == 0

    def activity(Q, s2):
        """``<A_r, X>`` for every row at ``X = Q diag(s2) Q^T`` (one full-data pass)."""
        if Q.shape[1] == 0:
            return np.zeros(m)
        return np.asarray(A.quad(Q) @ s2, dtype=float)

    def make_cut(mask, take=None):
        """The cut of ``mask`` (one pass ``A.adjoint_dense``); with ``take`` (hinge positions)
        also those rows as an in-memory operator, in the same pass when the operator can."""
        w = np.zeros(m)
        w[hr[mask]] = Cw[mask] * sg[mask]
        AT = None
        if take is not None and hasattr(A, "adjoint_take"):
            S, AT = A.adjoint_take(w, hr[take])
        else:
            S = A.adjoint_dense(w) if mask.any() else np.zeros((n, n))
            if take is not None:
                AT = row_subset(A, hr[take])
        cw = Cw * mask
        cut = _Cut(S=0.5 * (S + S.T), b=float(cw @ hs.b), g=np.asarray(Gh.T @ cw),
                   mask=np.packbits(mask))
        return cut, AT

    def y_full(y_e, band, y_b, lam, cuts):
        """Row multipliers: y_r = s_r C_r sum_c lambda_c c_r off the band (module docstring)."""
        y = np.zeros(m)
        y[ex] = y_e
        yh = np.zeros(mh)
        for lc, q in zip(lam, cuts, strict=True):
            if lc:
                yh += lc * np.unpackbits(q.mask, count=mh).astype(bool)
        yh *= Cw
        yh[band] = y_b
        y[hr] = sg * yh
        return y

    c_sh, zlb_sh, zub_sh = c[sh], zlb[sh], zub[sh]

    def _bound(lmax, d, h):
        """``t lambda_max + sup_z d^T z + h`` (as ``lagrangian_bound``)."""
        with np.errstate(invalid="ignore"):
            small = np.abs(d) <= 1e-7 * np.maximum(1.0, np.abs(c_sh))
            d = np.where(small & ~(np.isfinite(zlb_sh) & np.isfinite(zub_sh)), 0.0, d)
            zt = np.where(d > 0, d * zub_sh, np.where(d < 0, d * zlb_sh, 0.0)).sum()
        val = float((t * lmax if trace_eq else t * max(lmax, 0.0)) + zt + h)
        return val if np.isfinite(val) else np.inf

    def _top(H, kk):
        kk = max(1, min(kk, n))
        vals, vecs = sla.eigh(H, subset_by_index=[n - kk, n - 1], driver="evr")
        return vals[::-1], vecs[:, ::-1]

    def hinge_args(act, zs):
        return hs.b - sg * act[hr] - Gh @ zs

    # start: top eigenvectors of C, the all-rows cut (it bounds the shared variables like
    # sum_r C_r xi_r does when every row is violated), no band rows
    _, P = _top_eigs(full, np.append(1.0, np.zeros(m)), cpr, True, None, 1e-8)
    cuts = [make_cut(np.ones(mh, dtype=bool))[0]]
    band = np.zeros(0, dtype=np.int64)            # positions in hr
    AB = row_subset(A, hr[band])
    Ubar = thbar = None
    hist = {k: [] for k in ("objective", "bound", "gap", "columns", "time", "lambda", "cuts")}
    best_bound, best_obj = np.inf, -np.inf
    best_pt = best_trip = best_y = None
    best_mu = 0.0
    status = "max_iters"
    it = 0
    for it in range(1, max_iters + 1):
        k = P.shape[1]
        I, J = _pairs(k)
        scale = np.where(I == J, 1.0, _SQRT2)
        nb, nc = band.size, len(cuts)
        Cb, sb = Cw[band], sg[band]
        # per cut: its band rows (weights C_r s_r there), removed from the cut
        corr = [Cb * sb * _bits(q.mask, band) for q in cuts]
        cobj = np.asarray(C.quad_pairs(P))[0] * scale
        BB = np.asarray(AB.quad_pairs(P)) * scale if nb else np.zeros((0, I.size))
        Bs = np.vstack(
            ([np.asarray(AE.quad_pairs(P)) * scale] if ne else [])
            + [sb[:, None] * BB]
            + [(_svec(P.T @ q.S @ P, I, J, scale) - w @ BB)[None, :]
               for q, w in zip(cuts, corr, strict=True)])
        if Ubar is not None:
            ab_b = np.asarray(AB.quad(Ubar) @ thbar) if nb else np.zeros(0)
            abar = np.concatenate([
                np.asarray(AE.quad(Ubar) @ thbar) if ne else np.zeros(0), sb * ab_b,
                [_quad(Ubar, q.S, thbar) - w @ ab_b for q, w in zip(cuts, corr, strict=True)]])
            cbar = _quad(Ubar, Cd, thbar)
        else:
            abar = cbar = None
        gcut = np.array([q.g - (w / sb) @ Gh[band] if nb else q.g
                         for q, w in zip(cuts, corr, strict=True)]).reshape(nc, psh)
        bcut = np.array([q.b - (w / sb) @ hs.b[band] if nb else q.b
                         for q, w in zip(cuts, corr, strict=True)])
        G_m = sp.vstack([
            sp.hstack([Ge, sp.csr_array((ne, nb + 1))]),
            sp.hstack([Gh[band], sp.identity(nb), sp.csr_array((nb, 1))]),
            sp.hstack([sp.csr_array(gcut), sp.csr_array((nc, nb)),
                       sp.csr_array(np.ones((nc, 1)))]),
        ], format="csr")
        c_m = np.concatenate([c[sh], -Cb, [-1.0]])
        zlb_m = np.concatenate([zlb[sh], np.zeros(nb + 1)])
        zub_m = np.concatenate([zub[sh], np.full(nb + 1, np.inf)])
        lb_m = np.concatenate([lb_e, hs.b[band], bcut])
        ub_m = np.concatenate([ub_e, np.full(nb + nc, np.inf)])
        obj_m, W, alpha, z_m, y_m, mu = _psd_block_master(
            Bs, cobj, abar, cbar, G_m, c_m, lb_m, ub_m, zlb_m, zub_m, t, trace_eq, k)
        zs, xi_tot = z_m[:psh], float(z_m[-1])
        # the iterate X = P W P^T + alpha Xbar as Q diag(s2) Q^T
        lw, Vw, Q, s2 = iterate_factor(P, W, Ubar, thbar, alpha, t)
        # one full-data pass: <A_r, X> at the master's point; activities are linear in X, so
        # those at the separation point (in-out: between the best point and the master's) come
        # from the stored ones of the best point. Exact objective there (a feasible point)
        # and the next cut's mask; the master's point is the fallback separation point when
        # that cut would not cut the master's point off (checked on the client)
        act_m = activity(Q, s2)
        ha_m = hinge_args(act_m, zs)
        cut_viol = -np.inf
        for beta in ((inout, 0.0) if best_pt is not None and inout > 0 else (0.0,)):
            if beta > 0:
                Qb, s2b, zb, act_b = best_pt
                Qs, ss, _ = np.linalg.svd(np.hstack([Qb * np.sqrt(beta * s2b),
                                                     Q * np.sqrt((1 - beta) * s2)]),
                                          full_matrices=False)
                ss = ss * ss
                keep_s = ss > 1e-12 * t
                Qs, ss = Qs[:, keep_s], ss[keep_s]
                zsep = beta * zb + (1 - beta) * zs
                act = beta * act_b + (1 - beta) * act_m
            else:
                Qs, ss, zsep, act = Q, s2, zs, act_m
            if polish:
                # the best shared variable for this X (exact, on the client)
                zp = polish_shared(hs.b - sg * act[hr], Gh[:, [0]].toarray().ravel(), Cw,
                                   float(c_sh[0]), zlb_sh[0], zub_sh[0])
                if zp is not None:
                    zsep = np.array([zp])
            ha = hinge_args(act, zsep)
            viol = ha > 0
            hsum = float(Cw[viol] @ ha[viol])
            obj = _quad(Qs, Cd, ss) + float(c_sh @ zsep) - hsum
            if obj > best_obj:
                best_obj, best_pt = obj, (Qs, ss, zsep, act)
            mask = viol.copy()
            mask[band] = False
            # the cut's violation at the master's point
            cut_viol = float(Cw[mask] @ ha_m[mask]) - xi_tot
            if cut_viol > 1e-12 * max(1.0, abs(obj_m)):
                break
        # bound from the master duals (module docstring)
        y_e = _clip_duals(y_m[:ne], lb_e, ub_e)
        y_b = np.clip(y_m[ne: ne + nb], -Cb, 0.0)
        lam = np.minimum(y_m[ne + nb:], 0.0)
        tot = -lam.sum()
        if tot > 1.0:
            lam = lam / tot
        H = Cd - np.einsum("c,cij->ij", lam, np.array([q.S for q in cuts]))
        if nb:
            wb = sb * (y_b - sum(lc * w * sb for lc, w in zip(lam, corr, strict=True)))
            H = H - AB.adjoint_dense(wb)
        if ne and np.any(y_e):
            H = H - AE.adjoint_dense(y_e)
        y_all = np.concatenate([y_e, y_b, lam])
        # the dual as (H, reduced costs of the shared LP variables, h(y)): the bound is
        # t lambda_max(H) + sup_z d^T z + h, and convex combinations of duals are combinations
        # of these (Wentges smoothing with the best dual so far, as in the row master)
        d_m = np.asarray(c_m - G_m.T @ y_all)[:psh]
        h_m = float(np.where(y_all > 0, y_all * ub_m, np.where(y_all < 0, y_all * lb_m, 0.0))
                    .sum())
        trip_m = (0.5 * (H + H.T), d_m, h_m)
        cands = [(trip_m, 1.0)]
        if smoothing > 0 and best_trip is not None:
            cands.append((tuple(smoothing * b + (1 - smoothing) * x
                                for b, x in zip(best_trip, trip_m, strict=True)), smoothing))
        vecs_all, vals_m = [], None
        for trip, wgt in cands:
            vals, vecs = _top(trip[0], cpr)
            vals_m = vals if vals_m is None else vals_m
            vecs_all.append(vecs)
            bnd = _bound(vals[0], trip[1], trip[2])
            if bnd < best_bound:
                best_bound, best_trip = bnd, trip
                yf = y_full(y_e, band, y_b, lam, cuts)
                best_y = yf if wgt == 1.0 else smoothing * best_y + (1 - smoothing) * yf
                best_mu = mu
        vecs = np.linalg.qr(np.hstack(vecs_all))[0] if len(vecs_all) > 1 else vecs_all[0]
        rc_all = np.einsum("ia,ij,ja->a", vecs, trip_m[0], vecs) - mu
        gap = record_round(hist, it, best_obj, best_bound, offset, k, float(vals_m[0]), t0,
                           callback, cuts=nc)
        if verbose:
            print(f"[mg-cuts] it {it:3d} obj {best_obj + offset:+.9e} bound "
                  f"{best_bound + offset:+.9e} gap {gap:.2e} k {k} rank {Q.shape[1]} cuts {nc} "
                  f"band {nb} violated {int(viol.sum())}")
        if gap <= tol:
            status = "optimal"
            break
        if time.perf_counter() - t0 > time_limit:
            status = "time_limit"
            break
        # next band: rows at their kink in the master (fractional slack dual) stay, then the
        # rows closest to the kink at the separation point
        at_kink = band[(y_b < -1e-9 * Cb) & (y_b > -(1 - 1e-9) * Cb)]
        nn = min(max(band_rows - at_kink.size, 0), mh)
        near = np.argpartition(np.abs(ha), nn - 1)[:nn] if 0 < nn < mh else np.arange(nn)
        new_band = np.union1d(at_kink, near) if band_rows > 0 else band
        band_changed = not np.array_equal(new_band, band)
        # cuts: age by zero duals, drop old ones (never the all-rows cut), add the new one (its
        # matrix and the new band rows in one pass); the cut leaves out both bands' rows
        for q, lc in zip(cuts, lam, strict=True):
            q.age = 0 if lc < -1e-12 else q.age + 1
        cuts = [cuts[0]] + [q for q in cuts[1:] if q.age < cut_age]
        new_cut = cut_viol > 1e-12 * max(1.0, abs(obj_m))
        mask[new_band] = False
        cut, AB_new = make_cut(mask, new_band if band_changed else None) if new_cut else (
            None, row_subset(A, hr[new_band]) if band_changed else None)
        if new_cut:
            cuts.append(cut)
        if band_changed:
            band, AB = new_band, AB_new
        keep = rc_all > 1e-12 * max(1.0, abs(obj_m))
        if not keep.any() and not new_cut and not band_changed:
            status = "stalled"
            break
        if not keep.any():
            continue
        # next subspace (as in the row master)
        P, Ubar, thbar = next_subspace(P, lw, Vw, vecs[:, keep], Ubar, thbar, alpha, t,
                                       max_rank)

    # the best point: exact trace, exact slacks (one more pass)
    Q, s2, zs, _ = best_pt
    if (trace_eq and s2.sum() > 0) or s2.sum() > t:
        s2 = s2 * (t / s2.sum())
    act = activity(Q, s2)
    ha = hinge_args(act, zs)
    z = np.zeros(p)
    z[sh] = zs
    z[hs.cols] = np.maximum(ha, 0.0) / hs.gabs
    obj = _quad(Q, Cd, s2) + float(c @ z)
    y, mu = best_y, best_mu  # row multipliers of the best bound
    return MatrixGenerationResult(
        status=status,
        objective=float(obj + offset),
        bound=float(best_bound + offset),
        gap=float((best_bound - obj) / max(1.0, abs(obj))),
        theta=s2,
        U=Q,
        z=z,
        y=y,
        mu=float(mu),
        row_activity=act + G @ z,
        iterations=it,
        n_columns=int(P.shape[1]),
        solve_time=time.perf_counter() - t0,
        history=hist,
    )


def dispatch(full, A, C, G, c, lb, ub, zlb, zub, t, trace_eq, cuts, **kw):
    """Run :func:`solve_hinge_cuts` when it applies (``cuts`` as in ``solve_spectraplex_lp``),
    else None (the row master runs). An unbounded cut master is only a relaxation's verdict:
    then None as well, and the row master decides."""
    from .matrix_generation import UnboundedProblem

    if cuts not in (True, "auto"):
        raise ValueError(f"cuts must be 'auto', True or False, got {cuts!r}")
    if A.n > CUT_MAX_N:
        return None
    hs = hinge_structure(sp.csr_array(G), c, lb, ub, zlb, zub)
    if hs is None:
        return None
    if cuts == "auto" and hs.rows.size < CUT_MIN_ROWS and not is_dask_backed(A):
        return None
    try:
        return solve_hinge_cuts(full, A, C, G, c, lb, ub, zlb, zub, t, trace_eq, hs, **kw)
    except UnboundedProblem:
        return None
