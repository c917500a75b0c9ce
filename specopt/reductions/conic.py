"""The conic route: compile the (DCP) problem with specopt's graph forms and solve it with a
generic conic solver (MOSEK when licensed, else Clarabel or SCS by size; see ``backends``).

Certificate: the bound is recomputed from the backend's dual point, projected onto the dual cone
and its residual measured (``specopt.conic_bound``); it is reported only when that residual is
small, else the certificate says the bound is unproven (``extra["bound_unproven"]``) and the gate
does not certify the point as ``optimal``. The gate, not the solver's flag, decides the status:
an ``optimal_inaccurate`` whose checks all pass (gap against the checked bound included) is
``optimal`` (``solve.run_route``).
"""

from __future__ import annotations

from typing import Any

import cvxpy as cp

from .. import _cvxpy_compat as compat
from .._tree import walk
from .._values import evaluate_at
from ..atoms import LinearSpectral
from ..backends import backend_status
from ..certificate import relative_gap
from ..conic_bound import DUAL_RESIDUAL_TOL, dual_bound
from ..validate import conic_backend_options
from .analysis import SpectralTerm, analyze, normalized_problem, objective_summary, term_expr
from .base import CheckTriple, Match, Route, RouteResult, RunContext
from .conic_size import default_backend
from .registry import register_route


class ConicRoute(Route):
    name = "conic"
    priority = 1000  # the fallback: asked last by route="auto"

    def recognize(self, problem: cp.Problem) -> Match:
        if problem.is_dcp():
            return Match(True, "the problem is DCP: it compiles to a conic program")
        # written in a non-DCP way that is convex once normalized (e.g. x @ x, or spectral
        # atoms whose combination on one matrix is convex): compile the normalized problem
        try:
            normalized = normalized_problem(problem)
            if normalized.is_dcp():
                terms = objective_summary(analyze(problem))
                terms = terms if len(terms) <= 80 else terms[:77] + "..."
                return Match(True, f"DCP once normalized (objective {terms}): it compiles "
                             "to a conic program", normalized)
        except Exception:  # pragma: no cover - the plain reason below still applies
            pass
        return Match.no(_non_dcp_reason(problem))

    #: the backend prints its own log; its statuses are CVXPY's already
    UNIT = None
    STATUS_MAP = {s: s for s in (*compat.SOLUTION_PRESENT, *compat.INF_OR_UNB)}

    def resolve_solver(self, problem: cp.Problem, solver: str | None) -> str:
        """The backend: the one asked for, else the default for this problem; it must be
        usable."""
        backend = (solver or default_backend(problem)).upper()
        usable, why = backend_status(backend)
        if not usable:
            raise cp.error.SolverError(f"backend {backend} is not usable: {why}")
        return backend

    def known_options(self, problem: cp.Problem, backend: str
                      ) -> tuple[tuple[str, ...] | None, str]:
        return conic_backend_options(backend), f"route 'conic' on backend {backend}"

    def run(self, data: Any, ctx: RunContext, **opts: Any) -> tuple[Any, dict, str]:
        """The backend's solution of the (normalized) problem, duals keyed by the user's
        constraints; ``(solution, info, backend)``."""
        problem, backend = ctx.problem, ctx.solver
        warm_start = bool(opts.pop("warm_start", False))
        target = data if isinstance(data, cp.Problem) else problem
        solution, info = compat.conic_solve(target, backend, ctx.verbose, warm_start, **opts)
        if target is not problem:  # duals of the normalized problem's constraints -> user's
            ids = {t.id: c.id for t, c in zip(target.constraints, problem.constraints,
                                              strict=True)}
            solution.dual_vars = {ids.get(k, k): v for k, v in solution.dual_vars.items()}
        return solution, info, backend

    def invert(self, raw: tuple[Any, dict, str], ctx: RunContext) -> RouteResult:
        solution, info, backend = raw
        problem = ctx.problem
        status = solution.status
        if status in cp.settings.ERROR:
            raise cp.error.SolverError(
                f"{backend} failed (status {status}); try another solver or verbose=True"
            )
        extra: dict[str, Any] = {"solver_reported_solve_time": info.get("solve_time"),
                                 "solver_status": info.get("raw_status")}
        dual_check = bound = None
        if status in compat.SOLUTION_PRESENT:
            objective = evaluate_at(problem, solution.primal_vars)
            bound, dual_check = _checked_bound(problem, info, extra)
        else:
            objective = solution.opt_val
        return RouteResult(
            status=self.map_status(status),
            primal=dict(solution.primal_vars),
            dual=dict(solution.dual_vars),
            objective=objective,
            backend=backend,
            bound=bound,
            gap=relative_gap(objective, bound),
            iterations=info.get("iterations"),
            setup_time=info["compile_time"],
            solve_time=info["wall_solve_time"],
            extra=extra,
            dual_check=dual_check,
        )


