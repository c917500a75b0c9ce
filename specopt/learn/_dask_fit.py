r"""PSDBoost on Dask-backed triplets without a CVXPY problem (no object proportional to |S|
on the CVXPY side, no compilation before the first round).

The learner's SDP (:mod:`specopt.learn.psdboost`)::

    max_{rho, M, xi}  rho - c sum_r xi_r    s.t.  <A_r, M> - rho + xi_r >= 0,  xi >= 0,
                                                  M PSD,  tr M = 1,        c = C / |S|

is handed to :func:`specopt.solvers.mg.solve_spectraplex_lp` as its spectraplex LP directly:
``A`` the :class:`~specopt.solvers.mg.dask_rows.DaskRowOperator` of ``(+1, P), (-1, Q)``, LP
variables ``z = (rho, xi)``, ``G = [-1 | I]`` (two nonzeros a row, built from ``arange``), the
1-slack cut master (``cuts=True``). What stays on the client per row is what the cut master keeps
(a few scalars per row); CVXPY's ``m`` slack variables, its ``m``-row constraint and the
compilation that took minutes at ``|S| = 1e7`` are gone.

The certificate is the solver's: the objective of the returned point (every slack at its hinge
value, the trace exact, so no row is violated) and the Lagrangian bound of the cut master's
multipliers over all rows; ``max_violation`` is measured from the final pass's row activities.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from .._progress import Progress, progress_for, take_current
from ..certificate import Certificate
from ..solvers._status import SolverStatus
from ..solvers.mg import UnboundedProblem, solve_spectraplex_lp
from ..solvers.mg._dask_hinge import SINGLE_MIN_TOL, dask_hinge
from ..solvers.mg._problem import MGOptions
from ..solvers.mg._result import RoundLog
from ..solvers.mg.cuts import BAND_ROWS, CUT_MAX_N, solve_hinge_cuts
from ..solvers.mg.dask_rows import DaskRowOperator, is_dask_array

__all__ = ["PSDBoostDaskFit", "check_triplet_indices", "psdboost_dask", "triplet_z_rows"]

#: route options ``PSDBoostMetric(route_options=...)`` may pass to the direct solve
DIRECT_OPTIONS = ("tol", "max_iters", "time_limit", "max_rank", "columns_per_round",
                  "smoothing", "dense_threshold", "coarse", "band_rows")

#: hinge rows nearest their kink kept in the cut master (``BAND_ROWS`` in memory): a round
#: costs passes over all rows here, so fewer rounds for a larger master pay (|S| = 3e5, D = 100:
#: 27 rounds with 500, 19 with 1500)
DASK_BAND_ROWS = 3 * BAND_ROWS
#: from this many triplets on, the fit starts from the solution on about ``COARSE_ROWS`` of
#: them (every ``s``-th): coarse to fine
COARSE_MIN_ROWS = 4_000_000
#: the coarse level's size
COARSE_ROWS = 500_000
#: the coarse level is solved to this relative gap (or the fit's ``tol`` if larger): its
#: optimum differs from the full data's by the sampling error anyway
COARSE_TOL = 1e-3


@dataclass(frozen=True)
class PSDBoostDaskFit:
    """The metric ``M`` (d x d), the margin ``rho`` and the certificate of a direct Dask fit."""

    M: np.ndarray
    rho: float
    certificate: Certificate


def hinge_lp(m: int, c: float) -> tuple:
    """``(G, c, lb, ub, zlb, zub)`` of PSDBoost's rows ``<A_r, M> - rho + xi_r >= 0`` with
    ``z = (rho, xi)``: ``G = [-1 | I]`` in CSR built directly (no ``m x m`` identity)."""
    indptr = np.arange(0, 2 * m + 1, 2, dtype=np.int64)
    indices = np.empty(2 * m, dtype=np.int64)
    indices[0::2] = 0
    indices[1::2] = np.arange(1, m + 1)
    data = np.tile(np.array([-1.0, 1.0]), m)
    G = sp.csr_array((data, indices, indptr), shape=(m, m + 1))
    cz = np.full(m + 1, -c)
    cz[0] = 1.0
    zlb = np.zeros(m + 1)
    zlb[0] = -np.inf
    return G, cz, np.zeros(m), np.full(m, np.inf), zlb, np.full(m + 1, np.inf)


def psdboost_dask(P: Any, Q: Any, C: float, *, tol: float, verbose: bool = False,
                  options: dict | None = None) -> PSDBoostDaskFit:
    """PSDBoost's SDP (module docstring) on the Dask difference rows ``P`` (a_i - a_k) and ``Q``
    (a_i - a_j), solved by matrix generation's cut master on the operator directly.

    ``C`` is the per-triplet normalized weight (each slack costs ``C / |S|``); ``options``: any of
    :data:`DIRECT_OPTIONS` (others raise ``ValueError`` naming them). A stop at a cap
    (``time_limit``, ``max_iters``, a stall) returns the best feasible point with status
    ``optimal_inaccurate`` and its certified gap, with a ``ConvergenceWarning``."""
    t0 = time.perf_counter()
    opts = dict(options or {})
    bad = sorted(set(opts) - set(DIRECT_OPTIONS))
    if bad:
        raise ValueError(f"route_options {bad} do not apply to a Dask-backed PSDBoost fit "
                         f"(accepted: {', '.join(DIRECT_OPTIONS)})")
    opts.setdefault("tol", tol)
    coarse = opts.pop("coarse", None)
    A = DaskRowOperator([(1.0, P), (-1.0, Q)])
    m, d = A.m, A.n
    # coarse to fine: the solution on every s-th triplet is the start (its own rounds are
    # cheap: s times fewer rows); the certificate is the full data's all the same
    step = _coarse_step(coarse, m, P)
    start, info = None, None
    if step:
        start, info = _coarse_start(P, Q, C, step, opts, bool(verbose))
    cb = progress_for(bool(verbose), "matrix_generation",
                      f"PSDBoostMetric on Dask: {m} triplets in {A.n_blocks} blocks, d={d}, "
                      f"C={C:g}" + (f", from every {step}-th" if step else ""), "round")
    setup = time.perf_counter() - t0
    res = _solve(A, float(C) / m, cb, opts, start=start, t0=t0)
    cert = _certificate(res, m, float(C) / m, setup, time.perf_counter() - t0)
    if info is not None:
        cert.extra["coarse"] = info
    take_current()
    if isinstance(cb, Progress):
        cb.finish(cert)
    if res.status != SolverStatus.OPTIMAL:  # a cap: the point is feasible, the gap is reported
        warnings.warn(f"PSDBoost on Dask stopped ({res.status}) with certified relative gap "
                      f"{cert.gap:.2e} > tol={opts['tol']:g}", ConvergenceWarning, stacklevel=4)
    M = res.X
    return PSDBoostDaskFit(0.5 * (M + M.T), _rho(res), cert)


def _coarse_step(coarse: Any, m: int, P: Any) -> int:
    """The coarse level's step (0: none): option ``coarse`` None (from
    :data:`COARSE_MIN_ROWS` triplets on, about :data:`COARSE_ROWS` of them), True (the same
    at any size), False, or a step >= 2; rows not built from index triples
    (:func:`~specopt.solvers.mg.dask_rows.triplet_rows`) have no coarse level."""
    if coarse is False or getattr(P, "_specopt_keepalive", None) is None:
        return 0
    if coarse is None or coarse is True:
        return max(2, m // COARSE_ROWS) if m >= COARSE_MIN_ROWS or coarse is True else 0
    step = int(coarse)
    if step < 2 or step != coarse:
        raise ValueError(f"route option coarse must be None, True, False or an integer step "
                         f">= 2, got {coarse!r}")
    return step if m >= 2 * step else 0


def _coarse_start(P: Any, Q: Any, C: float, step: int, opts: dict, verbose: bool):
    """The fit on every ``step``-th triplet (same ``C``, each slack weighted ``C / rows``; a
    to :data:`COARSE_TOL`, within a quarter of the time limit, with the default band: its point
    ``(U, theta, (rho,))`` and a summary."""
    from ..solvers.mg.dask_rows import triplet_rows

    t0 = time.perf_counter()
    T, data = P._specopt_keepalive
    Tc = T[::step]
    # blocks as the fine level's, at least 4 of them (both workers busy)
    Pc, Qc = triplet_rows(data, Tc, block_rows=max(1, min(T.chunks[0][0],
                                                          -(-Tc.shape[0] // 4))))
    copts = {k: v for k, v in opts.items() if k not in ("time_limit", "band_rows")}
    copts.update(tol=max(float(opts["tol"]), COARSE_TOL), coarse=False, band_rows=BAND_ROWS)
    copts["time_limit"] = 0.25 * float(opts.get("time_limit", np.inf))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = psdboost_dask(Pc, Qc, C, tol=copts["tol"], options=copts)
    cert = fit.certificate
    info = {"rows": int(Tc.shape[0]), "step": step, "rounds": int(cert.iterations or 0),
            "gap": float(cert.gap), "time": time.perf_counter() - t0}
    if verbose:
        print(f"coarse level: {info['rows']} triplets (every {step}-th), {info['rounds']} "
              f"rounds, gap {info['gap']:.2e}, {info['time']:.1f} s")
    return (cert.extra["U"], cert.extra["theta"], np.array([fit.rho])), info


def _rho(res) -> float:
    """The margin ``rho`` (the first LP variable) of a result."""
    summ = getattr(res, "row_summary", None)
    return float(summ["z_shared"][0] if summ is not None else res.z[0])


def _solve(A: DaskRowOperator, c: float, cb: Any, opts: dict, start: tuple | None = None,
           t0: float | None = None):
    """The cut master on PSDBoost's hinge rows, their structure given (every row a hinge row
    with slack ``xi_r``, weight ``c``; ``rho`` the one shared variable), so nothing scans the
    ``|S|`` rows to find it; ``solve_spectraplex_lp`` when the cut master does not apply
    (``d > CUT_MAX_N``) or calls the problem unbounded (its relaxation's verdict only).
    ``start``: the cut master's first point (:func:`.cuts.solve_hinge_cuts`); ``t0``: the clock's
    start (the time limit and the logged times count from it)."""
    if A.n <= CUT_MAX_N:
        # every row <A_r, M> - rho + xi_r >= 0 with cost -c xi_r: the per-row state stays on
        # the workers (mg._dask_hinge), the client holds nothing proportional to m
        h = dask_hinge(A, c_shared=np.ones(1), zlb=np.array([-np.inf]), zub=np.array([np.inf]),
                       g_shared=np.array([-1.0]), sign=1.0, b=0.0, weight=c, gabs=1.0,
                       trace=1.0, trace_eq=True)
        mg = {k: v for k, v in opts.items() if k not in ("dense_threshold", "band_rows")}
        mg["dense"] = A.n <= opts.get("dense_threshold", 300)
        band_rows = int(opts.get("band_rows", DASK_BAND_ROWS))
        h = replace(h, near_rows=max(band_rows, 1), single=opts["tol"] >= SINGLE_MIN_TOL)
        log = RoundLog(time.perf_counter() if t0 is None else t0, 0.0, cb, ("cuts",))
        try:
            return solve_hinge_cuts(h.prob, MGOptions(callback=cb, **mg), h.hs, log, hinge=h,
                                    start=start, band_rows=band_rows)
        except UnboundedProblem:
            pass
    return solve_spectraplex_lp(A, None, *hinge_lp(A.m, c), trace=1.0, trace_eq=True,
                                master="psd", cuts=True, callback=cb, **opts)


def _certificate(res, m: int, c: float, setup: float, total: float) -> Certificate:
    """The learner's certificate from the solver's result: objective recomputed from ``z``,
    violations from the final pass's row activities (``<A_r, M> - rho + xi_r >= 0``, ``xi >=
    0``, ``tr M = 1``; ``M`` PSD by construction)."""
    z, ra = res.z, res.row_activity
    summ = getattr(res, "row_summary", None)
    if summ is not None:  # the direct cut master: slacks and activities live on the workers
        xsum, rmin, xmin = summ["xi_sum"], min(summ["row_min"], 0.0), min(summ["xi_min"], 0.0)
    else:
        xsum, rmin, xmin = (float(z[1:].sum()), float(ra.min(initial=0.0)),
                            float(z[1:].min(initial=0.0)))
    obj = _rho(res) - c * xsum
    viol = max(0.0, -rmin, -xmin, abs(float(res.theta.sum()) - 1.0))
    gap = abs(res.bound - obj) / max(1.0, abs(obj))
    # as the route maps a stop at a cap (time, rounds, stall): optimal_inaccurate
    status = cp.OPTIMAL if res.status == SolverStatus.OPTIMAL else cp.OPTIMAL_INACCURATE
    return Certificate(
        route="matrix_generation", backend="clarabel-psd-block+eigen (dask cut master)",
        status=status, objective=obj, bound=float(res.bound), gap=gap, max_violation=viol,
        iterations=res.iterations, setup_time=setup, solve_time=res.solve_time,
        total_time=total, history=res.history, is_global=True, relative_violation=viol,
        extra={"theta": res.theta, "U": res.U, "rows": m, "direct": True,
               "solver_status": str(res.status)})


def check_triplet_indices(T: Any, N: int) -> None:
    """``ValueError`` unless ``T`` is a non-empty (n, 3) integer array of indices in ``[0, N)``
    (a Dask array: its smallest and largest entries in one small computation)."""
    if T.ndim != 2 or T.shape[1] != 3 or T.shape[0] == 0:
        raise ValueError("triplets must be a non-empty (n, 3) integer array")
    if not np.issubdtype(T.dtype, np.integer):
        raise ValueError(f"triplet indices must be integers in [0, {N})")
    if is_dask_array(T):
        import dask

        lo, hi = dask.compute(T.min(), T.max())
    else:
        lo, hi = T.min(), T.max()
    if int(lo) < 0 or int(hi) >= N:
        raise ValueError(f"triplet indices must be integers in [0, {N})")


def _blk_z(T, XA) -> np.ndarray:
    """Rows ``(XA_i - XA_k)^2 - (XA_i - XA_j)^2`` of one block of triples."""
    T = np.asarray(T)
    a = XA[T[:, 0]]
    return (a - XA[T[:, 2]]) ** 2 - (a - XA[T[:, 1]]) ** 2


def triplet_z_rows(XA: Any, triplets: Any, block_rows: int | None = None) -> Any:
    """The relative-comparison rows ``z_t`` of :mod:`specopt.learn.relative_comparison` as a
    lazy Dask array (n, p): the projected points ``XA`` (N, p; numpy or Dask) are kept on the
    cluster as one block, the triples as they are chunked (or ``block_rows``, default 100 000
    for a numpy index array); each pass gathers its rows per block on the workers."""
    import dask
    import dask.array as da

    T = triplets if is_dask_array(triplets) else da.from_array(
        np.asarray(triplets), chunks=(block_rows or 100_000, -1))
    if block_rows:
        T = T.rechunk((block_rows, -1))
    T = T.rechunk({1: -1})
    P = XA if is_dask_array(XA) else da.from_array(np.asarray(XA, dtype=float),
                                                     chunks=XA.shape)
    P = P.rechunk(P.shape)
    T, P = dask.persist(T, P)
    key = P.to_delayed().ravel()[0]
    g = dask.delayed(_blk_z, pure=True)
    Z = da.concatenate([da.from_delayed(g(tb, key), shape=(rows, P.shape[1]), dtype=float)
                        for tb, rows in zip(T.to_delayed().ravel(), T.chunks[0], strict=True)],
                       axis=0)
    Z._specopt_keepalive = (T, P)  # the persisted triples and points live as long as Z
    return Z
