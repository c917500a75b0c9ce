"""Route "iterated_sdp": non-convex linear-spectral objectives by majorize-minimize (local).

Applies to problems that are convex except for ``linear_spectral`` terms (``mve_cost``,
``eigengap``, any alpha) of the wrong curvature in the objective. Each such term ``L(K)`` sits
in a monotone position of the objective (sign ``s = +1`` where the minimized objective increases
with it, ``-1`` where it decreases); with ``a = s alpha`` the breakpoint identity splits

    s L(K) = g_{a - beta}(K) + g_beta(K),   beta = concave_weights(a)  (nondecreasing),

a convex part (``a_n tr K + sum_{c_i > 0} c_i lambda_sum_largest(K, i)``, kept) and a concave part
majorized at the current iterate by ``tr(K B)``, ``B = sum_i beta_i v_i v_i^T`` (eigenvectors of
the current K). ``vec(B)`` is a ``cp.Parameter``: the convex subproblem is DPP, compiled once,
and SCS is warm-started from the previous iterate. The loop (``specopt.solvers.iterated_sdp``) has a
monotone objective trace; the status is :data:`specopt.certificate.STATIONARY`.

Options (``specopt.solve(prob, route="iterated_sdp", **opts)``): ``max_iters`` (50), ``tol``
(relative objective change), ``tol_K`` (relative change of K), ``restarts`` (0: extra seeded
random starts), ``seed`` (0), ``init`` ("auto" | "value" | "relaxation" | "trace" | "random";
"trace" first solves with each concave part replaced by ``beta_min tr K``, for ``mve_cost`` the
SDE ``max tr K``, on the compiled subproblem, so the first step is warm-started from it),
``monotone_tol``, ``carry_scale`` (False; SCS: start each solve at the scale SCS adapted to in
the previous one); other options go to the conic backend (``scs_max_iters`` for SCS's own cap).
The certificate's ``extra["scs_iterations"]`` lists SCS's iteration count of every solve.

Convex problems are not accepted: they are a :class:`RouteMismatch` naming the conic route (a
global solve with a certificate, which this local method cannot give).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np
from cvxpy.error import SolverError

from .._progress import progress_for
from ..atoms import LinearSpectral
from ..backends import available_backends, default_backend
from ..certificate import STATIONARY
from ..solvers.iterated_sdp import concave_weights, iterated_sdp
from .analysis import normalized_problem, short, try_analyze
from .base import Match, Route, RouteMismatch, RouteResult
from .registry import register_route

_SCS_EPS = 1e-6
_ROUTE_OPTS = ("max_iters", "tol", "tol_K", "restarts", "seed", "init", "monotone_tol",
               "carry_scale", "inner", "inner_tol")
_VAR_ATTRS = ("nonneg", "nonpos", "pos", "neg", "symmetric", "diag", "PSD", "NSD", "hermitian")


@dataclass
class _Node:
    """One linearized spectral term: its matrix (user and fresh variables), weights, parameter."""

    K_user: cp.Expression
    K: cp.Expression
    beta: np.ndarray
    B: cp.Parameter


@dataclass
class _Surrogate:
    problem: cp.Problem  # convex subproblem (fresh variables, B parameters)
    true_objective: cp.Expression  # the user's objective on the fresh variables
    sense: int  # +1 minimize, -1 maximize
    nodes: list[_Node]
    var_map: dict[int, cp.Variable]  # user var id -> fresh var
    user_vars: list[cp.Variable]
    con_map: list[tuple[int, cp.Constraint]] = field(default_factory=list)


def _fresh_variable(v: cp.Variable) -> cp.Variable:
    attrs = {k: True for k in _VAR_ATTRS if v.attributes.get(k)}
    if v.attributes.get("bounds") is not None:
        attrs["bounds"] = v.attributes["bounds"]
    return cp.Variable(v.shape, name=v.name(), **attrs)


def _contains_spectral(expr: cp.Expression) -> bool:
    if isinstance(expr, LinearSpectral):
        return True
    return any(_contains_spectral(a) for a in expr.args)


def _convex_part(K: cp.Expression, w: np.ndarray) -> cp.Expression:
    """``g_w(K) = w_n tr K + sum_{i<n} (w_i - w_{i+1}) lambda_sum_largest(K, i)`` (w nonincr.)."""
    out: cp.Expression = cp.Constant(0.0)
    if w[-1] != 0.0:
        out = w[-1] * cp.trace(K)
    c = w[:-1] - w[1:]
    for i in np.flatnonzero(c > 0):
        out = out + float(c[i]) * cp.lambda_sum_largest(K, int(i) + 1)
    return out


class _Builder:
    """Rebuilds the user's problem on fresh variables, linearizing the concave spectral parts."""

    def __init__(self, var_map: dict[int, cp.Variable]) -> None:
        self.var_map = var_map
        self.nodes: list[_Node] = []

    def substitute(self, expr: cp.Expression) -> cp.Expression:
        if isinstance(expr, cp.Variable):
            return self.var_map[expr.id]
        if not expr.args:
            return expr
        return expr.copy([self.substitute(a) for a in expr.args])

    def surrogate(self, expr: cp.Expression, s: int) -> cp.Expression:
        """``expr`` with each non-convex spectral term majorized (``s`` = position sign)."""
        if not _contains_spectral(expr):
            return self.substitute(expr)
        if isinstance(expr, LinearSpectral):
            K_user = expr.args[0]
            K = self.substitute(K_user)
            alpha = expr.alpha
            if np.all(np.diff(alpha) == 0):  # a multiple of the trace: affine
                return expr.copy([K])
            if s == 0:
                raise RouteMismatch(
                    f"{expr.name()} sits in a non-monotone position of the objective; the "
                    "iterated-SDP route needs each spectral term to enter monotonically"
                )
            if _contains_spectral(K_user):
                raise RouteMismatch("nested linear_spectral terms are not supported")
            a = s * alpha
            beta = concave_weights(a)
            if not np.any(beta):  # convex where it stands: kept as it is
                return expr.copy([K])
            n = K.shape[0]
            # tr(K B) = vec(B) . vec(K): a flat parameter compiles ~80x faster than a
            # symmetric (n, n) one in cp.sum(cp.multiply(B, K)) (0.07 s vs 5.8 s at n = 100)
            B = cp.Parameter(n * n, name=f"vecB{len(self.nodes)}")
            self.nodes.append(_Node(K_user, K, beta, B))
            return s * (_convex_part(K, a - beta) + B @ cp.vec(K, order="F"))
        new_args = []
        for i, arg in enumerate(expr.args):
            if expr.is_incr(i):
                child = s
            elif expr.is_decr(i):
                child = -s
            else:
                child = 0
            new_args.append(self.surrogate(arg, child))
        return expr.copy(new_args)


