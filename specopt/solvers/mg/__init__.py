r"""Matrix (column) generation for linear programs over the spectraplex.

Problem solved (maximization; all data plain arrays, no CVXPY)::

    max_{X, z}  <C, X> + c^T z + offset
    s.t.        lb <= A(X) + G z <= ub            (m rows, A(X)_r = <A_r, X>)
                zlb <= z <= zub
                X PSD,  tr X = t   (or tr X <= t)

Writing ``X = sum_i theta_i u_i u_i^T`` with ``||u_i|| = 1`` and ``theta >= 0``,
``sum theta = t`` (the spectraplex is the convex hull of the unit rank-one matrices) turns the
problem into an LP with one column per unit vector. The *restricted master* keeps finitely many
columns; it lives in one HiGHS model for the whole run (new columns are appended with
``addCols`` and the simplex restarts from the previous basis).

**Pricing and bound.** For any row multipliers ``y`` with the sign of the active side
(``y_r >= 0`` needs ``ub_r < inf``, ``y_r <= 0`` needs ``lb_r > -inf``) weak duality gives::

    OPT <= t * lambda_max(H(y)) + sum_j sup_{z_j in [zlb_j, zub_j]} (c - G^T y)_j z_j
           + sum_r max(y_r ub_r, y_r lb_r) + offset,         H(y) = C - A^*(y)

(with ``max(lambda_max, 0)`` for ``tr X <= t``). This Lagrangian bound is valid every round; the
top eigenvectors of ``H`` at the master duals are the columns with the largest reduced cost
``u^T H u - mu`` (``mu`` = dual of the trace row). The run stops when
``(bound - master) / max(1, |master|) <= tol``.

**Layout.** This front end checks the input (:mod:`._problem`) and dispatches to one master:
:mod:`.lp_master` (HiGHS over rank-one columns), :mod:`.psd_master` (PSD block over the rows)
or :mod:`.cuts` (1-slack cut master for hinge rows); they share :mod:`._block` (the PSD-block
master problem), :mod:`._bound` (eigen-oracle, Lagrangian bound), :mod:`._result` and the data
side :mod:`._operators` / :mod:`.dask_rows` (``A`` kept factored, or in Dask arrays).

**Tailing-off remedies** (measured in ``benchmarks/matrix_generation.py``):
several eigenvectors per round (``columns_per_round``), Wentges dual smoothing
(``smoothing``: price at ``alpha * y_best + (1 - alpha) * y_master``, falling back to the master
duals on a mispricing), pruning of columns that stayed at zero for ``prune_after`` rounds, and
aggregation of all columns into the eigenvectors of the current ``X`` when the master grows past
``max_columns``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from .._status import SolverStatus
from ._bound import farkas_bound, lagrangian_bound
from ._operators import (
    DenseOperator,
    FactoredOperator,
    StackedOperator,
    SymOperator,
    sum_operators,
    triplet_operator,
)
from ._problem import MGOptions, SpectraplexLP, spectraplex_lp
from ._result import MasterInfeasible, MatrixGenerationResult, RoundLog, UnboundedProblem
from .cuts import dispatch as _cut_master
from .dask_rows import is_dask_backed
from .lp_master import phase_one, solve_lp
from .psd_master import solve_psd

__all__ = [
    "DenseOperator",
    "FactoredOperator",
    "MasterInfeasible",
    "MatrixGenerationResult",
    "SpectraplexLP",
    "StackedOperator",
    "SymOperator",
    "UnboundedProblem",
    "farkas_bound",
    "lagrangian_bound",
    "phase_one",
    "solve_spectraplex_lp",
    "sum_operators",
    "triplet_operator",
]


def solve_spectraplex_lp(
    A: SymOperator,
    C: SymOperator | np.ndarray | None = None,
    G: sp.spmatrix | np.ndarray | None = None,
    c: np.ndarray | None = None,
    lb: np.ndarray | None = None,
    ub: np.ndarray | None = None,
    zlb: np.ndarray | None = None,
    zub: np.ndarray | None = None,
    *,
    trace: float = 1.0,
    trace_eq: bool = True,
    offset: float = 0.0,
    tol: float = 1e-6,
    max_iters: int = 2000,
    time_limit: float = np.inf,
    columns_per_round: int = 5,
    smoothing: float = 0.5,
    prune_after: int = 0,
    max_columns: int | None = None,
    dense_threshold: int = 300,
    init_columns: np.ndarray | None = None,
    big_m: float = 1e4,
    master: str = "lp",
    max_rank: int = 30,
    row_selection: int = 500,
    row_band: float = 1e-2,
    max_join: float = np.inf,
    resolve_rows: bool = False,
    warm_start: bool = True,
    full_space: int = 0,
    pricing: str = "eig",
    verbose: bool = False,
    callback: Callable[..., None] | None = None,
    cuts: str | bool = "auto",
) -> MatrixGenerationResult:
    r"""Column generation for ``max <C,X> + c^T z`` over the spectraplex (see module docstring).

    Parameters
    ----------
    A : SymOperator with ``m`` rows (``<A_r, X>``); C : objective matrix (dense (n, n) array or a
    1-row operator; None means 0); G : (m, p) coefficients of the LP variables ``z``; c : (p,)
    objective of ``z``; lb, ub : row bounds (``+-inf`` allowed); zlb, zub : bounds of ``z``.
    trace, trace_eq : ``tr X == trace`` (True) or ``tr X <= trace``.
    tol : stop when ``(bound - master) / max(1, |master|) <= tol``.
    columns_per_round : eigenvectors priced per round (those with positive reduced cost are added).
    smoothing : Wentges parameter ``alpha`` in [0, 1) (0 disables stabilization).
    prune_after : delete columns that were zero for this many consecutive rounds (0, default,
        disables: measured to cost rounds, see docs/routes/matrix_generation.md).
    max_columns : aggregate all columns into the eigenvectors of ``X`` beyond this many (None,
        default: never; aggregation was measured to cost rounds as well).
    dense_threshold : use dense ``eigh`` for n <= this, Lanczos (``eigsh``) above.
    master : "lp" (HiGHS over rank-one columns) or "psd" (PSD block over the generated span).
    max_rank : size of the PSD block (it grows beyond when X needs more directions).
    row_selection : with the PSD master and at least this many rows, inactive rows with zero
        multiplier leave the master and return when violated.
    row_band : rows whose slack exceeds ``row_band * max(1, |activity|)`` (and with a zero
        multiplier) leave the working set; a wider band means fewer rows coming back.
    max_join : at most ``max(JOIN_MIN, max_join * rows in the set)`` violated rows (the most
        violated, relative to ``max(1, |activity|)``) join the working set per round (inf,
        default: all of them); the others join later rounds if still violated.
    resolve_rows : re-solve the master until no row outside the working set is violated (the
        exact restricted master every round). False (default): one solve per round; the
        violated rows join the working set for the next round and the LP variables are
        re-optimized for the master's ``X`` (``_polish_z``), so the value used for the gap is
        that of an exactly feasible point (falls back to the exact master if none exists).
    warm_start : start the interior-point PSD-block master of each round from the previous
        round's point in the new block (shifted into the interior) instead of a cold start.
    full_space : PSD row master: for ``n <= full_space`` (0, default: never), once X uses at
        least ``FULL_SPACE_MIN_RANK n`` directions (weight above 1e-5 t; the same number for
        ``FULL_SPACE_STABLE`` rounds, 1 by default) and the gap is below ``FULL_SPACE_GAP``, the
        block becomes the whole space (P = I, no aggregate) and the master is solved exactly on
        its rows (re-solved until no row outside the working set is violated): the restricted
        master is then the SDP itself on those rows, and its duals certify. The round it kicks
        in is ``history["full_space"]``.
    pricing : "eig" (default): the top eigenvectors of ``H(y)`` at the master duals and the
        smoothed point; "gradient": also the top eigenvectors of the dual slack's gradient
        step off the block, ``(I - P P^T) H(y) (I - P P^T)`` (directions the block cannot
        represent; see docs/routes/matrix_generation.md for the measurement).
    cuts : hinge rows (a slack private to the row, in ``[0, inf)``, with negative cost) in the
        1-slack cutting-plane master of :mod:`specopt.solvers.mg.cuts` (PSD master only):
        "auto" (default) from ``cuts.CUT_MIN_ROWS`` hinge rows on or for Dask-backed data,
        True always when there are hinge rows, False never.
    callback : called every round as ``callback(round, objective=master value, bound=best
        bound, gap=rel. gap, violation=None)`` (``specopt._progress.Progress``).
    """
    t0 = time.perf_counter()
    prob = spectraplex_lp(A, C, G, c, lb, ub, zlb, zub, trace, trace_eq, offset)
    if not 0.0 <= smoothing < 1.0:
        raise ValueError("smoothing must be in [0, 1)")
    prob.full  # noqa: B018 - C and A must act on the same n (checked here, before any solve)
    opts = MGOptions(
        tol=tol, max_iters=max_iters, time_limit=time_limit,
        columns_per_round=columns_per_round, smoothing=smoothing, prune_after=prune_after,
        max_columns=max_columns, dense=prob.n <= dense_threshold, init_columns=init_columns,
        big_m=big_m, max_rank=max_rank, row_selection=row_selection, row_band=row_band,
        max_join=max_join, resolve_rows=resolve_rows, warm_start=warm_start,
        full_space=full_space, pricing=pricing, verbose=verbose, callback=callback,
    )
    if pricing not in ("eig", "gradient"):
        raise ValueError(f"pricing must be 'eig' or 'gradient', got {pricing!r}")
    stalled = None
    if master == "psd" and cuts:
        res = _cut_master(prob, opts, RoundLog(t0, offset, callback, ("cuts",)), cuts)
        if res is not None and (res.status != SolverStatus.STALLED or is_dask_backed(prob.A)):
            return res
        # a cut master that stalled short of the gap (no column prices out, no new cut: the
        # aggregated cuts lose the rows' information, C |S| = 1.05 on 17 rows: gap 0.14) hands
        # over to the row master, which needs the rows in memory
        stalled = res
    if master == "psd":
        out = solve_psd(prob, opts, RoundLog(t0, offset, callback))
        if stalled is not None:
            out.history["cut_master_stalled_gap"] = [float(stalled.gap)]
        return out
    if master != "lp":
        raise ValueError(f"master must be 'lp' or 'psd', got {master!r}")
    return solve_lp(prob, opts, RoundLog(t0, offset, callback))
