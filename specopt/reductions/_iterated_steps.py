"""The iterated-SDP route's MM steps: :class:`StepRunner` solves one linearized subproblem per
call (``runner(Bs) -> point``), on a conic backend (with fallbacks to the other backends and a
polish of inaccurate solves) or on the low-rank SDP engine, and counts what the steps cost."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np
from cvxpy.error import SolverError

from .. import _cvxpy_compat as compat
from ..backends import available_backends, mosek_licensed
from ._iterated_surrogate import Surrogate, center_if_better
from ._low_rank_steps import low_rank_subproblem, substitute_parameters
from .conic_size import default_backend, dense_kkt_dimension, psd_block_sides

#: SCS's tolerances for the MM steps (the route's defaults follow from them)
SCS_EPS = 1e-6


class SubproblemInfeasible(Exception):
    """A convex subproblem (same feasible set as the user's problem) is infeasible; the
    argument is the subproblem's status."""


class SubproblemUnbounded(Exception):
    """A linearized subproblem is unbounded (the majorizer, hence probably the problem); the
    argument is the subproblem's status."""


@dataclass
class BackendState:
    """The backend the steps use (it changes when one fails and another takes over) and the
    record of those changes."""

    backend: str
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    #: options added to the backend's after a retry succeeded (kept for the following steps)
    retry_opts: dict[str, Any] = field(default_factory=dict)
    #: an SCS step still inaccurate after its polish may be re-solved on Clarabel (only when
    #: the default rule chose SCS: a user who names ``solver="SCS"`` gets SCS's answer)
    clarabel_polish: bool = False
    #: the backend an inaccurate step moves to for good, instead of its polish (the several-block
    #: steps that start on SCS, :data:`MULTI_BLOCK_SCS_MAX_ITERS`)
    switch_to: str | None = None
    #: Clarabel solves the LMI form first (``compat.solve_in_place``'s ``lmi_first``): set when
    #: the steps leave the engine because its interior point stalled, a sign of a set without
    #: an interior, where Clarabel's given form ends ``AlmostSolved`` and the LMI form is solved
    #: (swiss roll, ``mve_cost`` N = 60: two conic steps 10.9 + 10.2 s given then LMI, 6.2 +
    #: 5.5 s LMI first, the same point)
    clarabel_lmi_first: bool = False


@dataclass
class StepStats:
    """What the steps cost and how they ended (shown in the certificate's ``extra``)."""

    setup: float | None = None
    solve: float = 0.0
    solves: int = 0
    scs_iters: list[int] = field(default_factory=list)
    scale: float | None = None
    statuses: list[str] = field(default_factory=list)
    inaccurate: int = 0
    polished: int = 0
    tie_solves: int = 0
    tie_time: float = 0.0
    #: engine steps re-solved on the conic backend (hybrid steps)
    replaced: int = 0
    #: the statuses of the solves a stationarity claim rests on
    check_statuses: list[str] = field(default_factory=list)


_GOOD = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE, cp.INFEASIBLE, cp.UNBOUNDED)
_FALLBACK_OPTS = {"SCS": {"eps_abs": SCS_EPS, "eps_rel": SCS_EPS, "max_iters": 20000}}
#: A Clarabel step that fails (NumericalError on feasible sets without an interior: 2-turn
#: spiral kNN graphs, rigid rows) is retried with a larger static regularization of its KKT
#: system (default 1e-8) before any other backend: ``max eigengap(K, 2)`` on the 15-point spiral
#: (``sum(K) == 0``): default Clarabel fails on the first step, the SCS fallback runs > 120 s;
#: 1e-7: 2 steps, 2.0 s, ``stationary_point``. Once a retry succeeds its options stay on.
_CLARABEL_RETRIES = ({"static_regularization_constant": 1e-7},
                     {"static_regularization_constant": 1e-6})


def _retry(prob: cp.Problem, state: BackendState, kw: dict, verbose: bool) -> bool:
    """Retry a failed step on the same backend with the settings of ``_CLARABEL_RETRIES``; True
    (and the settings kept in ``state.retry_opts``) when one ends with a verdict."""
    if state.backend != "CLARABEL":
        return False
    for extra in _CLARABEL_RETRIES:
        if all(state.retry_opts.get(k, 0) >= v for k, v in extra.items()):
            continue  # no stronger than what already failed
        try:
            compat.solve_in_place(prob, state.backend, warm_start=True, verbose=verbose,
                                  lmi_first=state.clarabel_lmi_first, **{**kw, **extra})
        except SolverError:
            continue
        if prob.status in _GOOD:
            state.retry_opts.update(extra)
            return True
    return False