def build_surrogate(problem: cp.Problem, con_ids: list[int] | None = None) -> _Surrogate:
    """The convex DPP subproblem of one iteration, or RouteMismatch saying why there is none.

    ``con_ids`` are the ids the duals are reported under (default: the constraints' own).
    """
    obj = problem.objective
    sense = 1 if isinstance(obj, cp.Minimize) else -1
    if problem.is_dcp():
        raise RouteMismatch(
            "the problem is convex (DCP): solve it with route='conic' (a global solve with a "
            "certificate); the iterated-SDP route is for non-convex spectral objectives"
        )
    user_vars = problem.variables()
    for v in user_vars:
        if v.attributes.get("boolean") or v.attributes.get("integer"):
            raise RouteMismatch(f"variable {v.name()} is integer/boolean; the route is continuous")
        if v.is_complex():
            raise RouteMismatch(f"variable {v.name()} is complex; the route is real-valued")
    for c in problem.constraints:
        if not c.is_dcp():
            raise RouteMismatch(
                f"constraint {short(c)} is not convex; the iterated-SDP route linearizes spectral "
                "terms of the objective only (the feasible set must be convex)"
            )
    if not _contains_spectral(obj.expr):
        raise RouteMismatch(
            "the objective has no linear_spectral / mve_cost / eigengap term; its non-convexity "
            "is not of the kind the iterated-SDP route handles"
        )
    var_map = {v.id: _fresh_variable(v) for v in user_vars}
    builder = _Builder(var_map)
    surr_expr = builder.surrogate(obj.expr, sense)
    if not builder.nodes:
        raise RouteMismatch("no spectral term of the wrong curvature was found in the objective")
    cons, con_map = [], []
    ids = con_ids if con_ids is not None else [c.id for c in problem.constraints]
    for cid, c in zip(ids, problem.constraints, strict=True):
        fresh = c.copy([builder.substitute(a) for a in c.args])
        cons.append(fresh)
        con_map.append((cid, fresh))
    surr = cp.Problem(cp.Minimize(surr_expr) if sense > 0 else cp.Maximize(surr_expr), cons)
    if not surr.is_dcp():
        raise RouteMismatch(
            "after linearizing the concave spectral parts the rest of the objective is still not "
            "convex; the iterated-SDP route needs the problem to be convex apart from them"
        )
    if not surr.is_dcp(dpp=True):  # pragma: no cover - parameters enter affinely
        raise RouteMismatch("the linearized subproblem is not DPP")
    return _Surrogate(
        problem=surr,
        true_objective=builder.substitute(obj.expr),
        sense=sense,
        nodes=builder.nodes,
        var_map=var_map,
        user_vars=user_vars,
        con_map=con_map,
    )


