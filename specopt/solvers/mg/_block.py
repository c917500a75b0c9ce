r"""The restricted PSD-block master (spectral-bundle style), shared by the row and cut masters.

Over ``X = P W P^T + alpha Xbar`` (``P`` an orthonormal (n, k) block, ``Xbar`` the aggregate of
dropped directions, trace 1)::

    max <P^T C P, W> + alpha cbar + c^T z   s.t.  tr W + alpha = t (or <= t),
        lb <= A(P W P^T) + alpha abar + G z <= ub,   W PSD,  alpha >= 0,  zlb <= z <= zub

with the rows given by their svec coefficients ``Bs`` (``<A_r, P W P^T> = Bs[r] @ svec(W)``).
:func:`_psd_block_master` returns ``(obj, W, alpha, z, y, mu)`` with ``y`` the max-sense row
duals; :func:`iterate_factor` and :func:`next_subspace` move from one block to the next.
"""

from __future__ import annotations

from dataclasses import dataclass

import clarabel
import numpy as np
import scipy.sparse as sp

from ..._interrupt import call_interruptibly
from ..sdp.ip_small import SmallStart, solve_small_sdp
from ._operators import _pairs, svec_index
from ._result import MasterInfeasible, UnboundedProblem

__all__ = ["Block", "MasterStart", "exact_trace", "iterate_factor", "next_subspace",
           "use_interior_point"]

_SQRT2 = np.sqrt(2.0)
_RANK_TOL = 1e-5  # eigenvalues of W below this (times t) go to the aggregate, not the block


@dataclass(frozen=True, eq=False)
class MasterStart:
    """A guess of the master's solution for a warm start (e.g. the previous round's point in
    the new block): ``W`` (k, k), ``alpha``, ``z`` (the master's LP variables), ``y`` (its
    max-sense row duals), ``mu`` (the trace dual)."""

    W: np.ndarray
    alpha: float
    z: np.ndarray
    y: np.ndarray
    mu: float


def _psd_block_master(Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k,
                      start: MasterStart | None = None, factors=None,
                      info: dict | None = None):
    r"""Solve the restricted master over ``X = P W P^T + alpha Xbar`` (module docstring).

    The row-space interior point wins once the PSD block is not small next to the rows
    (Clarabel's KKT carries a dense k(k+1)/2 scaling block; the IP's Schur complement has one
    row per master row): measured 4x faster at k = 36-45 with 500-660 rows, 4x slower at k = 16
    with 1400 rows. Small blocks stay with Clarabel: cheap there, and its vertex-like solutions
    suit a tight max_rank better (the IP's analytic-centre solutions stalled a max_rank = 3
    run). Clarabel also takes every master the IP gives up on. ``start``: a warm start of the
    interior point; ``factors``: the rows as sums of rank-one terms in the block, ``(V, F)``
    with ``P^T A_r P = sum_l F[r, l] v_l v_l^T`` (cheaper Schur complements). ``info``
    (a dict) receives ``"ip_steps"``: the interior point's steps, None if Clarabel solved it.
    """
    args = (Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k)
    info = {} if info is None else info
    info["ip_steps"] = None
    if use_interior_point(k, Bs.shape[0], factors is not None):
        res = None
        if start is not None:
            res = _psd_block_master_ip(*args, start=start, factors=factors, info=info)
        if res is None:  # (a warm start that does not converge: the cold one)
            res = _psd_block_master_ip(*args, factors=factors, info=info)
        if res is not None:
            return res
    info["ip_steps"] = None
    return _psd_block_master_clarabel(*args)


#: Above this many master rows Clarabel takes the master: the interior point's step costs
#: ``O(rows^2 k^2 + rows^3)`` and on these early, row-heavy masters it can crawl (a C = 0.2
#: family member at D = 100: k = 36 with 1273 rows, 80 short steps in 9.8 s CPU, then Clarabel
#: 13.5 s; at k = 29 with 1303 rows the two took 5.4 and 5.7 s).
_IP_MAX_ROWS = 1000
#: The same with rows given by rank-one terms (the Schur complement from the factors, about
#: ``16 rows^2 k`` instead of ``rows^2 k^2``): the same member, k = 37 with 1001 rows, took 73
#: steps in 5.3 s by the interior point against 8.6 s by Clarabel (run: 28.6 -> 24.5 s CPU).
_IP_MAX_ROWS_FACTORED = 1300


