"""Route "iterated_sdp": non-convex linear-spectral objectives by majorize-minimize (local).

Applies to problems that are convex except for ``linear_spectral`` terms (``mve_cost``,
``eigengap``, any alpha) of the wrong curvature in the objective. Each such term ``L(K)`` sits
in a monotone position of the objective (sign ``s = +1`` where the minimized objective increases
with it, ``-1`` where it decreases); with ``a = s alpha`` the breakpoint identity splits

    s L(K) = g_{a - beta}(K) + g_beta(K),   beta = concave_weights(a)  (nondecreasing),

a convex part (``a_n tr K + sum_{c_i > 0} c_i lambda_sum_largest(K, i)``, kept) and a concave part
majorized at the current iterate by ``tr(K B)``, ``B = sum_i beta_i v_i v_i^T`` (eigenvectors of
the current K). ``vec(B)`` is a ``cp.Parameter`` up to ``DPP_MAX_N`` (the convex subproblem
is DPP, compiled once, SCS warm-started), a constant compiled per step above (the DPP tensor
grows as n^4). The loop (``specopt.solvers.iterated_sdp``) stops by the stationarity measure
(the decrease the majorizer at the previous iterate allows, read off the step that minimizes
it); the status is :data:`specopt.certificate.STATIONARY` when the gate's checks pass.

Options (``specopt.solve(prob, route="iterated_sdp", **opts)``): ``max_iters`` (500, a safety
cap), ``tol`` (the stationarity tolerance is ``max(10 tol, 1e-6)``), ``tol_K`` (relative
change of K, only where no stationarity measure is used), ``restarts`` (0: extra seeded random
starts), ``seed`` (0), ``init`` ("auto" | "value" | "relaxation" | "trace" | "random";
"trace" first solves with each concave part replaced by ``beta_min tr K``, for ``mve_cost`` the
SDE ``max tr K``, on the compiled subproblem, so the first step is warm-started from it),
``monotone_tol``, ``extrapolation`` (``MM_EXTRAPOLATION``; 0 plain MM: the linearization
point of a step far from the stop is extrapolated, ``specopt.solvers.iterated_sdp``),
``carry_scale`` (False; SCS: start each solve at the scale SCS adapted to in
the previous one); other options go to the conic backend (``scs_max_iters`` for SCS's own cap).
The certificate's ``extra["scs_iterations"]`` lists SCS's iteration count of every solve.

Convex problems are not accepted: they are a :class:`RouteMismatch` naming the conic route (a
global solve with a certificate, which this local method cannot give).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cvxpy as cp
import numpy as np
from cvxpy.error import SolverError

from ..certificate import STATIONARY
from ..solvers.iterated_sdp import MM_EXTRAPOLATION, check_extrapolation, iterated_sdp
from . import low_rank_sdp as lrr
from ._iterated_stationarity import (
    MAX_TIE_SOLVES,
    MIN_TIE_SOLVES,
    TIE_SOLVE_FRACTION,
    stationarity_check,
)
from ._iterated_steps import (
    HYBRID_TIGHT_TOL,
    MULTI_BLOCK_SCS_MAX_ITERS,
    SCS_EPS,
    BackendProbe,
    StepRunner,
    SubproblemInfeasible,
    SubproblemUnbounded,
    conic_steps_on_scs,
    inner_backend,
)
from ._iterated_surrogate import Surrogate, build_surrogate, contains_spectral
from ._low_rank_steps import low_rank_subproblem
from .analysis import normalized_problem, try_analyze
from .base import Match, Route, RouteMismatch, RouteResult, RunContext
from .registry import register_route

_ROUTE_OPTS = ("max_iters", "tol", "tol_K", "restarts", "seed", "init", "monotone_tol",
               "carry_scale", "inner", "inner_tol", "inner_method", "extrapolation")
_INITS = ("auto", "value", "relaxation", "trace", "random")

#: Smallest relative surrogate decrease that counts as a descent step (stationarity tolerance
#: is ``max(10 * tol, STATIONARITY_TOL)``, relative to ``1 + |F(K*)|``).
STATIONARITY_TOL = 1e-6

#: With ``inner="auto"`` and no ``solver=``, from ``low_rank_sdp.ITERATED_MIN_N`` (24) on, where
#: the subproblem has the engine's form, the steps are hybrid (``_iterated_steps.HybridRefiner``):
#: inexact warm-started engine steps, then certified ones, on the engine or, where its interior
#: point stalls (swiss roll, S-curve, spiral kNN graphs at N = 30-60), on Clarabel. Before, the
#: engine ran every step to ``inner_tol`` from n = 63 (those families: > 40 s, uncertified) and
#: Clarabel every step below (N = 45: 1.1-1.6 s CPU per step, 10-30 steps). The route's own
#: floor (with the engine's ``ITERATED_MIN_N``): below, Clarabel alone (N = 15: 0.2-2 s).
ITERATED_ENGINE_MIN_N = 24
#: Safety cap on MM steps: the stop is by the stationarity measure; hitting the cap is reported
#: (``stop_reason="max_iters"``, not certified).
MAX_ITERS = 500
#: Up to this side n the linearization enters as a DPP parameter (compiled once, SCS warm
#: start); above, each step compiles the subproblem with B a constant. The DPP tensor of
#: ``vec(B) @ vec(K)`` grows as n^4 (n = 150: 13 s and 2.1 GB) while a plain compile takes
#: 0.14 s and 0.15 GB (n = 300: 0.9 s, 0.19 GB); n = 50: DPP 0.06 s, plain 0.05 s.
DPP_MAX_N = 50
#: ... and up to this side when every step is conic (no engine steps: e.g. non-shrink inequality
#: rows): each step then compiles and cold-starts otherwise. nonshrink digits N = 60 (720 rows,
#: 16 SCS steps): 28.4 s CPU per-step compiles (about 1.5 s each) vs 9.9 s DPP (3.9 s setup, SCS
#: warm-started: 175-275 iterations per step instead of 250-925); spokes N = 60 over 90 s vs
#: 23 s; peak memory 0.20 GB either way; at n = 80 (one step, digits) 0.23 GB nonshrink,
#: 0.27 GB eigengap.
CONIC_DPP_MAX_N = 80


@dataclass(frozen=True)
class MMSettings:
    """The options of one solve, split: the MM loop's (``loop``: tol, tol_K, monotone_tol,
    restarts, seed, ...), the start (``init``), the inner solver's and the backend's."""

    loop: dict[str, Any]
    user_keys: frozenset[str]
    backend: str
    solver_opts: dict[str, Any]
    init: str
    carry_scale: bool
    inner: str
    inner_tol: float
    inner_method: str


def mm_settings(surr: Surrogate, solver: str | None, opts: dict[str, Any],
                backend: str | None = None) -> MMSettings:
    """Split and default the options (unknown names go to the conic backend); ``backend``
    overrides the default rule's choice (not ``solver=``)."""
    loop = {k: opts.pop(k) for k in _ROUTE_OPTS if k in opts}
    user_keys = frozenset(loop)
    backend = (solver or backend or inner_backend(surr.problem)).upper()
    solver_opts = dict(opts)
    if "scs_max_iters" in solver_opts:  # ``max_iters`` is the route's own option
        solver_opts["max_iters"] = solver_opts.pop("scs_max_iters")
    if backend == "SCS":
        solver_opts.setdefault("eps_abs", SCS_EPS)
        solver_opts.setdefault("eps_rel", SCS_EPS)
        solver_opts.setdefault("max_iters", 20000)
        acc = max(solver_opts["eps_abs"], solver_opts["eps_rel"])
        defaults = {"tol": max(1e-6, 10 * acc), "tol_K": max(1e-4, 1e3 * acc),
                    "monotone_tol": max(1e-6, 10 * acc)}
    else:
        defaults = {"tol": 1e-6, "tol_K": 1e-4, "monotone_tol": 1e-6}
    for k, v in defaults.items():
        loop.setdefault(k, v)
    loop["extrapolation"] = check_extrapolation(loop.get("extrapolation", MM_EXTRAPOLATION))
    init = loop.pop("init", "auto")
    if init not in _INITS:
        raise ValueError(
            f"init must be 'auto', 'value', 'relaxation', 'trace' or 'random', got {init!r}"
        )
    return MMSettings(
        loop=loop, user_keys=user_keys, backend=backend, solver_opts=solver_opts, init=init,
        carry_scale=bool(loop.pop("carry_scale", False)) and backend == "SCS",
        # inner solver: "conic" (the backend above), "low_rank" (the SDP engine, warm-started
        # step to step) or "auto" (the engine where its route would pay off)
        inner=loop.pop("inner", "auto"), inner_tol=loop.pop("inner_tol", 1e-6),
        # the engine's solver per step: "auto" (interior point in its size range, the
        # warm-started factored method above), "ip" or "bm"
        inner_method=loop.pop("inner_method", "auto"))