_GOOD = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE, cp.INFEASIBLE, cp.UNBOUNDED)
_FALLBACK_OPTS = {"SCS": {"eps_abs": _SCS_EPS, "eps_rel": _SCS_EPS, "max_iters": 20000}}


def _solve_with_fallback(prob: cp.Problem, state: dict, kw: dict, verbose: bool) -> None:
    """Solve the subproblem with ``state["backend"]``; if it raises or ends without a verdict
    (error / inaccurate infeasibility), try the other usable backends (their default settings)
    before raising. A backend that succeeds is kept for the following iterations."""
    first = state["backend"]
    try:
        prob.solve(solver=first, warm_start=True, verbose=verbose, **kw)
        if prob.status in _GOOD:
            return
        why = f"status {prob.status}"
    except SolverError as exc:
        why = str(exc).splitlines()[0] if str(exc) else "solver error"
    tried = [f"{first}: {why}"]
    for alt in available_backends():
        if alt == first:
            continue
        try:
            prob.solve(solver=alt, verbose=verbose, **_FALLBACK_OPTS.get(alt, {}))
        except SolverError as exc:
            tried.append(f"{alt}: {str(exc).splitlines()[0] if str(exc) else 'solver error'}")
            continue
        if prob.status in _GOOD:
            state["backend"] = alt
            state["fallbacks"].append({"from": first, "to": alt, "reason": why})
            return
        tried.append(f"{alt}: status {prob.status}")
    raise SolverError("iterated_sdp: the convex subproblem failed with every backend ("
                      + "; ".join(tried) + ")")


