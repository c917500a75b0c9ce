"""The engine's front end: validate, choose the method (interior point for small ``n``, the
factored method above or after it), convert back to the user's units. No CVXPY here.

Problem (``sense="min"``; ``"max"`` is handled as ``min <-C, K>``)::

    min_K  <C, K>   s.t.   A(K) = b   (m rows, A(K)_r = sum_k a_k K[i_k, j_k], sparse)
                           K PSD,   [1^T K 1 = 0]   [tr K <= t]

(rows flagged by ``ineq`` are ``A_r(K) <= b_r``: the interior point only, with a trace bound;
their multipliers are ``<= 0`` in the bound, their violation ``max(A_r(K) - b_r, 0)``).

Status ``"optimal"`` needs the relative primal residual ``||A(K) - b|| / (1 + ||b||) <= tol``
and the relative gap ``|<C,K> - bound| / (1 + |<C,K>|) <= tol`` with the bound on its proven
side of ``<C, K>`` (within 5e-7 relative) (:mod:`specopt.solvers.sdp._certificate`); without a
trace bound, the relative dual infeasibility and ``|<C,K> - b^T y| / (1 + |<C,K>|)`` both
``<= tol``. Otherwise ``"inaccurate"`` (iteration/time cap reached), or ``"unbounded"`` with a
recession ray (:mod:`specopt.solvers.sdp.recession`) and a feasible point.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from .._jit import numba_loaded, numpy_twins_active, without_numba
from . import ip_sparse
from ._certificate import certify_point, measure, relative_residual
from ._data import INACCURATE, OPTIMAL, LowRankSDPResult, Scaled, SparseRows, SymOp
from .bm import BMOptions, BMState, run_bm
from .bm_diag import diagonal_targets, run_bm_diag
from .recession import feasibility_trace_cap, recession_ray

__all__ = ["IP_MAX_M", "IP_MAX_N", "mm_step_method", "solve_low_rank_sdp"]

#: ``method="auto"`` uses the interior point up to these sizes (matrix side, rows), for single
#: solves and for majorize-minimize steps alike. Measured in benchmarks/low_rank_sdp.py
#: (docs/routes/low_rank_sdp.md); MVE steps on digits kNN graphs: N = 100: interior point 0.07 s
#: per step vs factored 0.3-8.4 s (each certified to 1e-4); N = 400: 2.0 s vs 30+ s.
IP_MAX_N = 1200
IP_MAX_M = 8000
#: rows that fix the diagonal (max-cut) go to the sphere method (:mod:`specopt.solvers.sdp.bm_diag`)
#: from this ``n`` on under ``method="auto"``. Measured (random max-cut graphs, uniform and signed
#: weights, 3 seeds, tol 1e-6, all certified by both, values within 1e-7; load ~15; median s,
#: interior point vs sphere): n = 20: 0.083 vs 0.020; 50: 0.12 vs 0.013; 100: 0.35 vs 0.032;
#: 200: 1.19 vs 0.043; 400: 3.9 vs 0.13; maxG11 (n = 800): 16.8 vs 2.9; maxG51 (1000): 31 vs 2.7
DIAG_MIN_N = 20


#: Below these sizes (matrix side, nonzeros of the rows) a process that has not imported numba
#: yet solves with the kernels' NumPy twins and the interior point (no sphere method): numba's
#: start-up (0.3 s import + 0.2-0.4 s loading the cached kernels, idle machine) would be most of
#: the solve. Measured (benchmarks/low_rank_auto.py's families, fresh processes, load ~1): the
#: NumPy Schur complement costs 1-5x the compiled one, a few ms per step at these sizes.
JIT_FREE_MAX_N = 80
JIT_FREE_MAX_NNZ = 1500


def _jit_free_when_small(solve: Callable[..., LowRankSDPResult]) -> Callable[..., LowRankSDPResult]:
    """Run ``solve`` with NumPy twins (:func:`specopt.solvers._jit.without_numba`) when the
    problem is below ``JIT_FREE_MAX_N`` / ``JIT_FREE_MAX_NNZ`` and numba is not loaded yet."""

    @functools.wraps(solve)
    def wrapper(C: Any, A: SparseRows, *args: Any, **kwargs: Any) -> LowRankSDPResult:
        small = A.n <= JIT_FREE_MAX_N and A.rows.size <= JIT_FREE_MAX_NNZ
        with without_numba(small and not numba_loaded()):
            return solve(C, A, *args, **kwargs)

    return wrapper


#: ... and for majorize-minimize steps (``mm_step_method(mm=True)``: MVE, spectral completion,
#: the iterated route's engine steps), whose objective ``C_0 + s B_t`` is indefinite, so the
#: factored method's complementarity mode (what makes single SDE solves fast there) is off.
#: Measured (MVE, hubs and spokes N = 2000, m ~ 6000, load ~2): factored steps did not finish
#: the first (loose) step in 300 s; interior-point steps did four MM steps in 600 s (6-17 s per
#: interior-point step). N = 5000 (m ~ 15000) stays on the factored method (~60 s per
#: interior-point step: over an hour per fit).
MM_IP_MAX_N = 2500
MM_IP_MAX_M = 12000


def mm_step_method(method: str, n: int, m: int, mm: bool = False) -> str:
    """The solver of one SDP (or, ``mm=True``, of a majorize-minimize step): ``"ip"`` or
    ``"bm"`` (``method="auto"``: by size, ``IP_MAX_N`` / ``IP_MAX_M``, for MM steps
    ``MM_IP_MAX_N`` / ``MM_IP_MAX_M``)."""
    if method not in ("auto", "ip", "bm"):
        raise ValueError(f"method must be auto, ip or bm, got {method!r}")
    if method != "auto":
        return method
    max_n, max_m = (MM_IP_MAX_N, MM_IP_MAX_M) if mm else (IP_MAX_N, IP_MAX_M)
    return "ip" if n <= max_n and m <= max_m else "bm"


def _without_empty_rows(solve: Callable[..., LowRankSDPResult]
                        ) -> Callable[..., LowRankSDPResult]:
    """Run ``solve`` without the rows that are identically zero with ``b = 0`` (``0 = 0``: a
    masked matrix constraint ``cp.multiply(M, G) == M * D`` has one per zero of ``M``), or
    ``b >= 0`` on an inequality row (``0 <= b``); their multipliers are 0. Each would be a row
    of the interior point's Schur complement (the masked MVE rows at N = 30: 900 rows instead
    of 70)."""

    @functools.wraps(solve)
    def wrapper(C: Any, A: SparseRows, b: np.ndarray, *args: Any, **kwargs: Any
                ) -> LowRankSDPResult:
        b = np.asarray(b, dtype=float).ravel()
        if not A.m or b.size != A.m:
            return solve(C, A, b, *args, **kwargs)
        keep = A.row_norms() > 0
        ineq = kwargs.get("ineq")
        le = np.zeros(A.m, bool) if ineq is None else np.asarray(ineq, dtype=bool).ravel()
        if le.size != A.m:  # (the solve reports it)
            return solve(C, A, b, *args, **kwargs)
        trivial = ~keep & ((b == 0) | (le & (b > 0)))  # 0 = 0, 0 <= b
        if keep.all() or not np.all(trivial[~keep]):  # (0 = b != 0, 0 <= b < 0: reported)
            return solve(C, A, b, *args, **kwargs)
        if ineq is not None:
            kwargs["ineq"] = le[keep]
        if kwargs.get("y0") is not None:
            kwargs["y0"] = np.asarray(kwargs["y0"], dtype=float).ravel()[keep]
        res = solve(C, A.subset(keep), b[keep], *args, **kwargs)
        y = np.zeros(A.m)
        y[keep] = res.y
        res.y = y
        return res

    return wrapper


@_without_empty_rows
@_jit_free_when_small
def solve_low_rank_sdp(
    C: SymOp | np.ndarray | sp.sparray,
    A: SparseRows,
    b: np.ndarray,
    *,
    sense: str = "min",
    trace_bound: float | None = None,
    implied_trace_bound: float | None = None,
    centered: bool = False,
    face: Any = None,
    rank: int | None = None,
    max_rank: int | None = None,
    Y0: np.ndarray | None = None,
    y0: np.ndarray | None = None,
    mu0: float = 0.0,
    sigma0: float | None = None,
    tol: float = 1e-5,
    max_iters: int = 200,
    inner_max_iters: int = 2000,
    time_limit: float | None = None,
    dense_threshold: int = 2500,
    eig_k: int = 4,
    seed: int | None = 0,
    sigma_factor: float = 4.0,
    sigma_max: float = 1e6,
    inner: str = "auto",
    newton_max_iters: int = 100,
    method: str = "auto",
    verbose: bool = False,
    callback: Callable | None = None,
    objective_scale: float = 1.0,
    objective_offset: float = 0.0,
    ip_tol: float | None = None,
    ip_warm: bool = False,
    ip_start_scale: float = 1.0,
    ip_accept: bool = False,
    ip_schur_mixed: bool | None = None,
    ip_max_iters: int | None = None,
    ineq: np.ndarray | None = None,
) -> LowRankSDPResult:
    """Solve ``min/max <C, K> s.t. A(K) = b, K PSD [, 1^T K 1 = 0] [, tr K <= trace_bound]``.

    Parameters
    ----------
    C : the objective matrix (:class:`SymOp`, or a dense / scipy-sparse symmetric array).
    A, b : the rows (:class:`SparseRows`) and right-hand side (length ``A.m``).
    sense : ``"min"`` or ``"max"``.
    trace_bound : ``t`` in the constraint ``tr K <= t`` (None: no such constraint).
    implied_trace_bound : a bound on ``tr K`` valid for every feasible ``K`` that is *not* a
        constraint (e.g. :func:`graph_trace_bound`); used only by the certificate.
    centered : add the centering constraint ``1^T K 1 = 0`` (as ``Y^T 1 = 0``).
    face : a :class:`specopt.solvers.sdp.facial.FaceReduction` (e.g. from
        :func:`~specopt.solvers.sdp.facial.clique_face`): ``Y`` is kept in the face's range
        ``V`` (``K = V Z V^T``), the dual slack is checked as ``V^T S V``, and the bound carries
        the exposing-matrix correction that makes it valid for the original problem
        (:func:`~specopt.solvers.sdp.facial.face_correction`). Needs a trace bound.
    rank, max_rank : initial factor width (default ``min(n, 8)``, or ``Y0``'s) and its cap
        (default ``n``).
    Y0, y0, mu0, sigma0 : warm start (a previous result's ``Y, y, mu, sigma``, user units).
    tol : relative primal residual and relative gap targets (module docstring).
    max_iters, inner_max_iters, time_limit : outer iterations, L-BFGS iterations per outer
        iteration, wall-clock cap in seconds (every stage checks it).
    dense_threshold : dense ``eigh`` (smallest eigenpairs only) of the dual slack for ``n`` up to
        this, Lanczos above (ARPACK stalled for 60 s on the clustered near-zero spectrum of an
        SDE slack at n = 1797 where the dense subset solve takes 0.5 s).
    eig_k : eigenpairs computed per check (and columns added per rank growth at most).
    sigma_factor, sigma_max : penalty growth factor (when the residual did not drop 4x) and cap.
    inner : "lbfgs" (scipy L-BFGS-B), "lbfgs-exact" (L-BFGS with the exact quartic step),
        "newton-exact" (truncated Newton-CG with the exact step), "trust-krylov" / "trust-ncg"
        (scipy's trust regions on exact Hessian-vector products) or "auto" (exact-step L-BFGS
        while ``sigma < 1e3``, where it is cheaper; truncated Newton above, where L-BFGS stalls
        on the penalty's conditioning: measured on SDE swiss rolls; it replaced trust-krylov:
        SDE digits N = 1000, the four outer iterations at ``sigma`` 1.6e3-2.6e4 took 9.0 s
        wall against 33.8 s, load ~4).
    method : "bm" (the Burer-Monteiro augmented Lagrangian, :mod:`specopt.solvers.sdp.bm`),
        "ip" (the sparse-row interior point, :mod:`specopt.solvers.sdp.ip_sparse`, then the
        factored method from its point if the certificate does not close) or "auto" ("ip" for
        ``n <= IP_MAX_N`` and ``m <= IP_MAX_M`` without a warm start: 20-40 dense steps of
        ``O(n^3 + m^3)``; "bm" above or when warm-started).
    callback : called once per outer iteration as ``callback(it, objective=..., gap=...,
        violation=<relative primal residual>)`` (e.g. a :class:`specopt._progress.Progress`).
    objective_scale, objective_offset : the objective shown by ``verbose`` and passed to
        ``callback`` is ``objective_scale * <C, K> + objective_offset`` (the caller's own
        objective when it reached this form by a sign change and a constant).
    ip_tol : the interior point's own stopping tolerance (relative residuals and gap; default
        ``min(1e-7, 0.05 tol)``). Its point is certified to ``tol`` afterwards either way; a
        looser value saves the last steps when ``tol`` is loose (inexact MM steps).
    ip_warm : with ``method="ip"``, ``Y0, y0`` (and ``mu0`` with a ``trace_bound``): the
        interior point starts near them (:func:`~specopt.solvers.sdp.ip_sparse._warm_start`;
        for a majorize-minimize step, whose problem differs from the last only in ``C``), and
        from its cold start when that point does not certify.
    ip_start_scale : multiplies the interior point's cold primal start ``xi I``.
    ip_accept : the interior point stops at the first iterate (of relative error ``<= tol``)
        whose point this solve's certificate already accepts at ``tol`` (checked without the
        repairs: least-squares dual, polish), instead of running on to ``ip_tol``: the same
        claim, fewer steps (majorize-minimize steps).
    ip_schur_mixed : the interior point's Schur complement in float32 with float64 refinement
        (:class:`~specopt.solvers.sdp._schur_solve.SchurSolve`); None: from
        ``_schur_solve.SCHUR_F32_MIN_M`` rows on.
    ip_max_iters : with the interior point: at most this many steps, HKM only (no NT retry), and
        no factored continuation of an uncertified point (its best iterate is returned with its
        certificate, ``inaccurate``): a step that only has to supply the next linearization of
        a majorize-minimize run (:func:`~specopt.solvers.sdp.mm.low_rank_mm`'s cold first step).
    ineq : bool mask of the rows that are ``A_r(K) <= b_r`` (slacks in the interior point;
        needs ``method="ip"`` and ``trace_bound`` or ``implied_trace_bound``, no ``face``).
    """
    t_start = time.perf_counter()
    C, b = _validate(C, A, b, sense, method, inner, trace_bound, face)
    ineq = _inequality_rows(ineq, A, method, trace_bound, implied_trace_bound, face)
    n = A.n
    sgn = 1.0 if sense == "min" else -1.0
    # (read off equality rows only: with inequality rows, the bound comes from the caller)
    fixed_diag = ineq is None and diagonal_targets(A, b) is not None  # tr K fixed: bounded
    t_row = trace_row(A, b) if ineq is None else None  # a row tr K = t: a certificate bound
    if t_row is not None:
        fixed_diag = True
        implied_trace_bound = t_row if implied_trace_bound is None else min(
            implied_trace_bound, t_row)
    if trace_bound is None and implied_trace_bound is None and face is None and not fixed_diag:
        v = recession_ray(C, A, centered, sense)
        if v is not None:
            return _unbounded(C, A, b, v, sense=sense, centered=centered, tol=tol,
                              time_limit=time_limit, seed=seed, verbose=verbose, t_start=t_start,
                              method=method)
    P = Scaled(C, A, b, trace_bound, implied_trace_bound, centered, sgn, face, ineq)
    rng = np.random.default_rng(seed)
    max_rank = n if max_rank is None else max(1, min(int(max_rank), n))
    if face is not None:  # rank(K) <= dim of the face
        max_rank = max(1, min(max_rank, face.dim))
    d = diagonal_targets(P.A, P.b) if not centered and face is None and ineq is None else None
    if d is not None:  # the rows fix the diagonal: tr K = sum(d) for every feasible K
        P.t_cert = float(d.sum()) if P.t_cert is None else min(P.t_cert, float(d.sum()))
    # the sphere method works on a sparse C~ (a dense or low-rank part is made dense: small n)
    sparse_c = (C.U is None and C.dense is None) or n <= 3000
    use_diag = d is not None and trace_bound is None and sparse_c and (
        method == "bm" or (method == "auto" and n >= DIAG_MIN_N and not numpy_twins_active()))
    if use_diag and rank is None and Y0 is None:
        rank = min(max_rank, max(8, math.isqrt(2 * n) // 3 + 1))
    st = _start(P, Y0, y0, mu0, sigma0, rank, max_rank, rng)
    bm_iters = max_iters
    if not use_diag and mm_step_method(method, n, P.m) == "ip" and (
            method == "ip" or Y0 is None):
        ip_cb = None
        if callback is not None:  # IP steps numbered on across the HKM and NT runs
            steps = itertools.count(1)

            def ip_cb(_it: int, **kw: Any) -> None:
                callback(next(steps), **kw)

        shown = (objective_scale, objective_offset)
        ipt = min(1e-7, 0.05 * tol) if ip_tol is None else float(ip_tol)
        # (with a trace bound, its multiplier mu0 too)
        warm = (st.Y, st.y, st.mu) if ip_warm and Y0 is not None and y0 is not None else None
        plan = _IPPlan(tol, ipt, warm, ip_start_scale, ip_accept, ip_schur_mixed, ip_max_iters)
        bm_iters, time_limit = _ip_then(P, st, plan, time_limit, t_start, dense_threshold,
                                        eig_k, rng, verbose, ip_cb, max_rank,
                                        0 if ip_max_iters is not None else max_iters, shown)
    opts = BMOptions(tol=tol, max_iters=bm_iters, inner_max_iters=inner_max_iters, inner=inner,
                     newton_max_iters=newton_max_iters, sigma_factor=sigma_factor,
                     sigma_max=sigma_max, eig_k=eig_k, dense_threshold=dense_threshold,
                     max_rank=max_rank, time_limit=time_limit, t_start=t_start, verbose=verbose,
                     callback=callback, objective_scale=objective_scale,
                     objective_offset=objective_offset,
                     # C <= -c I (SDE/MVU): the certificate is the scaled dual bound, and the
                     # complementarity dual drives the multipliers and the rank near the optimum
                     ls_mode=P.c_margin is not None and P.face is None)
    if use_diag:
        run_bm_diag(P, d, st, opts, rng, r0=rank)
    else:
        run_bm(P, st, opts, rng)
    return _finish(P, C, st, tol, t_start)


def trace_row(A: SparseRows, b: np.ndarray) -> float | None:
    """``t`` with ``tr K = t`` for every feasible ``K``, read off the rows: one row
    ``a tr K = a t`` (every diagonal entry once, one coefficient ``a``, nothing else), or
    single-entry rows ``a_i K_ii = b_i`` that fix every diagonal entry (among other rows: SDPLIB's
    thetaG11/51, whose edge rows come after the diagonal ones); else None."""
    n = A.n
    if A.rows.size < n:
        return None
    counts = np.bincount(A.rows, minlength=A.m)
    single = (counts[A.rows] == 1) & (A.ii == A.jj) & (A.vals != 0)
    if np.count_nonzero(single) >= n:
        fixed = np.full(n, np.nan)
        fixed[A.ii[single]] = b[A.rows[single]] / A.vals[single]
        if np.all(np.isfinite(fixed)) and np.all(fixed >= 0):
            return float(fixed.sum())
    for r in np.flatnonzero(counts == n):
        k = A.rows == r
        ii, jj, v = A.ii[k], A.jj[k], A.vals[k]
        if np.all(ii == jj) and np.unique(ii).size == n and np.all(v == v[0]) and v[0] != 0:
            t = float(b[r] / v[0])
            return t if t >= 0 else None
    return None


def _inequality_rows(ineq: Any, A: SparseRows, method: str, trace_bound: float | None,
                     implied_trace_bound: float | None, face: Any) -> np.ndarray | None:
    """The mask of the rows ``A_r(K) <= b_r`` (None when there are none), checked: the
    interior point takes them (slacks), with a trace bound for the certificate."""
    if ineq is None:
        return None
    ineq = np.asarray(ineq, dtype=bool).ravel()
    if ineq.size != A.m:
        raise ValueError(f"ineq has {ineq.size} entries for {A.m} rows")
    if not ineq.any():
        return None
    if method != "ip":
        raise ValueError("inequality rows need method='ip' (the interior point's slacks)")
    if trace_bound is None and implied_trace_bound is None:
        raise ValueError("inequality rows need a trace bound (trace_bound or "
                         "implied_trace_bound) for the certificate")
    if face is not None:
        raise ValueError("inequality rows are not supported with a face")
    return ineq


def _validate(C: Any, A: SparseRows, b: Any, sense: str, method: str, inner: str,
              trace_bound: float | None, face: Any) -> tuple[SymOp, np.ndarray]:
    """Check the options and shapes; ``C`` as a :class:`SymOp`, ``b`` as a float vector."""
    if method not in ("auto", "bm", "ip"):
        raise ValueError(f"method must be auto, bm or ip, got {method!r}")
    if inner not in ("auto", "lbfgs", "lbfgs-exact", "newton-exact", "trust-krylov", "trust-ncg"):
        raise ValueError("inner must be auto, lbfgs, lbfgs-exact, newton-exact, trust-krylov or "
                         "trust-ncg, "
                         f"got {inner!r}")
    if sense not in ("min", "max"):
        raise ValueError(f"sense must be 'min' or 'max', got {sense!r}")
    n = A.n
    b = np.asarray(b, dtype=float).ravel()
    if b.size != A.m:
        raise ValueError(f"b has {b.size} entries for {A.m} rows")
    if not np.all(np.isfinite(b)):
        raise ValueError("b must be finite")
    if not isinstance(C, SymOp):
        C = SymOp(n, sparse=C) if sp.issparse(C) else SymOp(n, dense=np.asarray(C, dtype=float))
    if C.n != n:
        raise ValueError(f"C is {C.n} x {C.n} but the rows act on {n} x {n} matrices")
    if trace_bound is not None and not trace_bound >= 0:
        raise ValueError(f"trace_bound must be >= 0, got {trace_bound}")
    if face is not None and face.V.shape[0] != n:
        raise ValueError(f"face basis has {face.V.shape[0]} rows for n = {n}")
    return C, b


def _start(P: Scaled, Y0: np.ndarray | None, y0: np.ndarray | None, mu0: float,
           sigma0: float | None, rank: int | None, max_rank: int,
           rng: np.random.Generator) -> BMState:
    """The starting point in solver units: the warm start, or a random ``Y`` of the rows' scale."""
    n = P.n
    if Y0 is not None:
        Y = np.array(Y0, dtype=float, copy=True).reshape(n, -1) / math.sqrt(P.kappa)
        if rank is not None and Y.shape[1] < rank:
            Y = np.c_[Y, 1e-3 * rng.standard_normal((n, rank - Y.shape[1]))]
    else:
        r0 = min(max_rank, rank if rank is not None else min(n, 8))
        Y = rng.standard_normal((n, r0))
        scale = (P.t if P.t is not None else max(1.0, float(np.mean(np.abs(P.b))) if P.m else 1.0)
                 * n / 4)
        Y *= math.sqrt(scale / max(float(np.sum(Y * Y)), 1e-300))
    Y = np.ascontiguousarray(P.project(Y))
    if y0 is not None:
        y = np.asarray(y0, dtype=float).ravel() * P.sense / (P.row_scale * P.gamma)
        if y.size != P.m:
            raise ValueError(f"y0 has {y.size} entries for {P.m} rows")
    else:
        y = np.zeros(P.m)
    return BMState(Y=Y, y=y, mu=float(mu0) / P.gamma,
                   sigma=float(sigma0) if sigma0 is not None else 100.0)


class _IPPlan(NamedTuple):
    """The interior-point stage's settings (:func:`_ip_stage`)."""

    #: the certificate's tolerance
    tol: float
    #: the interior point's own stopping tolerance
    ip_tol: float
    #: its warm start ``(Y, y, mu)`` in solver units (tried first, HKM), or None
    warm: tuple | None
    #: the cold start's scale
    start_scale: float
    #: ``ip_accept``: stop at the first iterate the certificate accepts
    accept: bool
    #: ``ip_schur_mixed``
    schur_mixed: bool | None
    #: ``ip_max_iters``: a step cap (HKM only, no repairs), or None
    max_iters: int | None


def _ip_then(P: Scaled, st: BMState, plan: _IPPlan, time_limit: float | None,
             t_start: float, dense_threshold: int, eig_k: int, rng: np.random.Generator,
             verbose: bool, callback: Callable | None, max_rank: int, max_iters: int,
             shown: tuple[float, float] = (1.0, 0.0)) -> tuple[int, float | None]:
    """The interior point, then what is left for the factored method: returns its iteration
    budget and time limit (0 when the IP point is certified or the time is out)."""
    ip = _ip_stage(P, plan, time_limit, t_start, dense_threshold, eig_k, rng, verbose, callback,
                   shown)
    st.Y, st.y, st.mu, st.lam, st.cert = ip["Y"], ip["y"], ip["mu"], ip["lam"], ip["cert"]
    st.best = (ip["score"], st.Y, st.y, st.mu, st.lam, st.cert)  # before any truncation below
    st.it = ip["iterations"]
    st.hist["ip"] = ip["history"]
    st.hist["gap"].append(st.cert.gap)
    st.hist["primal_residual"].append(ip["res"])
    if ip["optimal"]:
        st.status = OPTIMAL
        return 0, time_limit
    if time_limit is not None and time.perf_counter() - t_start > time_limit:
        return 0, time_limit
    if max_iters <= 0 and ip["res"] <= plan.tol:
        # no factored iterations and the rows met, only the gap short: the IP's point as it
        # ended (the truncation below would only lose row accuracy: S-curve / swiss roll MVE
        # steps at N = 60, residual 2e-6 -> 2e-5 and 5e-7 -> 1e-4). A point off its rows is
        # still cut to its leading part: as majorize-minimize iterates those did better
        # (spiral N = 60: 3.6 s kept on the engine, 31 s with the full point)
        return 0, time_limit
    if time_limit is None:
        # the factored method rarely closes what the IP left open (degenerate SDEs): it gets
        # 20x the IP's time, at least 20 s, unless the caller set a limit
        time_limit = max(20.0, 20.0 * (time.perf_counter() - t_start))
    # continue with the factored method from the IP's point: its leading columns up to the
    # Barvinok-Pataki rank (an optimal K of rank r with r(r+1)/2 <= m + 1 exists), the
    # multipliers already close
    pataki = int(math.isqrt(2 * (P.m + 1))) + 2
    st.Y = np.ascontiguousarray(st.Y[:, : max(1, min(st.Y.shape[1], max_rank, pataki))])
    st.sigma = max(st.sigma, 1e3)
    return max_iters, time_limit


def _ip_stage(P: Scaled, plan: _IPPlan, time_limit: float | None,
              t_start: float, dense_threshold: int, eig_k: int, rng: np.random.Generator,
              verbose: bool, callback: Callable | None,
              shown: tuple[float, float] = (1.0, 0.0)) -> dict:
    """Run :func:`~specopt.solvers.sdp.ip_sparse.solve_sparse_sdp_ip` on the scaled problem and
    certify its point exactly as the factored method's (smallest eigenvalue of the dual slack at
    the IP's ``y``, the bound, the residual of the returned factor; with ``ip_accept`` at the
    iterates within ``tol``, stopping at the first certified one).

    HKM direction first; when its point is not certified, the NT direction from scratch (on the
    degenerate swiss-roll SDEs NT kept long steps where HKM stalled; on well-posed ones HKM needs
    fewer steps: digits N = 300, 18 vs 73) and the better certificate is kept. A point that is
    nearly feasible gets Gauss-Newton steps onto the rows (a slightly infeasible point can have
    an objective beyond the proven bound). ``shown``: the caller's ``(objective_scale,
    objective_offset)`` for the verbose lines and the callback; ``plan``: the settings (the warm
    start tried first, HKM; then the cold starts as above)."""
    tol, ip_tol, warm, start_scale, early, mixed, ip_max = plan
    best: dict | None = None
    C_dense = P.C.to_dense()
    taken: list[dict] = []

    def accept(Y: np.ndarray, y: np.ndarray, mu: float) -> bool:
        # the certificate as below, without its repairs (cheap: one smallest-eigenvalue solve)
        out = certify_point(P, np.ascontiguousarray(Y), y, mu, tol, dense_threshold, eig_k,
                            rng, out_of_time=lambda: True)
        if out["optimal"]:
            taken.append(out)
        return bool(out["optimal"])
    kinds = ("hkm",) if ip_max is not None else ("hkm", "nt")
    for kind in (("warm",) if warm is not None else ()) + kinds:
        left = None if time_limit is None else time_limit - (time.perf_counter() - t_start)
        if left is not None and left <= 0:
            if best is not None:
                break
            left = 0.0  # out of time before the first direction: one IP step, not no point
        ipr = ip_sparse.solve_sparse_sdp_ip(C_dense, P.A.rows, P.A.ii, P.A.jj, P.A.vals, P.b,
                                            centered=P.centered, trace_bound=P.t,
                                            tol=ip_tol, direction_kind=kind.replace(
                                                "warm", "hkm"),
                                            warm=warm if kind == "warm" else None,
                                            start_scale=start_scale,
                                            time_limit=left, face=P.V, verbose=verbose,
                                            callback=callback,
                                            objective_scale=shown[0] * P.user_objective(1.0),
                                            objective_offset=shown[1],
                                            accept=accept if early else None, accept_err=tol,
                                            schur_mixed=mixed,
                                            max_iters=300 if ip_max is None else ip_max,
                                            ineq=P.ineq)
        out = taken.pop() if ipr.accepted else certify_point(
            P, np.ascontiguousarray(ipr.Y), ipr.y, ipr.mu, tol, dense_threshold, eig_k, rng,
            out_of_time=lambda: ip_max is not None or (  # a capped step: no repairs
                time_limit is not None and time.perf_counter() - t_start > time_limit))
        out.update(iterations=ipr.iterations + (best["iterations"] if best else 0),
                   history=ipr.history)
        if verbose:
            print(f"[sdp] interior point ({kind}): {ipr.iterations} steps, res "
                  f"{out['res']:.2e} lam_min {out['lam']:.2e} gap {out['cert'].gap:.2e} -> "
                  f"{'certified' if out['optimal'] else 'not certified'}")
        if best is None or out["optimal"] or out["score"] < best["score"]:
            best = out
        if best["optimal"]:
            break
    return best


def _finish(P: Scaled, C: SymOp, st: BMState, tol: float, t_start: float) -> LowRankSDPResult:
    """The best point (when the method ended uncertified on a worse one: penalty growth on
    degenerate problems can drift), certified as it is, in the user's units."""
    Y, y, mu, lam, cert = st.Y, st.y, st.mu, st.lam, st.cert
    if st.status != OPTIMAL and st.best is not None and cert is not None:
        if st.best[0] < max(relative_residual(P, Y), cert.gap):
            _, Y, y, mu, lam, cert = st.best
        _, _, cert, ok = measure(P, Y, y, mu, lam, tol)
        if ok:
            st.status = OPTIMAL
    Yu = Y * math.sqrt(P.kappa)
    r = P.residual(Y)
    return LowRankSDPResult(
        Y=Yu,
        y=y * P.row_scale * P.gamma * P.sense,
        mu=mu * P.gamma,
        objective=float(np.sum(C.matmat(Yu) * Yu)),
        bound=None if cert is None or cert.bound is None else P.user_objective(cert.bound),
        gap=cert.gap if cert else math.inf,
        dual_value=P.user_objective(cert.dual if cert else 0.0),
        lambda_min=lam * P.gamma,
        dual_infeasibility=cert.dinf if cert else math.inf,
        primal_residual=float(np.linalg.norm(r)) / (1.0 + float(np.linalg.norm(P.b))),
        max_abs_residual=float(np.max(np.abs(r / P.row_scale * P.kappa))) if r.size else 0.0,
        status=st.status,
        iterations=st.it,
        inner_iterations=st.inner_total,
        rank=Y.shape[1],
        sigma=st.sigma,
        trace_bound_used=None if P.t_cert is None else P.t_cert * P.kappa,
        solve_time=time.perf_counter() - t_start,
        history=st.hist,
        rank_growths=st.growths,
    )


def _unbounded(C: SymOp, A: SparseRows, b: np.ndarray, v: np.ndarray, *, sense: str,
               centered: bool, tol: float, time_limit: float | None, seed: int | None,
               verbose: bool, t_start: float, method: str) -> LowRankSDPResult:
    """With a recession ray ``v`` (:func:`~specopt.solvers.sdp.recession.recession_ray`):
    unbounded if a feasible point exists. Feasibility is decided by the same problem with
    ``tr K <= T`` added (:func:`~specopt.solvers.sdp.recession.feasibility_trace_cap`; bounded,
    so the interior point certifies it). Status ``"unbounded"`` when that point satisfies the
    rows to ``tol``; else the result of the bounded solve with status ``"inaccurate"``."""
    T = feasibility_trace_cap(A, b)
    if verbose:
        print(f"[sdp] the objective improves without bound along a component of the row graph;"
              f" feasibility check with tr K <= {T:.3g}")
    res = solve_low_rank_sdp(C, A, b, sense=sense, centered=centered, trace_bound=T, tol=tol,
                             time_limit=time_limit, seed=seed, verbose=verbose, method=method)
    res.solve_time = time.perf_counter() - t_start
    res.trace_bound_used = None
    res.bound = None
    if res.primal_residual <= tol:
        res.status = "unbounded"
        res.ray = v
        res.objective = math.inf if sense == "max" else -math.inf
        res.gap = 0.0
    else:
        res.status = INACCURATE
    return res