def step_runner(surr: Surrogate, solver: str | None, cfg: MMSettings) -> StepRunner:
    """The MM steps' solver: the conic backend, or the SDP engine (``inner``; with
    ``inner="auto"`` and no ``solver=`` from the engine's size on)."""
    inner = cfg.inner
    dpp = max(nd.K.shape[0] for nd in surr.nodes) <= DPP_MAX_N
    runner = StepRunner(surr, cfg.backend, cfg.solver_opts, dpp=dpp, carry_scale=cfg.carry_scale,
                        engine_tried=solver is not None or inner == "conic",
                        inner_tol=cfg.inner_tol, inner_method=cfg.inner_method)
    runner.state.clarabel_polish = solver is None
    if inner not in ("auto", "conic", "low_rank"):
        raise ValueError(f"inner must be 'auto', 'conic' or 'low_rank', got {inner!r}")
    if inner == "low_rank":
        runner.use_engine(low_rank_subproblem(surr, required=True, tol=cfg.inner_tol,
                                              method=cfg.inner_method))  # every step
    elif inner == "auto" and solver is None:
        lr_run = low_rank_subproblem(surr, required=False, tol=cfg.inner_tol,
                                     method=cfg.inner_method,
                                     min_n=None if lrr.ITERATED_MIN_N is None
                                     else max(lrr.ITERATED_MIN_N, ITERATED_ENGINE_MIN_N))
        if lr_run is not None:  # inexact engine steps, certified last steps
            runner.use_hybrid(lr_run, tight_tol=cfg.inner_tol if "inner_tol" in cfg.user_keys
                              else max(cfg.inner_tol, HYBRID_TIGHT_TOL))
    if runner.engine is None and max(nd.K.shape[0] for nd in surr.nodes) <= CONIC_DPP_MAX_N:
        runner.dpp = True  # every step conic: compiled once, warm-started (CONIC_DPP_MAX_N)
    return runner


