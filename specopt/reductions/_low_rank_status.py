"""Infeasible / unbounded for the low-rank SDP route when its engine ends uncertified: a Farkas
vector from the engine's diverging multipliers or from a phase-one SDP (:func:`phase_one_farkas`),
checked by :func:`farkas_check`, or a recession direction with a feasible point
(:func:`ray_check`), each checked on its own (:func:`decide_status`).
"""

from __future__ import annotations

import math
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..solvers.sdp import OPTIMAL, solve_low_rank_sdp
from ..solvers.sdp._data import SparseRows, SymOp
from ._low_rank_duals import complement_basis, route_duals
from ._low_rank_read import LRData
from .base import RouteResult

#: A Farkas vector ``z`` (``A^*(z)`` PSD on the feasible face, ``b^T z < 0``) is accepted with
#: ``lambda_min(A^*(z)) >= -FARKAS_EIG_TOL ||A^*(z)||_F`` (no trace bound known) and
#: ``b^T z <= -FARKAS_MARGIN ||b|| ||z||`` (both scaled to ``||A^*(z)||_F = 1``; farkas_check).
FARKAS_EIG_TOL = 1e-12
FARKAS_MARGIN = 1e-9
#: The recession-direction problem (``max <C, D>`` s.t. ``A(D) = 0``, ``tr D <= 1``) is solved to
#: this tolerance; a ray is accepted with ``sgn <C, D> >= RAY_GAIN ||C||_F``.
RAY_TOL = 1e-7
RAY_GAIN = 1e-6
#: The phase-one problem (:func:`phase_one_farkas`) is solved to this tolerance, in at most the
#: engine's own solve time but this many seconds at least.
PHASE_ONE_TOL = 1e-7
PHASE_ONE_MIN_SECONDS = 2.0



def farkas_check(d: LRData, z: np.ndarray) -> tuple[bool, float, float]:
    """Whether ``z`` proves ``{K PSD : A(K) = b [, 1^T K 1 = 0] [, tr K <= t]}`` empty:
    ``(passed, lambda_min, b^T z)`` with ``z`` scaled to ``||A^*(z)||_F = 1``.

    For every feasible ``K``: ``b^T z = <A^*(z), K> >= lambda_min tr K`` (with centering
    ``K = Q Q^T K Q Q^T``, ``Q`` a basis of ``1^perp``, so ``lambda_min`` is that of
    ``Q^T A^*(z) Q``). Hence ``b^T z + T max(0, -lambda_min) < 0`` contradicts feasibility for a
    bound ``tr K <= T`` (the trace constraint or the bound implied by the rows); without one
    ``lambda_min >= -FARKAS_EIG_TOL`` (rounding) and ``b^T z < 0`` is required.
    """
    S = d.A.pairs.adjoint(np.asarray(z, float)).toarray()
    nrm = float(np.linalg.norm(S))
    if not nrm > 0 or not np.all(np.isfinite(S)):
        return False, math.nan, math.nan
    S /= nrm
    btz = float(d.b @ z) / nrm
    if d.centered:
        Q = complement_basis(d.n)
        S = Q.T @ S @ Q
    lam = float(np.linalg.eigvalsh(S)[0]) if S.size else 0.0
    margin = FARKAS_MARGIN * float(np.linalg.norm(d.b)) * float(np.linalg.norm(z)) / nrm
    T = d.trace_bound if d.trace_bound is not None else d.implied_trace_bound
    if T is not None:
        ok = btz + T * max(0.0, -lam) < -margin
    else:
        ok = lam >= -FARKAS_EIG_TOL and btz < -margin
    return bool(ok), lam, btz


