r"""The 1-slack cut master (:mod:`.cuts`) with its per-row state on the Dask workers.

For hinge rows given by a :class:`~.dask_rows.DaskRowOperator` with the same hinge data in every
row (PSDBoost: ``<A_r, M> - rho + xi_r >= 0``, ``xi_r >= 0``, cost ``-c xi_r``), i.e.::

    s (<A_r, X> + g^T z) + gabs xi_r >= b,   xi_r >= 0, cost -C gabs xi_r     (r = 1..m)

with scalars ``s, b, C, gabs`` and one vector ``g`` over the shared LP variables ``z``, every
array with one entry per row stays on the cluster:

* the row activities ``<A_r, X>`` of a pass are *persisted* per block (8 bytes a row, on the
  workers); the best point's activities too;
* a per-row vector is a recipe ``scale * sum_i coef_i act_i + shift`` over persisted activities
  (:class:`_Vec`): hinge arguments, the separation point's mix, the breakpoints of the shared
  variable's polish are evaluated inside the block tasks;
* a cut's mask is persisted packed (1 bit a row) per block, made in the same pass as its
  ``n x n`` matrix and the new band rows;
* the shared variable's polish (``rho``: the breakpoint where the slope of ``c0 z - sum_r C
  max(0, d_r - e z)`` turns negative, a ``k``-th smallest breakpoint) is an exact distributed
  selection: counts per bin over a shrinking interval, then the few values of the last bin
  gathered (:func:`_kth_smallest`);
* the band (the rows nearest their kink) is a top-``k`` per block merged on the client.

Passes per round (each a round trip to the cluster): the polish's selection for the in-out
point and its fallback together (two as a rule), one pass for both candidates' hinge sums, cut
sums, masks and rows nearest the kink, and the cut's pass (its matrix, the new band rows and
the older cuts' bits there).

The client holds ``O(n^2)`` per cut, the band rows, ``O(blocks)`` task references and small
per-block results: nothing proportional to ``m``. The result's ``z`` (shared variables, then the
slacks in row order), ``row_activity`` and ``y`` are lazy Dask arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .._status import SolverStatus
from ._block import exact_trace
from ._operators import zero_objective
from ._problem import SpectraplexLP
from ._result import MatrixGenerationResult, RoundLog
from .cuts import BAND_ROWS, HingeRows, _Cut, _Hinge, _quad, _top
from .dask_rows import (
    DaskRowOperator,
    _blk_adjoint,
    _blk_rows_matvec,
    _blk_rows_quad32,
    _blk_take_terms,
    _dask,
)

__all__ = ["SINGLE_MIN_TOL", "DaskHinge", "dask_hinge"]

#: values of the last bin gathered to the client by the distributed selection
SELECT_GATHER = 200_000
#: bins per pass of the distributed selection
SELECT_BINS = 1024
#: the rounds' activities are kept in single precision for tolerances from this one on
SINGLE_MIN_TOL = 1e-5


# --------------------------------------------------------------------------------------------
# Block functions (run on the workers)
# --------------------------------------------------------------------------------------------
def _ev(vec, rows: int) -> np.ndarray:
    """A :class:`_Vec` on one block: ``(scale, shift, coefs, blocks)`` -> (rows,)."""
    scale, shift, coefs, blocks = vec
    v = np.zeros(rows)
    for c, blk in zip(coefs, blocks, strict=True):
        v += c * np.asarray(blk)
    return scale * v + shift if scale != 1.0 or shift != 0.0 else v


def _blk_vec(vec, rows):
    """A per-row vector kept on the worker: in single precision when its activities are."""
    v = _ev(vec, rows)
    return v.astype(np.float32) if vec[3] and all(
        np.asarray(b).dtype == np.float32 for b in vec[3]) else v


def _mask_of(mvec, excl, rows):
    """The mask of a block: all rows (``mvec`` None) or ``value > 0``, rows ``excl`` off."""
    mask = np.ones(rows, dtype=bool) if mvec is None else _ev(mvec, rows) > 0
    mask[excl] = False
    return mask


def _blk_sep_sums(mvec, excl, vec_m, rows):
    """``[sum max(0, value), #{value > 0}, sum_{mask} vec_m]`` of the block (the mask:
    ``value > 0`` off the rows ``excl``)."""
    v = _ev(mvec, rows)
    mask = v > 0
    pos = float(v[mask].sum()), float(mask.sum())
    mask[excl] = False
    return np.array([*pos, float(_ev(vec_m, rows)[mask].sum())])


def _blk_sep_near(mvec, excl, vec_m, rows, nn):
    """:func:`_blk_sep_sums` and :func:`_blk_nearest` of ``mvec`` in one task."""
    return _blk_sep_sums(mvec, excl, vec_m, rows), _blk_nearest(mvec, rows, nn)


def _blk_nearest(vec, rows, nn):
    """The ``nn`` rows of the block with the smallest ``|value|``: (local indices, |value|)."""
    a = np.abs(_ev(vec, rows))
    idx = np.argpartition(a, nn - 1)[:nn] if nn < rows else np.arange(rows)
    return idx, a[idx]


def _blk_order(vec, rows, q):
    """``q`` order statistics of the block: (0-based ranks, values)."""
    v = np.sort(_ev(vec, rows))
    pos = np.unique(np.linspace(0, rows - 1, q).round().astype(np.int64)) if rows else (
        np.zeros(0, dtype=np.int64))
    return pos, v[pos]


def _blk_le_between(vec, rows, lo, hi):
    """``(#{value <= lo}, the values in (lo, hi])`` of the block."""
    v = _ev(vec, rows)
    return int((v <= lo).sum()), v[(v > lo) & (v <= hi)]


def _blk_count_le(vec, rows, edges):
    """``#{value <= edges[j]}`` for every edge."""
    v = _ev(vec, rows)
    return np.cumsum(np.bincount(np.searchsorted(edges, v, side="left"),
                                 minlength=edges.size + 1)[:edges.size])


def _blk_packmask(mvec, excl, rows):
    """A cut's mask of one block, packed (kept on the worker)."""
    return np.packbits(_mask_of(mvec, excl, rows))


def _blk_cut(packed, rows, w, take, olds, nsig, *sv):
    """A cut's block: ``(sum_{mask} w A_r, rows take of every term, count, the masks olds'
    bits at the rows take)``."""
    idx = np.flatnonzero(np.unpackbits(packed, count=rows))
    H = _blk_adjoint(idx, w, None, nsig, *sv) if idx.size else None
    T = _blk_take_terms(take, nsig, *sv) if take.size else None
    return H, T, int(idx.size), _blk_bits(take, *olds)


def _blk_bits(idx, *cut_blks):
    """Each cut's mask bits at the local rows ``idx``: (cuts, len(idx)) bool."""
    out = np.empty((len(cut_blks), idx.size), dtype=bool)
    for c, p in enumerate(cut_blks):
        out[c] = (p[idx >> 3] >> (7 - (idx & 7))) & 1
    return out


def _blk_final(ha, act, rows, gabs, shift, s_gabs):
    """The returned point on one block: slacks ``max(ha, 0) / gabs``, row activities and the
    block's ``(sum C-free hinge, sum xi, min activity, min xi)``."""
    h = np.maximum(_ev(ha, rows), 0.0)
    xi = h / gabs
    ra = _ev(act, rows) + shift + s_gabs * xi
    return xi, ra, np.array([h.sum(), xi.sum(), ra.min(initial=np.inf),
                             xi.min(initial=np.inf)])


def _part(blk, i):
    return blk[i]


def _blk_y(rows, lam, band_idx, band_y, scale, *cut_blks):
    """Row multipliers of a block: ``scale * sum_c lam_c mask_c``, the band rows set apart."""
    y = np.zeros(rows)
    for lc, blk in zip(lam, cut_blks, strict=True):
        y += lc * np.unpackbits(blk, count=rows)
    y *= scale
    y[band_idx] = band_y
    return y


# --------------------------------------------------------------------------------------------
# Per-row vectors and masks kept on the workers
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _Vec:
    """``scale * sum_i coef_i act_i + shift`` over persisted per-block activities ``act_i``
    (``terms``: ``(coef, [block references])``)."""

    terms: tuple
    scale: float = 1.0
    shift: float = 0.0

    def __rmul__(self, a: float) -> _Vec:
        return _Vec(tuple((a * c, blks) for c, blks in self.terms), self.scale, self.shift)

    def __add__(self, other: _Vec) -> _Vec:
        if (self.scale, self.shift, other.scale, other.shift) != (1.0, 0.0, 1.0, 0.0):
            raise ValueError("only plain activities are added")
        return _Vec(self.terms + other.terms)

    def affine(self, scale: float, shift: float) -> _Vec:
        """``scale * self + shift``."""
        return _Vec(self.terms, scale * self.scale, scale * self.shift + shift)

    def block(self, b: int) -> tuple:
        return (self.scale, self.shift, [c for c, _ in self.terms],
                [blks[b] for _, blks in self.terms])


@dataclass(frozen=True, eq=False)
class _Mask:
    """``vec > 0`` (all rows when ``vec`` is None) with the rows ``excl`` (sorted) off."""

    vec: _Vec | None
    excl: np.ndarray


@dataclass(frozen=True, eq=False)
class DaskHinge(_Hinge):
    """The cut master's problem (:class:`.cuts._Hinge`) with uniform hinge rows over a
    :class:`DaskRowOperator` (module docstring): ``s0, b0, C0, gabs0`` the row scalars, ``gh``
    the signed shared coefficients ``s g``."""

    A: DaskRowOperator
    gh: np.ndarray
    s0: float
    b0: float
    C0: float
    gabs0: float
    #: every cut mask a lazy row-multiplier array refers to (the graph holds keys only)
    kept: list = field(default_factory=list)
    #: rows per block nearest their kink, found in the separation pass (:meth:`nearest`)
    near_rows: int = BAND_ROWS
    #: the separation pass's nearest rows per candidate: ``[(hinge args, block parts)]``
    near: list = field(default_factory=list)
    #: the last master's band and its cuts' bits there: ``[band, [(mask, bits)]]``
    bits: list = field(default_factory=list)
    #: the rounds' activities in single precision (4 bytes a row on the workers): for
    #: tolerances from :data:`SINGLE_MIN_TOL` on (their rounding, about 1e-7 relative, stays
    #: far below the gap sought; the returned point is measured in double precision anyway)
    single: bool = False

    # ---- helpers -----------------------------------------------------------------------------
    @property
    def _rows(self) -> np.ndarray:
        return np.diff(self.A.bounds)

    def _compute(self, tasks):
        return self.A._dask.compute(*tasks)

    def _tasks(self, fn, vecs, *extra, blocks=None):
        """One task per block: ``fn(*[vec.block(b)], rows_b, *extra)``."""
        d = self.A._dask.delayed(fn, pure=True)
        bs = range(self.A.n_blocks) if blocks is None else blocks
        return [d(*[v.block(b) for v in vecs], int(self._rows[b]), *extra) for b in bs]

    def _local(self, rows: np.ndarray):
        """Sorted global rows split per block: ``{block: local indices}``."""
        rows = np.asarray(rows, dtype=np.int64)
        blk = np.searchsorted(self.A.bounds, rows, side="right") - 1
        return {int(b): rows[blk == b] - self.A.bounds[b] for b in np.unique(blk)}

    # ---- per-row state -----------------------------------------------------------------------
    def activity(self, Q: np.ndarray, s2: np.ndarray, exact: bool = False) -> _Vec:
        """``<A_r, X>`` at ``X = Q diag(s2) Q^T``, persisted per block on the workers: in
        single precision (:attr:`single`) for the rounds, whose activities only choose the next
        cut, band and shared variable (any choice is valid; the returned point's objective is
        measured again in double precision, ``exact``)."""
        if Q.shape[1] == 0:
            return _Vec(())
        if self.single and not exact:
            tasks = [self.A._call(_blk_rows_quad32, b, np.asarray(Q, float),
                                  np.asarray(s2, float)) for b in range(self.A.n_blocks)]
            return _Vec(((1.0, list(self.A._dask.persist(*tasks))),))
        tasks = [self.A._call(_blk_rows_matvec, b, "quad", np.asarray(Q, float), 1.0,
                              np.asarray(s2, float)) for b in range(self.A.n_blocks)]
        return _Vec(((1.0, list(self.A._dask.persist(*tasks))),))

    def hinge_args(self, act: _Vec, zs: np.ndarray) -> _Vec:
        return act.affine(-self.s0, self.b0 - float(self.gh @ zs))

    def keep(self, act: _Vec) -> _Vec:
        if len(act.terms) <= 1 and act.scale == 1.0 and act.shift == 0.0:
            return act
        return _Vec(((1.0, list(self.A._dask.persist(*self._tasks(_blk_vec, [act])))),))

    def start_subspace(self, k: int) -> np.ndarray:
        return _top(self.Cd, k)[1]

    def all_rows(self) -> _Mask:
        return _Mask(None, np.zeros(0, dtype=np.int64))

    def band_operator(self, band: np.ndarray):
        return self.A.take_operator(np.asarray(band, dtype=np.int64))

    def band_G(self, band: np.ndarray):
        return sp.csr_array(np.tile(self.gh, (len(band), 1)))

    def band_bits(self, cuts: list, band: np.ndarray) -> list:
        """Each cut's mask at the band rows: known from the last master or from the pass that
        made the cut or the band (:meth:`make_cut`), else one pass for the others."""
        band = np.asarray(band, dtype=np.int64)
        known = {}
        if self.bits and np.array_equal(self.bits[0], band):
            known = {id(m): b for m, b in self.bits[1]}
        miss = [q for q in cuts if id(q.mask) not in known]
        if miss and band.size:
            d = self.A._dask.delayed(_blk_bits, pure=True)
            loc = self._local(band)
            bits = np.hstack(self._compute([d(idx, *[q.mask[b] for q in miss])
                                            for b, idx in loc.items()]))
            known.update((id(q.mask), bits[i]) for i, q in enumerate(miss))
        known.update((id(q.mask), np.zeros(band.size, dtype=bool)) for q in miss
                     if id(q.mask) not in known)
        self.bits[:] = [band, [(q.mask, known[id(q.mask)]) for q in cuts]]
        return [known[id(q.mask)] for q in cuts]

    def polish_zs(self, acts: list) -> list:
        """:func:`.cuts.polish_shared` for uniform rows at several points (their selections
        share the passes): the breakpoints ``d_r / e`` all drop the slope by ``C |e|``, so the
        maximizer is a ``k``-th smallest breakpoint, with the same ``k`` at every point."""
        prob, e, C, m = self.prob, float(self.gh[0]), self.C0, self.A.m
        c0, lo, hi = float(prob.c[0]), float(prob.zlb[0]), float(prob.zub[0])
        k = None
        if e == 0:
            z = -np.inf if c0 < 0 else (0.0 if c0 == 0 else np.inf)
        else:
            slope = c0 + (C * e * m if e > 0 else 0.0)  # left of every breakpoint
            if slope < 0:
                z = -np.inf
            elif slope == 0:
                k = 1
            elif c0 - (C * -e * m if e < 0 else 0.0) > 0:  # increasing right of every breakpoint
                z = np.inf
            else:
                k = min(m, max(1, int(np.ceil(slope / (C * abs(e)) * (1 - 1e-12)))))
        zs = ([z] * len(acts) if k is None else _kth_many(
            self, [a.affine(-self.s0, self.b0).affine(1.0 / e, 0.0) for a in acts], k))
        out = [float(np.clip(z, lo, hi)) for z in zs]
        return [z if np.isfinite(z) else None for z in out]

    def separation_candidates(self, pts: list, ha_m: _Vec, band: np.ndarray) -> list:
        """:meth:`.cuts._Hinge.separation_candidates` with every candidate in the same passes:
        the polish's selection, then one pass for the sums and masks of all candidates and
        their :attr:`near_rows` rows nearest the kink per block (kept for :meth:`nearest`)."""
        zss = [z for _, z in pts]
        if self.polish:
            zss = [z if zp is None else np.array([zp])
                   for z, zp in zip(zss, self.polish_zs([a for a, _ in pts]), strict=True)]
        has = [self.hinge_args(a, z) for (a, _), z in zip(pts, zss, strict=True)]
        band = np.asarray(band, dtype=np.int64)
        d = self.A._dask.delayed(_blk_sep_near, pure=True)
        loc, none, nb = self._local(band), np.zeros(0, dtype=np.int64), self.A.n_blocks
        parts = self._compute([d(ha.block(b), loc.get(b, none), ha_m.block(b),
                                 int(self._rows[b]), self.near_rows)
                               for ha in has for b in range(nb)])
        self.near[:] = [(ha, [p[1] for p in parts[i * nb:(i + 1) * nb]])
                        for i, ha in enumerate(has)]
        out = []
        for i, (z, ha) in enumerate(zip(zss, has, strict=True)):
            tot = sum(p[0] for p in parts[i * nb:(i + 1) * nb])
            out.append((z, ha, float(self.C0 * tot[0]), int(tot[1]), _Mask(ha, band),
                        float(self.C0 * tot[2])))
        return out

    def nearest(self, ha: _Vec, nn: int) -> np.ndarray:
        if nn <= 0:
            return np.zeros(0, dtype=np.int64)
        parts = next((p for v, p in self.near if v is ha), None)
        if parts is None or nn > self.near_rows:
            parts = self._compute(self._tasks(_blk_nearest, [ha], nn))
        idx = np.concatenate([i + self.A.bounds[b] for b, (i, _) in enumerate(parts)])
        val = np.concatenate([v for _, v in parts])
        keep = np.argsort(val, kind="stable")[:nn]
        return np.sort(idx[keep])

    def top_mask(self, ha: _Vec, count: int, band: np.ndarray) -> _Mask:
        """The rows with ``ha`` at least its ``count``-th largest value (an exact selection,
        :func:`_kth_many`; ties all in), the rows ``band`` off."""
        band = np.asarray(band, dtype=np.int64)
        if count >= self.A.m:
            return _Mask(None, band)
        t = -_kth_many(self, [ha.affine(-1.0, 0.0)], max(count, 1))[0]
        return _Mask(ha.affine(1.0, -float(np.nextafter(t, -np.inf))), band)

    def drop_rows(self, mask: _Mask, rows: np.ndarray) -> _Mask:
        return _Mask(mask.vec, np.union1d(mask.excl, np.asarray(rows, dtype=np.int64)))

    def make_cut(self, mask: _Mask, take: np.ndarray | None = None):
        """The cut of ``mask`` in one pass: per block its packed mask (persisted on the worker),
        its share of ``S_c``, the rows ``take`` and the count of masked rows."""
        A, dsk = self.A, self.A._dask
        loc_ex = self._local(mask.excl)
        loc_tk = self._local(take) if take is not None else {}
        none = np.zeros(0, dtype=np.int64)
        pack = dsk.delayed(_blk_packmask, pure=True)
        blks = list(dsk.persist(*[pack(None if mask.vec is None else mask.vec.block(b),
                                       loc_ex.get(b, none), int(r))
                                  for b, r in enumerate(self._rows)]))
        # the last master's cuts' bits at a new band come in the same pass
        olds = [m for m, _ in self.bits[1]] if take is not None and self.bits else []
        parts = self._compute([A._call(_blk_cut, b, blks[b], int(r), self.C0 * self.s0,
                                       loc_tk.get(b, none), [o[b] for o in olds])
                               for b, r in enumerate(self._rows)])
        S = sum((H for H, _, _, _ in parts if H is not None), np.zeros((A.n, A.n)))
        Ts = [T for _, T, _, _ in parts]
        count = float(sum(c for _, _, c, _ in parts))
        # the new cut's bits are 0 on its excluded rows (the band among them)
        if take is not None:
            old_bits = np.hstack([p[3] for p in parts]) if olds else np.zeros((0, take.size))
            self.bits[:] = [np.asarray(take, dtype=np.int64),
                            [*zip(olds, old_bits.astype(bool), strict=True),
                             (blks, np.zeros(take.size, dtype=bool))]]
        elif self.bits and np.isin(self.bits[0], mask.excl).all():
            self.bits[1].append((blks, np.zeros(self.bits[0].size, dtype=bool)))
        cut = _Cut(S=0.5 * (S + S.T), b=self.C0 * self.b0 * count, g=self.C0 * count * self.gh,
                   mask=blks)
        AT = A._taken_operator([t for t in Ts if t is not None], take.size) if (
            take is not None) else None
        return cut, AT

    def y_full(self, y_e, band, y_b, lam, cuts):
        """The row multipliers as a lazy Dask array (``s0 C0 sum_c lambda_c c_r``, band rows
        ``s0 y_b``)."""
        _, da = _dask()
        d = self.A._dask.delayed(_blk_y, pure=True)
        loc = self._local(band)
        pos = {b: np.searchsorted(band, idx + self.A.bounds[b]) for b, idx in loc.items()}
        use = [i for i, lc in enumerate(lam) if lc]
        none = np.zeros(0, dtype=np.int64)
        parts = [da.from_delayed(
            d(int(r), [lam[i] for i in use], loc.get(b, none),
              self.s0 * np.asarray(y_b)[pos[b]] if b in pos else np.zeros(0),
              self.s0 * self.C0, *[cuts[i].mask[b] for i in use]), shape=(int(r),),
            dtype=float) for b, r in enumerate(self._rows)]
        self.kept.extend(cuts[i].mask for i in use
                         if not any(k is cuts[i].mask for k in self.kept))
        return da.concatenate(parts)

    def cut_result(self, log: RoundLog, st, top, bnd, status: SolverStatus, it: int
                   ) -> MatrixGenerationResult:
        """The best point with its exact trace and exact slacks (one more pass; the slacks,
        ``z = (shared, slacks in row order)`` and the row activities as lazy Dask arrays)."""
        _, da = _dask()
        prob = self.prob
        s2 = exact_trace(top.s2, prob.trace, prob.trace_eq)
        act = self.activity(top.Q, s2, exact=True)
        ha = self.hinge_args(act, top.z)
        dsk = self.A._dask
        blks = list(dsk.persist(*self._tasks(
            _blk_final, [ha, act], self.gabs0, self.s0 * float(self.gh @ top.z),
            self.s0 * self.gabs0)))
        part = dsk.delayed(_part, pure=True)
        summ = np.array(self._compute([part(t, 2) for t in blks]))
        obj = _quad(top.Q, self.Cd, s2) + float(prob.c @ top.z) - self.C0 * summ[:, 0].sum()
        xi, ra = (da.concatenate([da.from_delayed(part(t, i), shape=(int(r),), dtype=float)
                                  for t, r in zip(blks, self._rows, strict=True)])
                  for i in (0, 1))
        z = da.concatenate([da.from_array(np.asarray(top.z, dtype=float)), xi])
        z._specopt_keepalive = ra._specopt_keepalive = blks  # the graph holds keys only
        if bnd.y is not None:  # (a mix of the y_full arrays: their masks live in self.kept)
            bnd.y._specopt_keepalive = self.kept
        res = log.result(status, obj, bnd.value, theta=s2, U=top.Q, z=z, y=bnd.y,
                         mu=float(bnd.mu), row_activity=ra, iterations=it,
                         n_columns=int(st.blk.P.shape[1]))
        # what a certificate needs of the rows, measured in the same pass
        res.row_summary = {"xi_sum": float(summ[:, 1].sum()), "row_min": float(summ[:, 2].min()),
                           "xi_min": float(summ[:, 3].min()), "z_shared": np.array(top.z)}
        # the pricing matrix C - A^*(y) of the bound's multipliers (the PSD constraint's dual
        # without a pass over y)
        res.H = None if bnd.trip is None else np.array(bnd.trip[0])
        return res


def _kth_smallest(h: DaskHinge, vec: _Vec, k: int) -> float:
    """The ``k``-th smallest value (1-based) of a per-row vector, exactly (:func:`_kth_many`)."""
    return _kth_many(h, [vec], k)[0]


def _kth_many(h: DaskHinge, vecs: list, k: int) -> list:
    """The ``k``-th smallest value (1-based) of each per-row vector, exactly, in two passes as a
    rule (shared by all vectors): :data:`SELECT_BINS` order statistics per block bracket it in
    ``(lo, hi]`` (rank bounds: below ``lo`` surely fewer than ``k`` values, up to ``hi`` surely
    ``k`` or more); then the values in the bracket are gathered with the count up to ``lo``. If
    the bracket may hold more than :data:`SELECT_GATHER` values, counts per bin shrink it
    first."""
    nb = h.A.n_blocks
    if h.A.m <= SELECT_GATHER:
        got = h._compute([t for v in vecs for t in h._tasks(_blk_le_between, [v], -np.inf,
                                                               np.inf)])
        return [float(np.partition(np.concatenate([x for _, x in got[i * nb:(i + 1) * nb]]),
                                   k - 1)[k - 1]) for i in range(len(vecs))]
    allp = h._compute([t for v in vecs for t in h._tasks(_blk_order, [v], SELECT_BINS)])
    brackets = []
    for i in range(len(vecs)):
        parts = allp[i * nb:(i + 1) * nb]
        cand = np.unique(np.concatenate([v for _, v in parts]))
        lo_cnt = np.zeros(cand.size)  # values <= t: at least ...
        hi_cnt = np.zeros(cand.size)  # ... and at most
        for (pos, v), r in zip(parts, h._rows, strict=True):
            j = np.searchsorted(v, cand, side="right")  # order statistics <= t
            lo_cnt += np.where(j > 0, pos[np.maximum(j - 1, 0)] + 1, 0)
            hi_cnt += np.where(j < v.size, pos[np.minimum(j, v.size - 1)], r)
        hi = float(cand[int(np.argmax(lo_cnt >= k))])
        below = np.flatnonzero(hi_cnt < k)
        lo = float(cand[below[-1]]) if below.size else -np.inf
        most = hi_cnt[np.searchsorted(cand, hi)] - (lo_cnt[below[-1]] if below.size else 0)
        brackets.append((lo, hi, most, float(cand[0])))
    small = [i for i, br in enumerate(brackets) if br[2] <= SELECT_GATHER]
    got = h._compute([t for i in small for t in h._tasks(
        _blk_le_between, [vecs[i]], brackets[i][0], brackets[i][1])]) if small else []
    out = []
    for i, (lo, hi, _, vmin) in enumerate(brackets):
        if i in small:
            g = got[small.index(i) * nb:(small.index(i) + 1) * nb]
            nbelow = sum(c for c, _ in g)
            out.append(float(np.sort(np.concatenate([v for _, v in g]))[k - nbelow - 1]))
        else:
            out.append(_kth_bins(h, vecs[i], k, lo, hi, vmin))
    return out


def _kth_bins(h: DaskHinge, vec: _Vec, k: int, a: float, b: float, vmin: float) -> float:
    """:func:`_kth_smallest` on the bracket ``(a, b]`` (``a = -inf``: from the minimum
    ``vmin`` on): counts per bin until one bin holds at most :data:`SELECT_GATHER` values."""
    while True:
        base = a if np.isfinite(a) else vmin
        edges = np.concatenate([[base], base + (b - base) * np.arange(1, SELECT_BINS + 1)
                                / SELECT_BINS])
        edges[-1] = b
        cnt = sum(h._compute(h._tasks(_blk_count_le, [vec], edges)))
        if cnt[0] >= k:  # (only with a = -inf: the minimum itself)
            return base
        j = int(np.searchsorted(cnt, k, side="left"))  # the first edge with >= k values below
        a2, nb, b2 = float(edges[j - 1]), int(cnt[j - 1]), float(edges[j])
        if (a2, b2) == (a, b):  # no float left to split at: every value in it is b
            return b2
        if cnt[j] - nb <= SELECT_GATHER:
            got = h._compute(h._tasks(_blk_le_between, [vec], a2, b2))
            vals = np.sort(np.concatenate([v for _, v in got]))
            return float(vals[k - nb - 1])
        a, b = a2, b2


def dask_hinge(A: DaskRowOperator, *, c_shared: np.ndarray, zlb: np.ndarray, zub: np.ndarray,
               g_shared: np.ndarray, sign: float, b: float, weight: float, gabs: float,
               trace: float, trace_eq: bool, C=None, offset: float = 0.0) -> DaskHinge:
    """The cut master's problem for ``m = A.m`` uniform hinge rows (module docstring) over the
    shared LP variables ``z`` (costs ``c_shared``, bounds ``zlb, zub``, coefficient ``g_shared``
    in every row), objective ``<C, X>`` (None: 0); pass it as ``hinge=`` to
    :func:`.cuts.solve_hinge_cuts` (with its ``prob`` and ``hs``)."""
    m, n = A.m, A.n
    c_sh = np.asarray(c_shared, dtype=float).ravel()
    psh = c_sh.size
    Cop = zero_objective(n) if C is None else C
    prob = SpectraplexLP(sp.csr_array((0, psh)), c_sh, np.zeros(0), np.zeros(0),
                         np.asarray(zlb, dtype=float).ravel(),
                         np.asarray(zub, dtype=float).ravel(), A=A, C=Cop, trace=trace,
                         trace_eq=trace_eq, offset=offset)
    view = lambda v: np.broadcast_to(float(v), (m,))  # noqa: E731 - no memory per row
    hs = HingeRows(rows=_AllRows(m), cols=None, sign=view(sign), b=view(b), weight=view(weight),
                   gabs=view(gabs), shared=np.arange(psh), explicit=np.zeros(0, dtype=np.int64))
    Cd = Cop.adjoint_dense(np.ones(1))
    gh = float(sign) * np.asarray(g_shared, dtype=float).ravel()
    return DaskHinge(prob, hs, None, sp.csr_array((0, psh)), None, 0.5 * (Cd + Cd.T), psh == 1,
                     A=A, gh=gh, s0=float(sign), b0=float(b), C0=float(weight),
                     gabs0=float(gabs))


class _AllRows:
    """The hinge rows ``0..m-1`` without an array: ``rows[i] = i``."""

    def __init__(self, m: int):
        self.size = m

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, idx):
        idx = np.asarray(idx)
        return np.flatnonzero(idx) if idx.dtype == bool else idx