#: When the interior point loses accuracy near the boundary (no progress for 4 steps), its best
#: iterate is accepted within this multiple of ``acc`` (1e-9): the D = 500 cut masters (dense
#: aggregated cut rows) all stopped at 2e-7 (primal residual growing below mu ~ 1e-10) and went
#: to Clarabel, 79% of the route's CPU time; the masters' values and duals only steer the rounds
#: (the bound is the Lagrangian one at any duals, the value that of the polished point).
_IP_ACCEPT = 1e3

#: Iterative-refinement steps of the interior point's Newton directions for masters without
#: factored rows (the cut master's dense aggregated cuts are nearly dependent): with 3 the D = 500
#: cut masters lost primal accuracy below mu ~ 1e-8 and 4 of 12 dumped ones failed (then
#: Clarabel); with 10 all 12 converged (one more step). The factored row masters keep 3 (10 cost
#: them ~20% more CPU: member 4 9.7 -> 11.7 s, member 11 22.1 -> 24.2 s at load ~9).
_REFINE_DENSE = 10

#: Steps a warm-started master may take before it is abandoned for a cold start.
_WARM_MAX_ITERS = 35


def use_interior_point(k: int, rows: int, factored: bool = False) -> bool:
    """The master's solver (:func:`_psd_block_master`): the interior point for a block of at
    least 12 whose svec size is at least a quarter of the rows, up to ``_IP_MAX_ROWS`` rows
    (``_IP_MAX_ROWS_FACTORED`` when the rows are given by rank-one terms)."""
    cap = _IP_MAX_ROWS_FACTORED if factored else _IP_MAX_ROWS
    return k >= 12 and 2 * k * (k + 1) >= rows and rows <= cap


# --------------------------------------------------------------------------------------------
# By the row-space interior point
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _IPForm:
    """The standard form of one master and how its solution maps back: kept rows ``rows``,
    ``z = z0`` plus ``sgn`` times the nonnegative parts ``nonneg``, free ``z`` at ``fj``."""

    sdp: tuple  # (Amats, b, Cmat, Al, cl, Af, cf) of solve_small_sdp
    rows: np.ndarray
    z0: np.ndarray
    nonneg: np.ndarray
    sgn: np.ndarray
    fj: np.ndarray


def _svec_mats(coef: np.ndarray, k: int) -> np.ndarray:
    """Symmetric ``Q`` with ``<Q, W> = coef @ svec(W)`` (one per leading index of ``coef``)."""
    I, J, scale = svec_index(k)
    Q = np.zeros(coef.shape[:-1] + (k, k))
    Q[..., I, J] = coef / scale
    Q[..., J, I] = coef / scale
    return Q