def _solve_with_fallback(prob: cp.Problem, state: BackendState, kw: dict, verbose: bool,
                         others: bool = True) -> float:
    """Solve the subproblem with ``state.backend``; if it raises or ends without a verdict
    (error / inaccurate infeasibility), try the other usable backends (their default settings)
    before raising. A backend that succeeds is kept for the following iterations. Every solve is
    interruptible by Ctrl-C (worker thread, see ``specopt._interrupt``). Returns the compile
    seconds of the successful solve. With ``others=False`` a failure raises at once."""
    first = state.backend
    kw = {**kw, **state.retry_opts}
    compile_time = 0.0
    try:
        compile_time = compat.solve_in_place(prob, first, warm_start=True, verbose=verbose,
                                             lmi_first=state.clarabel_lmi_first, **kw)
        if prob.status in _GOOD or scs_time_limited(prob):  # (the caller moves a cut step)
            return compile_time
        why = f"status {prob.status}"
    except SolverError as exc:
        why = str(exc).splitlines()[0] if str(exc) else "solver error"
    if _retry(prob, state, kw, verbose):
        return compile_time
    if not others:
        raise SolverError(f"{first}: {why}")
    tried = [f"{first}: {why}"]
    for alt in available_backends():
        if alt == first:
            continue
        try:
            compile_time = compat.solve_in_place(prob, alt, verbose=verbose,
                                                 **_FALLBACK_OPTS.get(alt, {}))
        except SolverError as exc:
            tried.append(f"{alt}: {str(exc).splitlines()[0] if str(exc) else 'solver error'}")
            continue
        if prob.status in _GOOD:
            state.backend = alt
            state.fallbacks.append({"from": first, "to": alt, "reason": why})
            return compile_time
        tried.append(f"{alt}: status {prob.status}")
    raise SolverError("iterated_sdp: the convex subproblem failed with every backend ("
                      + "; ".join(tried) + ")")


#: An inner solve flagged inaccurate is re-solved once: Clarabel at these tolerances (its
#: defaults are 1e-8; "AlmostSolved" stalls at a gap of ~2e-8 on unscaled distance rows, and
#: 1e-7 stalls too on some), SCS warm-started from its point with this many times its cap.
_CLARABEL_POLISH = {"tol_gap_abs": 1e-6, "tol_gap_rel": 1e-6, "tol_feas": 1e-6}
#: ... and with a larger static regularization when that is still inaccurate (the relaxation
#: step of the 30-point swiss roll with non-shrink rows: "AlmostSolved" at default settings and
#: at 1e-6 tolerances, solved in 12 iterations with 1e-7)
_CLARABEL_POLISH_REG = {"static_regularization_constant": 1e-7}
_SCS_POLISH_ITERS = 4


#: The conic inner path uses Clarabel while the subproblem's dense KKT estimate
#: (``conic_size.dense_kkt_dimension``) is at most this, SCS above (the one-shot rule's 300 is for
#: one solve; an MM run makes 5-30, and SCS at eps 1e-6 took 223 s on a 16-point eigengap where
#: Clarabel takes ~1 s; a 24-point eigengap (d ~ 900): Clarabel 46 s for 21 solves at load 12).
#: Read on the subproblem, after normNuc(K) of a PSD K became trace(K): spellings agree.
ITERATED_CLARABEL_MAX_DENSE_DIM = 2000



def inner_backend(subproblem: cp.Problem) -> str:
    """The conic backend of the MM steps (``solver=None``): MOSEK when licensed, else Clarabel up
    to ``ITERATED_CLARABEL_MAX_DENSE_DIM``, else the default backend."""
    if not mosek_licensed() and "CLARABEL" in available_backends() \
            and dense_kkt_dimension(subproblem) <= ITERATED_CLARABEL_MAX_DENSE_DIM:
        return "CLARABEL"
    return default_backend(subproblem)


#: MM steps that stay on the conic backend every step (the subproblem is not in the SDP engine's
#: form, e.g. the non-shrink inequality rows ``K_ii + K_jj - 2 K_ij >= d_ij``) and whose
#: subproblem has a single PSD block go to SCS above this dense KKT size instead of Clarabel
#: (N = 45 has 1035, N = 60 1830; N = 30 465 stays on Clarabel). ``nonshrink`` (benchmarks/
#: iterated_sdp.py), CPU s at load 4-5, SCS / Clarabel: swiss N = 45 2.0 (stationary) / 7.2
#: (a step inaccurate after its polish), spiral 45 2.0 / 7.3 (same), digits 60 25 / > 60
#: (Clarabel 4-8 s CPU per step, SCS ~1.5 s); the values agree to 3e-7 where both certify.
#: Not with several PSD blocks (the epigraphs of ``lambda_sum_largest`` in the convex part of
#: ``eigengap``): SCS did not finish ``max eigengap`` on the 24-point swiss roll in 60 s, where
#: Clarabel took 6.6 s.
ITERATED_SCS_SINGLE_BLOCK_MIN_DIM = 1000


#: Conic-only MM steps with several PSD blocks (the epigraphs of the sums of largest eigenvalues
#: in ``eigengap``'s convex part) start on SCS, warm-started, with this iteration cap, and move to
#: Clarabel for good at the first step SCS leaves inaccurate (:class:`BackendState`
#: ``switch_to``). ``max eigengap(K, 2)`` at N = 30 (4 blocks of 30), wall s on Clarabel / SCS:
#: digits 54 / 4.0, spokes 54 / 12.7 (warm-started SCS steps take 0.1 s, Clarabel's 0.6 s, and
#: the runs take 14-79 MM steps); on the swiss roll, whose kNN set has no interior, SCS stays
#: inaccurate (9 s at 20000 iterations, 38 s more in its polish, per step) where Clarabel
#: certifies in 1.6-4 s per step.
MULTI_BLOCK_SCS_MAX_ITERS = 5000


