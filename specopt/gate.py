"""The verification gate: every route's result is checked on the user's problem before it is
written (``solve.run_route``, and through it ``compare``).

``optimal`` and ``stationary_point`` mean that every check below passed; a result that fails is
downgraded to ``optimal_inaccurate`` with the reasons in the certificate (``cert.checks``,
``cert.gate_reasons``), reclassified ``infeasible`` when a conic feasibility probe proves that
the constraints admit no point, or (conic route) retried on another backend first.

Checks (each recorded as ``checks[name] = Check(passed, measured, tolerance)``):

``objective``
    The route's reported objective against the objective recomputed on the user's problem at
    the returned point: ``|f_route - f(x)| / (1 + |f(x)|) <= OBJECTIVE_TOL``.
``feasibility``
    The largest *relative* constraint violation (:func:`relative_violations`). For a constraint
    ``c`` with arguments ``a_1, ..., a_k`` (for ``lhs <= rhs`` / ``lhs == rhs``: the two sides;
    for a cone: its argument), evaluated at the point,

        rel_viol(c) = viol(c) / (1 + scale(c)),
        scale(c)    = max_j max( |a_j|_inf, max over the summands t of a_j of |t|_inf ),

    with ``viol(c)`` CVXPY's own ``constraint.violation()`` (largest entry; ``-lambda_min`` for
    ``>>``). This is the relative residual of SCS/Clarabel (residual over ``1 + max(|Ax|, |b|)``)
    measured on the user's data: a violation of 53 on data of size 1e6 passes, on data of size
    1 it does not. Tolerance ``FEASIBILITY_TOL``.
``bound_side``
    A proven bound must lie on the right side of the objective (``bound <= f + tol`` when
    minimizing, ``>=`` when maximizing), ``tol = BOUND_TOL * max(1, |f|)``.
``gap``
    For ``optimal`` (and ``optimal_inaccurate``, which the conic route promotes to ``optimal``
    when every check passes): the relative gap ``|f - bound| / max(1, |f|) <= GAP_TOL`` where
    the route has a bound.
``dual_feasibility``
    Conic route: the relative residual of the backend's dual point after projection onto the
    dual cone (``specopt.conic_bound``), which the bound is computed from. Failing it, the bound
    is unproven (not reported) and the point is not ``optimal``.
``converged``
    The route's own convergence flag (``extra["converged"]``) and, for iterated routes, whether
    every inner solve was accurate (``extra["inner_solves_accurate"]``).
``conic_probe``
    For ``infeasible`` (and ``unbounded`` from a specialized route): a feasibility solve
    (Clarabel, zero objective, the constraints plus the objective's domain) must agree. A wrong
    infeasibility claim is retried (conic route), else a ``SolverError``.
``stationarity``
    For ``stationary_point``: the route's own stationarity test (``extra["stationarity"]``, a
    ``(passed, measured, tolerance)`` triple), e.g. the tied-eigenspace test of the iterated SDP.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import cvxpy as cp
import numpy as np

from .certificate import STATIONARY

#: Relative objective mismatch tolerated between the route and the recomputation.
OBJECTIVE_TOL = 1e-6
#: Largest relative constraint violation (see module docstring) of a certified point.
FEASIBILITY_TOL = 1e-4
#: Relative slack of the bound-side check.
BOUND_TOL = 1e-6
#: Largest relative gap of a point called ``optimal``.
GAP_TOL = 1e-4
#: The conic feasibility probe (reclassification as infeasible) runs only while the conic form is
#: this small (``backends.dense_kkt_dimension``); beyond it a failing point is only downgraded.
PROBE_MAX_DENSE_DIM = 5000

CERTIFIED = (cp.OPTIMAL, STATIONARY)


class Check(NamedTuple):
    """One gate check: ``passed``, the ``measured`` value and the ``tolerance`` it was held to."""

    passed: bool
    measured: float | None
    tolerance: float | None


def _inf_norm(value: Any) -> float:
    if value is None:
        return math.nan
    arr = np.abs(np.asarray(value, dtype=complex if np.iscomplexobj(value) else float))
    return float(np.max(arr)) if arr.size else 0.0


def _summands(expr: cp.Expression) -> list[cp.Expression]:
    if type(expr).__name__ == "AddExpression":
        return [t for a in expr.args for t in _summands(a)]
    return [expr]


def constraint_scale(con: cp.Constraint) -> float:
    """``scale(c)`` of the module docstring (the constraint's variables must hold values)."""
    scale = 0.0
    for arg in con.args:
        scale = max(scale, _inf_norm(arg.value))
        for t in _summands(arg):
            scale = max(scale, _inf_norm(t.value))
    return scale


def relative_violations(problem: cp.Problem) -> list[tuple[cp.Constraint, float, float]]:
    """``[(constraint, violation, relative violation)]`` at the variables' current values."""
    out = []
    for con in problem.constraints:
        try:
            viol = con.violation()
        except (ValueError, TypeError):
            viol = None
        if viol is None:
            out.append((con, math.inf, math.inf))
            continue
        v = float(np.max(np.abs(viol))) if np.size(viol) else 0.0
        if not math.isfinite(v):
            out.append((con, math.inf, math.inf))
            continue
        out.append((con, v, v / (1.0 + constraint_scale(con))))
    return out


def measure(problem: cp.Problem, primal: dict[int, Any]) -> dict[str, float | None]:
    """Objective, absolute and relative max violation at ``primal`` (variables untouched)."""
    from .solve import values_set

    with values_set(problem, primal):
        try:
            obj = problem.objective.value
            obj = None if obj is None else float(np.real(obj))
        except (ValueError, TypeError):
            obj = None
        rows = relative_violations(problem)
    return {
        "objective": obj,
        "max_violation": max((r[1] for r in rows), default=0.0),
        "relative_violation": max((r[2] for r in rows), default=0.0),
    }


def _sense(problem: cp.Problem) -> float:
    return 1.0 if isinstance(problem.objective, cp.Minimize) else -1.0


def run_checks(
    problem: cp.Problem, result: Any, is_global: bool, measured: dict[str, float | None]
) -> dict[str, Check]:
    """All checks that apply to ``result`` (a :class:`~specopt.reductions.RouteResult`)."""
    checks: dict[str, Check] = {}
    obj = measured["objective"]
    if obj is None or not math.isfinite(obj):
        checks["objective"] = Check(False, obj, OBJECTIVE_TOL)
        return checks
    if result.objective is not None:
        mism = abs(float(result.objective) - obj) / (1.0 + abs(obj))
        checks["objective"] = Check(mism <= OBJECTIVE_TOL, mism, OBJECTIVE_TOL)
    rel = measured["relative_violation"]
    checks["feasibility"] = Check(rel is not None and rel <= FEASIBILITY_TOL, rel, FEASIBILITY_TOL)
    if result.bound is not None:
        bound = float(result.bound)
        # how far the bound lies on the wrong side, relative to max(1, |f|)
        wrong = _sense(problem) * (bound - obj) / max(1.0, abs(obj)) if math.isfinite(bound) else (
            -math.inf if _sense(problem) * bound < 0 else math.inf)
        checks["bound_side"] = Check(wrong <= BOUND_TOL, wrong, BOUND_TOL)
        if is_global and result.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            gap = abs(obj - bound) / max(1.0, abs(obj)) if math.isfinite(bound) else math.inf
            checks["gap"] = Check(gap <= GAP_TOL, gap, GAP_TOL)
    extra = result.extra or {}
    if "converged" in extra:
        ok = bool(extra["converged"])
        checks["converged"] = Check(ok, float(ok), 1.0)
    if "dual_check" in extra:
        checks["dual_feasibility"] = Check(*extra["dual_check"])
    if "inner_solves_accurate" in extra:
        ok = bool(extra["inner_solves_accurate"])
        checks["inner_solves_accurate"] = Check(ok, float(ok), 1.0)
    if result.status == STATIONARY:
        st = extra.get("stationarity")
        if st is None:
            checks["stationarity"] = Check(False, None, None)
        else:
            checks["stationarity"] = Check(*st)
    return checks


def failed(checks: dict[str, Check]) -> list[str]:
    return [name for name, c in checks.items() if not c.passed]


def describe(checks: dict[str, Check], names: list[str]) -> str:
    def f(x):
        return "-" if x is None else f"{x:.3g}"

    return "; ".join(
        f"{n}: measured {f(checks[n].measured)} > tolerance {f(checks[n].tolerance)}"
        if checks[n].measured is not None and checks[n].tolerance is not None
        and n not in ("converged", "inner_solves_accurate")
        else f"{n}: failed" for n in names
    )


def feasibility_probe(problem: cp.Problem) -> str | None:
    """Status of ``find x subject to the constraints and the objective's domain`` on Clarabel.

    Used to reclassify a point that fails the feasibility check on a convex route: returns
    ``"infeasible"`` when Clarabel certifies that no point exists, ``"feasible"`` when it finds
    one, ``None`` when the probe is not applicable (non-DCP constraints, too large, no Clarabel).
    """
    from .backends import backend_status, dense_kkt_dimension

    if not backend_status("CLARABEL")[0]:
        return None
    try:
        domain = list(problem.objective.expr.domain)
    except Exception:  # an atom without a domain: the constraints alone
        domain = []
    from . import _cvxpy_compat as compat

    try:
        probe = cp.Problem(cp.Minimize(0), [*problem.constraints, *domain])
        if not probe.is_dcp() or dense_kkt_dimension(probe) > PROBE_MAX_DENSE_DIM:
            return None
        solution, _ = compat.conic_solve(probe, "CLARABEL")
    except Exception:  # no conic form (e.g. Dask data refuse compilation), solver failure, ...
        return None
    if solution.status == cp.INFEASIBLE:
        return "infeasible"
    if solution.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        # "feasible" only with a point that passes the gate's own feasibility measure
        point = {v.id: solution.primal_vars.get(v.id) for v in problem.variables()}
        if any(val is None for val in point.values()):
            return None
        rel = measure(probe, point)["relative_violation"]
        return "feasible" if rel is not None and rel <= FEASIBILITY_TOL else None
    return None