def _ip_form(Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k) -> _IPForm:
    r"""Standard form (minimization of the negated objective): ``W`` is the PSD block, ``alpha``
    and the shifted bounded parts of ``z`` (``z = zlb + u``, ``z = zub - v``, and ``u + v =
    zub - zlb`` for boxes) are nonnegative, unbounded ``z`` are free; a row with one finite
    side gets a surplus/slack, a two-sided row ``lb <= a x <= ub`` becomes ``a x - s1 = lb``,
    ``s1 + s2 = ub - lb``."""
    p = G.shape[1]
    G = sp.csc_array(G)
    lbz, ubz = np.isfinite(zlb), np.isfinite(zub)
    fixed = lbz & ubz & (zlb == zub)
    box = lbz & ubz & ~fixed
    lo_only, up_only = lbz & ~ubz, ubz & ~lbz
    z0 = np.where(lbz, zlb, np.where(ubz, zub, 0.0))
    shift = G @ z0
    lbr, ubr = lb - shift, ub - shift
    eq = np.isfinite(lbr) & np.isfinite(ubr) & (lbr == ubr)
    two = np.isfinite(lbr) & np.isfinite(ubr) & ~eq
    lo = np.isfinite(lbr) & ~np.isfinite(ubr)
    up = np.isfinite(ubr) & ~np.isfinite(lbr)
    rows = np.flatnonzero(eq | two | lo | up)
    nr = rows.size
    me = nr + 1 + int(two[rows].sum()) + int(box.sum())
    # PSD part: the kept rows, then the trace row; the extra rows do not touch W
    Amats = np.zeros((me, k, k))
    Amats[:nr] = _svec_mats(Bs[rows], k)
    Amats[nr][np.diag_indices(k)] = 1.0
    b = np.zeros(me)
    b[:nr] = np.where(np.isfinite(lbr[rows]), lbr[rows], ubr[rows])
    b[nr] = t
    Gk = sp.csc_array(G[rows]) if nr else sp.csc_array((0, p))
    nonneg = np.flatnonzero(lo_only | box | up_only)  # z = zlb + u or z = zub - v
    sgn = np.where(up_only[nonneg], -1.0, 1.0)
    Al, cl = _ip_nonneg_columns(b, Gk, abar, cbar, trace_eq, c, nonneg, sgn, box, zlb, zub,
                                rows, eq, two, up, lbr, ubr)
    fj = np.flatnonzero(~lbz & ~ubz)
    Af = np.zeros((me, fj.size))
    if nr:
        Af[:nr] = Gk[:, fj].toarray()
    cf = -np.asarray(c, dtype=float)[fj]
    sdp = (Amats, b, -_svec_mats(cobj, k), Al, cl, Af, cf)
    return _IPForm(sdp, rows, z0, nonneg, sgn, fj)


def _ip_nonneg_columns(b, Gk, abar, cbar, trace_eq, c, nonneg, sgn, box, zlb, zub, rows, eq,
                       two, up, lbr, ubr):
    """The nonnegative columns of :func:`_ip_form`, in blocks: ``[alpha] [trace slack] [z
    parts] [v of boxes] [row slacks] [second slacks of two-sided rows]``; fills the right-hand
    sides of the box and two-sided rows into ``b``. Returns ``(Al, cl)``."""
    me, nr = b.size, rows.size
    nbox, ntwo = int(box.sum()), int(two[rows].sum())
    blocks, costs = [], []

    def block(rows_idx, cols_idx, vals, ncols):
        blocks.append(sp.csc_array((vals, (rows_idx, cols_idx)), shape=(me, ncols)))

    if abar is not None:
        nzr = np.flatnonzero(abar[rows])
        block(np.r_[nzr, nr], np.zeros(nzr.size + 1, int), np.r_[abar[rows][nzr], 1.0], 1)
        costs.append([-cbar])
    if not trace_eq:
        block([nr], [0], [1.0], 1)
        costs.append([0.0])
    Gz = sp.coo_array(Gk[:, nonneg] @ sp.diags_array(sgn)) if nr else sp.coo_array((0, 0))
    jbox = np.flatnonzero(box[nonneg])
    brow = nr + 1 + ntwo + np.arange(nbox)
    block(np.r_[Gz.row, brow], np.r_[Gz.col, jbox], np.r_[Gz.data, np.ones(nbox)], nonneg.size)
    costs.append(-sgn * np.asarray(c, dtype=float)[nonneg])
    block(brow, np.arange(nbox), np.ones(nbox), nbox)
    costs.append(np.zeros(nbox))
    b[brow] = (zub - zlb)[box]
    ri = np.flatnonzero(~eq[rows])  # rows with a slack (lower: -s, upper: +s, two-sided: -s1)
    tw = np.flatnonzero(two[rows[ri]])  # slack columns of the two-sided rows
    trow = nr + 1 + np.arange(ntwo)
    sval = np.where(up[rows[ri]], 1.0, -1.0)
    block(np.r_[ri, trow], np.r_[np.arange(ri.size), tw], np.r_[sval, np.ones(ntwo)], ri.size)
    costs.append(np.zeros(ri.size))
    block(trow, np.arange(ntwo), np.ones(ntwo), ntwo)
    costs.append(np.zeros(ntwo))
    b[trow] = (ubr - lbr)[rows[ri[tw]]]
    return (sp.hstack(blocks, format="csr"),
            np.concatenate([np.asarray(x, dtype=float) for x in costs]))


