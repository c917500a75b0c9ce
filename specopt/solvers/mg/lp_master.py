r"""Column generation with an LP master: ``X = sum_i theta_i u_i u_i^T`` over rank-one columns.

Writing ``X = sum_i theta_i u_i u_i^T`` with ``||u_i|| = 1`` and ``theta >= 0``, ``sum theta =
t`` (the spectraplex is the convex hull of the unit rank-one matrices) turns the problem into an
LP with one column per unit vector. The *restricted master* keeps finitely many columns; it lives
in one HiGHS model for the whole run (new columns are appended with ``addCols`` and the simplex
restarts from the previous basis). Each round prices the top eigenvectors of ``H`` at the master
duals (or at Wentges' smoothed point), prunes idle columns (``prune_after``) and aggregates the
columns into the eigenvectors of ``X`` past ``max_columns``. An infeasible master gets elastic
columns of cost ``-big_m``; if the final point still uses them, :func:`phase_one` decides.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from .._highs import add_csc_cols, add_empty_rows, highs_bounds, new_highs, run_highs
from .._status import SolverStatus
from ._bound import BestBound, _clip_duals, _top_eigs, bound_at, farkas_bound
from ._operators import SymOperator
from ._problem import MGOptions, SpectraplexLP, spectraplex_lp
from ._result import MatrixGenerationResult, RoundLog, UnboundedProblem

__all__ = ["phase_one", "solve_lp"]


class _Master:
    """The restricted master LP, alive for the whole run (z columns first, then theta)."""

    def __init__(self, prob: SpectraplexLP, big_m: float):
        self.A, self.C = prob.A, prob.C
        self.m, self.p = prob.m, prob.p
        self.h = new_highs()
        h = self.h
        h.setOptionValue("solver", "simplex")
        h.setOptionValue("presolve", "off")
        h.setOptionValue("primal_feasibility_tolerance", 1e-9)
        h.setOptionValue("dual_feasibility_tolerance", 1e-9)
        t, inf = prob.trace, highspy.kHighsInf
        rl = np.append(highs_bounds(prob.lb), t if prob.trace_eq else -inf)
        ru = np.append(highs_bounds(prob.ub), t)
        add_empty_rows(h, rl, ru)
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        if self.p:
            add_csc_cols(h, prob.c, highs_bounds(prob.zlb), highs_bounds(prob.zub),
                           sp.csc_array(prob.G))
        self.n_art = 0
        self.big_m = big_m
        self.U = np.zeros((prob.n, 0))
        self.col_age = np.zeros(0, dtype=int)

    def add_artificials(self) -> None:
        """Elastic columns ``+-s_r`` with cost ``-big_m`` on every constraint row (phase 1).

        They go between the z and the theta columns (the layout every index here assumes): the
        theta columns are taken out and put back after them."""
        m = self.m
        U = self.U
        self.delete_theta(np.arange(U.shape[1]))
        idx = np.arange(m, dtype=np.int32)
        for sign in (1.0, -1.0):
            self.h.addCols(
                m, np.full(m, -self.big_m), np.zeros(m), np.full(m, highspy.kHighsInf), m,
                np.arange(m, dtype=np.int32), idx, np.full(m, sign),
            )
        self.n_art = 2 * m
        self.add_columns(U)

    @property
    def theta_start(self) -> int:
        return self.p + self.n_art

    def artificial(self, x: np.ndarray) -> float:
        """Total weight of the elastic columns in the master solution ``x``."""
        return float(x[self.p: self.theta_start].sum()) if self.n_art else 0.0

    def add_columns(self, U: np.ndarray) -> None:
        U = U / np.linalg.norm(U, axis=0, keepdims=True)
        k = U.shape[1]
        cost = self.C.quad(U)[0]
        vals = np.vstack([self.A.quad(U), np.ones((1, k))])
        vals[np.abs(vals) < 1e-14] = 0.0
        add_csc_cols(self.h, cost, np.zeros(k), np.full(k, highspy.kHighsInf), sp.csc_array(vals))
        self.U = np.hstack([self.U, U])
        self.col_age = np.append(self.col_age, np.zeros(k, dtype=int))

    def delete_theta(self, local_idx: np.ndarray) -> None:
        if local_idx.size == 0:
            return
        cols = (local_idx + self.theta_start).astype(np.int32)
        self.h.deleteCols(cols.size, cols)
        keep = np.ones(self.U.shape[1], bool)
        keep[local_idx] = False
        self.U = self.U[:, keep]
        self.col_age = self.col_age[keep]

    def solve(self):
        run_highs(self.h)
        status = self.h.getModelStatus()
        if status == highspy.HighsModelStatus.kNotset:
            # the warm start failed inside HiGHS (seen after column deletion): solve cold
            self.h.clearSolver()
            run_highs(self.h)
            status = self.h.getModelStatus()
        sol = self.h.getSolution()
        x = np.asarray(sol.col_value)
        y = np.asarray(sol.row_dual)
        obj = self.h.getInfo().objective_function_value
        return status, obj, x, y, np.asarray(sol.row_value)


@dataclass(frozen=True, eq=False)
class _LPRound:
    """One master solve: value, primal ``x`` (z, artificials, theta), clipped row duals ``y``,
    trace dual ``mu``, row activities."""

    obj: float
    x: np.ndarray
    y: np.ndarray
    mu: float
    rowv: np.ndarray


def _solve_master(master: _Master, prob: SpectraplexLP) -> _LPRound:
    """Solve the master (with elastic columns once it is infeasible); unbounded is an error."""
    st, obj, x, yrow, rowv = master.solve()
    if st == highspy.HighsModelStatus.kInfeasible and master.n_art == 0:
        master.add_artificials()
        st, obj, x, yrow, rowv = master.solve()
    if st == highspy.HighsModelStatus.kUnbounded or (
        st == highspy.HighsModelStatus.kUnboundedOrInfeasible
    ):
        raise UnboundedProblem("the problem is unbounded (the master LP is)")
    if st != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"HiGHS master LP failed: {master.h.modelStatusToString(st)}")
    m = prob.m
    return _LPRound(obj, x, _clip_duals(yrow[:m], prob.lb, prob.ub), float(yrow[m]), rowv)


def _initial_columns(prob: SpectraplexLP, opts: MGOptions) -> np.ndarray:
    """Top eigenvectors of C (or the given columns), plus the coordinate axes for small n."""
    n = prob.n
    if opts.init_columns is not None:
        return np.asarray(opts.init_columns, float).reshape(n, -1)
    _, U0 = _top_eigs(prob.full, np.append(1.0, np.zeros(prob.m)), opts.columns_per_round,
                      opts.dense, None, 1e-8)
    return np.hstack([U0, np.eye(n)]) if n <= 50 else U0


def _price(prob: SpectraplexLP, opts: MGOptions, best: BestBound, v0, rnd: _LPRound):
    """Eigenvectors at the separation point (Wentges' or the master duals) and the bound there;
    on a mispricing (no column prices out at the master duals) the master duals again.
    Returns ``(best, vals, vecs, keep)``, ``keep`` the columns to add."""
    full, cpr, dense = prob.full, opts.columns_per_round, opts.dense
    ym, mu, small = rnd.y, rnd.mu, 1e-12 * max(1.0, abs(rnd.obj))
    ys = best.smoothed(ym, opts.smoothing)
    yp = ym if ys is None else ys
    vals, vecs = _top_eigs(full, np.append(1.0, -yp), cpr, dense, v0, 1e-10)
    best = best.improve(bound_at(prob, vals[0], yp), yp)
    rc = full.quad(vecs).T @ np.append(1.0, -ym) - mu
    keep = rc > small
    if ys is not None and not keep.any():  # mispricing: price at the master duals
        vals, vecs = _top_eigs(full, np.append(1.0, -ym), cpr, dense, v0, 1e-10)
        best = best.improve(bound_at(prob, vals[0], ym), ym)
        keep = vals - mu > small
    return best, vals, vecs, keep


def _manage_columns(master: _Master, x: np.ndarray, opts: MGOptions, it: int,
                    new: np.ndarray) -> None:
    """Age the columns, prune the idle ones, aggregate past ``max_columns``, add ``new``."""
    max_columns = opts.max_columns or np.iinfo(np.int64).max
    theta = x[master.theta_start:]
    master.col_age = np.where(theta > 1e-12, 0, master.col_age + 1)
    if opts.prune_after and it % 10 == 0:
        master.delete_theta(np.flatnonzero(master.col_age >= opts.prune_after))
    if master.U.shape[1] > max_columns:
        theta = master.h.getSolution().col_value[master.theta_start:]
        Uc = _aggregate(master.U, np.asarray(theta))
        master.delete_theta(np.arange(master.U.shape[1]))
        master.add_columns(Uc)
    master.add_columns(new)


def solve_lp(prob: SpectraplexLP, opts: MGOptions, log: RoundLog) -> MatrixGenerationResult:
    """The LP-master loop (module docstring); valid input assumed."""
    master = _Master(prob, opts.big_m)
    master.add_columns(_initial_columns(prob, opts))
    best, v0, rnd = BestBound(), None, None
    status = SolverStatus.MAX_ITERS
    it = 0
    for it in range(1, opts.max_iters + 1):
        rnd = _solve_master(master, prob)
        best, vals, vecs, keep = _price(prob, opts, best, v0, rnd)
        v0 = vecs[:, 0]
        ncols = master.U.shape[1]
        gap = log.record(it, rnd.obj, best.value, ncols, float(vals[0]))
        if opts.verbose:
            print(f"[mg] it {it:4d} obj {rnd.obj + prob.offset:+.9e} bound "
                  f"{best.value + prob.offset:+.9e} gap {gap:.2e} cols {ncols}")
        if gap <= opts.tol and master.artificial(rnd.x) <= 1e-9:
            status = SolverStatus.OPTIMAL
            break
        if log.elapsed() > opts.time_limit:
            status = SolverStatus.TIME_LIMIT
            break
        if not keep.any():
            # nothing prices out although the gap is open: numerical floor of the oracle
            status = SolverStatus.STALLED
            break
        _manage_columns(master, rnd.x, opts, it, vecs[:, keep])
    return _lp_result(prob, opts, log, master, rnd, best, status, it)


def _lp_result(prob: SpectraplexLP, opts: MGOptions, log: RoundLog, master: _Master,
               rnd: _LPRound, best: BestBound, status: SolverStatus, it: int
               ) -> MatrixGenerationResult:
    """The master's point after the loop; an infeasible-looking end (artificials in use) is
    ``infeasible`` only with a phase-1 proof."""
    obj, x, rowv = rnd.obj, rnd.x, rnd.rowv
    if x.size != master.theta_start + master.U.shape[1]:
        # the loop ended after changing the columns: re-solve (the master value can only rise)
        _, obj_new, x, _, rowv = master.solve()
        obj = max(obj, obj_new)
    theta = np.maximum(np.asarray(x[master.theta_start:]), 0.0)
    art = master.artificial(x)
    if art > 1e-9:
        # the big-M master still uses its artificials: infeasible only with a proof (phase 1)
        proven = phase_one(prob.A, prob.G, prob.lb, prob.ub, prob.zlb, prob.zub, prob.trace,
                           prob.trace_eq, max_iters=opts.max_iters, time_limit=opts.time_limit,
                           dense=opts.dense)
        status = SolverStatus.INFEASIBLE if proven else (
            SolverStatus.STALLED if status == SolverStatus.OPTIMAL else status)
    pos = theta > 0
    return log.result(status, obj, best.value, theta=theta[pos], U=master.U[:, pos],
                      z=np.asarray(x[: master.p]), y=rnd.y, mu=rnd.mu,
                      row_activity=np.asarray(rowv[:prob.m]), iterations=it,
                      n_columns=int(master.U.shape[1]), artificial=art, y_bound=best.y)


def phase_one(A: SymOperator, G, lb, ub, zlb, zub, t: float, trace_eq: bool, *,
              max_iters: int = 500, time_limit: float = np.inf, dense: bool = True,
              rel_tol: float = 1e-7) -> bool:
    """Whether the constraints are proven infeasible: phase 1 of the LP master.

    Solves ``max -sum_r (s+_r + s-_r)`` subject to ``lb <= A(X) + G z + s+ - s- <= ub`` over
    the spectraplex (the LP master with elastic columns of cost -1), then checks the best
    multipliers ``y`` (``|y| <= 1``) as a Farkas certificate with :func:`farkas_bound`:
    infeasible when that bound is below ``-rel_tol * (1 + max |finite bound|)``.
    """
    t0 = time.perf_counter()
    m = A.m
    G = sp.csr_array(G)
    p = G.shape[1]
    Gp = sp.hstack([G, sp.identity(m), -sp.identity(m)], format="csr")
    cp1 = np.concatenate([np.zeros(p), -np.ones(2 * m)])
    zlb1 = np.concatenate([zlb, np.zeros(2 * m)])
    zub1 = np.concatenate([zub, np.full(2 * m, np.inf)])
    prob1 = spectraplex_lp(A, None, Gp, cp1, lb, ub, zlb1, zub1, t, trace_eq)
    opts = MGOptions(tol=1e-9, max_iters=max_iters, time_limit=time_limit, dense=dense,
                     big_m=1.0)
    res = solve_lp(prob1, opts, RoundLog(t0, 0.0, None))
    finite = np.concatenate([lb[np.isfinite(lb)], ub[np.isfinite(ub)], [0.0]])
    margin = rel_tol * (1.0 + float(np.abs(finite).max()))
    if not res.bound < -margin:
        return False
    # the certificate, checked on its own: the row multipliers of the best bound
    y = _clip_duals(np.clip(res.y_bound, -1.0, 1.0), lb, ub)
    return farkas_bound(A, y, G, lb, ub, zlb, zub, t, trace_eq, dense) < -margin


def _aggregate(U: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Eigenvectors of ``X = U diag(theta) U^T`` with nonzero eigenvalue (same X, fewer columns)."""
    W = U * np.sqrt(np.maximum(theta, 0.0))
    Q, s, _ = np.linalg.svd(W, full_matrices=False)
    r = int((s > 1e-10 * max(s[0], 1e-300)).sum()) if s.size else 0
    return Q[:, : max(r, 1)]