def phase_one_farkas(d: LRData, time_limit: float | None = None,
                     seed: int | None = 0) -> np.ndarray | None:
    """A candidate Farkas vector from a phase-one SDP (to be checked by :func:`farkas_check`),
    or None (centered data, or the phase-one solve did not certify).

    With ``K0 = c I`` (interior; ``c n = t / 2`` under a trace bound ``tr K <= t``, else
    ``c = 1``) and ``r = b - A(K0)``, the phase-one problem in ``(K, tau)``, written as one PSD
    matrix ``X = [[K, *], [*, tau]]`` of order n + 1 (the off-diagonal part is free, so
    ``X PSD`` says ``K PSD, tau >= 0``), is

        max tau   s.t.   A(K) - tau r = A(K0),   X PSD   [, tr X <= t + 1],

    strictly feasible at ``(K0, 0)``. ``tau = 1`` (with ``tr K <= t``) is a point of the
    original set, so an infeasible set has ``tau* < 1``. Its dual, ``min A(K0)^T y [+ (t+1)
    mu]`` s.t. ``A^*(y) (+ mu I) PSD`` and ``r^T y <= -1 (+ mu)``, gives ``b^T y = r^T y +
    A(K0)^T y <= tau* - 1 < 0`` with ``A^*(y)`` PSD (up to ``mu``): the vector ``z = y`` of
    :func:`farkas_check`, which decides. The engine's own multipliers on the original problem
    need not converge to such a ray within a time budget (an infeasible problem has no
    optimal multipliers); this problem has them.

    Centering (``1^T K 1 = 0``) is dropped when every row annihilates ``1`` (``A_r 1 = 0``:
    distance rows): then ``K`` feasible gives ``J K J`` feasible and centered, so both sets are
    empty together (and ``farkas_check`` checks ``z`` on ``1^perp``). Other centered data: None.
    """
    n, A = d.n, d.A
    if not A.m or (d.centered and not _annihilate_ones(A)):
        return None
    t = d.trace_bound
    c = 1.0 if t is None else t / (2.0 * n)
    diag = A.ii == A.jj
    AK0 = c * np.bincount(A.rows[diag], weights=A.vals[diag], minlength=A.m)
    r = d.b - AK0
    rows = SparseRows(np.r_[A.rows, np.arange(A.m)], np.r_[A.ii, np.full(A.m, n)],
                      np.r_[A.jj, np.full(A.m, n)], np.r_[A.vals, -r], A.m, n + 1)
    obj = SymOp(n + 1, sparse=sp.csr_array(([1.0], ([n], [n])), shape=(n + 1, n + 1)))
    res = solve_low_rank_sdp(obj, rows, AK0, sense="max",
                             trace_bound=None if t is None else t + 1.0, tol=PHASE_ONE_TOL,
                             time_limit=time_limit, seed=seed)
    if res.status != OPTIMAL or res.y is None or not res.objective < 1.0:
        return None
    return np.asarray(res.y, dtype=float)


def _annihilate_ones(A: SparseRows) -> bool:
    """Whether every row matrix ``A_r`` (symmetric part) has ``A_r 1 = 0``."""
    key = np.r_[A.rows * A.n + A.ii, A.rows * A.n + A.jj]
    sums = np.bincount(key, weights=np.r_[A.vals, A.vals] / 2.0, minlength=A.m * A.n)
    scale = max(float(np.max(np.abs(A.vals), initial=0.0)), 1e-300)
    return bool(np.max(np.abs(sums), initial=0.0) <= 1e-12 * scale)


def farkas_multipliers(d: LRData, z: np.ndarray, lam: float) -> dict[int, Any]:
    """The Farkas vector ``z`` as multipliers of the user's constraints (CVXPY's convention,
    ``gate_claims``): ``z`` on the rows, ``mu = max(0, -lambda_min(A^*(z)))`` on the trace
    constraint when there is one, and the PSD multiplier ``A^*(z) + mu I`` (the centering
    duals moving it onto ``1^perp``), so that their weighted constraint sum is the constant
    ``-b^T z - mu t > 0`` (``route_duals`` with a zero objective, maximize)."""
    zero = LRData(**{**d.__dict__, "C": SymOp(d.n), "sense": "max"})
    mu = 0.0
    if d.trace_con is not None:
        nrm = float(np.linalg.norm(d.A.pairs.adjoint(z).toarray()))
        mu = max(0.0, -lam) * nrm * (1.0 + 1e-9)
    return route_duals(zero, z, mu)


