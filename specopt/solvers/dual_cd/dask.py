r"""The relative-comparison QP of :mod:`specopt.solvers.dual_cd` with ``Z`` a Dask array.

Problem (as :func:`~specopt.solvers.dual_cd.dual_cd`, one weight ``C`` for every row)::

    min_{w}  P(w) = 1/2 w^T L w + C sum_i max(0, 1 - z_i^T w)     s.t.  w_J >= 0

``Z`` (n x m, chunked by rows) never comes to the client: every step is ONE pass over its row
blocks returning an ``m``-vector, an ``m x m`` matrix and a few scalars (tree-summed on the
cluster), so the client holds ``O(m^2)`` whatever ``n``.

**Method: projected Newton on the Huber-smoothed primal, smoothing decreased geometrically.**
With ``s_i = 1 - z_i^T w`` and ``h_mu(s) = 0 (s <= 0), s^2 / (2 mu) (0 < s < mu), s - mu/2``::

    P_mu(w) = 1/2 w^T L w + C sum_i h_mu(s_i),
    grad    = L w - C Z^T clip(s / mu, 0, 1),      Hess = L + (C / mu) Z_B^T Z_B

(``B``: the rows with ``0 < s_i < mu``). Per block the pass returns ``Z_b^T clip(s/mu, 0, 1)``,
``Z_{b,B}^T Z_{b,B}``, ``sum h_mu``, ``sum max(0, s)`` and ``sum clip(s/mu, 0, 1)``. The step
solves the bound-constrained Newton model ``min g^T d + 1/2 d^T H d, w_J + d_J >= 0`` exactly
on the client (a bounded least-squares problem of size ``m``), with backtracking on ``P_mu``
(one pass per trial). When the Newton decrement is small, ``mu`` shrinks tenfold.

**Certificate, over ALL rows, every pass.** ``P(w)`` at the current ``w`` (feasible: ``w_J >=
0``) is exact (the pass sums ``max(0, s_i)``). The multipliers ``lam_i = C clip(s_i / mu, 0, 1)``
lie in ``[0, C]``, so with the best ``t >= 0`` (another bounded least squares of size ``m``)::

    D(lam, t) = sum_i lam_i - 1/2 (Z^T lam + t)^T L^{-1} (Z^T lam + t)  <=  min P

(weak duality, as in :mod:`specopt.solvers.dual_cd`; ``Z^T lam`` and ``sum lam`` come from the
same pass). The run stops when ``(best P - best D) / max(1, best P) <= tol``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla
from scipy.optimize import lsq_linear

from .._status import SolverStatus
from ._data import DualCDResult, factor
from ._newton import _huber_newton, _kkt_polish

__all__ = ["dual_cd_dask"]

NONFINITE_Z = ("Z contains NaN or infinite entries (found in a pass over the Dask blocks; "
               "check the data the rows are built from)")


def _blk_stats(Zb, w: np.ndarray, mu: float) -> np.ndarray:
    """One block's sums, packed in one vector: ``[Z^T h (m), Z_B^T Z_B (m*m), sum h_mu,
    sum max(0, s), sum h, |B|, #violated]`` with ``h = clip(s / mu, 0, 1)``."""
    Zb = np.asarray(Zb, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        s = 1.0 - Zb @ w
    if not np.isfinite(s).all():
        raise ValueError(NONFINITE_Z)
    h = np.clip(s / mu, 0.0, 1.0)
    band = (s > 0) & (s < mu)
    ZB = Zb[band]
    hub = np.where(s <= 0, 0.0, np.where(s < mu, s * s / (2 * mu), s - 0.5 * mu))
    return np.concatenate([Zb.T @ h, (ZB.T @ ZB).ravel(),
                           [hub.sum(), np.maximum(s, 0.0).sum(), h.sum(), band.sum(),
                            (s > 0).sum()]])


def _blk_line(Zb, W: np.ndarray, mu: float) -> np.ndarray:
    """``sum_i h_mu(1 - z_i^T w_k)`` of one block at every candidate point ``w_k`` (columns of
    ``W``)."""
    with np.errstate(invalid="ignore", over="ignore"):
        S = 1.0 - np.asarray(Zb, dtype=float) @ W
    if not np.isfinite(S).all():
        raise ValueError(NONFINITE_Z)
    return np.where(S <= 0, 0.0, np.where(S < mu, S * S / (2 * mu), S - 0.5 * mu)).sum(axis=0)


def _blk_sample(Zb, stride: int) -> np.ndarray:
    """Every ``stride``-th row of a block."""
    out = np.asarray(Zb, dtype=float)[::stride]
    if not np.isfinite(out).all():
        raise ValueError(NONFINITE_Z)
    return out


def _blk_bands(Zb, w: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """At ``s = 1 - Z w``, per edge ``e_j``: ``#{|s| < e_j}``, ``#{s >= e_j}`` and ``sum_{s >=
    e_j} z_i`` (m), packed as ``[(E,), (E,), (E*m,)]``."""
    Zb = np.asarray(Zb, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        s = 1.0 - Zb @ w
    if not np.isfinite(s).all():
        raise ValueError(NONFINITE_Z)
    E = edges.size
    near = np.searchsorted(np.sort(np.abs(s)), edges, side="left")  # #{|s| < e_j}
    k = np.searchsorted(edges, s, side="right")  # s >= e_j  <=>  j < k
    order = np.argsort(k, kind="stable")
    ks = k[order]
    starts = np.searchsorted(ks, np.arange(E + 1), side="left")
    bucket = np.zeros((E + 1, Zb.shape[1]))
    nz = np.flatnonzero(np.diff(np.append(starts, ks.size)) > 0)
    if nz.size:
        bucket[nz] = np.add.reduceat(Zb[order], starts[nz], axis=0)
    cnt = np.bincount(k, minlength=E + 1)
    q_ge = np.cumsum(bucket[::-1], axis=0)[::-1][1:]  # rows with k > j
    n_ge = np.cumsum(cnt[::-1])[::-1][1:]
    return np.concatenate([near.astype(float), n_ge.astype(float), q_ge.ravel()])


def _blk_near(Zb, w: np.ndarray, b: float) -> np.ndarray:
    """The rows of a block with ``|1 - z_i^T w| < b``."""
    Zb = np.asarray(Zb, dtype=float)
    return Zb[np.abs(1.0 - Zb @ w) < b]


def _blk_hinge(Zb, W: np.ndarray) -> np.ndarray:
    """``sum_i max(0, 1 - z_i^T w_k)`` of one block at every column ``w_k`` of ``W``."""
    with np.errstate(invalid="ignore", over="ignore"):
        S = 1.0 - np.asarray(Zb, dtype=float) @ W
    if not np.isfinite(S).all():
        raise ValueError(NONFINITE_Z)
    return np.maximum(S, 0.0).sum(axis=0)


@dataclass(frozen=True)
class _Stats:
    """The pass at ``(w, mu)``: smoothed value ``F``, gradient ``g``, Hessian ``H``, exact
    primal ``P``, the dual ingredients ``u = Z^T lam``, ``sum lam``; rows in the band and
    violated."""

    w: np.ndarray
    mu: float
    F: float
    g: np.ndarray
    H: np.ndarray
    P: float
    u: np.ndarray
    lam_sum: float
    band: int
    violated: int


class _Passes:
    """The full-data passes over the row blocks of ``Z`` (tree sums on the active scheduler)."""

    def __init__(self, Z: Any, L: np.ndarray, C: float):
        import dask

        from ..mg.dask_rows import tree_sum

        self.dask, self.tree_sum = dask, tree_sum
        self.blocks = list(Z.rechunk({1: -1}).to_delayed().ravel())
        self.L, self.C, self.m, self.n = L, C, L.shape[0], int(Z.shape[0])
        self.count = 0

    def stats(self, w: np.ndarray, mu: float) -> _Stats:
        f = self.dask.delayed(_blk_stats, pure=True)
        (v,) = self.dask.compute(self.tree_sum([f(b, w, mu) for b in self.blocks]))
        self.count += 1
        m, L, C = self.m, self.L, self.C
        zh, ZZ, (hub, hinge, hsum, band, viol) = v[:m], v[m: m + m * m].reshape(m, m), v[-5:]
        quad = 0.5 * float(w @ L @ w)
        return _Stats(w=w, mu=mu, F=quad + C * hub, g=L @ w - C * zh, H=L + (C / mu) * ZZ,
                      P=quad + C * hinge, u=C * zh, lam_sum=C * hsum, band=int(band),
                      violated=int(viol))

    def _sum(self, fn, *args) -> np.ndarray:
        f = self.dask.delayed(fn, pure=True)
        (v,) = self.dask.compute(self.tree_sum([f(b, *args) for b in self.blocks]))
        self.count += 1
        return v

    def primal(self, W: np.ndarray) -> np.ndarray:
        """The exact primal ``P`` at every column of ``W`` (one pass)."""
        return 0.5 * np.einsum("ik,ij,jk->k", W, self.L, W) + self.C * self._sum(_blk_hinge, W)

    def sample(self, rows: int) -> np.ndarray:
        """About ``rows`` rows of ``Z``, every ``n / rows``-th of each block (one pass)."""
        f = self.dask.delayed(_blk_sample, pure=True)
        parts = self.dask.compute(*[f(b, max(1, self.n // rows)) for b in self.blocks])
        self.count += 1
        return np.vstack(parts)

    def bands(self, w: np.ndarray, edges: np.ndarray):
        """``(#near, #up, q_up)`` per edge (:func:`_blk_bands`, one pass)."""
        v = self._sum(_blk_bands, w, edges)
        E, m = edges.size, self.m
        return v[:E], v[E: 2 * E], v[2 * E:].reshape(E, m)

    def near(self, w: np.ndarray, b: float) -> np.ndarray:
        """The rows with ``|1 - z_i^T w| < b`` (one pass)."""
        f = self.dask.delayed(_blk_near, pure=True)
        parts = self.dask.compute(*[f(blk, w, b) for blk in self.blocks])
        self.count += 1
        return np.vstack(parts)

    def line(self, W: np.ndarray, mu: float) -> np.ndarray:
        """``P_mu`` at every column of ``W`` (one pass, ``k`` numbers per block)."""
        f = self.dask.delayed(_blk_line, pure=True)
        (v,) = self.dask.compute(self.tree_sum([f(b, W, mu) for b in self.blocks]))
        self.count += 1
        return 0.5 * np.einsum("ik,ij,jk->k", W, self.L, W) + self.C * v


def _dual_value(st: _Stats, Rinv_T: np.ndarray, mask: np.ndarray) -> tuple[float, np.ndarray]:
    """``D(lam, t)`` at the pass's ``lam`` with the best ``t >= 0`` on ``J`` (module docstring);
    returns ``(D, t)``. Any ``t >= 0`` gives a valid bound, so an inexact ``t`` only weakens it."""
    return _dual_of(st.u, st.lam_sum, Rinv_T, mask)


def _dual_of(u: np.ndarray, lam_sum: float, Rinv_T: np.ndarray, mask: np.ndarray
             ) -> tuple[float, np.ndarray]:
    """``D(lam, t)`` from ``u = Z^T lam`` and ``sum lam`` with the best ``t >= 0`` on ``J``."""
    a = Rinv_T @ u
    t = np.zeros_like(u)
    if mask.any():
        B = Rinv_T[:, mask]
        t[mask] = np.maximum(lsq_linear(B, -a, bounds=(0.0, np.inf), method="bvls").x, 0.0)
        a = a + B @ t[mask]
    return float(lam_sum - 0.5 * a @ a), t


def _newton_step(st: _Stats, mask: np.ndarray) -> np.ndarray:
    """``argmin_d g^T d + 1/2 d^T H d`` s.t. ``w_J + d_J >= 0`` (bounded least squares)."""
    H = 0.5 * (st.H + st.H.T)
    Rh = sla.cholesky(H, lower=False)
    rhs = -sla.solve_triangular(Rh, st.g, trans="T", lower=False)
    lo = np.where(mask, -st.w, -np.inf)
    d = sla.solve_triangular(Rh, rhs, lower=False)
    if np.all(st.w + d >= 0) or not mask.any():
        return d
    res = lsq_linear(Rh, rhs, bounds=(lo, np.full_like(lo, np.inf)), method="bvls")
    return res.x


@dataclass(frozen=True)
class _Best:
    P: float = np.inf
    w: np.ndarray | None = None
    D: float = -np.inf
    lam_mu: float = 0.0
    t: np.ndarray | None = None

    def update(self, st: _Stats, D: float, t: np.ndarray) -> _Best:
        out = self
        if st.P < out.P:
            out = _Best(st.P, st.w, out.D, out.lam_mu, out.t)
        if D > out.D:
            out = _Best(out.P, out.w, D, st.mu, t)
        return out

    @property
    def gap(self) -> float:
        return max(self.P - self.D, 0.0)


def dual_cd_dask(
    L: np.ndarray,
    Z: Any,
    C: float = 1.0,
    *,
    nonneg: bool | np.ndarray = True,
    tol: float = 1e-6,
    ridge: float = 0.0,
    mu0: float = 2.0,
    mu_min: float = 1e-12,
    max_passes: int = 500,
    time_limit: float | None = None,
    callback: Callable[..., None] | None = None,
    polish: bool = True,
    coarse: Any = None,
) -> DualCDResult:
    """Solve the QP of the module docstring with ``Z`` a Dask array ``(n, m)`` (chunked by
    rows); every pass runs on the active Dask scheduler and returns ``O(m^2)`` numbers.

    ``C`` one positive weight for every row; ``nonneg``: True, False or a boolean mask (the
    coordinates ``J``); ``ridge``: solve with ``L + ridge I``; ``tol``: certified relative gap;
    ``max_passes`` caps the passes over the data; ``polish``: start with the kink polish
    (a sample warm start, then the near rows solved on the client), the Newton passes only if
    it does not certify. ``callback(step, objective=P, bound=D,
    gap=rel. gap, violation=0.0, rows_in_band=..., violated=...)`` after every pass. Returns a
    :class:`~specopt.solvers.dual_cd.DualCDResult` with ``lam`` empty (``n`` multipliers are
    not gathered) and ``xi`` empty; ``method = "newton-dask"``.

    ``coarse``: a Dask array of rows standing for all of ``Z`` (each weighted ``n /
    rows(coarse)``), e.g. every ``s``-th row. With it the warm start is the kink polish of that
    coarse problem (from its own sample): at ``n = 1e8`` the :data:`NEAR_ROWS` nearest rows are
    0.2% of the data, and the sample alone puts ``w`` too far from the optimum for so narrow a
    band; the coarse problem's band holds a tenth of its rows. Its passes are over the coarse
    rows only and are not counted in ``iterations``."""
    t0 = time.perf_counter()
    L, mask = _check(L, Z, C, nonneg, ridge, tol)
    R, _ = factor(L, ridge)
    Lr = L + ridge * np.eye(L.shape[0]) if ridge else L
    Rinv_T = sla.solve_triangular(R, np.eye(L.shape[0]), trans="T", lower=False)
    passes = _Passes(Z, Lr, float(C))
    setup = time.perf_counter() - t0
    w = np.zeros(L.shape[0])
    best, hist = _Best(), {"primal": [], "dual": [], "gap": [], "time": [], "mu": []}
    status, step = SolverStatus.MAX_ITERS, 0
    if polish:
        def on_pass(bst: _Best, band: float, near: int) -> None:
            nonlocal step
            step += 1
            rel = bst.gap / max(1.0, abs(bst.P))
            _record(hist, bst, rel, band, t0)
            if callback is not None:
                callback(step, objective=bst.P, bound=bst.D, gap=rel, violation=0.0,
                         rows_in_band=near, violated=-1)

        src = passes if coarse is None else _Passes(coarse, Lr, float(C) * passes.n / int(
            coarse.shape[0]))
        S = src.sample(SAMPLE_ROWS)  # warm start: the sample, each row weighted n / |S|
        w = _huber_newton(Lr, S, np.full(len(S), C * passes.n / len(S)), mask, w, 0.1)
        if coarse is not None:  # then the coarse problem's polish (module docstring)
            w = _kink_polish(src, Rinv_T, mask, w, tol, _Best(), lambda *a: None)[0].w
        best, mu0 = _kink_polish(passes, Rinv_T, mask, w, tol, best, on_pass)
        if best.gap / max(1.0, abs(best.P)) <= tol:
            return _result(best, SolverStatus.OPTIMAL, passes, setup, t0, hist)
        w = best.w
    st = passes.stats(w, mu0)
    while True:
        D, t = _dual_value(st, Rinv_T, mask)
        best = best.update(st, D, t)
        rel = best.gap / max(1.0, abs(best.P))
        _record(hist, best, rel, st.mu, t0)
        step += 1
        if callback is not None:
            callback(step, objective=best.P, bound=best.D, gap=rel, violation=0.0,
                     rows_in_band=st.band, violated=st.violated)
        if rel <= tol:
            status = SolverStatus.OPTIMAL
            break
        if passes.count + 2 > max_passes:
            break
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            status = SolverStatus.TIME_LIMIT
            break
        nxt = _advance(passes, st, mask, mu_min, tol)
        if nxt is st:
            status = SolverStatus.STALLED
            break
        st = nxt
    return _result(best, status, passes, setup, t0, hist)


def _result(best: _Best, status: SolverStatus, passes: _Passes, setup: float, t0: float,
            hist: dict) -> DualCDResult:
    return DualCDResult(
        w=best.w, xi=np.zeros(0), lam=np.zeros(0), t=best.t, primal=best.P, dual=best.D,
        gap=best.gap, rel_gap=best.gap / max(1.0, abs(best.P)), status=status,
        iterations=passes.count, setup_time=setup, solve_time=time.perf_counter() - t0,
        history=hist, method="newton-dask")


#: rows near the kink the polish gathers to the client (at most: 80 MB at m = 50)
NEAR_ROWS = 200_000
#: rows of the sample the warm start is solved on
SAMPLE_ROWS = 50_000
#: band half-widths tried for the near rows ``|1 - z_i^T w| < b`` (the widest that fits
#: :data:`NEAR_ROWS` is used: far from the optimum, a narrow band misreads the partition)
BAND_EDGES = np.geomspace(1e-5, 1e3, 65)
#: polish attempts (each: 3 passes) before the Newton passes take over
POLISH_ROUNDS = 3


def _kink_polish(passes: _Passes, Rinv_T: np.ndarray, mask: np.ndarray, w: np.ndarray,
                 tol: float, best: _Best, on_pass) -> tuple[_Best, float]:
    """The kink polish (module docstring): rows far from the kink at ``w`` summed on the
    cluster, the near rows gathered and the reduced problem solved on the client (Huber ladder
    and the KKT pair of its partition), every candidate certified on ALL rows (its primal by
    one pass, its dual exactly from the sums). Returns the best pair and the last band."""
    L, C = passes.L, passes.C
    b = float(BAND_EDGES[-1])
    for _ in range(POLISH_ROUNDS):
        before = best.P, best.D
        near_cnt, n_up, q_up = passes.bands(w, BAND_EDGES)
        ok = np.flatnonzero(near_cnt <= NEAR_ROWS)
        j = int(ok[-1]) if ok.size else 0
        b = float(BAND_EDGES[j])
        Zn = passes.near(w, b)
        q, nu = C * q_up[j], float(n_up[j])
        Zaug = np.vstack([Zn, q[None, :] / C])  # the rows above the band as one row, lam = C
        Caug = np.full(Zaug.shape[0], C)
        ws, lams = [w], [np.append(np.where(1.0 - Zn @ w > 0, C, 0.0), C)]
        mu = min(0.1, 0.5 * b)
        while mu >= 1e-11:
            w = _huber_newton(L, Zn, Caug[:-1], mask, w, mu, q=q)
            r = 1.0 - Zn @ w
            ws.append(w)
            lams.append(np.append(C * np.clip(r / mu, 0.0, 1.0), C))
            part = np.append(np.where(r >= mu, C, np.where(np.abs(r) < mu, 0.5 * C, 0.0)), C)
            kk = _kkt_polish(L, Zaug, Caug, mask, part, np.where(mask & (w <= 0), 1.0, 0.0))
            if kk is not None:
                ws.append(kk[0])
                lams.append(np.append(kk[1][:-1], C))
                rk = np.maximum(1.0 - Zn @ kk[0], 0.0)
                P_red = 0.5 * kk[0] @ L @ kk[0] - q @ kk[0] + C * (nu + rk.sum())
                D_k, _ = _dual_of(Zaug.T @ lams[-1], lams[-1][:-1].sum() + C * nu, Rinv_T, mask)
                if P_red - D_k <= 0.1 * tol * max(1.0, abs(P_red)):
                    break
            mu *= 0.1
        W = np.column_stack(ws)
        P = passes.primal(W)
        for k in range(W.shape[1]):
            D, t = _dual_of(Zaug.T @ lams[k], lams[k][:-1].sum() + C * nu, Rinv_T, mask)
            if P[k] < best.P:
                best = _Best(float(P[k]), W[:, k].copy(), best.D, best.lam_mu, best.t)
            if D > best.D:
                best = _Best(best.P, best.w, D, 0.0, t)
        on_pass(best, b, int(Zn.shape[0]))
        if best.gap / max(1.0, abs(best.P)) <= tol or (best.P, best.D) == before:
            break
        w = best.w
    return best, b


#: step lengths tried along the Newton direction, all in one pass (``P_mu`` is convex along it)
STEPS = 2.0 ** -np.arange(40)


def _advance(passes: _Passes, st: _Stats, mask: np.ndarray, mu_min: float, tol: float
             ) -> _Stats:
    """One projected Newton step on ``P_mu``: the best of :data:`STEPS` along the direction
    (one pass for all of them), then the pass at the new point; or, when the Newton decrement
    is below ``1e-12`` of the objective (or no step decreases ``P_mu``), the same point at
    ``mu / 10``."""
    d = _newton_step(st, mask)
    dec = -float(st.g @ d)
    if dec > 1e-12 * max(1.0, abs(st.F)):
        W = st.w[:, None] + d[:, None] * STEPS[None, :]
        W[mask] = np.maximum(W[mask], 0.0)
        F = passes.line(W, st.mu)
        k = int(np.argmin(F))
        if F[k] < st.F:
            return passes.stats(W[:, k].copy(), st.mu)
    if st.mu <= mu_min:
        return st
    return passes.stats(st.w, max(st.mu * 0.1, mu_min))


def _record(hist: dict, best: _Best, rel: float, mu: float, t0: float) -> None:
    for k, v in (("primal", best.P), ("dual", best.D), ("gap", rel),
                 ("time", time.perf_counter() - t0), ("mu", mu)):
        hist[k].append(v)


def _check(L, Z, C, nonneg, ridge, tol) -> tuple[np.ndarray, np.ndarray]:
    """``(L, mask)`` checked against ``Z``'s shape; errors name the argument."""
    L = np.asarray(L, dtype=float)
    if Z.ndim != 2 or Z.shape[0] == 0 or Z.shape[1] == 0:
        raise ValueError(f"Z must be a non-empty 2-D Dask array (n, m), got shape {Z.shape}")
    if np.isnan(Z.shape[0]):
        raise ValueError("the Dask array Z needs known chunk sizes (call compute_chunk_sizes)")
    m = Z.shape[1]
    if L.shape != (m, m):
        raise ValueError(f"L must have shape ({m}, {m}) to match Z of shape {Z.shape}, "
                         f"got {L.shape}")
    if not np.all(np.isfinite(L)):
        raise ValueError("L contains NaN or infinite entries")
    if not (np.ndim(C) == 0 and np.isfinite(C) and C > 0):
        raise ValueError(f"C must be one finite number > 0 for Dask rows, got {C!r}")
    if not (tol > 0):
        raise ValueError(f"tol must be > 0, got {tol!r}")
    if not (np.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge!r}")
    if np.abs(L - L.T).max() > 1e-10 * max(1.0, np.abs(L).max()):
        raise ValueError("L must be symmetric")
    mask = np.full(m, bool(nonneg)) if isinstance(nonneg, (bool, np.bool_)) else np.asarray(
        nonneg, dtype=bool)
    if mask.shape != (m,):
        raise ValueError(f"nonneg must be a bool or a boolean mask of shape ({m},)")
    return L, mask
