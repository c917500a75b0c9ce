"""Dual coordinate descent passes (Algorithm 2 in Cholesky coordinates) with shrinking, the
certificate over ALL constraints at checks, and polish candidates that only enter through it.
Input is validated by the front end (:func:`specopt.solvers.dual_cd.dual_cd`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from .._status import SolverStatus
from ._data import DualCDResult, Problem, transform
from ._kernels import block_pass, combine, seed_rng
from ._newton import NewtonStart, polish_candidates


@dataclass(frozen=True)
class CDOptions:
    """Options of the passes (see :func:`specopt.solvers.dual_cd.dual_cd`)."""

    tol: float
    max_passes: int
    shrinking: bool
    check_every: int
    polish: bool
    time_limit: float | None
    verbose: bool
    callback: Callable[..., None] | None


@dataclass(frozen=True)
class _Coords:
    """Cholesky coordinates: rows ``Y`` = z_i R^{-1} and ``Sr`` = rows of R^{-T} e_j (j in J),
    their squared norms, and the sign-constrained coordinates ``tcoords``."""

    Y: np.ndarray
    qd: np.ndarray
    Sr: np.ndarray
    sd: np.ndarray
    tcoords: np.ndarray
    t_upper: np.ndarray  #: t has no upper bound

    @classmethod
    def build(cls, prob: Problem) -> _Coords:
        Y, S = transform(prob.Z, prob.R, prob.diagonal)
        tcoords = np.flatnonzero(prob.mask)
        Sr = np.ascontiguousarray(S[tcoords])  # rows s_j = R^{-T} e_j, j in J
        return cls(Y, np.einsum("ij,ij->i", Y, Y), Sr, np.einsum("ij,ij->i", Sr, Sr), tcoords,
                   np.full(tcoords.size, np.inf))


@dataclass
class _State:
    """Dual point (lam, t, v = Y^T lam + S^T t), shrinking state and the best primal point."""

    lam: np.ndarray
    tv: np.ndarray
    v: np.ndarray
    idx: np.ndarray
    tidx: np.ndarray
    n_act: int
    nt_act: int
    best_w: np.ndarray | None
    best_P: float
    n_polish: int
    next_polish: int
    pg_max_old: float = np.inf
    pg_min_old: float = -np.inf
    eps_pg: float = 1.0
    passes: int = 0

    def t_full(self, m: int, tcoords: np.ndarray) -> np.ndarray:
        t = np.zeros(m)
        t[tcoords] = self.tv
        return t

    def unshrink(self) -> None:
        """The next pass sees every variable again."""
        self.n_act, self.nt_act = self.lam.size, self.tv.size
        self.pg_max_old, self.pg_min_old = np.inf, -np.inf


def _dual_value(Y, Sr, lam, tv):
    """``v = Y^T lam + S_J^T t`` recomputed (no drift) and ``D = sum lam - |v|^2 / 2``."""
    v = np.zeros(Y.shape[1])
    combine(Y, lam, v)
    if tv.size:
        combine(Sr, tv, v)
    return v, float(lam.sum() - 0.5 * v @ v)


def _primal_value(Y, R, v, tcoords, C):
    """Primal-feasible ``wp`` (w = R^{-1} v with w_J clipped at 0) and its objective P(wp)."""
    w = sla.solve_triangular(R, v, lower=False, check_finite=False)
    if tcoords.size:
        w[tcoords] = np.maximum(w[tcoords], 0.0)
    vp = R @ w
    margins = Y @ vp
    return w, float(0.5 * vp @ vp + C @ np.maximum(0.0, 1.0 - margins))


def _start(prob: Problem, co: _Coords, warm: NewtonStart | None, seed: int) -> _State:
    """lam = 0, t = 0 (or the Newton path's best dual point), every coordinate active."""
    n, nt = prob.Z.shape[0], co.tcoords.size
    st = _State(lam=np.zeros(n), tv=np.zeros(nt), v=np.zeros(prob.Z.shape[1]),
                idx=np.arange(n, dtype=np.int64), tidx=np.arange(nt, dtype=np.int64),
                n_act=n, nt_act=nt, best_w=None, best_P=np.inf, n_polish=0,
                next_polish=0 if warm is None else 20)
    if warm is not None:  # continue from the Newton path's best dual point
        st.best_w, st.best_P, st.n_polish = warm.w, warm.P, warm.n_candidates
        st.lam[:] = warm.lam
        st.tv[:] = warm.t[co.tcoords]
        st.v = _dual_value(co.Y, co.Sr, st.lam, st.tv)[0]
    seed_rng(int(seed))
    return st


def _pass(prob: Problem, co: _Coords, st: _State, shrinking: bool) -> tuple[float, float]:
    """One randomized pass over the active lam, then t coordinates; (max, min) projected
    gradient seen."""
    st.n_act, pmax, pmin = block_pass(co.Y, co.qd, prob.C, 1.0, st.lam, st.v, st.idx, st.n_act,
                                      st.pg_max_old, st.pg_min_old, shrinking)
    if co.tcoords.size:
        st.nt_act, tmax, tmin = block_pass(co.Sr, co.sd, co.t_upper, 0.0, st.tv, st.v, st.tidx,
                                           st.nt_act, st.pg_max_old, st.pg_min_old, shrinking)
        pmax, pmin = max(pmax, tmax), min(pmin, tmin)
    return pmax, pmin


def _polish(prob: Problem, co: _Coords, st: _State, D: float, tol: float, hist) -> float:
    """Try the polish candidates; keep a better primal point, continue from a better dual
    point. Returns the (possibly improved) dual value."""
    st.next_polish = 2 * st.passes  # back off: a polish costs a few O(nm) sweeps
    m, tc = prob.Z.shape[1], co.tcoords
    for wk, lam_k, t_k in polish_candidates(prob, st.lam, st.t_full(m, tc), st.best_w):
        st.n_polish += 1
        Pk = _primal_value(co.Y, prob.R, prob.R @ wk, tc, prob.C)[1]
        if Pk < st.best_P:
            st.best_w, st.best_P = wk, Pk
        vk, Dk = _dual_value(co.Y, co.Sr, lam_k, t_k[tc])
        if Dk > D:  # continue coordinate descent from the better dual point
            st.lam[:], st.tv[:], st.v, D = lam_k, t_k[tc], vk, Dk
            hist["dual"][-1] = D
        if (st.best_P - D) / max(1.0, st.best_P) <= tol:
            break
    return D


def _check(prob: Problem, co: _Coords, st: _State, opts: CDOptions, hist, t0: float,
           first: int) -> float:
    """Full (unshrunk) certificate, with polish candidates when due; recorded and reported.
    Returns the relative gap."""
    st.v, D = _dual_value(co.Y, co.Sr, st.lam, st.tv)
    w, P = _primal_value(co.Y, prob.R, st.v, co.tcoords, prob.C)
    if P < st.best_P:
        st.best_w, st.best_P = w, P
    if (opts.polish and st.passes >= st.next_polish
            and (st.best_P - D) / max(1.0, st.best_P) > opts.tol):
        D = _polish(prob, co, st, D, opts.tol, hist)
    hist["primal"].append(st.best_P)
    hist["gap"].append(st.best_P - D)
    hist["pass"].append(st.passes)
    hist.setdefault("time", []).append(time.perf_counter() - t0)
    rel = (st.best_P - D) / max(1.0, st.best_P)
    if opts.callback is not None:
        opts.callback(first + st.passes, objective=st.best_P, bound=D, gap=rel, violation=0.0)
    if opts.verbose:
        print(f"pass {st.passes:5d}  P={st.best_P:.10g}  D={D:.10g}  rel.gap={rel:.3e}"
              f"  active={st.n_act}/{st.lam.size}  polish={st.n_polish}")
    return rel


def _passes(prob, co, st, opts: CDOptions, hist, t0: float, first: int) -> SolverStatus:
    """Passes until the certified gap reaches tol, the time limit or ``max_passes``."""
    inf = np.inf
    t1 = time.perf_counter()
    while st.passes < opts.max_passes:
        st.passes += 1
        pmax, pmin = _pass(prob, co, st, opts.shrinking)
        hist["dual"].append(float(st.lam.sum() - 0.5 * st.v @ st.v))
        spread = pmax - pmin if st.n_act + st.nt_act else 0.0
        out_of_time = opts.time_limit is not None and time.perf_counter() - t1 > opts.time_limit
        if not (spread <= st.eps_pg or st.passes % opts.check_every == 0
                or st.passes == opts.max_passes or out_of_time):
            st.pg_max_old = pmax if pmax > 0 else inf
            st.pg_min_old = pmin if pmin < 0 else -inf
            continue
        if _check(prob, co, st, opts, hist, t0, first) <= opts.tol:
            return SolverStatus.OPTIMAL
        if out_of_time:
            return SolverStatus.TIME_LIMIT
        if spread <= st.eps_pg:
            st.eps_pg *= 0.1
        st.unshrink()
    return SolverStatus.MAX_ITERS


def solve_cd(prob: Problem, opts: CDOptions, seed: int, warm: NewtonStart | None,
             t0: float) -> DualCDResult:
    """Coordinate descent (from the Newton path's point when ``warm``), certified."""
    co = _Coords.build(prob)
    st = _start(prob, co, warm, seed)
    hist = warm.history if warm is not None else {"dual": [], "primal": [], "gap": [],
                                                  "pass": []}
    setup_time = time.perf_counter() - t0
    t1 = time.perf_counter()
    status = _passes(prob, co, st, opts, hist, t0, 0 if warm is None else warm.n_candidates)
    solve_time = time.perf_counter() - t1
    if not hist["pass"] or hist["pass"][-1] != st.passes:
        v, D = _dual_value(co.Y, co.Sr, st.lam, st.tv)
        w, P = _primal_value(co.Y, prob.R, v, co.tcoords, prob.C)
        if P < st.best_P:
            st.best_w, st.best_P = w, P
    else:
        D = hist["dual"][-1]
    gap = st.best_P - D
    return DualCDResult(
        w=st.best_w, xi=np.maximum(0.0, 1.0 - prob.Z @ st.best_w), lam=st.lam,
        t=st.t_full(prob.Z.shape[1], co.tcoords), primal=st.best_P, dual=D, gap=gap,
        rel_gap=gap / max(1.0, st.best_P), status=status, iterations=st.passes,
        setup_time=setup_time, solve_time=solve_time, history=hist, n_polish=st.n_polish,
        method="newton+cd" if warm is not None else "cd",
    )