def loop_options(cfg: MMSettings, runner: StepRunner) -> dict[str, Any]:
    """The MM loop's options; with every step on the engine, the default tolerances follow
    the engine's accuracy (``inner_tol``) instead of the conic backend's."""
    loop = dict(cfg.loop)
    if runner.engine is not None:
        tol = cfg.inner_tol
        lr_defaults = {"tol": max(1e-6, 10 * tol), "tol_K": max(1e-4, 1e2 * tol),
                       "monotone_tol": max(1e-6, 10 * tol)}
        loop.update({k: v for k, v in lr_defaults.items() if k not in cfg.user_keys})
    return loop


@dataclass(frozen=True)
class MMOutcome:
    """How the MM run ended: ``status`` (stationary_point, or the subproblem's infeasible /
    unbounded status); the runs (one per tie escape), the last stationarity check, the
    returned point, the start used, the stationarity tolerance, the step runner and the
    seconds of iterating."""

    status: str
    runner: StepRunner
    results: list[Any] | None = None
    stat: dict[str, Any] | None = None
    point: dict[str, Any] | None = None
    init: str = ""
    stat_tol: float = 0.0
    seconds: float = 0.0


class IteratedSDPRoute(Route):
    """Majorize-minimize over convex SDP subproblems (local method, see module docstring)."""

    name = "iterated_sdp"
    is_global = False
    priority = 40
    OPTIONS = _ROUTE_OPTS
    #: other options go to the conic backend; ``scs_max_iters`` is SCS's own cap
    PASSES_OPTIONS = True
    INNER_OPTIONS = ("scs_max_iters",)
    UNIT = "MM step"
    STATUS_MAP = {s: s for s in (STATIONARY, cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE,
                                 cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE)}

    def recognize(self, problem: cp.Problem) -> Match:
        desc, why = try_analyze(problem)
        if desc is None:
            return Match.no(why)
        spectral = desc.of_kind("spectral")
        if not spectral and not contains_spectral(problem.objective.expr):
            if problem.is_dcp():
                return Match.no("the problem is convex (DCP) and has no spectral term: the "
                                "conic route solves it globally")
            return Match.no(
                "the objective has no spectral term (linear_spectral / mve_cost / eigengap, or "
                "lambda_max / lambda_sum_largest / ... combinations); its non-convexity is not "
                "of the kind the iterated-SDP route handles"
            )
        try:
            surr = build_surrogate(normalized_problem(problem, desc),
                                   [c.con.id for c in desc.constraints])
        except RouteMismatch as exc:
            return Match.no(str(exc))
        names = ", ".join(t.label for t in spectral) or "(nested linear_spectral)"
        return Match(
            True,
            f"non-convex spectral objective {names}: majorize-minimize with a DPP subproblem "
            "(local solution)",
            surr,
        )

    def pays_off(self, problem: cp.Problem, match: Match) -> tuple[bool, str]:
        return True, "no other route solves non-convex spectral objectives"

    def run(self, surr: Surrogate, ctx: RunContext, **opts: Any) -> MMOutcome:
        raw = dict(opts)
        cfg = mm_settings(surr, ctx.solver, opts)
        runner = step_runner(surr, ctx.solver, cfg)
        on_scs = None if ctx.solver is not None or cfg.inner != "auto" \
            or runner.engine is not None \
            else conic_steps_on_scs(surr.problem, cfg.backend, cfg.solver_opts)
        if on_scs is not None:
            # every step conic, one PSD block, large: SCS (see ITERATED_SCS_SINGLE_BLOCK_MIN_DIM);
            # several blocks: SCS, capped, then Clarabel from its first inaccurate step
            multi = on_scs == "several blocks"
            if multi:
                raw.setdefault("scs_max_iters", MULTI_BLOCK_SCS_MAX_ITERS)
            clarabel_opts = dict(cfg.solver_opts)
            cfg = mm_settings(surr, None, raw, backend="SCS")
            runner = step_runner(surr, ctx.solver, cfg)
            if multi:
                runner.state.switch_to = "CLARABEL"
            else:  # one block: Clarabel tried once when SCS's steps run long (SCS_PROBE_RATIO)
                runner.probe = BackendProbe(clarabel_opts)
        loop = loop_options(cfg, runner)
        max_iters = int(loop.pop("max_iters", MAX_ITERS))
        stat_tol = max(10.0 * float(loop["tol"]), STATIONARITY_TOL)
        if runner.refiner is not None:
            runner.refiner.stat_tol = stat_tol
        cb = ctx.callback
        callback = None if cb is None else (
            lambda it, objective=None, **kw: cb(it, objective=surr.sense * objective, **kw))
        t_start = time.perf_counter()
        try:
            K0, init_used, p0 = self._initial(surr, cfg.init, runner, loop.get("seed", 0))
            results, stat = _iterate(surr, runner, K0, p0, loop, max_iters, stat_tol, callback)
        except SubproblemInfeasible as exc:
            return MMOutcome(exc.args[0], runner)
        except SubproblemUnbounded as exc:
            return MMOutcome(exc.args[0], runner)
        point = results[-1].point
        if stat["descent"] is not None and stat["descent"]["objective"] < results[-1].objective:
            point = stat["descent"]  # better than the last MM point (no iterations left)
        return MMOutcome(STATIONARY, runner, results, stat, point, init_used, stat_tol,
                         time.perf_counter() - t_start)

    def invert(self, out: MMOutcome, ctx: RunContext) -> RouteResult:
        surr: Surrogate = ctx.data
        stats = out.runner.stats
        status = self.map_status(out.status)
        if out.results is None:  # infeasible / unbounded: a status, no values
            return RouteResult.no_point(status, surr.sense, backend=out.runner.backend,
                                        setup_time=stats.setup, solve_time=stats.solve,
                                        extra={"subproblem_solves": stats.solves})
        point, stat, res = out.point, out.stat, out.results[-1]
        return RouteResult(
            status=status,
            primal={v.id: point["primal"][v.id] for v in surr.user_vars},
            objective=float(point["objective"]) * surr.sense,
            backend=out.runner.backend,
            dual=point["dual"],
            iterations=sum(r.total_iterations for r in out.results),
            setup_time=stats.setup,
            solve_time=stats.solve,
            history=_history(out.results, surr.sense),
            extra=_extra(out, surr.sense),
            converged=res.converged,
            # the claim rests on the returned point's own step (its feasibility is checked by the
            # gate as well) and on the solves that certify it; earlier steps only moved the
            # iterate (every status is in "subproblem_statuses")
            inner_accurate=point["status"] == cp.OPTIMAL and all(
                st == cp.OPTIMAL for st in stats.check_statuses),
            # (passed, measured, tolerance) for the gate; details in "stationarity_detail"
            stationarity=(stat["measured"] <= out.stat_tol, stat["measured"], out.stat_tol),
        )

    @staticmethod
    def _initial(surr: Surrogate, init: str, run, seed) -> tuple[list[np.ndarray], str, Any]:
        """Start: the user's value of each K, else the trace relaxation, else random (seeded).
        Also returns the subproblem point of the start when it is one (else None)."""
        if init in ("auto", "value"):
            vals = [nd.K_user.value for nd in surr.nodes]
            if all(v is not None for v in vals):
                return [np.asarray(v, dtype=float) for v in vals], "value", None
            if init == "value":
                raise ValueError("init='value' but a variable of a spectral term has no value")
        if init == "trace":
            # each concave part replaced by beta_min tr(K) (beta_1 = smallest weight); for
            # mve_cost this first solve is max tr K, the SDE, on the compiled DPP problem, so the
            # first linearized step is warm-started from it
            p = run([float(np.min(nd.beta)) * np.eye(nd.K.shape[0]) for nd in surr.nodes])
            return p["K"], "trace", p
        if init in ("auto", "relaxation"):
            # trace relaxation: each concave part replaced by mean(beta) * tr(K)
            try:
                p = run([np.mean(nd.beta) * np.eye(nd.K.shape[0]) for nd in surr.nodes])
                return p["K"], "relaxation", p
            except SolverError:
                if init == "relaxation":
                    raise
        rng = np.random.default_rng(seed)
        Ks = []
        for nd in surr.nodes:
            G = rng.standard_normal((nd.K.shape[0],) * 2)
            Ks.append(G @ G.T)
        return Ks, "random", None