#: Single-block steps that run on SCS by the size rule (``"one block"``) try one step on Clarabel
#: when SCS's last two steps took over ``SCS_PROBE_RATIO`` times Clarabel's predicted step
#: (:func:`clarabel_step_seconds`), and stay there when that step took under ``1 /
#: SCS_PROBE_RATIO`` of SCS's; else every later step is SCS's. The rule's own cases are
#: unchanged (non-shrink rows: SCS ~1.5 s per step, Clarabel 4-8 s at N = 60); ``min mve_cost``
#: with ``<=`` distance rows and a loose trace bound, S-curve N = 45: SCS steps of 1-10 s (up to
#: 34400 iterations, 25 MM steps, 83 s), Clarabel ~1.1 s per step (36 s on Clarabel throughout).
SCS_PROBE_RATIO = 1.5
#: Clarabel's seconds per single-block MM step at dense KKT size 1035 (N = 45; one thread, quiet
#: machine), scaled as its factorization, the size cubed: ~6 s at 1830 (N = 60, measured 4-8 s).
CLARABEL_STEP_SECONDS_1035 = 1.1
#: ... and at least this (a step's fixed costs: small steps of either backend take milliseconds)
CLARABEL_STEP_SECONDS_MIN = 0.1
#: While the probe is undecided, an SCS step stops at this many times Clarabel's predicted step
#: (SCS's ``time_limit_secs``) and the step is solved on Clarabel instead, as the probe: one
#: slow SCS step then costs at most this, not the 3-25 s SCS took on the ``<=`` distance rows
#: (nonexpand, N = 45) before two slow steps moved them to Clarabel.
SCS_STEP_BUDGET_RATIO = 3.0
#: ... and after this many cut steps every later step is Clarabel's
SCS_BUDGET_CUTS = 2


def scs_time_limited(step: cp.Problem) -> bool:
    """Whether SCS stopped the step at its ``time_limit_secs``."""
    info = (step.solver_stats.extra_stats or {}).get("info", {}) \
        if step.solver_stats is not None else {}
    return "time_limit" in str(info.get("status", ""))


def clarabel_step_seconds(subproblem: cp.Problem) -> float:
    """Clarabel's predicted seconds for one single-block MM step
    (``CLARABEL_STEP_SECONDS_1035``, at least ``CLARABEL_STEP_SECONDS_MIN``)."""
    return max(CLARABEL_STEP_SECONDS_MIN,
               CLARABEL_STEP_SECONDS_1035 * (dense_kkt_dimension(subproblem) / 1035.0) ** 3)


@dataclass
class BackendProbe:
    """Measured moves between SCS and Clarabel during single-block SCS steps: one try of
    Clarabel after two slow SCS steps (``SCS_PROBE_RATIO``), and every SCS step capped at
    ``SCS_STEP_BUDGET_RATIO`` times Clarabel's predicted step, a step cut there solved on
    Clarabel (after ``SCS_BUDGET_CUTS`` cuts, every later step). ``opts`` are Clarabel's step
    options; the record says what was measured."""

    opts: dict[str, Any]
    scs_seconds: list[float] = field(default_factory=list)
    clarabel_seconds: float | None = None
    #: Clarabel's predicted step (:func:`clarabel_step_seconds`, read once)
    predicted: float | None = None
    #: the one try of Clarabel was made
    done: bool = False
    #: the steps left SCS for good (Clarabel by measurement, or another backend by a failure)
    settled: bool = False
    #: SCS steps cut at the budget
    cuts: int = 0

    def record(self) -> dict[str, Any]:
        """What was measured: SCS's step seconds, Clarabel's probe step (None: not tried)."""
        return {"scs_seconds": list(self.scs_seconds), "clarabel_seconds": self.clarabel_seconds,
                "clarabel_predicted": self.predicted, "scs_budget_cuts": self.cuts}

    def budget(self, step: cp.Problem) -> float | None:
        """SCS's time limit for the next step (``SCS_STEP_BUDGET_RATIO``), None once settled."""
        if self.settled or not math.isfinite(SCS_STEP_BUDGET_RATIO):
            return None
        if self.predicted is None:
            self.predicted = clarabel_step_seconds(step)
        return SCS_STEP_BUDGET_RATIO * self.predicted

    def cut(self, runner: StepRunner, seconds: float) -> None:
        """An SCS step reached its budget after ``seconds``: the step goes to Clarabel (the
        probe, while not done; SCS's time counts as the budget's, a lower bound of its own);
        at the ``SCS_BUDGET_CUTS``-th cut, every later step too."""
        self.cuts += 1
        self.scs_seconds.append(seconds)
        if self.cuts >= SCS_BUDGET_CUTS:
            self._settle(runner, f"SCS steps reached their budget ({seconds:.2g} s, "
                                 f"{SCS_STEP_BUDGET_RATIO:g}x Clarabel's predicted step) "
                                 f"{self.cuts} times")
        runner.state.backend = "CLARABEL"

    def _settle(self, runner: StepRunner, reason: str) -> None:
        runner.conic_backend, runner.solver_opts = "CLARABEL", dict(self.opts)
        runner.state.fallbacks.append({"from": "SCS", "to": "CLARABEL", "reason": reason})
        self.done = self.settled = True

    def after_step(self, runner: StepRunner, step: cp.Problem, seconds: float) -> None:
        """Read the step's time; switch ``runner`` to Clarabel for one step, or for good, or
        back to SCS."""
        state = runner.state
        if self.settled:
            return
        if state.backend == "SCS":
            if self.done:
                return
            self.scs_seconds.append(seconds)
            last = self.scs_seconds[-2:]
            if self.predicted is None:
                self.predicted = clarabel_step_seconds(step)
            if len(last) == 2 and min(last) > SCS_PROBE_RATIO * self.predicted:
                state.backend = "CLARABEL"  # the next step is the probe
            return
        if state.backend != "CLARABEL":  # moved elsewhere by a failure: no probe
            self.done = self.settled = True
            return
        if not self.done:  # the probe step
            self.clarabel_seconds, self.done = seconds, True
            scs = sum(self.scs_seconds[-2:]) / 2.0
            if seconds * SCS_PROBE_RATIO < scs:
                self._settle(runner, f"measured: Clarabel step {seconds:.2g} s, SCS steps "
                                     f"{scs:.2g} s")
                return
        state.backend = "SCS"  # back: the probe lost, or a cut step's visit