def _psd_block_master_ip(Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k,
                         acc=1e-9, start: MasterStart | None = None, factors=None,
                         info: dict | None = None):
    r"""The master of :func:`_psd_block_master` by the row-space interior point
    (:func:`~specopt.solvers.sdp.ip_small.solve_small_sdp`, standard form of :func:`_ip_form`);
    ``None`` if it does not converge. Row duals are mapped back to the max-sense multipliers
    ``y_r = d OPT / d(bound)`` (= minus the standard-form dual of the row's first equation).
    ``start``: warm start from a guess (:func:`_ip_start` maps it to the standard form);
    ``factors``: the rows' rank-one terms (:func:`_psd_block_master`).
    """
    form = _ip_form(Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k)
    guess = None
    if start is not None:
        guess = _ip_start(form, start, Bs, abar, G, lb, ub, zlb, zub, t, trace_eq)
    # a warm start converges in ~10-25 steps or not at all (then the caller starts cold): the
    # cap keeps a failed one cheap
    sol = solve_small_sdp(*form.sdp, tol=acc, start=guess,
                          max_iters=80 if guess is None else _WARM_MAX_ITERS, accept=_IP_ACCEPT,
                          factors=None if factors is None else _ip_factors(form, *factors),
                          refine=3 if factors is not None else _REFINE_DENSE)
    if sol is None:
        return None
    if info is not None:
        info["ip_steps"] = sol.iterations
    I, J, scale = svec_index(k)
    W = sol.X
    alpha = float(sol.xl[0]) if abar is not None else 0.0
    off = (abar is not None) + (not trace_eq)
    z = form.z0.copy()
    z[form.nonneg] += form.sgn * sol.xl[off: off + form.nonneg.size]
    z[form.fj] = sol.xf
    nr = form.rows.size
    y = np.zeros(Bs.shape[0])
    y[form.rows] = -sol.y[:nr]
    mu = -float(sol.y[nr])
    obj = float(cobj @ (W[I, J] * scale)) + alpha * (cbar or 0.0) + float(c @ z)
    return obj, W, max(alpha, 0.0), z, y, mu


def _ip_factors(form: _IPForm, V: np.ndarray, F) -> tuple[np.ndarray, sp.csr_array]:
    """The rank-one terms of the standard form's rows: the kept rows' ``F``, the trace row
    ``I = sum_i e_i e_i^T``, none on the auxiliary rows."""
    me, nr, k = form.sdp[1].size, form.rows.size, V.shape[1]
    nv = V.shape[0]
    Fr = sp.csr_array(F)[form.rows]
    Ft = sp.csr_array((np.ones(k), (np.full(k, nr), nv + np.arange(k))), shape=(me, nv + k))
    Fs = sp.vstack([sp.hstack([Fr, sp.csr_array((nr, k))]),
                    sp.csr_array((me - nr, nv + k))], format="csr") + Ft
    return np.vstack([V, np.eye(k)]), Fs