def _iterate(surr: Surrogate, runner: StepRunner, K0: list[np.ndarray], p0: Any,
             loop: dict[str, Any], max_iters: int, stat_tol: float,
             callback: Callable | None) -> tuple[list[Any], dict[str, Any]]:
    """MM from ``K0`` until stationary (or ``max_iters`` steps); where the stationarity check
    finds a descent step (a supergradient of a tied eigenspace), MM again from it. Returns the
    runs and the last check."""
    betas = [nd.beta for nd in surr.nodes]
    res = iterated_sdp(runner, lambda p: p["objective"], K0, betas, get_K=lambda p: p["K"],
                       max_iters=max_iters, callback=callback, stationarity_tol=stat_tol,
                       first_point=p0, refine=runner.refiner, **loop)
    results = [res]
    used = res.iterations
    seed = loop.get("seed", 0)
    while True:
        stat = _timed_check(surr, runner, res, used, stat_tol, seed)
        if stat["descent"] is None or used >= max_iters:
            return results, stat
        more = {k: v for k, v in loop.items() if k not in ("restarts", "seed")}
        res = iterated_sdp(runner, lambda p: p["objective"], stat["descent"]["K"], betas,
                           get_K=lambda p: p["K"], max_iters=max_iters - used,
                           callback=callback, stationarity_tol=stat_tol,
                           first_point=stat["descent"], refine=runner.refiner, **more)
        results.append(res)
        used += res.iterations