def conic_steps_on_scs(subproblem: cp.Problem, backend: str,
                       user_opts: dict[str, Any]) -> str | None:
    """Whether the conic-only MM steps (no engine steps, no ``solver=``) should run on SCS
    rather than ``backend`` (the default rule's choice), and why: None when Clarabel was not
    chosen, SCS is not installed or a backend option was given (they would be Clarabel's);
    ``"one block"`` when the subproblem has one PSD block of dense KKT size above
    ``ITERATED_SCS_SINGLE_BLOCK_MIN_DIM``; ``"several blocks"`` when it has several (then with
    the switch back to Clarabel, :data:`MULTI_BLOCK_SCS_MAX_ITERS`); else None."""
    if backend != "CLARABEL" or user_opts or "SCS" not in available_backends():
        return None
    blocks = len(psd_block_sides(subproblem))
    if blocks > 1:
        return "several blocks"
    if blocks == 1 and dense_kkt_dimension(subproblem) > ITERATED_SCS_SINGLE_BLOCK_MIN_DIM:
        return "one block"
    return None


def _polish(prob: cp.Problem, state: BackendState, kw: dict) -> bool:
    """Re-solve an inaccurate subproblem (see ``_CLARABEL_POLISH``); True if it is then
    solved to the backend's (polish) tolerance. The inaccurate point stays when it is not."""
    seen = []
    for backend, opts in _polish_tries(prob, state, kw):
        if (backend, opts) in seen:
            continue
        seen.append((backend, opts))
        try:
            compat.solve_in_place(prob, backend, warm_start=True, verbose=False,
                                  lmi_first=state.clarabel_lmi_first, **opts)
        except SolverError:
            continue
        if prob.status == cp.OPTIMAL:
            return True
    return False


