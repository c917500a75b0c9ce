r"""Matrix generation with the PSD-block master over the rows (spectral-bundle style).

Each round solves the restricted master over ``X = P W P^T + alpha Xbar`` (:mod:`._block`) on a
working set of rows, prices the top eigenvectors of ``H`` at the master duals (and at Wentges'
smoothed point), and moves to the next block: the directions ``X`` uses plus the new ones, the
rest aggregated into ``Xbar``. With at least ``row_selection`` rows, inactive rows with a zero
multiplier leave the master and return when violated; unless ``resolve_rows``, one solve per
round, the LP variables re-optimized for the master's ``X`` (:func:`_polish_z`) so that the
value used for the gap is that of an exactly feasible point.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import highspy
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .._highs import add_csc_cols, add_empty_rows, highs_bounds, new_highs, run_highs
from .._status import SolverStatus
from ._block import (
    _RANK_TOL,
    Block,
    MasterStart,
    _psd_block_master,
    exact_trace,
    iterate_factor,
    next_subspace,
)
from ._bound import BestBound, _clip_duals, _top_eigs, bound_at
from ._operators import FactoredOperator, svec_index
from ._problem import MGOptions, SpectraplexLP
from ._result import MatrixGenerationResult, RoundLog
from .dask_rows import initial_working_set  # no dask import unless Dask-backed

__all__ = ["solve_psd"]


@dataclass(frozen=True, eq=False)
class _Coef:
    """The block's svec coefficients: ``B[0]`` of the objective, ``B[1:]`` of the rows (a
    ``LazyRows`` for Dask-backed rows), and the svec index ``(I, J, scale)``; for rows
    ``A_r = sum_l M[r, l] v_l v_l^T`` (:class:`~._operators.FactoredOperator`) also ``V P``
    and ``M``."""

    B: np.ndarray
    I: np.ndarray
    J: np.ndarray
    scale: np.ndarray
    VP: np.ndarray | None = None  # factored rows (FactoredOperator): V P and M
    M: sp.csr_array | None = None

    def activity(self, W: np.ndarray, alpha: float, abar: np.ndarray | None) -> np.ndarray:
        """``A(P W P^T + alpha Xbar)``."""
        act = self.B[1:] @ (W[self.I, self.J] * self.scale)
        return act + alpha * abar if abar is not None else act

    def value(self, W: np.ndarray) -> float:
        """``<C, P W P^T>``."""
        return float(self.B[0] @ (W[self.I, self.J] * self.scale))

    def factors(self, rows: np.ndarray):
        """The rows ``rows`` as rank-one terms in the block, ``(V P, F)`` with ``P^T A_r P =
        sum_l F[r, l] (P^T v_l)(P^T v_l)^T`` (only the terms they use), or None when the rows
        are not factored."""
        if self.VP is None:
            return None
        Fr = sp.csr_array(self.M[rows])
        used = np.zeros(Fr.shape[1], dtype=bool)
        used[Fr.indices] = True
        cols = np.flatnonzero(used)
        return self.VP[cols], sp.csr_array(Fr[:, cols])


@dataclass(frozen=True, eq=False)
class _Point:
    """A master solution: value, block ``W``, aggregate weight, LP variables, row and trace
    duals (max-sense)."""

    obj: float
    W: np.ndarray
    alpha: float
    z: np.ndarray
    y: np.ndarray
    mu: float
    ip_steps: int | None = None  # steps of the interior point (None: solved by Clarabel)


@dataclass(frozen=True, eq=False)
class _Rows:
    """The row working set: ``work`` (rows in the master), ``age`` (rounds idle in a row),
    ``patience`` (idle rounds before a row may leave), ``priv`` (the row of each LP variable
    private to one row, -1 otherwise); ``select`` False keeps every row."""

    select: bool
    work: np.ndarray
    age: np.ndarray
    patience: np.ndarray
    priv: np.ndarray


def _start_rows(prob: SpectraplexLP, opts: MGOptions, P: np.ndarray, zcur: np.ndarray) -> _Rows:
    """All rows, or (Dask-backed rows) round 1 on a top-k of the rows, not all of them."""
    m, p = prob.m, prob.p
    select = m >= opts.row_selection
    work = np.ones(m, dtype=bool)
    Gc = sp.csc_array(prob.G)
    priv = np.full(p, -1)
    if select and Gc.nnz:
        one = np.flatnonzero(np.diff(Gc.indptr) == 1)
        priv[one] = Gc.indices[Gc.indptr[one]]
    if select:
        work = initial_working_set(prob.A, P, prob.trace, prob.G, zcur, prob.lb, prob.ub, work)
    return _Rows(select, work, np.zeros(m, dtype=int), np.ones(m, dtype=int), priv)


def _update_rows(rows: _Rows, prob: SpectraplexLP, opts: MGOptions, ax: np.ndarray, pt: _Point,
                 viol: np.ndarray | None) -> _Rows:
    """Rows with room to spare and a zero multiplier leave the master (their private LP
    variables are frozen); they come back as soon as they are violated. Against cycling (rows
    dropped, violated by the next master, re-added, ...), a row that came back must stay idle
    twice as many rounds as before it may leave again."""
    act = ax + prob.G @ pt.z
    slack = np.minimum(act - prob.lb, prob.ub - act)
    y = pt.y
    small = np.abs(y) <= 1e-6 * max(1.0, float(np.abs(y).max(initial=0.0)))
    idle = (slack > opts.row_band * np.maximum(1.0, np.abs(act))) & small
    age = np.where(idle, rows.age + 1, 0)
    work = ~(idle & (age >= rows.patience))
    patience = rows.patience
    if viol is not None:
        patience = patience.copy()
        patience[viol] *= 2
        age[viol] = 0
        work |= viol
    return replace(rows, work=work, age=age, patience=patience)


def _master_on_rows(prob: SpectraplexLP, blk: Block, coef: _Coef, work: np.ndarray,
                    priv: np.ndarray, zcur: np.ndarray, resolve: bool = True,
                    start: MasterStart | None = None):
    """The PSD-block master on the rows in ``work``, exact for all rows.

    LP variables private to a row outside the working set (one nonzero in G, in that row) are
    frozen at ``zcur``. After a solve, rows outside the set that are violated are added and the
    master is solved again, so the result is the optimum of the master with every row (its
    multipliers are zero on the rows left out). With ``resolve=False`` the first solve is
    returned with the mask of the violated rows outside the set (second item; None when none is
    violated, i.e. the result is exact); the caller adds them to the set for the next round.
    ``start``: a warm start over all rows and LP variables (:class:`~._block.MasterStart`);
    a re-solve starts from the solve before it.
    """
    G, c, lb, ub = prob.G, prob.c, prob.lb, prob.ub
    k = blk.P.shape[1]
    work = work.copy()
    info: dict = {}
    while True:
        rows = np.flatnonzero(work)
        free = (priv < 0) | work[np.maximum(priv, 0)]
        Gr = sp.csr_array(G[rows])
        const = float(c[~free] @ zcur[~free])
        sub = None if start is None else MasterStart(start.W, start.alpha, start.z[free],
                                                     start.y[rows], start.mu)
        obj, W, alpha, zf, yr, mu = _psd_block_master(
            coef.B[1:][rows], coef.B[0], blk.abar[rows] if blk.abar is not None else None,
            blk.cbar, sp.csr_array(Gr[:, np.flatnonzero(free)]), c[free], lb[rows], ub[rows],
            prob.zlb[free], prob.zub[free], prob.trace, prob.trace_eq, k, start=sub,
            factors=coef.factors(rows), info=info,
        )
        z = zcur.copy()
        z[free] = zf
        y = np.zeros(prob.m)
        y[rows] = yr
        pt = _Point(obj + const, W, alpha, z, y, mu, info["ip_steps"])
        if work.all():
            return pt, None
        act = coef.activity(W, alpha, blk.abar) + G @ z
        tol = 1e-9 * np.maximum(1.0, np.abs(act))
        viol = ~work & ((act < lb - tol) | (act > ub + tol))
        if not viol.any():
            return pt, None
        if not resolve:
            return pt, viol
        work |= viol
        start = MasterStart(W, alpha, z, y, mu)


#: Rows that may always join the working set in one round (``MGOptions.max_join``).
JOIN_MIN = 50


def _cap_joined(viol: np.ndarray, act: np.ndarray, prob: SpectraplexLP, opts: MGOptions,
                n_work: int) -> np.ndarray:
    """The violated rows that join now: the ``max(JOIN_MIN, max_join * n_work)`` most violated
    (violation relative to ``max(1, |activity|)``); the rest join later rounds if still
    violated (the value used for the gap is that of the re-optimized z, feasible for all rows,
    so leaving violated rows out costs no validity)."""
    cap = max(JOIN_MIN, int(opts.max_join * n_work)) if np.isfinite(opts.max_join) else viol.size
    idx = np.flatnonzero(viol)
    if idx.size <= cap:
        return viol
    amount = np.maximum(prob.lb[idx] - act[idx], act[idx] - prob.ub[idx])
    amount /= np.maximum(1.0, np.abs(act[idx]))
    out = np.zeros_like(viol)
    out[idx[np.argsort(-amount)[:cap]]] = True
    return out


def _solve_round(prob: SpectraplexLP, opts: MGOptions, blk: Block, rows: _Rows,
                 zcur: np.ndarray, start: MasterStart | None = None):
    """One master solve (tight: looser ones early on were measured to cost rounds at the end),
    warm-started from ``start``; returns ``(point, A(X), violated rows outside the working
    set or None)``."""
    I, J, scale = svec_index(blk.P.shape[1])
    fac = isinstance(prob.A, FactoredOperator)
    coef = _Coef(prob.full.quad_pairs(blk.P) * scale, I, J, scale,
                 prob.A.V @ blk.P if fac else None, prob.A.M if fac else None)
    pt, viol = _master_on_rows(prob, blk, coef, rows.work, rows.priv, zcur,
                               resolve=opts.resolve_rows, start=start)
    ax = coef.activity(pt.W, pt.alpha, blk.abar)
    if viol is not None:
        viol = _cap_joined(viol, ax + prob.G @ pt.z, prob, opts, int(rows.work.sum()))
        # one solve on the working set: X is kept, the LP variables re-optimized for it
        # (exactly feasible, so its value is a valid lower bound); the violated rows join
        z_pol, _ = _polish_z(ax, prob)
        if z_pol is None:  # no feasible z for this X: fall back to the exact master
            pt, _ = _master_on_rows(prob, blk, coef, rows.work | viol, rows.priv, zcur,
                                    start=MasterStart(pt.W, pt.alpha, pt.z, pt.y, pt.mu))
            ax = coef.activity(pt.W, pt.alpha, blk.abar)
            viol = None
        else:
            obj = coef.value(pt.W) + pt.alpha * (blk.cbar or 0.0) + float(prob.c @ z_pol)
            pt = replace(pt, z=z_pol, obj=obj)
    return pt, ax, viol


def _off_block(prob: SpectraplexLP, w: np.ndarray, P: np.ndarray, k: int,
               dense: bool) -> np.ndarray:
    """Top-``k`` eigenvectors of the dual slack's gradient off the block,
    ``(I - P P^T) H (I - P P^T)`` with ``H = sum_r w_r A_r`` (``pricing="gradient"``)."""
    full, n = prob.full, prob.n
    if P.shape[1] >= n - 1:
        return np.zeros((n, 0))

    def proj(x):
        return x - P @ (P.T @ x)

    if dense:
        H = full.adjoint_dense(w)
        HP = H @ P
        Hp = H - P @ HP.T - HP @ P.T + P @ ((P.T @ HP) @ P.T)
        vals, vecs = np.linalg.eigh(0.5 * (Hp + Hp.T))
        return vecs[:, ::-1][:, :k]
    lin = spla.LinearOperator((n, n), dtype=float, matvec=lambda x: proj(
        full.adjoint_matvec(w, proj(np.reshape(x, (n, 1))))[:, 0]))
    return spla.eigsh(lin, k=min(k, n - 2), which="LA", tol=1e-8)[1]


def _price(prob: SpectraplexLP, opts: MGOptions, best: BestBound, v0, y: np.ndarray,
           mu: float, P: np.ndarray | None = None):
    """Eigenvectors at the separation point and the bound there; with smoothing the master
    duals are priced too (one more eigen-solve, cheap next to the master: their bound is often
    the better one, and their columns never misprice); with ``pricing="gradient"`` also the
    top eigenvectors off the block ``P`` (:func:`_off_block`). Returns ``(best, vals, vecs,
    rc)``."""
    full, cpr, dense = prob.full, opts.columns_per_round, opts.dense
    ys = best.smoothed(y, opts.smoothing)
    yp = y if ys is None else ys
    vals, vecs = _top_eigs(full, np.append(1.0, -yp), cpr, dense, v0, 1e-10)
    best = best.improve(bound_at(prob, vals[0], yp, ztol=1e-7), yp)
    extra = (_off_block(prob, np.append(1.0, -y), P, cpr, dense)
             if opts.pricing == "gradient" and P is not None else None)
    if ys is None and extra is None:
        return best, vals, vecs, vals - mu
    if ys is not None:
        vm, Um = _top_eigs(full, np.append(1.0, -y), cpr, dense, v0, 1e-10)
        best = best.improve(bound_at(prob, vm[0], y, ztol=1e-7), y)
        vals = np.append(vm[0], vals)
        vecs = np.hstack([Um, vecs])
    if extra is not None:
        vecs = np.hstack([vecs, extra])
    vecs = np.linalg.qr(vecs)[0]
    rc = full.quad(vecs).T @ np.append(1.0, -y) - mu
    return best, vals, vecs, rc


#: ``full_space``: the switch to P = I needs this many rounds with the same number of directions
#: in X (weight above ``_RANK_TOL t``) ... (3 was measured slower than 1 on the D = 100 family:
#: member 6 8.6 -> 6.1 s CPU, member 7 6.3 -> 3.9-4.8 s, members 4 and 11 unchanged (same round);
#: the full-space master is the SDP on the working rows whatever the face, so waiting for a
#: stable rank only delays it)
FULL_SPACE_STABLE = 1
#: ... and a relative gap at most this (3e-2 switched member 6 at round 6 with the working set
#: still growing: 9.1 s CPU against 6.1 with 1e-2) ...
FULL_SPACE_GAP = 1e-2
#: ... and that rank at least this fraction of n (low-rank members 0 and 2 of the D = 100 family,
#: rank 3 and 5, switched after 6-10 rounds and took 1.3 -> 1.8 and 1.1 -> 2.4 s CPU: the k = n
#: master costs more than the few rounds it saves there; rank 10-19 members gained 10-75%)
FULL_SPACE_MIN_RANK = 1 / 16
#: ... and n at least this (a PSDBoost D = 6 fit at tol 1e-8 switched at once, then repeated the
#: full-space master 2000 rounds at its solver's accuracy, 2.5e-8: 32 s where the block master
#: certifies 5e-11 in 3 rounds).
FULL_SPACE_MIN_N = 32

#: The next master is warm-started only if this one took at most this many interior-point steps.
WARM_AFTER_STEPS = 40
#: ... and only if at most this fraction of its rows join the working set.
WARM_MAX_JOINED = 0.5


def warm_start(blk: Block, Q: np.ndarray, s2: np.ndarray, pt, trace: float,
               trace_eq: bool) -> MasterStart:
    """The point ``X = Q diag(s2) Q^T`` (with its LP variables and duals ``pt``) as a start of
    the master over the next block: ``W = P^T X P``, the rest of the trace on the aggregate
    (exact when ``P`` holds the directions of ``X`` that the block keeps)."""
    F = blk.P.T @ Q
    W = (F * s2) @ F.T
    tot = trace if trace_eq else float(s2.sum())
    alpha = max(tot - float(np.trace(W)), 0.0) if blk.Ubar is not None else 0.0
    return MasterStart(W, alpha, pt.z, pt.y, pt.mu)


def _next_block(prob: SpectraplexLP, opts: MGOptions, blk: Block, lw, Vw, newv: np.ndarray,
                alpha: float) -> Block:
    """The next subspace and aggregate (:func:`~._block.next_subspace`)."""
    P, Ubar, thbar = next_subspace(blk.P, lw, Vw, newv, blk.Ubar, blk.thbar, alpha, prob.trace,
                                   opts.max_rank)
    if Ubar is None:
        return Block(P)
    return Block(P, Ubar, thbar, prob.A.quad(Ubar) @ thbar,
                  float(prob.C.quad(Ubar)[0] @ thbar))


@dataclass(frozen=True, eq=False)
class _Best:
    """The best master point so far as ``X = Q diag(s2) Q^T`` with its z and duals."""

    obj: float = -np.inf
    Q: np.ndarray | None = None
    s2: np.ndarray | None = None
    z: np.ndarray | None = None
    y: np.ndarray | None = None
    mu: float = 0.0


def solve_psd(prob: SpectraplexLP, opts: MGOptions, log: RoundLog) -> MatrixGenerationResult:
    """The PSD-block row master (module docstring); valid input assumed."""
    m = prob.m
    _, P = _top_eigs(prob.full, np.append(1.0, np.zeros(m)), opts.columns_per_round, opts.dense,
                     None, 1e-8)
    blk, best, top, v0 = Block(P), BestBound(), _Best(), None
    zcur = np.clip(np.zeros(prob.p), prob.zlb, prob.zub)
    rows = _start_rows(prob, opts, P, zcur)
    status = SolverStatus.MAX_ITERS
    it = 0
    start = None
    ranks: list[int] = []
    ropts = opts  # the round's options (exact working set after the full-space switch)
    for it in range(1, opts.max_iters + 1):
        k = blk.P.shape[1]
        pt, ax, viol = _solve_round(prob, ropts, blk, rows, zcur, start)
        zcur = pt.z
        n_before, n_joined = int(rows.work.sum()), 0
        if rows.select:
            old_work = rows.work
            rows = _update_rows(rows, prob, opts, ax, pt, viol)
            n_joined = int((rows.work & ~old_work).sum())
        y = _clip_duals(pt.y, prob.lb, prob.ub)
        lw, Vw, Q, s2 = iterate_factor(blk.P, pt.W, blk.Ubar, blk.thbar, pt.alpha, prob.trace)
        if pt.obj > top.obj:
            top = _Best(pt.obj, Q, s2, pt.z, y, pt.mu)
        best, vals, vecs, rc = _price(prob, opts, best, v0, y, pt.mu, blk.P)
        v0 = vecs[:, 0]
        gap = log.record(it, top.obj, best.value, k, float(vals[0]))
        if opts.verbose:
            print(f"[mg-psd] it {it:3d} obj {top.obj + prob.offset:+.9e} bound "
                  f"{best.value + prob.offset:+.9e} gap {gap:.2e} k {k} rank {Q.shape[1]} "
                  f"rows {int(rows.work.sum())}")
        if gap <= opts.tol:
            status = SolverStatus.OPTIMAL
            break
        if log.elapsed() > opts.time_limit:
            status = SolverStatus.TIME_LIMIT
            break
        keep = rc > 1e-12 * max(1.0, abs(top.obj))
        if (not keep.any() or ropts is not opts) and viol is None:
            # (full space: the master was the SDP on every row it needs; nothing left to add)
            status = SolverStatus.STALLED
            break  # (rows just joined the working set: the next master differs, go on)
        ranks.append(int((s2 > _RANK_TOL * prob.trace).sum()))
        if (ropts is opts and FULL_SPACE_MIN_N <= prob.n <= opts.full_space
                and gap <= FULL_SPACE_GAP
                and len(ranks) >= FULL_SPACE_STABLE and ranks[-1] >= FULL_SPACE_MIN_RANK * prob.n
                and len(set(ranks[-FULL_SPACE_STABLE:])) == 1):
            # the rank is identified: the block becomes the whole space, the master exact
            ropts = replace(opts, resolve_rows=True)
            log.hist["full_space"] = [it]
            if opts.verbose:
                print(f"[mg-psd] full-space master from round {it + 1} (rank {ranks[-1]})")
        if ropts is not opts:
            blk = Block(np.eye(prob.n))
        else:
            blk = _next_block(prob, opts, blk, lw, Vw, vecs[:, keep], pt.alpha)
        # warm start after an interior-point master of moderate difficulty, unless many rows
        # join: after Clarabel (a vertex-like point), a long solve or a working set that grew
        # 5x (189 -> 928 rows) the warm start was measured to fail (35 wasted steps, then cold)
        start = None
        if (opts.warm_start and pt.ip_steps is not None and pt.ip_steps <= WARM_AFTER_STEPS
                and n_joined <= WARM_MAX_JOINED * n_before):
            start = warm_start(blk, Q, s2, pt, prob.trace, prob.trace_eq)
    return _psd_result(prob, log, top, best, status, it, blk.P.shape[1])


def _psd_result(prob: SpectraplexLP, log: RoundLog, top: _Best, best: BestBound,
                status: SolverStatus, it: int, k: int) -> MatrixGenerationResult:
    """The best point seen (the master value can dip when a working-set solve is not exact):
    exact trace and PSD by construction; z polished for exact row feasibility with X fixed."""
    Q, z, obj = top.Q, top.z, top.obj
    s2 = exact_trace(top.s2, prob.trace, prob.trace_eq)
    ax = prob.A.quad(Q) @ s2
    cx = float(prob.C.quad(Q)[0] @ s2)
    z_pol, _ = _polish_z(ax, prob)
    if z_pol is not None:
        z = z_pol
        obj = cx + float(prob.c @ z)
    return log.result(status, obj, best.value, theta=s2, U=Q, z=np.asarray(z), y=top.y,
                      mu=top.mu, row_activity=ax + prob.G @ z, iterations=it, n_columns=int(k))


def _polish_z(ax: np.ndarray, prob: SpectraplexLP):
    """With ``A(X) = ax`` fixed, the best exactly feasible ``z`` (an LP in HiGHS), or None;
    also the row activities there."""
    G = prob.G
    if prob.p == 0:
        return np.zeros(0), ax
    h = new_highs()
    h.setOptionValue("primal_feasibility_tolerance", 1e-10)
    h.setOptionValue("dual_feasibility_tolerance", 1e-10)
    add_empty_rows(h, highs_bounds(prob.lb - ax), highs_bounds(prob.ub - ax))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    add_csc_cols(h, prob.c, highs_bounds(prob.zlb), highs_bounds(prob.zub), sp.csc_array(G))
    run_highs(h)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None, None
    z = np.clip(np.asarray(h.getSolution().col_value), prob.zlb, prob.zub)
    return z, ax + G @ z