def _timed_check(surr: Surrogate, runner: StepRunner, res: Any, used: int, stat_tol: float,
                 seed: Any) -> dict[str, Any]:
    """The stationarity check of ``res``'s point, on a budget of solves (a fraction of the
    ``used`` MM steps); records the solves the claim rests on."""
    stats = runner.stats
    solves0, t0 = stats.solves, time.perf_counter()
    budget = min(MAX_TIE_SOLVES, max(MIN_TIE_SOLVES, int(TIE_SOLVE_FRACTION * used)))
    base_step = res.last_step if res.stop_reason == "stationary" else None
    if runner.refiner is not None:
        runner.refiner.allow_bounded = False  # the check's solves certify to inner_tol
    out = stationarity_check(surr, res.point, runner, stat_tol, seed, base_step=base_step,
                             budget=budget)
    if runner.refiner is not None:
        runner.refiner.allow_bounded = True
    stats.tie_solves += stats.solves - solves0
    # the solves the claim rests on: the certifying step and the tie-check solves
    stats.check_statuses = list(stats.statuses[solves0:])
    if base_step is not None:
        stats.check_statuses.append(base_step[0]["status"])
    stats.tie_time += time.perf_counter() - t0
    return out


def _history(results: list[Any], sign: int) -> dict[str, list[float]]:
    """The runs' traces joined, objectives in the user's sign; ``stationarity``: each step's
    measure of the iterate before it (``inf`` where there is none: the first step, an
    extrapolated one)."""
    hist: dict[str, list[float]] = {"objective": [], "rel_change_objective": [],
                                    "rel_change_K": [], "time": [], "stationarity": []}
    for r in results:
        hist["stationarity"] += list(r.history.get("stationarity", []))
        hist["time"] += list(r.history.get("time", []))
        hist["objective"] += [sign * v for v in r.history["objective"]]
        hist["rel_change_objective"] += list(r.history["rel_change_objective"])
        hist["rel_change_K"] += list(r.history["rel_change_K"])
    return hist