def _ip_start(form: _IPForm, g: MasterStart, Bs, abar, G, lb, ub, zlb, zub, t,
              trace_eq) -> SmallStart:
    """The guess ``g`` in the standard form of :func:`_ip_form` (columns in the order of
    :func:`_ip_nonneg_columns`). Primal: ``alpha``, the trace slack, the shifted parts of
    ``z`` and the row slacks from the activities. Dual: minus ``y`` on the rows, ``-mu`` on
    the trace row; the duals of the box and two-sided rows (which touch only nonnegative
    columns) as large as keeps both columns' dual slacks nonnegative, ``min(0, slack)``."""
    Amats, b, C, Al, cl, Af, cf = form.sdp
    rows, nr, me = form.rows, form.rows.size, b.size
    W, z = g.W, np.asarray(g.z, dtype=float)
    alpha = max(float(g.alpha), 0.0) if abar is not None else 0.0
    I, J, scale = svec_index(W.shape[0])
    act = Bs[rows] @ (W[I, J] * scale) + G[rows] @ z
    if abar is not None:
        act = act + alpha * abar[rows]
    lbz, ubz = np.isfinite(zlb), np.isfinite(zub)
    box = lbz & ubz & (zlb != zub)
    lbr, ubr = lb[rows], ub[rows]
    eq = np.isfinite(lbr) & np.isfinite(ubr) & (lbr == ubr)
    two = np.isfinite(lbr) & np.isfinite(ubr) & ~eq
    up = np.isfinite(ubr) & ~np.isfinite(lbr)
    ri = np.flatnonzero(~eq)
    s1 = np.where(up[ri], ubr[ri] - act[ri], act[ri] - lbr[ri])
    parts = ([[alpha]] if abar is not None else []) + (
        [] if trace_eq else [[t - np.trace(W) - alpha]])
    parts += [form.sgn * (z - form.z0)[form.nonneg], (zub - z)[box], s1,
              (ubr - act)[ri[two[ri]]]]
    xl = np.concatenate([np.asarray(x, dtype=float) for x in parts])
    y = np.zeros(me)
    y[:nr] = -np.asarray(g.y, dtype=float)[rows]
    y[nr] = -g.mu
    # the auxiliary rows (two-sided, then boxes) each pair two nonnegative columns: the first
    # column's dual slack without them, capped at 0, keeps both nonnegative
    sl0 = cl - sp.csr_array(Al).T @ y
    aux = np.arange(nr + 1, me)
    if aux.size:
        Alc = sp.csc_array(sp.csr_array(Al)[aux].T)  # (nl, aux)
        first = np.array([Alc.indices[Alc.indptr[j]:Alc.indptr[j + 1]].min()
                          for j in range(aux.size)])
        y[aux] = np.minimum(0.0, sl0[first])
    return SmallStart(W, xl, z[form.fj], y)


# --------------------------------------------------------------------------------------------
# By Clarabel
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _ClarabelForm:
    """Clarabel's data ``(P, q, A, b, cones)`` of one master, and the row classes (``eq``,
    ``up``, ``lo``) and zero-cone size ``nz`` that map its duals back."""

    data: tuple
    eq: np.ndarray
    up: np.ndarray
    lo: np.ndarray
    nz: int


def _clarabel_form(Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k):
    """Variables ``x = (svec W, [alpha], z)``: trace row, equality rows (zero cone), one-sided
    sides of the rows and of z, ``alpha >= 0`` (nonnegative cone), ``svec W`` (PSD cone)."""
    npairs = Bs.shape[1]
    p = G.shape[1]
    has_bar = abar is not None
    na = 1 if has_bar else 0
    nx = npairs + na + p
    I, J = _pairs(k)
    diag = (I == J).astype(float)
    parts = [sp.csr_array(Bs)] + ([sp.csr_array(abar.reshape(-1, 1))] if has_bar else []) + [G]
    R = sp.hstack(parts, format="csr")
    trow = sp.csr_array(np.concatenate([diag, np.ones(na), np.zeros(p)]).reshape(1, -1))
    eq = np.isfinite(lb) & np.isfinite(ub) & (lb == ub)
    up = np.isfinite(ub) & ~eq
    lo = np.isfinite(lb) & ~eq
    zeye = sp.hstack([sp.csr_array((p, npairs + na)), sp.identity(p, format="csr")], format="csr")
    zup, zlo = np.isfinite(zub), np.isfinite(zlb)
    blocks_zero, b_zero = [], []
    blocks_nn, b_nn = [], []
    (blocks_zero if trace_eq else blocks_nn).append(trow)
    (b_zero if trace_eq else b_nn).append([t])
    blocks_zero.append(R[eq])
    b_zero.append(ub[eq])
    blocks_nn += [R[up], -R[lo], zeye[zup], -zeye[zlo]]
    b_nn += [ub[up], -lb[lo], zub[zup], -zlb[zlo]]
    if has_bar:
        e = np.zeros((1, nx))
        e[0, npairs] = -1.0
        blocks_nn.append(sp.csr_array(e))
        b_nn.append([0.0])
    psd = sp.hstack([-sp.identity(npairs), sp.csr_array((npairs, na + p))], format="csr")
    Aall = sp.vstack(blocks_zero + blocks_nn + [psd], format="csc")
    b = np.concatenate([np.concatenate(b_zero), np.concatenate(b_nn), np.zeros(npairs)])
    nz = sum(x.shape[0] for x in blocks_zero)
    nn = sum(x.shape[0] for x in blocks_nn)
    cones = ([clarabel.ZeroConeT(nz)] if nz else []) + (
        [clarabel.NonnegativeConeT(nn)] if nn else []) + [clarabel.PSDTriangleConeT(k)]
    q = -np.concatenate([cobj, [cbar] if has_bar else [], c])
    return _ClarabelForm((sp.csc_array((nx, nx)), q, Aall, b, cones), eq, up, lo, nz)


