r"""One-slack cutting-plane master for hinge rows in matrix generation.

Rows of the spectraplex LP (:mod:`specopt.solvers.mg`) of the *hinge* form::

    s_r (<A_r, X> + g_r^T z) + |g_{r,j}| xi_j >= b_r,     xi_j in [0, inf),  cost -|c_j| xi_j

(``xi_j`` an LP variable in that row only, ``s_r = +1`` for a ``>=`` row, ``-1`` for a ``<=``
row written the other way round) are exactly the terms ``-C_r max(0, b_r - s_r (<A_r, X> +
g_r^T z))`` of the objective, ``C_r = |c_j| / |g_{r,j}|``. The 1-slack reformulation (Joachims,
Finley, Yu, "Cutting-plane training of structural SVMs", 2009) replaces every ``xi_j`` by one
variable ``xi_tot >= 0`` (cost -1) and the cuts, for masks ``c in {0, 1}^{m_h}``::

    sum_r c_r C_r s_r (<A_r, X> + g_r^T z) + xi_tot >= sum_r c_r C_r b_r.

With all masks this is the same problem; a few masks give a relaxation. The master (the PSD block
master of :mod:`._block`, over ``X = P W P^T + alpha Xbar``) holds the non-hinge
rows explicitly plus one row per cut: its size does not grow with the number of hinge rows.

Each cut is stored as ``S_c = sum_r c_r C_r s_r A_r`` (dense n x n, one pass
``A.adjoint_dense`` over the masked rows: a map over row blocks and a sum on a Dask cluster),
``b_c`` and ``g_c`` (LP coefficients), plus its mask packed to bits. A change of subspace ``P``
re-expresses every cut on the client (``P^T S_c P``), without a pass over the data.

**Bound.** With cut duals ``lambda_c <= 0`` (max-sense), ``sum_c |lambda_c| <= 1`` (scaled down
if the master returns more), the row multipliers ``y_r = s_r C_r sum_c lambda_c c_r`` are valid
for the original problem (the reduced cost of every ``xi_j`` is ``-|c_j| (1 - sum_c |lambda_c|
c_r) <= 0``), and ``sum_r y_r A_r = sum_c lambda_c S_c``: the Lagrangian bound of the module
``mg._bound`` is evaluated in the cut space, with ``lambda_max`` of a dense ``n x n``
matrix built on the client.

**Lower bound.** At each master iterate ``(X, z)`` one full-data pass gives ``<A_r, X>`` for all
rows; the hinge slacks are set to their exact values, so the objective is that of an exactly
feasible point (up to the explicit rows, which the master satisfies). The violated rows of that
pass form the next cut. The gap is ``(best bound - best objective) / max(1, |best objective|)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from .._status import SolverStatus
from ._block import (
    Block,
    MasterStart,
    _psd_block_master,
    exact_trace,
    iterate_factor,
    next_subspace,
)
from ._bound import _clip_duals, _top_eigs
from ._operators import SymOperator, row_subset, svec_index
from ._problem import LPSide, MGOptions, SpectraplexLP
from ._result import MatrixGenerationResult, RoundLog, UnboundedProblem
from .dask_rows import is_dask_backed
from .psd_master import WARM_AFTER_STEPS, warm_start

__all__ = ["HingeRows", "dispatch", "hinge_structure", "polish_shared", "solve_hinge_cuts"]

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
#: Warm-start each interior-point cut master from the previous round's point and duals
#: (:func:`_warm_start`; with ``warm_start=True``). Off: on the D = 500 / |S| = 1e4 member 0 at
#: a 60 s CPU budget it cut the masters' steps 23 -> 13 (0.50 -> 0.31 s CPU per master) but
#: the bound stalled: gap 5.4e-4 after 79 rounds against 3.4e-4 after 67 cold
#: (docs/routes/matrix_generation.md).
CUT_WARM_START = False


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
    single = np.bincount(r, minlength=m)[r] == 1  # rows with exactly one slack
    cand, r, g = cand[single], r[single], g[single]
    if r.size == 0:
        return None
    order = np.argsort(r)
    cand, r, g = cand[order], r[order], g[order]
    s = np.sign(g)
    b = np.where(s > 0, lb[r], -ub[r])
    keep_col = np.ones(p, dtype=bool)
    keep_col[cand] = False
    keep_row = np.ones(m, dtype=bool)
    keep_row[r] = False
    shared, explicit = np.flatnonzero(keep_col), np.flatnonzero(keep_row)
    return HingeRows(rows=r, cols=cand, sign=s, b=b, weight=-c[cand] / np.abs(g),
                     gabs=np.abs(g), shared=shared, explicit=explicit)


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
    if after.size:  # right of every breakpoint, exactly (the running sum drifts: 1e-15 > 0
        after[-1] = c0 - float(C[nz][e[nz] < 0] @ -e[nz][e[nz] < 0])  # read as unbounded)
    if slope < 0:
        z = -np.inf
    elif slope == 0:  # flat left of the first breakpoint: attained there
        z = bp[0] if bp.size else 0.0
    else:
        i = int(np.argmax(after <= 0)) if (after <= 0).any() else -1
        z = bp[i] if i >= 0 else np.inf
    z = float(np.clip(z, lo, hi))
    return z if np.isfinite(z) else None



@dataclass(frozen=True, eq=False)
class _Cut:
    """One cut of the master (module docstring); ``age``: rounds its dual has been zero."""

    S: np.ndarray         # sum_r c_r C_r s_r A_r  (n, n)
    b: float              # sum_r c_r C_r b_r
    g: np.ndarray         # sum_r c_r C_r s_r g_r (shared columns)
    mask: np.ndarray      # packed bits over the hinge rows
    age: int = 0


@dataclass(frozen=True, eq=False)
class _Hinge:
    """The problem seen by the cut master: hinge structure ``hs``, the signed shared LP part of
    the hinge rows ``Gh``, the explicit rows ``Ge`` / ``AE`` (in memory), dense ``C``; ``polish``:
    one shared LP variable in no explicit row (PSDBoost's rho, an SVM bias), polished exactly."""

    prob: SpectraplexLP
    hs: HingeRows
    Gh: sp.csr_array
    Ge: sp.csr_array
    AE: SymOperator | None
    Cd: np.ndarray
    polish: bool

    @classmethod
    def build(cls, prob: SpectraplexLP, hs: HingeRows) -> _Hinge:
        Gsh = sp.csr_array(prob.G[:, hs.shared])
        Gh = sp.csr_array(sp.diags_array(hs.sign) @ Gsh[hs.rows])
        Ge = sp.csr_array(Gsh[hs.explicit])
        AE = row_subset(prob.A, hs.explicit) if hs.explicit.size else None
        Cd = prob.C.adjoint_dense(np.ones(1))
        return cls(prob, hs, Gh, Ge, AE, 0.5 * (Cd + Cd.T), hs.shared.size == 1 and Ge.nnz == 0)

    def activity(self, Q: np.ndarray, s2: np.ndarray) -> np.ndarray:
        """``<A_r, X>`` for every row at ``X = Q diag(s2) Q^T`` (one full-data pass)."""
        if Q.shape[1] == 0:
            return np.zeros(self.prob.m)
        return np.asarray(self.prob.A.quad(Q) @ s2, dtype=float)

    def hinge_args(self, act: np.ndarray, zs: np.ndarray) -> np.ndarray:
        """``b_r - s_r (<A_r, X> + g_r^T z)`` of the hinge rows (positive: violated)."""
        return self.hs.b - self.hs.sign * act[self.hs.rows] - self.Gh @ zs

    def make_cut(self, mask: np.ndarray, take: np.ndarray | None = None):
        """The cut of ``mask`` (one pass ``A.adjoint_dense``); with ``take`` (hinge positions)
        also those rows as an in-memory operator, in the same pass when the operator can."""
        A, hs, n = self.prob.A, self.hs, self.prob.n
        hr, Cw, sg = hs.rows, hs.weight, hs.sign
        w = np.zeros(self.prob.m)
        w[hr[mask]] = Cw[mask] * sg[mask]
        AT = None
        if take is not None and hasattr(A, "adjoint_take"):
            S, AT = A.adjoint_take(w, hr[take])
        else:
            S = A.adjoint_dense(w) if mask.any() else np.zeros((n, n))
            if take is not None:
                AT = row_subset(A, hr[take])
        cw = Cw * mask
        cut = _Cut(S=0.5 * (S + S.T), b=float(cw @ hs.b), g=np.asarray(self.Gh.T @ cw),
                   mask=np.packbits(mask))
        return cut, AT

    # ---- the per-row state (numpy arrays here; kept on the workers by the Dask subclass,
    # specopt.solvers.mg._dask_hinge): every use of an array with one entry per row is below
    def start_subspace(self, k: int) -> np.ndarray:
        """The first subspace: top-``k`` eigenvectors of ``C``."""
        return _top_eigs(self.prob.full, np.append(1.0, np.zeros(self.prob.m)), k, True, None,
                         1e-8)[1]

    def all_rows(self) -> np.ndarray:
        """The mask of every hinge row (the first cut)."""
        return np.ones(self.hs.rows.size, dtype=bool)

    def band_operator(self, band: np.ndarray) -> SymOperator:
        """The band rows (hinge positions) as an in-memory operator."""
        return row_subset(self.prob.A, self.hs.rows[band])

    def band_bits(self, cuts: list, band: np.ndarray) -> list:
        """Each cut's mask at the band rows."""
        return [_bits(q.mask, band) for q in cuts]

    def band_G(self, band: np.ndarray):
        """The signed shared LP part of the band rows."""
        return self.Gh[band]

    def keep(self, act):
        """``act`` kept for later rounds (the best point's activities)."""
        return act

    def polish_z(self, act) -> float | None:
        """The best shared variable for the activities ``act`` (:func:`polish_shared`)."""
        hs, prob, sh = self.hs, self.prob, self.hs.shared
        return polish_shared(hs.b - hs.sign * act[hs.rows], self.Gh[:, [0]].toarray().ravel(),
                             hs.weight, float(prob.c[sh][0]), prob.zlb[sh][0], prob.zub[sh][0])

    def hinge_sum(self, ha) -> tuple[float, int]:
        """``(sum_r C_r max(0, ha_r), number of violated rows)``."""
        viol = ha > 0
        return float(self.hs.weight[viol] @ ha[viol]), int(viol.sum())

    def cut_mask(self, ha, ha_m, band: np.ndarray):
        """The next cut's mask (violated rows of ``ha`` off the band) and ``sum_mask C_r
        ha_m_r`` (the cut's left side at the master's point)."""
        mask = ha > 0
        mask[band] = False
        return mask, float(self.hs.weight[mask] @ ha_m[mask])

    def separation_sums(self, ha, ha_m, band: np.ndarray):
        """:meth:`hinge_sum` of ``ha`` and :meth:`cut_mask` (in one pass where it matters)."""
        return (*self.hinge_sum(ha), *self.cut_mask(ha, ha_m, band))

    def separation_candidates(self, pts: list, ha_m, band: np.ndarray):
        """For each candidate ``(activities, shared z)`` in turn (lazily: the caller stops at
        the first good one): ``(z, hinge args, *separation_sums)``, ``z`` polished."""
        for act, zsep in pts:
            if self.polish:  # the best shared variable for this X (exact)
                zp = self.polish_z(act)
                if zp is not None:
                    zsep = np.array([zp])
            ha = self.hinge_args(act, zsep)
            yield (zsep, ha, *self.separation_sums(ha, ha_m, band))

    def nearest(self, ha, nn: int) -> np.ndarray:
        """Positions of the ``nn`` hinge rows with the smallest ``|ha|``."""
        mh = self.hs.rows.size
        return np.argpartition(np.abs(ha), nn - 1)[:nn] if 0 < nn < mh else np.arange(nn)

    def drop_rows(self, mask, rows: np.ndarray):
        """``mask`` with the hinge positions ``rows`` cleared."""
        mask[rows] = False
        return mask

    def top_mask(self, ha, count: int, band: np.ndarray):
        """The mask of the ``count`` hinge rows with the largest ``ha`` (ties either way), the
        rows ``band`` off (a warm start's first cut, :func:`_start_state`)."""
        mh = self.hs.rows.size
        mask = np.zeros(mh, dtype=bool)
        mask[np.argpartition(-ha, count - 1)[:count] if 0 < count < mh else slice(None)] = True
        mask[band] = False
        return mask

    def cut_result(self, log: RoundLog, st: _State, top: _Top, bnd: _Bound,
                   status: SolverStatus, it: int) -> MatrixGenerationResult:
        """The result at the best point (:func:`_cut_result`)."""
        return _cut_result(self, log, st, top, bnd, status, it)

    def y_full(self, y_e, band, y_b, lam, cuts) -> np.ndarray:
        """Row multipliers: y_r = s_r C_r sum_c lambda_c c_r off the band (module docstring)."""
        hs = self.hs
        y = np.zeros(self.prob.m)
        y[hs.explicit] = y_e
        yh = np.zeros(hs.rows.size)
        for lc, q in zip(lam, cuts, strict=True):
            if lc:
                yh += lc * np.unpackbits(q.mask, count=hs.rows.size).astype(bool)
        yh *= hs.weight
        yh[band] = y_b
        y[hs.rows] = hs.sign * yh
        return y

    def bound(self, lmax: float, d: np.ndarray, h: float) -> float:
        """``t lambda_max + sup_z d^T z + h`` (as ``lagrangian_bound``, shared LP variables)."""
        prob, sh = self.prob, self.hs.shared
        zlb, zub = prob.zlb[sh], prob.zub[sh]
        with np.errstate(invalid="ignore"):
            small = np.abs(d) <= 1e-7 * np.maximum(1.0, np.abs(prob.c[sh]))
            d = np.where(small & ~(np.isfinite(zlb) & np.isfinite(zub)), 0.0, d)
            zt = np.where(d > 0, d * zub, np.where(d < 0, d * zlb, 0.0)).sum()
        t = prob.trace
        val = float((t * lmax if prob.trace_eq else t * max(lmax, 0.0)) + zt + h)
        return val if np.isfinite(val) else np.inf


def _top(H: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``kk`` eigenpairs of the dense ``H`` (values descending)."""
    n = H.shape[0]
    kk = max(1, min(kk, n))
    vals, vecs = sla.eigh(H, subset_by_index=[n - kk, n - 1], driver="evr")
    return vals[::-1], vecs[:, ::-1]


@dataclass(frozen=True, eq=False)
class _State:
    """What the cut master carries from round to round: cuts, band rows (positions in the hinge
    rows) and their in-memory operator ``AB``, the block."""

    cuts: list
    band: np.ndarray
    AB: SymOperator
    blk: Block
    start: MasterStart | None = None  # warm start of this round's master (None: cold)


@dataclass(frozen=True, eq=False, kw_only=True)
class _Master(LPSide):
    """One round's master (explicit rows, band rows with their slacks, one row per cut; its
    :class:`LPSide` has the LP columns shared, band slacks, xi_tot); ``corr`` per cut: its band
    rows' weights ``C_r s_r`` (removed from the cut)."""

    Bs: np.ndarray
    cobj: np.ndarray
    abar: np.ndarray | None
    cbar: float | None
    corr: list

    def solve(self, prob: SpectraplexLP, k: int, start: MasterStart | None = None,
              info: dict | None = None):
        return _psd_block_master(self.Bs, self.cobj, self.abar, self.cbar, self.G, self.c,
                                 self.lb, self.ub, self.zlb, self.zub, prob.trace, prob.trace_eq,
                                 k, start=start, info=info)


def _master(h: _Hinge, st: _State) -> _Master:
    """The master of the round (svec coefficients on the block ``P``, aggregate, LP part)."""
    hs, P, band, AB = h.hs, st.blk.P, st.band, st.AB
    I, J, scale = svec_index(P.shape[1])
    nb, ne = band.size, hs.explicit.size
    Cb, sb = hs.weight[band], hs.sign[band]
    corr = [Cb * sb * bits for bits in h.band_bits(st.cuts, band)]
    cobj = np.asarray(h.prob.C.quad_pairs(P))[0] * scale
    BB = np.asarray(AB.quad_pairs(P)) * scale if nb else np.zeros((0, I.size))
    Bs = np.vstack(
        ([np.asarray(h.AE.quad_pairs(P)) * scale] if ne else [])
        + [sb[:, None] * BB]
        + [((P.T @ q.S @ P)[I, J] * scale - w @ BB)[None, :]
           for q, w in zip(st.cuts, corr, strict=True)])
    abar, cbar = _master_aggregate(h, st, corr)
    return _Master(*_master_lp(h, st, corr), Bs=Bs, cobj=cobj, abar=abar, cbar=cbar, corr=corr)


def _master_aggregate(h: _Hinge, st: _State, corr: list):
    """``(abar, cbar)`` of the aggregate in the master's rows (None without one)."""
    Ubar, thbar, band = st.blk.Ubar, st.blk.thbar, st.band
    if Ubar is None:
        return None, None
    nb, ne, sb = band.size, h.hs.explicit.size, h.hs.sign[band]
    ab_b = np.asarray(st.AB.quad(Ubar) @ thbar) if nb else np.zeros(0)
    abar = np.concatenate([
        np.asarray(h.AE.quad(Ubar) @ thbar) if ne else np.zeros(0), sb * ab_b,
        [_quad(Ubar, q.S, thbar) - w @ ab_b for q, w in zip(st.cuts, corr, strict=True)]])
    return abar, _quad(Ubar, h.Cd, thbar)


def _master_lp(h: _Hinge, st: _State, corr: list):
    """``(G, c, lb, ub, zlb, zub)`` of the master (LP columns: shared, band slacks, xi_tot)."""
    prob, hs, band, cuts = h.prob, h.hs, st.band, st.cuts
    sh, ex = hs.shared, hs.explicit
    nb, nc, ne, psh = band.size, len(cuts), ex.size, sh.size
    Cb, sb, Ghb = hs.weight[band], hs.sign[band], h.band_G(band)
    gcut = np.array([q.g - (w / sb) @ Ghb if nb else q.g
                     for q, w in zip(cuts, corr, strict=True)]).reshape(nc, psh)
    bcut = np.array([q.b - (w / sb) @ hs.b[band] if nb else q.b
                     for q, w in zip(cuts, corr, strict=True)])
    G_m = sp.vstack([
        sp.hstack([h.Ge, sp.csr_array((ne, nb + 1))]),
        sp.hstack([Ghb, sp.identity(nb), sp.csr_array((nb, 1))]),
        sp.hstack([sp.csr_array(gcut), sp.csr_array((nc, nb)),
                   sp.csr_array(np.ones((nc, 1)))]),
    ], format="csr")
    c_m = np.concatenate([prob.c[sh], -Cb, [-1.0]])
    zlb_m = np.concatenate([prob.zlb[sh], np.zeros(nb + 1)])
    zub_m = np.concatenate([prob.zub[sh], np.full(nb + 1, np.inf)])
    lb_m = np.concatenate([prob.lb[ex], hs.b[band], bcut])
    ub_m = np.concatenate([prob.ub[ex], np.full(nb + nc, np.inf)])
    return G_m, c_m, lb_m, ub_m, zlb_m, zub_m


@dataclass(frozen=True, eq=False)
class _Top:
    """The best separation point so far (an exactly feasible point: value ``obj``):
    ``X = Q diag(s2) Q^T``, shared LP variables ``z``, row activities ``act``."""

    obj: float = -np.inf
    Q: np.ndarray | None = None
    s2: np.ndarray | None = None
    z: np.ndarray | None = None
    act: np.ndarray | None = None


def _sep_point(top: _Top, beta: float, Q, s2, zs, act_m, t: float):
    """``beta`` (best point) + ``1 - beta`` (master's point), as ``(Q, s2, z, activities)``:
    activities are linear in X, so no pass over the data."""
    if beta == 0:
        return Q, s2, zs, act_m
    Qs, ss, _ = np.linalg.svd(np.hstack([top.Q * np.sqrt(beta * top.s2),
                                         Q * np.sqrt((1 - beta) * s2)]), full_matrices=False)
    ss = ss * ss
    keep = ss > 1e-12 * t
    return Qs[:, keep], ss[keep], beta * top.z + (1 - beta) * zs, beta * top.act + (
        1 - beta) * act_m


def _separate(h: _Hinge, top: _Top, band, Q, s2, zs, xi_tot: float, obj_m: float,
              inout: float):
    """One full-data pass at the master's point; the exact objective at the separation point
    (in-out: between the best point and the master's; the master's point is the fallback when
    that cut would not cut the master's point off, checked on the client) and the next cut's
    mask. Returns ``(top, hinge args, number violated, mask, violation of the cut at the
    master)``."""
    prob, sh = h.prob, h.hs.shared
    act_m = h.activity(Q, s2)
    ha_m = h.hinge_args(act_m, zs)
    pts = [_sep_point(top, beta, Q, s2, zs, act_m, prob.trace)
           for beta in ((inout, 0.0) if top.Q is not None and inout > 0 else (0.0,))]
    cands = h.separation_candidates([(p[3], p[2]) for p in pts], ha_m, band)
    found = None
    for pt, cand in zip(pts, cands, strict=True):
        (Qs, ss, _, act), (zsep, ha, hsum, nviol, mask, cut_lhs) = pt, cand
        obj = _quad(Qs, h.Cd, ss) + float(prob.c[sh] @ zsep) - hsum
        if obj > top.obj:  # every candidate evaluated is a feasible point: the best is kept
            top = _Top(obj, Qs, ss, zsep, h.keep(act))
        cut_viol = cut_lhs - xi_tot  # the cut's violation at the master
        if found is None and (cut_viol > 1e-12 * max(1.0, abs(obj_m)) or pt is pts[-1]):
            found = (ha, nviol, mask, cut_viol)
    return top, *found


@dataclass(frozen=True, eq=False)
class _Dual:
    """The master duals in the original rows' terms: explicit rows ``y_e``, band rows ``y_b``,
    cuts ``lam`` (scaled to ``sum |lam| <= 1``) and the dual as ``trip = (H, reduced costs of
    the shared LP variables, h(y))``: its bound is ``t lambda_max(H) + sup_z d^T z + h``."""

    y_e: np.ndarray
    y_b: np.ndarray
    lam: np.ndarray
    trip: tuple


def _dual(h: _Hinge, st: _State, mst: _Master, y_m: np.ndarray) -> _Dual:
    """Bound from the master duals (module docstring)."""
    hs, band = h.hs, st.band
    ne, nb = hs.explicit.size, band.size
    Cb, sb = hs.weight[band], hs.sign[band]
    y_e = _clip_duals(y_m[:ne], mst.lb[:ne], mst.ub[:ne])
    y_b = np.clip(y_m[ne: ne + nb], -Cb, 0.0)
    lam = np.minimum(y_m[ne + nb:], 0.0)
    tot = -lam.sum()
    if tot > 1.0:
        lam = lam / tot
    H = h.Cd - np.einsum("c,cij->ij", lam, np.array([q.S for q in st.cuts]))
    if nb:
        wb = sb * (y_b - sum(lc * w * sb for lc, w in zip(lam, mst.corr, strict=True)))
        H = H - st.AB.adjoint_dense(wb)
    if ne and np.any(y_e):
        H = H - h.AE.adjoint_dense(y_e)
    y_all = np.concatenate([y_e, y_b, lam])
    d_m = np.asarray(mst.c - mst.G.T @ y_all)[:hs.shared.size]
    h_m = float(np.where(y_all > 0, y_all * mst.ub, np.where(y_all < 0, y_all * mst.lb, 0.0))
                .sum())
    return _Dual(y_e, y_b, lam, (0.5 * (H + H.T), d_m, h_m))


@dataclass(frozen=True, eq=False)
class _Bound:
    """The best bound so far, its dual triple, row multipliers and trace dual."""

    value: float = np.inf
    trip: tuple | None = None
    y: np.ndarray | None = None
    mu: float = 0.0


def _price(h: _Hinge, st: _State, dual: _Dual, mu: float, bnd: _Bound, smoothing: float,
           cpr: int):
    """Eigenvectors and bounds at the master dual and (Wentges smoothing, as in the row master:
    convex combinations of duals are combinations of their triples) at its mix with the best
    dual. Returns ``(bound, vals at the master dual, vecs, reduced costs)``."""
    trip_m = dual.trip
    cands = [(trip_m, 1.0)]
    if smoothing > 0 and bnd.trip is not None:
        cands.append((tuple(smoothing * b + (1 - smoothing) * x
                            for b, x in zip(bnd.trip, trip_m, strict=True)), smoothing))
    vecs_all, vals_m = [], None
    for trip, wgt in cands:
        vals, vecs = _top(trip[0], cpr)
        vals_m = vals if vals_m is None else vals_m
        vecs_all.append(vecs)
        b = h.bound(vals[0], trip[1], trip[2])
        if b < bnd.value:
            yf = h.y_full(dual.y_e, st.band, dual.y_b, dual.lam, st.cuts)
            yb = yf if wgt == 1.0 else smoothing * bnd.y + (1 - smoothing) * yf
            bnd = _Bound(b, trip, yb, mu)
    vecs = np.linalg.qr(np.hstack(vecs_all))[0] if len(vecs_all) > 1 else vecs_all[0]
    rc_all = np.einsum("ia,ij,ja->a", vecs, trip_m[0], vecs) - mu
    return bnd, vals_m, vecs, rc_all


def _next_cuts(h: _Hinge, st: _State, dual: _Dual, ha, mask, new_cut: bool, band_rows: int,
               cut_age: int):
    """Next band: rows at their kink in the master (fractional slack dual) stay, then the rows
    closest to the kink at the separation point. Cuts: age by zero duals, drop old ones (never
    the all-rows cut), add the new one (its matrix and the new band rows in one pass); the cut
    leaves out both bands' rows. Returns ``(state, band changed)`` (same block)."""
    band, mh = st.band, h.hs.rows.size
    Cb, y_b = h.hs.weight[band], dual.y_b
    at_kink = band[(y_b < -1e-9 * Cb) & (y_b > -(1 - 1e-9) * Cb)]
    nn = min(max(band_rows - at_kink.size, 0), mh)
    near = h.nearest(ha, nn)
    new_band = np.union1d(at_kink, near) if band_rows > 0 else band
    band_changed = not np.array_equal(new_band, band)
    cuts = [replace(q, age=0 if lc < -1e-12 else q.age + 1)
            for q, lc in zip(st.cuts, dual.lam, strict=True)]
    cuts = [cuts[0]] + [q for q in cuts[1:] if q.age < cut_age]
    mask = h.drop_rows(mask, new_band)
    cut, AB_new = h.make_cut(mask, new_band if band_changed else None) if new_cut else (
        None, h.band_operator(new_band) if band_changed else None)
    if new_cut:
        cuts.append(cut)
    if band_changed:
        return _State(cuts, new_band, AB_new, st.blk), True
    return replace(st, cuts=cuts), False


def solve_hinge_cuts(prob: SpectraplexLP, opts: MGOptions, hs: HingeRows, log: RoundLog, *,
                     cut_age: int = CUT_AGE, inout: float = 0.8, band_rows: int = BAND_ROWS,
                     smoothing: float = 0.5, hinge: _Hinge | None = None,
                     start: tuple | None = None) -> MatrixGenerationResult:
    """Matrix generation with the 1-slack cut master (module docstring); returns a
    ``MatrixGenerationResult`` over the original rows and LP variables.

    ``band_rows`` hinge rows closest to their kink (smallest ``|b_r - s_r (...)|`` at the last
    separation point) are kept in the master with their own slack (the cuts then cover the other
    rows only); ``inout`` is the weight of the best point in the separation point;
    ``smoothing`` the Wentges weight of the best dual in the pricing point (its own default, not
    the row master's option). ``hinge``: the problem as the cut master sees it, when not
    built from ``(prob, hs)`` (the Dask one keeps its per-row state on the workers).
    ``start``: a point ``(Q, s2, z)`` (``X = Q diag(s2) Q^T``, shared LP variables ``z``; e.g.
    the solution on a sample of the rows) to start from (:func:`_start_state`).
    """
    h = _Hinge.build(prob, hs) if hinge is None else hinge
    if start is not None:
        st, top = _start_state(h, start, band_rows)
    else:
        # start: top eigenvectors of C, the all-rows cut (it bounds the shared variables like
        # sum_r C_r xi_r does when every row is violated), no band rows
        P = h.start_subspace(opts.columns_per_round)
        band = np.zeros(0, dtype=np.int64)
        st = _State([h.make_cut(h.all_rows())[0]], band, h.band_operator(band), Block(P))
        top = _Top()
    bnd, status = _Bound(), None
    it = 0
    for it in range(1, opts.max_iters + 1):
        status, st, top, bnd = _round(h, opts, st, top, bnd, it, log, inout=inout,
                                      smoothing=smoothing, band_rows=band_rows, cut_age=cut_age)
        if status is not None:
            break
    res = h.cut_result(log, st, top, bnd, status or SolverStatus.MAX_ITERS, it)
    if res.status == SolverStatus.OPTIMAL and res.gap > opts.tol:
        # the returned point is measured again (exactly); the rounds' value may have been
        # measured in lower precision (the Dask rows): that measure decides
        res.status = SolverStatus.INACCURATE
    return res


#: a warm start's first cut holds this many times the rows that bound the shared variable
START_CUT_FACTOR = 4


def _start_state(h: _Hinge, start: tuple, band_rows: int) -> tuple[_State, _Top]:
    """The first state at a given point ``(Q, s2, z)``: its exact objective is the first best
    point (one activity pass, the shared variable polished), the master's subspace is ``span
    Q``, the band the rows nearest their kink there, and the first cut (in place of the
    all-rows cut, whose pass over every row is the most expensive of a cold start) holds the
    rows with the largest hinge arguments there: any mask gives a valid cut. With one shared
    variable of cost ``c0`` it holds ``START_CUT_FACTOR |c0| / (C |e|)`` rows (uniform
    weights assumed), so that the cut bounds that variable in the master; if it does not
    (its coefficient is below ``|c0|``), the all-rows cut is added."""
    prob, hs = h.prob, h.hs
    Q, s2, z = (np.asarray(a, dtype=float) for a in start)
    s2 = exact_trace(s2, prob.trace, prob.trace_eq)
    act = h.activity(Q, s2)
    band0 = np.zeros(0, dtype=np.int64)
    zsep, ha, hsum, *_ = next(iter(h.separation_candidates(
        [(act, z)], h.hinge_args(act, z), band0)))
    obj = _quad(Q, h.Cd, s2) + float(prob.c[hs.shared] @ zsep) - hsum
    top = _Top(obj, Q, s2, np.asarray(zsep, dtype=float), h.keep(act))
    mh = hs.rows.size
    band = h.nearest(ha, min(band_rows, mh)) if band_rows > 0 else band0
    c0 = np.abs(prob.c[hs.shared])
    ce = float(np.mean(hs.weight[:1]) * np.abs(h.band_G(np.zeros(1, dtype=np.int64))
                                              .toarray()).max()) if mh else 0.0
    count = mh if ce == 0 else int(min(mh, np.ceil(START_CUT_FACTOR * c0.max(initial=1.0)
                                                       / ce)))
    cut, AB = h.make_cut(h.top_mask(ha, count, band), band)
    cuts = [cut]
    if np.any(np.abs(cut.g) <= c0):  # the cut alone may leave the shared variables unbounded
        cuts.insert(0, h.make_cut(h.all_rows())[0])
    P = np.linalg.qr(Q)[0] if Q.shape[1] else h.start_subspace(1)
    return _State(cuts, band, AB, Block(P)), top


def _round(h: _Hinge, opts: MGOptions, st: _State, top: _Top, bnd: _Bound, it: int,
           log: RoundLog, *, inout: float, smoothing: float, band_rows: int, cut_age: int):
    """One round: master, separation, bound, log, stopping test, next cuts / band / block.
    Returns ``(status or None, state, best point, best bound)``."""
    prob, k, nc = h.prob, st.blk.P.shape[1], len(st.cuts)
    mst = _master(h, st)
    info: dict = {}
    obj_m, W, alpha, z_m, y_m, mu = mst.solve(prob, k, st.start, info)
    zs, xi_tot = z_m[:h.hs.shared.size], float(z_m[-1])
    blk = st.blk
    lw, Vw, Q, s2 = iterate_factor(blk.P, W, blk.Ubar, blk.thbar, alpha, prob.trace)
    top, ha, nviol, mask, cut_viol = _separate(h, top, st.band, Q, s2, zs, xi_tot, obj_m, inout)
    dual = _dual(h, st, mst, y_m)
    bnd, vals_m, vecs, rc_all = _price(h, st, dual, mu, bnd, smoothing, opts.columns_per_round)
    gap = log.record(it, top.obj, bnd.value, k, float(vals_m[0]), cuts=nc)
    if opts.verbose:
        print(f"[mg-cuts] it {it:3d} obj {top.obj + prob.offset:+.9e} bound "
              f"{bnd.value + prob.offset:+.9e} gap {gap:.2e} k {k} rank {Q.shape[1]} cuts {nc} "
              f"band {st.band.size} violated {nviol}")
    if gap <= opts.tol:
        return SolverStatus.OPTIMAL, st, top, bnd
    if log.elapsed() > opts.time_limit:
        return SolverStatus.TIME_LIMIT, st, top, bnd
    small = 1e-12 * max(1.0, abs(obj_m))
    new_cut = cut_viol > small
    old = st
    st, band_changed = _next_cuts(h, st, dual, ha, mask, new_cut, band_rows, cut_age)
    keep = rc_all > small
    if keep.any():  # next subspace (as in the row master)
        P, Ubar, thbar = next_subspace(blk.P, lw, Vw, vecs[:, keep], blk.Ubar, blk.thbar,
                                       alpha, prob.trace, opts.max_rank)
        st = replace(st, blk=Block(P, Ubar, thbar))
    warm = (CUT_WARM_START and opts.warm_start and info.get("ip_steps") is not None
            and info["ip_steps"] <= WARM_AFTER_STEPS)
    st = replace(st, start=_warm_start(h, old, st, Q, s2, z_m, y_m, mu) if warm else None)
    if not keep.any():
        return (None if new_cut or band_changed else SolverStatus.STALLED), st, top, bnd
    return None, st, top, bnd


def _warm_start(h: _Hinge, old: _State, new: _State, Q, s2, z_m, y_m, mu) -> MasterStart:
    """The master's point ``(Q diag(s2) Q^T, z_m)`` and duals ``(y_m, mu)`` as a start of the
    next round's master: rows and band slacks matched by band row, cut rows by cut (new ones:
    dual 0, slack 0; the interior point's warm start moves the guess into the interior)."""
    ne, psh, ob, nbd = h.hs.explicit.size, h.hs.shared.size, old.band, new.band
    pos = np.minimum(np.searchsorted(ob, nbd), max(ob.size - 1, 0))
    kept = (ob[pos] == nbd) if ob.size else np.zeros(nbd.size, dtype=bool)
    slack, yb = np.zeros(nbd.size), np.zeros(nbd.size)
    slack[kept] = z_m[psh + pos[kept]]
    yb[kept] = y_m[ne + pos[kept]]
    at = {id(q.S): ne + ob.size + j for j, q in enumerate(old.cuts)}
    yc = np.array([y_m[at[id(q.S)]] if id(q.S) in at else 0.0 for q in new.cuts])
    pt = MasterStart(None, 0.0, np.concatenate([z_m[:psh], slack, z_m[-1:]]),
                     np.concatenate([y_m[:ne], yb, yc]), mu)
    return warm_start(new.blk, Q, s2, pt, h.prob.trace, h.prob.trace_eq)


def _cut_result(h: _Hinge, log: RoundLog, st: _State, top: _Top, bnd: _Bound,
                status: SolverStatus, it: int) -> MatrixGenerationResult:
    """The best point: exact trace, exact slacks (one more pass); the row multipliers of the
    best bound."""
    prob, hs = h.prob, h.hs
    s2 = exact_trace(top.s2, prob.trace, prob.trace_eq)
    act = h.activity(top.Q, s2)
    ha = h.hinge_args(act, top.z)
    z = np.zeros(prob.p)
    z[hs.shared] = top.z
    z[hs.cols] = np.maximum(ha, 0.0) / hs.gabs
    obj = _quad(top.Q, h.Cd, s2) + float(prob.c @ z)
    return log.result(status, obj, bnd.value, theta=s2, U=top.Q, z=z, y=bnd.y,
                      mu=float(bnd.mu), row_activity=act + prob.G @ z, iterations=it,
                      n_columns=int(st.blk.P.shape[1]))


def dispatch(prob: SpectraplexLP, opts: MGOptions, log: RoundLog,
             cuts: str | bool) -> MatrixGenerationResult | None:
    """Run :func:`solve_hinge_cuts` when it applies (``cuts`` as in ``solve_spectraplex_lp``),
    else None (the row master runs). An unbounded cut master is only a relaxation's verdict:
    then None as well, and the row master decides."""
    if cuts not in (True, "auto"):
        raise ValueError(f"cuts must be 'auto', True or False, got {cuts!r}")
    if prob.n > CUT_MAX_N:
        return None
    hs = hinge_structure(prob.G, prob.c, prob.lb, prob.ub, prob.zlb, prob.zub)
    if hs is None:
        return None
    if cuts == "auto" and hs.rows.size < CUT_MIN_ROWS and not is_dask_backed(prob.A):
        return None
    try:
        return solve_hinge_cuts(prob, opts, hs, log)
    except UnboundedProblem:
        return None