def _extra(out: MMOutcome, sign: int) -> dict[str, Any]:
    """What the certificate shows about the run (restarts, monotonicity, the steps' cost)."""
    results, stats, stat = out.results, out.runner.stats, out.stat
    first, res = results[0], results[-1]
    violations = [(it, inc) for r in results for run_ in r.runs
                  for it, inc in run_.monotone_violations]
    return {
        "stop_reason": res.stop_reason,
        "monotone": not violations,
        "monotone_violations": violations,
        "init": out.init,
        "restarts": len(first.runs) - 1,
        "run_values": [sign * v for v in first.run_values],
        "spread": first.spread,
        "best_run": first.best_run,
        "total_iterations": sum(r.total_iterations for r in results),
        "subproblem_solves": stats.solves,
        "inaccurate_subproblems": stats.inaccurate,
        "polished_subproblems": stats.polished,
        "engine_steps_resolved_on_conic": stats.replaced,
        "tie_check_solves": stats.tie_solves,
        "tie_check_time": stats.tie_time,
        "dpp": out.runner.dpp,
        "subproblem_status": out.point["status"],
        "subproblem_statuses": list(stats.statuses),
        "iterate_time": out.seconds,
        "scs_iterations": list(stats.scs_iters),
        "backend_fallbacks": list(out.runner.state.fallbacks),
        "backend_retry_options": dict(out.runner.state.retry_opts),
        # single-block SCS steps: Clarabel's measured try (SCS_PROBE_RATIO), or None
        "backend_probe": None if out.runner.probe is None else out.runner.probe.record(),
        "stationarity_detail": {k: v for k, v in stat.items() if k != "descent"},
        "tie_escapes": len(results) - 1,
        # steps linearized at an extrapolated point, and the one that increased F (then off)
        "extrapolated_steps": sum(sum(r.extrapolated) for r in results),
        "extrapolation_rejected": [it for r in results for it in r.extrapolation_rejected],
        # hybrid steps: the phase of every engine step (0 loose, 1 certified), conic after
        "hybrid_phases": None if out.runner.refiner is None else list(out.runner.refiner.phases),
        # certified-phase engine steps that stalled short of inner_tol, kept on their bound
        "hybrid_bounded_steps": None if out.runner.refiner is None else out.runner.refiner.bounded,
    }


register_route(IteratedSDPRoute())