def _checked_bound(problem: cp.Problem, info: dict, extra: dict
                   ) -> tuple[float | None, CheckTriple | None]:
    """The bound from the backend's dual point, recomputed and checked (``conic_bound``), in the
    user's sense; None (and ``extra["bound_unproven"]``: why) when it is not proven. Also the
    dual check for the gate (passed, relative residual, tolerance)."""
    canon = info.get("canonical")
    if canon is None:
        extra["bound_unproven"] = "the backend's dual point is not available to check"
        return None, None
    checked = dual_bound(**canon)
    dual_check = (checked.bound is not None, checked.residual, DUAL_RESIDUAL_TOL)
    extra["dual_cone_shift"] = checked.shift
    solver_dobj = info.get("dobj")
    if solver_dobj is not None:
        extra["solver_dual_objective"] = float(solver_dobj)
    if checked.bound is None:
        extra["bound_unproven"] = checked.reason
        return None, dual_check
    sense = 1.0 if isinstance(problem.objective, cp.Minimize) else -1.0
    return sense * checked.bound, dual_check


def _non_dcp_reason(problem: cp.Problem) -> str:
    culprits = []
    obj = problem.objective
    try:
        desc = analyze(problem)
        for t in desc.terms:
            e = term_expr(t)
            ok = e.is_convex() if desc.sense == 1 else e.is_concave()
            if not ok:
                where = "minimized" if desc.sense == 1 else "maximized"
                if e.is_concave() or e.is_convex():
                    kind = "concave" if e.is_concave() else "convex"
                    culprits.append(f"objective term {t.label} is {kind} and {where}")
                elif isinstance(t, SpectralTerm):
                    culprits.append(f"objective term {t.label} has non-monotone alpha (DC, "
                                    "neither convex nor concave)")
                else:
                    culprits.append(f"objective term {t.label} is neither convex nor concave")
                break
    except Exception:  # pragma: no cover - fall back to the tree walk below
        pass
    if not obj.is_dcp() and not culprits:
        for node in walk(obj.expr):
            if isinstance(node, LinearSpectral) and not (
                node.is_atom_convex() or node.is_atom_concave()
            ):
                culprits.append("a linear_spectral term with non-monotone alpha (DC)")
            elif isinstance(node, LinearSpectral):
                wrong = "minimized concave" if isinstance(obj, cp.Minimize) else "maximized convex"
                if (node.is_atom_concave() and isinstance(obj, cp.Minimize)) or (
                    node.is_atom_convex() and isinstance(obj, cp.Maximize)
                ):
                    culprits.append(f"a {wrong} linear_spectral term")
        if not culprits:
            culprits.append("the objective is not DCP")
    bad = [c for c in problem.constraints if not c.is_dcp()]
    if bad:
        culprits.append(f"{len(bad)} constraint(s) are not DCP")
    return "not DCP (" + "; ".join(dict.fromkeys(culprits)) + "): no conic form exists"


register_route(ConicRoute())