def _clarabel_solve(data: tuple, acc: float):
    """Clarabel on ``data``; it sometimes stops at its first factorization on these degenerate
    masters: the retries (no equilibration, stronger static regularization, default accuracy)
    fix it. Unbounded / infeasible / failed masters raise."""
    attempts = ({}, {"equilibrate_enable": False}, {"static_regularization_constant": 1e-7},
                {"tol_gap_abs": 1e-8, "tol_gap_rel": 1e-8, "tol_feas": 1e-8,
                 "static_regularization_constant": 1e-7, "equilibrate_enable": False})
    for extra in attempts:
        st = clarabel.DefaultSettings()
        st.verbose = False
        st.tol_gap_abs = st.tol_gap_rel = acc
        st.tol_feas = acc
        st.max_threads = 1
        for key, val in extra.items():
            setattr(st, key, val)
        solver = clarabel.DefaultSolver(*data, st)
        sol = call_interruptibly(solver.solve)
        if str(sol.status) in ("Solved", "AlmostSolved", "DualInfeasible"):
            break
    if str(sol.status) in ("DualInfeasible", "AlmostDualInfeasible"):
        raise UnboundedProblem("the problem is unbounded (the PSD-block master is)")
    if str(sol.status) in ("PrimalInfeasible", "AlmostPrimalInfeasible"):
        raise MasterInfeasible(f"Clarabel PSD-block master failed: {sol.status}")
    if str(sol.status) not in ("Solved", "AlmostSolved"):
        raise RuntimeError(f"Clarabel PSD-block master failed: {sol.status}")
    return sol


def _psd_block_master_clarabel(Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k,
                               acc=1e-10):
    r"""The master of :func:`_psd_block_master` with Clarabel's own API; decides infeasible
    (``MasterInfeasible``) and unbounded (``UnboundedProblem``) masters."""
    form = _clarabel_form(Bs, cobj, abar, cbar, G, c, lb, ub, zlb, zub, t, trace_eq, k)
    sol = _clarabel_solve(form.data, acc)
    m, npairs = Bs.shape
    nz = form.nz
    x = np.asarray(sol.x)
    zd = np.asarray(sol.z)
    # duals: trace row first in its cone group
    if trace_eq:
        mu, zeq, off = zd[0], zd[1:nz], nz
    else:
        mu, zeq, off = zd[nz], zd[:nz], nz + 1
    y = np.zeros(m)
    y[form.eq] = zeq
    nup, nlo = int(form.up.sum()), int(form.lo.sum())
    y[form.up] += zd[off: off + nup]
    y[form.lo] -= zd[off + nup: off + nup + nlo]
    I, J = _pairs(k)
    w = x[:npairs]
    W = np.zeros((k, k))
    W[I, J] = np.where(I == J, w, w / _SQRT2)
    W = W + np.triu(W, 1).T
    has_bar = abar is not None
    alpha = float(x[npairs]) if has_bar else 0.0
    return -float(sol.obj_val), W, max(alpha, 0.0), x[npairs + has_bar:], y, float(mu)