def _polish_tries(prob: cp.Problem, state: BackendState, kw: dict
                  ) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(backend, options)`` of the polish's re-solves, in order. Clarabel: its polish
    tolerances, a larger static regularization, both. SCS: warm-started with more iterations;
    then, when the default rule chose SCS (``state.clarabel_polish``) and Clarabel takes the
    subproblem's size (``ITERATED_CLARABEL_MAX_DENSE_DIM``), Clarabel at its polish tolerances
    and with the regularization (the single-block steps that run on SCS by
    ``conic_steps_on_scs``: a 10-point helix with non-shrink rows stayed inaccurate on SCS after
    80000 iterations). Generated lazily: the size check only once SCS has failed."""
    if state.backend == "CLARABEL":
        base = {**kw, **state.retry_opts}
        yield from (("CLARABEL", {**base, **_CLARABEL_POLISH}),
                    ("CLARABEL", {**base, **_CLARABEL_POLISH_REG}),
                    ("CLARABEL", {**base, **_CLARABEL_POLISH, **_CLARABEL_POLISH_REG}))
    elif state.backend == "SCS":
        yield "SCS", {**kw, "max_iters": _SCS_POLISH_ITERS * int(kw.get("max_iters", 20000))}
        if state.clarabel_polish and "CLARABEL" in available_backends() \
                and dense_kkt_dimension(prob) <= ITERATED_CLARABEL_MAX_DENSE_DIM:
            yield from (("CLARABEL", _CLARABEL_POLISH),
                        ("CLARABEL", {**_CLARABEL_POLISH, **_CLARABEL_POLISH_REG}))


#: Hybrid steps (:class:`HybridRefiner`): the engine's tolerance for the early, inexact steps,
#: and how many of them at most before the certified phase.
HYBRID_LOOSE_TOL = 1e-4
HYBRID_MAX_LOOSE = 15
#: ... and for the certified ones (unless ``inner_tol`` is given): 10x below the stationarity
#: tolerance these steps back (1e-4). At 1e-6 the interior point stalls at gaps of 2e-6 to
#: 1e-5 on spiral / swiss-roll kNN sets (N = 30-45) and the steps went to Clarabel.
HYBRID_TIGHT_TOL = 1e-5


#: stalled but bounded certified-phase engine steps kept in a row before the conic backend
HYBRID_MAX_BOUNDED = 3
#: the share of the stationarity tolerance a kept step's relative gap may use (the rest is
#: left for the MM decrease the measure is made of)
BOUNDED_GAP_SHARE = 1.0


#: An engine point the run would return must meet its rows to this relative residual, row by
#: row (``max |A(K) - b| / (1 + |b|)``), else the run finishes on the conic backend (two more
#: steps there, see :meth:`HybridRefiner.__call__`). On kNN distance sets without an interior
#: the value moves by about twice the row residual: concave, swiss roll N = 45, the engine's
#: point at 7.5e-4 was 1.45e-3 (relative) below Clarabel's stationary value; the claim's
#: tolerance is 1e-4.
HYBRID_FINISH_ROW_TOL = 1e-5


def _usable(point: dict[str, Any], finishing: bool = False) -> bool:
    """Certified to ``inner_tol``, or a bounded certified-phase engine step; while finishing on
    the conic backend, a conic step only."""
    if finishing and "low_rank" in point:
        return False
    return point.get("status") == cp.OPTIMAL or bool(point.get("bounded"))


def row_residual(engine: Any, K: np.ndarray) -> float:
    """``max_r |A(K)_r - b_r| / (1 + |b_r|)`` over the engine's rows (its data ``d0``; on
    inequality rows the violation ``max(A(K)_r - b_r, 0)``)."""
    A, b = engine.d0.A, np.asarray(engine.d0.b, dtype=float)
    if not A.m:
        return 0.0
    r = np.bincount(A.rows, weights=A.vals * K[A.ii, A.jj], minlength=A.m) - b
    ineq = getattr(engine.d0, "ineq", None)
    if ineq is not None:  # rows A_r(K) <= b_r: their violation only
        r[ineq] = np.maximum(r[ineq], 0.0)
    return float(np.max(np.abs(r) / (1.0 + np.abs(b))))


class HybridRefiner:
    """Inexact MM on the SDP engine with certified last steps (the ``refine`` hook of
    :func:`specopt.solvers.iterated_sdp.iterated_sdp`).

    Phase 0: engine steps at ``loose_tol`` (warm-started interior points; a point certified
    only to ``loose_tol`` is reported ``optimal_inaccurate``, so no claim rests on it). When the
    stationarity measure between two points certified to ``loose_tol`` falls to ``tol`` (10
    ``loose_tol``: the loose steps cannot resolve less) or after ``HYBRID_MAX_LOOSE`` steps,
    phase 1: engine steps at ``tight_tol``. An engine step of phase 1 that does not certify
    switches every following step to the conic backend (phase 2; Clarabel with its retries and
    polish), which certifies near-degenerate sets (swiss-roll and spiral kNN graphs) where the
    interior point stalls. The claim needs the last two steps certified, whichever phase solved
    them."""

    def __init__(self, runner: StepRunner, loose_tol: float, tight_tol: float) -> None:
        self.runner, self.loose_tol, self.tight_tol = runner, float(loose_tol), float(tight_tol)
        self.tol = 10.0 * self.loose_tol
        self.phase = 0
        self.loose_steps = 0
        self.phases: list[int] = []
        #: the factored method's iterations per phase 1 step: none after an interior point
        #: (its stalled point is kept on its bound or the step goes to the conic backend; the
        #: factored continuation never rescued one on these sets, where the dual optimum is not
        #: attained, and it cost 2-3 s per step: normnuc S-curve N = 60 35.3 -> 7.3 s, concave
        #: spiral N = 60 21.7 -> 7.3 s, swiss roll N = 45 10.9 -> 7.1 s, digits and spokes
        #: N = 60-120 unchanged); the factored method's own budget when it is the method
        self.bm_iters: int | None = None
        #: the route's stationarity tolerance (set by the route): what a stalled phase 1 step
        #: must bound (see :meth:`_bounded`)
        self.stat_tol: float | None = None
        self.bounded = 0
        self.bounded_run = 0
        #: off during the tie check (its solves' decreases do not count a gap)
        self.allow_bounded = True
        #: the run finishes on the conic backend (the engine's last point missed
        #: ``HYBRID_FINISH_ROW_TOL``)
        self.finishing = False
        self.finish_row_tol: float | None = HYBRID_FINISH_ROW_TOL
        #: the loop's stationarity measure at the current call (set by the loop)
        self.measure = 0.0

    def engine_step(self, point: dict[str, Any]) -> None:
        """Book an engine step; phase 0 points are marked inaccurate, a phase 1 step that does
        not certify hands the next steps to the conic backend."""
        self.phases.append(self.phase)
        point["row_residual"] = row_residual(self.runner.engine, point["K"][0])
        if self.phase == 0:
            res = point["low_rank"]
            point["loose_ok"] = point["status"] == cp.OPTIMAL or (
                res.gap is not None and max(res.gap, res.primal_residual) <= self.tol)
            point["status"] = cp.OPTIMAL_INACCURATE  # certified to loose_tol at best
            self.loose_steps += 1
            if self.loose_steps >= HYBRID_MAX_LOOSE:
                self._tighten()
        elif point["status"] == cp.OPTIMAL:
            self.bounded_run = 0
        else:
            if self._bounded(point):
                return  # kept: its gap enters the stationarity measure
            self.phase = 2
            self.runner.to_conic("engine step not certified to inner_tol")

    def _bounded(self, point: dict[str, Any]) -> bool:
        """A phase 1 step that stalled short of ``tight_tol`` but is usable: rows satisfied to
        ``tight_tol`` and a proven bound whose gap, relative as the stationarity measure
        (``/(1 + |value|)``), is at most half the stationarity tolerance (the other half is
        left for the MM decrease the measure is made of). Its gap (value minus bound, in
        minimization form; negative when the rows' residual put the value below the bound) is
        stored as ``point["gap_abs"]``; the MM loop subtracts it from the step's majorizer
        value, so the measure stays a proven upper bound of the decrease. At most
        ``HYBRID_MAX_BOUNDED`` in a row: then the steps go to the conic backend as before."""
        res = point["low_rank"]
        if not self._can_finish():
            # without the conic finish a kept step's value is not the conic one (see
            # ``HYBRID_FINISH_ROW_TOL``): the stall hands over to the conic backend as before
            return False
        if not self.allow_bounded or res.bound is None or not math.isfinite(res.gap) \
                or self.stat_tol is None \
                or res.primal_residual > self.tight_tol \
                or self.bounded_run >= HYBRID_MAX_BOUNDED:
            return False
        # signed: a value below the proven bound (rows met only to ``tight_tol`` on a set
        # without an interior) raises the majorizer's certified minimum to the bound itself
        gap = float(res.objective) - float(res.bound)
        if self.runner.engine.d0.sense == "max":
            gap = -gap  # minimization form, as the loop's values
        if gap / (1.0 + abs(float(point["objective"]))) > BOUNDED_GAP_SHARE * self.stat_tol:
            return False
        point["gap_abs"] = gap
        point["bounded"] = True
        self.bounded_run += 1
        self.bounded += 1
        return True

    def _can_finish(self) -> bool:
        """The conic finish is on and its backend is Clarabel (above its size rule the conic
        backend is SCS: spokes N = 60, 2.9 s CPU on certified engine steps, ran over 170 s
        with an SCS finish)."""
        return self.finish_row_tol is not None and self.runner.conic_backend == "CLARABEL"

    def _tighten(self) -> None:
        self.phase = 1
        engine = self.runner.engine
        engine.tol = self.tight_tol
        engine.opts["max_iters"] = self.bm_iters

    def __call__(self, prev_point: Any, point: Any) -> bool:
        """Called when the measure is small: True (go on) while the two points are not both
        certified and a more accurate phase is left."""
        cur_ok = _usable(point, self.finishing)
        if cur_ok and prev_point is not None and _usable(prev_point, self.finishing):
            if self._can_finish() and "low_rank" in prev_point \
                    and prev_point["row_residual"] > self.finish_row_tol \
                    and (self.stat_tol is None or self.measure <= self.stat_tol):
                # (only when the run would stop here: between, the engine steps go on)
                # the point to return meets its rows too loosely for its value to be the
                # conic backend's: the last steps on that backend (MM from this point, the
                # returned point and the one certifying it both conic)
                self.finishing = True
                self.phase = 2
                self.runner.to_conic(f"finish: engine point rows at "
                                     f"{prev_point['row_residual']:.1e} relative")
                return True
            # certified pair; a bounded step is certified to what the claim needs (its gap is
            # in the measure; the returned point's rows hold to ``tight_tol``, the gate checks
            # them again)
            for p in (prev_point, point):
                if p.get("bounded"):
                    p["status"] = cp.OPTIMAL
            return False
        if self.phase == 0:
            # a small measure between points whose gap or residual is above ``tol`` says
            # nothing (the majorizer was built at a point off the feasible set): go on loose
            if point.get("loose_ok") and prev_point is not None and prev_point.get("loose_ok"):
                self._tighten()
            return True
        if "loose_ok" in point:
            # a loose point, the phase tightened after it (HYBRID_MAX_LOOSE): the certified
            # steps are still to come (returning False here ended such runs uncertified)
            return True
        # one more step certifies the pair (a failed engine step was re-solved on the conic
        # backend); a conic step that failed after its polish ends the run
        return cur_ok


class StepRunner:
    """``runner(Bs) -> point``: the subproblem of ``surr`` at the linearizations ``Bs`` (one per
    spectral term), solved; the point is ``{"primal", "K", "objective", "dual", "status"}``
    (objective in minimization form). ``dpp``: ``B`` enters as a parameter (compiled once),
    else as a constant per step. A conic failure hands the steps to the SDP engine where the
    subproblem has its form (unless ``engine_tried``), before the other backends."""

    def __init__(self, surr: Surrogate, backend: str, solver_opts: dict[str, Any], *,
                 dpp: bool, carry_scale: bool, engine_tried: bool, inner_tol: float,
                 inner_method: str) -> None:
        self.surr, self.solver_opts, self.dpp = surr, solver_opts, dpp
        self.carry_scale, self.engine_tried = carry_scale, engine_tried
        self.inner_tol, self.inner_method = inner_tol, inner_method
        self.state = BackendState(backend)
        self.stats = StepStats()
        self.engine: Any = None
        self.conic_backend = backend
        self.refiner: HybridRefiner | None = None
        #: a measured try of Clarabel during single-block SCS steps (:class:`BackendProbe`)
        self.probe: BackendProbe | None = None

    @property
    def backend(self) -> str:
        return self.state.backend

    def use_engine(self, run: Any) -> None:
        """Every following step on the SDP engine (``low_rank_subproblem``'s ``run``)."""
        self.engine = run
        self.state.backend = "low_rank_sdp"

    def use_hybrid(self, run: Any, loose_tol: float = HYBRID_LOOSE_TOL,
                   tight_tol: float | None = None) -> None:
        """Inexact early steps on the SDP engine, certified last steps (see
        :class:`HybridRefiner`): the engine at ``loose_tol`` until :meth:`refine` is called,
        then the engine at ``inner_tol``, then (after an engine step that does not certify) the
        conic backend."""
        self.use_engine(run)
        self.refiner = HybridRefiner(self, loose_tol,
                                     self.inner_tol if tight_tol is None else tight_tol)
        self.refiner.bm_iters = run.opts.get("max_iters")
        run.tol = loose_tol
        if run.method == "ip":  # a step is the interior point's answer as it ends
            run.opts["max_iters"] = 0
            self.refiner.bm_iters = 0

    def to_conic(self, reason: str) -> None:
        """Every following step on the conic backend (``self.conic_backend``; Clarabel on its
        LMI form first, see ``BackendState.clarabel_lmi_first``)."""
        self.engine = None
        self.state.fallbacks.append({"from": "low_rank_sdp", "to": self.conic_backend,
                                     "reason": reason})
        self.state.backend = self.conic_backend
        self.state.clarabel_lmi_first = True

    def _backend_opts(self) -> dict[str, Any]:
        """The options of a step on the current backend: the configured backend's, or after a
        move to another backend, that backend's own defaults (SCS's eps_abs made Clarabel
        raise TypeError)."""
        if self.state.backend == self.conic_backend:
            return dict(self.solver_opts)
        if self.probe is not None and not self.probe.done and self.state.backend == "CLARABEL":
            return dict(self.probe.opts)
        return dict(_FALLBACK_OPTS.get(self.state.backend, {}))

    def step_problem(self, Bs: list[np.ndarray]) -> cp.Problem:
        surr, prob = self.surr, self.surr.problem
        if self.dpp:
            for nd, B in zip(surr.nodes, Bs, strict=True):
                nd.B.value = (0.5 * (B + B.T)).ravel(order="F")
            return prob
        values = {nd.B.id: cp.Constant((0.5 * (B + B.T)).ravel(order="F"))
                  for nd, B in zip(surr.nodes, Bs, strict=True)}
        obj = substitute_parameters(prob.objective.expr, values)
        sense = cp.Minimize if isinstance(prob.objective, cp.Minimize) else cp.Maximize
        return cp.Problem(sense(obj), prob.constraints)

    def _solve_step(self, step: cp.Problem, kw: dict, others: bool = True) -> float:
        with warnings.catch_warnings(record=True) as caught:
            # CVXPY warns "Solution may be inaccurate" about this internal subproblem; an
            # inaccurate step is polished below, and counted in the certificate
            warnings.simplefilter("always")
            compile_time = _solve_with_fallback(step, self.state, kw, False, others)
            state = self.state
            # (an SCS step cut at the probe's budget is left as it is: the caller moves it)
            cut = scs_time_limited(step)
            if not cut and step.status == cp.OPTIMAL_INACCURATE and state.switch_to is not None \
                    and state.backend != state.switch_to:
                # this step and every following one on ``switch_to``, at its own defaults
                state.fallbacks.append({"from": state.backend, "to": state.switch_to,
                                        "reason": "inaccurate step (several PSD blocks)"})
                state.backend, state.switch_to = state.switch_to, None
                kw = self._backend_opts()
                compile_time = _solve_with_fallback(step, state, kw, False, others)
            if not cut and step.status == cp.OPTIMAL_INACCURATE and _polish(step, state, kw):
                self.stats.polished += 1
        for w in caught:
            if "Solution may be inaccurate" not in str(w.message):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return compile_time

    def _engine_step(self, Bs: list[np.ndarray]) -> dict[str, Any]:
        engine, ref = self.engine, self.refiner
        point = engine(Bs)
        self.stats.solves += 1
        self.stats.solve += point["low_rank"].solve_time
        if ref is not None:
            ref.engine_step(point)
        self.stats.statuses.append(point["status"])
        if point["status"] != cp.OPTIMAL:  # step not certified to inner_tol
            self.stats.inaccurate += 1
        return point

    def __call__(self, Bs: list[np.ndarray]) -> dict[str, Any]:
        if self.engine is not None:
            point = self._engine_step(Bs)
            if self.engine is not None:
                return point
            # a certified-phase engine step that did not certify handed the steps to the conic
            # backend: this step is re-solved there rather than passed through (its status
            # leaves the record: no claim rests on it; the solve count keeps it)
            self.stats.statuses.pop()
            self.stats.inaccurate -= 1
            self.stats.replaced += 1
        step = self.step_problem(Bs)
        kw = self._backend_opts()
        if self.state.backend == "CLARABEL" and self.state.clarabel_lmi_first:
            # the steps after the engine's (``to_conic``: its interior point stalled, or the
            # run finishes) start at the polish tolerances: on these sets Clarabel's defaults end
            # "AlmostSolved" after 3-3.5 s CPU (N = 45), then polished there anyway (S-curve
            # N = 60, LMI form: 59 iterations, 8.3 s at 1e-8, then 27, 4.3 s at 1e-6)
            for k, v in _CLARABEL_POLISH.items():
                kw.setdefault(k, v)
        if self.carry_scale and self.stats.scale is not None and self.state.backend == "SCS":
            kw.setdefault("scale", self.stats.scale)  # SCS's adapted scale, warm-started
        budget = self.probe.budget(step) if self.probe is not None \
            and self.state.backend == "SCS" else None
        if budget is not None:
            kw["time_limit_secs"] = budget
        t0 = time.perf_counter()
        try:
            compile_time = self._solve_step(step, kw, others=self.engine_tried)
            if budget is not None and scs_time_limited(step):
                cut_seconds = time.perf_counter() - t0
                self.probe.cut(self, cut_seconds)
                self.stats.solve += cut_seconds
                self.stats.solves += 1
                kw, t0 = self._backend_opts(), time.perf_counter()
                compile_time = self._solve_step(step, kw, others=self.engine_tried)
        except SolverError as exc:
            if self.engine_tried:
                raise
            # a Clarabel failure (NumericalError on sets without an interior: 2-turn spiral kNN
            # graphs) hands the steps to the SDP engine where the subproblem has its form,
            # before SCS (issue_alpha, spiral N = 15, load 16: engine 10 s certified, SCS 84 s)
            self.engine_tried = True
            run = low_rank_subproblem(self.surr, required=False, min_n=0, tol=self.inner_tol,
                                      method=self.inner_method)
            if run is not None:
                self.state.fallbacks.append({"from": self.state.backend, "to": "low_rank_sdp",
                                             "reason": str(exc)})
                self.use_engine(run)
                return self._engine_step(Bs)
            compile_time = self._solve_step(step, kw)
        seconds = time.perf_counter() - t0
        self._record(step, compile_time, seconds)
        if self.probe is not None:
            self.probe.after_step(self, step, seconds)
        return self._point(step.status)

    def _record(self, step: cp.Problem, compile_time: float, seconds: float) -> None:
        """Count the step; infeasible / unbounded / failed subproblems raise."""
        stats = self.stats
        if stats.setup is None:
            stats.setup = compile_time
        stats.solve += seconds
        stats.solves += 1
        info = ((step.solver_stats.extra_stats or {}).get("info", {})
                if self.state.backend == "SCS" else {})
        if info:
            stats.scs_iters.append(int(info.get("iter", -1)))
            if info.get("scale"):
                stats.scale = float(info["scale"])
        status = step.status
        stats.statuses.append(status)
        if status == cp.OPTIMAL_INACCURATE:
            stats.inaccurate += 1
        if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
            raise SubproblemInfeasible(status)
        if status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE):
            raise SubproblemUnbounded(status)
        if status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            raise SolverError(f"iterated_sdp: subproblem solver returned status {status}")

    def _point(self, status: str) -> dict[str, Any]:
        """The solved subproblem's point (row centering tidied where that helps)."""
        surr = self.surr
        if surr.centered:
            center_if_better(surr)
        primal = {
            uid: np.array(fv.value, dtype=float, copy=True) for uid, fv in surr.var_map.items()
        }
        K = [np.asarray(nd.K.value, dtype=float) for nd in surr.nodes]
        K = [0.5 * (k + k.T) for k in K]
        dual = {cid: fc.dual_value for cid, fc in surr.con_map}
        value = float(np.asarray(surr.true_objective.value))
        return {"primal": primal, "K": K, "objective": surr.sense * value, "dual": dual,
                "status": status}