def ray_check(d: LRData, D: np.ndarray) -> tuple[bool, float, float]:
    """Whether the PSD matrix ``D`` is a recession direction along which the objective improves:
    ``(passed, ||A(D)||_inf / tr D, gain)``, ``gain = sgn <C, D> / (||C||_F tr D)`` (``sgn`` +1
    when maximizing). Accepted with ``||A(D)|| <= RAY_TOL * 10 max_r ||A_r||`` (centering:
    ``|1^T D 1| / n`` alike), no trace bound, and ``gain >= RAY_GAIN``."""
    tr = float(np.trace(D))
    if d.trace_bound is not None or d.implied_trace_bound is not None or not tr > 0:
        return False, math.nan, math.nan
    M = sp.coo_array((d.A.vals, (d.A.rows, d.A.ii * d.n + d.A.jj)), shape=(d.A.m, d.n * d.n))
    res = np.abs(M.tocsr() @ D.ravel()) / tr if d.A.m else np.zeros(0)
    viol = float(np.max(res, initial=0.0))
    if d.centered:
        viol = max(viol, abs(float(D.sum())) / (d.n * tr))
    sgn = 1.0 if d.sense == "max" else -1.0
    cn = d.C.fro_norm()
    gain = sgn * float(np.sum(d.C.to_dense() * D)) / (max(cn, 1e-300) * tr)
    anorm = float(np.max(d.A.row_norms(), initial=1.0))
    ok = viol <= RAY_TOL * 10 * anorm and gain >= RAY_GAIN
    return bool(ok), viol, gain


def decide_status(d: LRData, res: Any, kw: dict, left: float | None,
                   say: Any = None) -> RouteResult | None:
    """``infeasible`` (a Farkas vector from the engine's diverging multipliers, else, when the
    engine found no feasible point, from :func:`phase_one_farkas`) or ``unbounded``
    (a certified recession direction and a feasible point) when the engine ended uncertified;
    None when neither is proven. ``say(message)`` (the progress printer's log) reports the
    checks."""
    sgn = 1.0 if d.sense == "max" else -1.0  # engine's y: A^*(y) - C PSD (max), C - A^*(y) (min)
    candidates = []
    if d.A.m and res.y is not None and np.any(res.y):
        candidates.append(("the multipliers", lambda: sgn * np.asarray(res.y, float)))
    if res.primal_residual > kw.get("tol", 1e-5):  # no feasible point found: phase one,
        # for at most as long as the engine ran (2 s at least), within the user's time limit
        cap = max(PHASE_ONE_MIN_SECONDS, float(res.solve_time))
        cap = cap if left is None else min(cap, max(left, 0.0))
        candidates.append(("a phase-one solve",
                           lambda: phase_one_farkas(d, cap, kw.get("seed", 0))))
    for source, make in candidates:
        if left is not None and left <= 0 and source != "the multipliers":
            break
        z = make()
        if z is None:
            continue
        ok, lam, btz = farkas_check(d, z)
        if say is not None:
            say(f"Farkas check on {source}: lambda_min {lam:.3g}, b^T z {btz:.3g} -> "
                f"{'infeasible' if ok else 'not proven'}")
        if ok:
            return RouteResult.no_point(
                cp.INFEASIBLE, _sense(d), backend="low_rank_sdp", solve_time=res.solve_time,
                history=res.history, status_check=("farkas", ok, btz, 0.0),
                farkas=farkas_multipliers(d, z, lam),
                extra={"farkas": z, "farkas_source": source, "farkas_lambda_min": lam,
                       "farkas_btz": btz, "engine_status": res.status})
    if (d.trace_bound is not None or d.implied_trace_bound is not None
            or res.primal_residual > kw.get("tol", 1e-5)):
        return None  # no ray possible, or no feasible point shown
    if left is not None and left <= 0:
        return None
    ray = solve_low_rank_sdp(d.C, d.A, np.zeros(d.A.m), sense=d.sense, trace_bound=1.0,
                             centered=d.centered, tol=RAY_TOL, time_limit=left,
                             seed=kw.get("seed", 0))
    if ray.status != OPTIMAL:
        return None
    D = ray.Y @ ray.Y.T
    ok, viol, gain = ray_check(d, D)
    if say is not None:
        say(f"recession direction: |A(D)| {viol:.3g}, gain {gain:.3g} -> "
            f"{'unbounded' if ok else 'not proven'}")
    if not ok:
        return None
    return RouteResult.no_point(
        cp.UNBOUNDED, _sense(d), backend="low_rank_sdp", solve_time=res.solve_time,
        history=res.history, status_check=("recession_ray", ok, viol, RAY_TOL * 10),
        ray=({d.K.id: res.Y @ res.Y.T}, {d.K.id: D}),
        extra={"ray": ray.Y, "ray_violation": viol, "ray_gain": gain,
               "primal_residual": res.primal_residual, "engine_status": res.status})


def _sense(d: LRData) -> int:
    """+1 minimize, -1 maximize (``RouteResult.no_point``)."""
    return -1 if d.sense == "max" else 1