# --------------------------------------------------------------------------------------------
# From one block to the next
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Block:
    """The subspace ``P`` and the aggregate ``Xbar = Ubar diag(thbar) Ubar^T`` (None: none),
    with (row master) its row activities ``abar = A(Xbar)`` and value ``cbar = <C, Xbar>``."""

    P: np.ndarray
    Ubar: np.ndarray | None = None
    thbar: np.ndarray | None = None
    abar: np.ndarray | None = None
    cbar: float | None = None


def exact_trace(s2: np.ndarray, t: float, trace_eq: bool) -> np.ndarray:
    """Weights of the final ``X = Q diag(s2) Q^T`` scaled to ``tr X = t`` (or capped at t)."""
    tot = s2.sum()
    if (trace_eq and tot > 0) or tot > t:
        return s2 * (t / tot)
    return s2


def iterate_factor(P, W, Ubar, thbar, alpha, t):
    """The iterate ``X = P W P^T + alpha Ubar diag(thbar) Ubar^T`` as ``Q diag(s2) Q^T``
    (weights below ``1e-12 max(t, max s2)`` dropped); also the eigenpairs ``(lw, Vw)`` of W."""
    lw, Vw = np.linalg.eigh(W)
    F = P @ (Vw * np.sqrt(np.maximum(lw, 0.0)))
    if Ubar is not None and alpha > 0:
        F = np.hstack([F, Ubar * np.sqrt(alpha * thbar)])
    Q, s, _ = np.linalg.svd(F, full_matrices=False)
    s2 = s * s
    nzr = s2 > 1e-12 * max(t, s2.max(initial=0.0))
    return lw, Vw, Q[:, nzr], s2[nzr]


def next_subspace(P, lw, Vw, newv, Ubar, thbar, alpha, t, max_rank):
    """The next block ``P`` and aggregate ``(Ubar, thbar)`` of the PSD-block masters.

    Keeps the eigenvectors of ``W`` (eigenpairs ``lw, Vw``), largest first: never a direction X
    uses (weight above ``_RANK_TOL t``; interior-point masters leave small weights on directions
    they do not use, which the aggregate keeps, so X is unchanged), and up to
    ``max(max_rank, 2 (rank + new))`` with the new directions ``newv`` (room for as many past
    directions as X uses: with a block of rank(X) + new columns a rank-16 member tailed off at
    gap 9e-3 after 74 rounds). What is dropped joins the aggregate, normalized to trace 1.
    """
    k = P.shape[1]
    n_new = newv.shape[1]
    n_pos = int((lw > _RANK_TOL * t).sum())
    cap = max(max_rank, 2 * (n_pos + n_new))
    r_keep = max(1, n_pos, min(k, cap - n_new))
    order = np.argsort(lw)[::-1]
    lw, Vw = lw[order], Vw[:, order]
    Q1 = P @ Vw[:, :r_keep]
    drop = [P @ (Vw[:, r_keep:] * np.sqrt(np.maximum(lw[r_keep:], 0.0)))]
    if Ubar is not None and alpha > 0:
        drop.append(Ubar * np.sqrt(alpha * thbar))
    Fd = np.hstack(drop)
    Qd, sd, _ = np.linalg.svd(Fd, full_matrices=False) if Fd.size else (None, np.zeros(0), 0)
    sd2 = sd * sd
    if sd2.sum() > 1e-14 * t:
        pos = sd2 > 1e-14 * sd2.sum()
        Ubar, thbar = Qd[:, pos], sd2[pos] / sd2[pos].sum()
    else:
        Ubar = thbar = None
    newv = newv - Q1 @ (Q1.T @ newv)
    Pn, Rn = np.linalg.qr(np.hstack([Q1, newv]))
    return Pn[:, np.abs(np.diag(Rn)) > 1e-10], Ubar, thbar