class IteratedSDPRoute(Route):
    """Majorize-minimize over convex SDP subproblems (local method, see module docstring)."""

    name = "iterated_sdp"
    is_global = False
    priority = 40

    def recognize(self, problem: cp.Problem) -> Match:
        desc, why = try_analyze(problem)
        if desc is None:
            return Match.no(why)
        spectral = desc.of_kind("spectral")
        if not spectral and not _contains_spectral(problem.objective.expr):
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

    def solve(
        self,
        problem: cp.Problem,
        match: Match,
        *,
        solver: str | None = None,
        verbose: bool = False,
        **opts: Any,
    ) -> RouteResult:
        if match is None or not match.ok:
            m = self.recognize(problem)
            if not m.ok:
                raise RouteMismatch(f"route 'iterated_sdp' does not apply: {m.reason}")
            match = m
        surr: _Surrogate = match.data
        route_opts = {k: opts.pop(k) for k in _ROUTE_OPTS if k in opts}
        user_keys = set(route_opts)
        # default: the lead's size rule (Clarabel for small PSD parts, SCS for large ones)
        backend = (solver or default_backend(surr.problem)).upper()
        solver_opts = dict(opts)
        if "scs_max_iters" in solver_opts:  # ``max_iters`` is the route's own option
            solver_opts["max_iters"] = solver_opts.pop("scs_max_iters")
        if backend == "SCS":
            solver_opts.setdefault("eps_abs", _SCS_EPS)
            solver_opts.setdefault("eps_rel", _SCS_EPS)
            solver_opts.setdefault("max_iters", 20000)
            acc = max(solver_opts["eps_abs"], solver_opts["eps_rel"])
            defaults = {"tol": max(1e-6, 10 * acc), "tol_K": max(1e-4, 1e3 * acc),
                        "monotone_tol": max(1e-6, 10 * acc)}
        else:
            defaults = {"tol": 1e-6, "tol_K": 1e-4, "monotone_tol": 1e-6}
        for k, v in defaults.items():
            route_opts.setdefault(k, v)
        init = route_opts.pop("init", "auto")
        if init not in ("auto", "value", "relaxation", "trace", "random"):
            raise ValueError(
                f"init must be 'auto', 'value', 'relaxation', 'trace' or 'random', got {init!r}"
            )

        carry_scale = bool(route_opts.pop("carry_scale", False)) and backend == "SCS"
        prob = surr.problem
        state: dict[str, Any] = {"backend": backend, "fallbacks": []}
        timings: dict[str, Any] = {"setup": None, "solve": 0.0, "solves": 0, "scs_iters": [],
                                   "scale": None, "inaccurate": 0}

        def run(Bs: list[np.ndarray]) -> dict[str, Any]:
            for nd, B in zip(surr.nodes, Bs, strict=True):
                nd.B.value = (0.5 * (B + B.T)).ravel(order="F")
            kw = dict(solver_opts)
            if carry_scale and timings["scale"] is not None:
                kw.setdefault("scale", timings["scale"])  # SCS's adapted scale, warm-started
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                # CVXPY warns "Solution may be inaccurate" about this internal subproblem; the
                # count goes into the certificate (extra["inaccurate_subproblems"]) instead of
                # a warning about a problem the user never wrote
                warnings.simplefilter("always")
                _solve_with_fallback(prob, state, kw, False)
            for w in caught:
                if "Solution may be inaccurate" in str(w.message):
                    timings["inaccurate"] += 1
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            dt = time.perf_counter() - t0
            if timings["setup"] is None:
                timings["setup"] = prob.compilation_time or 0.0
            timings["solve"] += dt
            timings["solves"] += 1
            used = state["backend"]
            info = (prob.solver_stats.extra_stats or {}).get("info", {}) if used == "SCS" else {}
            if info:
                timings["scs_iters"].append(int(info.get("iter", -1)))
                if info.get("scale"):
                    timings["scale"] = float(info["scale"])
            status = prob.status
            if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
                raise SolverError("iterated_sdp: the feasible set is empty (subproblem infeasible)")
            if status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE):
                raise SolverError(
                    "iterated_sdp: a linearized subproblem is unbounded; the non-convex objective "
                    "is probably unbounded on the feasible set (add bounds)"
                )
            if status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
                raise SolverError(f"iterated_sdp: subproblem solver returned status {status}")
            primal = {
                uid: np.array(fv.value, dtype=float, copy=True) for uid, fv in surr.var_map.items()
            }
            K = [np.asarray(nd.K.value, dtype=float) for nd in surr.nodes]
            K = [0.5 * (k + k.T) for k in K]
            dual = {cid: fc.dual_value for cid, fc in surr.con_map}
            value = float(np.asarray(surr.true_objective.value))
            return {"primal": primal, "K": K, "objective": surr.sense * value, "dual": dual,
                    "status": status}

        # inner solver: "conic" (the backend above), "low_rank" (Burer-Monteiro engine,
        # warm-started step to step) or "auto" (low-rank where its route would pay off)
        inner = route_opts.pop("inner", "auto")
        inner_tol = route_opts.pop("inner_tol", 1e-6)
        if inner not in ("auto", "conic", "low_rank"):
            raise ValueError(f"inner must be 'auto', 'conic' or 'low_rank', got {inner!r}")
        if inner != "conic" and solver is None or inner == "low_rank":
            from .low_rank_sdp import low_rank_subproblem

            lr_run = low_rank_subproblem(surr, required=inner == "low_rank", tol=inner_tol)
            if lr_run is not None:
                def run(Bs: list[np.ndarray], _lr=lr_run) -> dict[str, Any]:
                    point = _lr(Bs)
                    timings["solves"] += 1
                    timings["solve"] += point["low_rank"].solve_time
                    if point["status"] != cp.OPTIMAL:  # step not certified to inner_tol
                        timings["inaccurate"] += 1
                    return point

                backend = "low_rank_sdp"
                lr_defaults = {"tol": max(1e-6, 10 * inner_tol),
                               "tol_K": max(1e-4, 1e2 * inner_tol),
                               "monotone_tol": max(1e-6, 10 * inner_tol)}
                route_opts.update({k: v for k, v in lr_defaults.items() if k not in user_keys})
        K0, init_used = self._initial(surr, init, run, route_opts.get("seed", 0))
        t_start = time.perf_counter()
        cb = progress_for(verbose, self.name, match.reason, unit="MM step")
        res = iterated_sdp(
            run,
            lambda p: p["objective"],
            K0,
            [nd.beta for nd in surr.nodes],
            get_K=lambda p: p["K"],
            callback=None if cb is None else (
                lambda it, objective=None, **kw: cb(it, objective=surr.sense * objective, **kw)),
            **route_opts,
        )
        total = time.perf_counter() - t_start
        point = res.point
        sign = surr.sense
        violations = [(it, inc) for run_ in res.runs for it, inc in run_.monotone_violations]
        hist = {
            "objective": [sign * v for v in res.history["objective"]],
            "rel_change_objective": list(res.history["rel_change_objective"]),
            "rel_change_K": list(res.history["rel_change_K"]),
            "time": list(res.history.get("time", [])),
        }
        extra = {
            "converged": res.converged,
            "stop_reason": res.stop_reason,
            "monotone": not violations,
            "monotone_violations": violations,
            "init": init_used,
            "restarts": len(res.runs) - 1,
            "run_values": [sign * v for v in res.run_values],
            "spread": res.spread,
            "best_run": res.best_run,
            "total_iterations": res.total_iterations,
            "subproblem_solves": timings["solves"],
            "inaccurate_subproblems": timings["inaccurate"],
            "subproblem_status": point["status"],
            "iterate_time": total,
            "scs_iterations": list(timings["scs_iters"]),
            "backend_fallbacks": list(state["fallbacks"]),
        }
        return RouteResult(
            status=STATIONARY,
            primal={v.id: point["primal"][v.id] for v in surr.user_vars},
            objective=sign * res.objective,
            backend=state["backend"],
            dual=point["dual"],
            iterations=res.total_iterations,
            setup_time=timings["setup"],
            solve_time=timings["solve"],
            history=hist,
            extra=extra,
        )

    @staticmethod
    def _initial(surr: _Surrogate, init: str, run, seed) -> tuple[list[np.ndarray], str]:
        """Start: the user's value of each K, else the trace relaxation, else random (seeded)."""
        if init in ("auto", "value"):
            vals = [nd.K_user.value for nd in surr.nodes]
            if all(v is not None for v in vals):
                return [np.asarray(v, dtype=float) for v in vals], "value"
            if init == "value":
                raise ValueError("init='value' but a variable of a spectral term has no value")
        if init == "trace":
            # each concave part replaced by beta_min tr(K) (beta_1 = smallest weight); for
            # mve_cost this first solve is max tr K, the SDE, on the compiled DPP problem, so the
            # first linearized step is warm-started from it
            p = run([float(np.min(nd.beta)) * np.eye(nd.K.shape[0]) for nd in surr.nodes])
            return p["K"], "trace"
        if init in ("auto", "relaxation"):
            # trace relaxation: each concave part replaced by mean(beta) * tr(K)
            try:
                p = run([np.mean(nd.beta) * np.eye(nd.K.shape[0]) for nd in surr.nodes])
                return p["K"], "relaxation"
            except SolverError:
                if init == "relaxation":
                    raise
        rng = np.random.default_rng(seed)
        Ks = []
        for nd in surr.nodes:
            G = rng.standard_normal((nd.K.shape[0],) * 2)
            Ks.append(G @ G.T)
        return Ks, "random"


register_route(IteratedSDPRoute())
