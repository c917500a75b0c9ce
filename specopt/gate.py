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

    the summands of ``a + b`` being its terms, of ``cp.sum(X)`` the entries of ``X`` and of
    ``trace(X)`` its diagonal (``cp.sum(K) == 0`` adds n^2 entries: it is measured against
    their size, not against its own value near 0); a constraint that fails on this scale is
    measured against its sides written out, ``sum_k a_rk x_k + c_r``, the largest ``|a_rk x_k|``
    or ``|c_r|`` (:func:`~specopt._values.expanded_term_scale`: ``1^T K 1 == 0``),
    with ``viol(c)`` CVXPY's own ``constraint.violation()`` (largest entry; for ``>>``
    ``-lambda_min``, bounded by Cholesky factorizations from n = 300, exact above half the
    tolerance: :mod:`specopt._psd_violation`). This is the relative residual of SCS/Clarabel
    (residual over ``1 + max(|Ax|, |b|)``) measured on the user's data: a violation of 53 on
    data of size 1e6 passes, on data of size 1 it does not. Tolerance ``FEASIBILITY_TOL``.
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
    The route's own convergence flag (``RouteResult.converged``) and, for iterated routes,
    whether the inner solves its claim rests on were accurate (``RouteResult.inner_accurate``,
    check ``inner_solves_accurate``).
``farkas_on_problem`` / ``recession_on_problem``
    For ``infeasible`` / ``unbounded`` from a route that hands over its proof (``RouteResult.
    farkas`` / ``ray``): the proof re-derived on the user's constraints (``specopt.gate_claims``:
    Farkas multipliers whose weighted constraint sum is a positive constant, to
    ``gate_claims.FARKAS_RADIUS`` times the data's scale; a feasible point and a direction along
    which every constraint holds to the feasibility tolerance and the objective improves
    linearly). A claim whose proof fails here and that no conic probe confirms is downgraded to
    ``infeasible_inaccurate`` / ``unbounded_inaccurate``.
``conic_probe``
    For ``infeasible`` (and ``unbounded`` from a specialized route): a feasibility solve
    (Clarabel, zero objective, the constraints plus the objective's domain) must agree. A wrong
    infeasibility claim is retried (conic route), else a ``SolverError``.
``stationarity``
    For ``stationary_point``: the route's own stationarity test (``RouteResult.stationarity``, a
    ``(passed, measured, tolerance)`` triple), e.g. the tied-eigenspace test of the iterated SDP.

:func:`verify` is the gate: a function of the problem and the route's result (it reads values
at the result's point and puts them back; it writes nothing) that returns the checks and the
status they back (:class:`Verdict`). ``solve.py`` only retries and builds the certificate.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import cvxpy as cp
import numpy as np

from . import _cvxpy_compat as compat
from ._psd_violation import psd_violation
from ._values import constraint_scale, expanded_term_scale, objective_value, values_set
from .backends import backend_status
from .certificate import STATIONARY, relative_gap
from .gate_claims import FARKAS_RADIUS, farkas_on_problem, ray_on_problem
from .reductions.conic_size import dense_kkt_dimension

if TYPE_CHECKING:
    from .reductions.base import RouteResult

#: Relative objective mismatch tolerated between the route and the recomputation.
OBJECTIVE_TOL = 1e-6
#: Largest relative constraint violation (see module docstring) of a certified point.
FEASIBILITY_TOL = 1e-4
#: Relative slack of the bound-side check.
BOUND_TOL = 1e-6
#: Largest relative gap of a point called ``optimal``.
GAP_TOL = 1e-4
#: The conic feasibility probe (reclassification as infeasible) runs only while the conic form is
#: this small (``reductions.conic_size.dense_kkt_dimension``); beyond it a failing point is
#: only downgraded.
PROBE_MAX_DENSE_DIM = 5000

CERTIFIED = (cp.OPTIMAL, STATIONARY)


class Check(NamedTuple):
    """One gate check: ``passed``, the ``measured`` value and the ``tolerance`` it was held to."""

    passed: bool
    measured: float | None
    tolerance: float | None


def relative_violations(problem: cp.Problem) -> list[tuple[cp.Constraint, float, float]]:
    """``[(constraint, violation, relative violation)]`` at the variables' current values."""
    out = []
    for con in problem.constraints:
        scale = None
        try:
            value = con.args[0].value if isinstance(con, cp.constraints.PSD) else None
            if value is not None:
                # a Cholesky bound instead of eigvalsh for large matrices (_psd_violation)
                scale = constraint_scale(con)
                viol = psd_violation(value, FEASIBILITY_TOL * (1.0 + scale))
            else:
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
        scale = constraint_scale(con) if scale is None else scale
        if v > FEASIBILITY_TOL * (1.0 + scale):
            # failing on the sides' size: measured against the terms they add up instead
            scale = max(scale, expanded_term_scale(con) or 0.0)
        out.append((con, v, v / (1.0 + scale)))
    return out


def measure(problem: cp.Problem, primal: dict[int, Any]) -> dict[str, float | None]:
    """Objective, absolute and relative max violation at ``primal`` (variables untouched)."""
    with values_set(problem, primal):
        try:
            obj = objective_value(problem)
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
    problem: cp.Problem, result: RouteResult, is_global: bool, measured: dict[str, float | None]
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
            gap = relative_gap(obj, bound)
            checks["gap"] = Check(gap <= GAP_TOL, gap, GAP_TOL)
    if result.converged is not None:
        checks["converged"] = _flag(result.converged)
    if result.dual_check is not None:
        checks["dual_feasibility"] = Check(*result.dual_check)
    if result.inner_accurate is not None:
        checks["inner_solves_accurate"] = _flag(result.inner_accurate)
    if result.status == STATIONARY:
        st = result.stationarity
        checks["stationarity"] = Check(False, None, None) if st is None else Check(*st)
    return checks


def _flag(ok: bool) -> Check:
    return Check(bool(ok), float(bool(ok)), 1.0)


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
    if not backend_status("CLARABEL")[0]:
        return None
    try:
        domain = list(problem.objective.expr.domain)
    except Exception:  # an atom without a domain: the constraints alone
        domain = []
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


_PROOFS = {cp.INFEASIBLE: ("farkas_on_problem", cp.INFEASIBLE_INACCURATE),
           cp.UNBOUNDED: ("recession_on_problem", cp.UNBOUNDED_INACCURATE)}


def _proof_held(status: str, checks: dict[str, Check], reasons: list[str]) -> str:
    """An infeasible / unbounded claim whose proof failed on the user's problem, and that no
    conic probe confirmed, becomes ``*_inaccurate``."""
    name, weaker = _PROOFS.get(status, (None, None))
    if name is None or name not in checks or checks[name].passed:
        return status
    probe = checks.get("conic_probe")
    if probe is not None and probe.passed:
        return status
    reasons.append(f"{status} not proven on the problem ({describe(checks, [name])})")
    return weaker


class Verdict(NamedTuple):
    """What the gate decides about one route result.

    ``status`` is the status the checks back (the route's, downgraded or reclassified);
    ``checks`` the checks (:class:`Check` by name); ``reasons`` why the status differs from
    the route's (empty when it does not); ``measured`` the objective and violations at the
    returned point (:func:`measure`; empty when the result has no point).
    """

    status: str
    checks: dict[str, Check]
    reasons: list[str]
    measured: dict[str, float | None]

    @property
    def failed(self) -> list[str]:
        return failed(self.checks)


def has_point(status: str) -> bool:
    """Whether a result with ``status`` carries a point (values to write)."""
    return status in compat.SOLUTION_PRESENT or status == STATIONARY


def verify(problem: cp.Problem, result: RouteResult, *, is_global: bool,
           conic: bool = False) -> Verdict:
    """The gate: check ``result`` on the user's ``problem`` and decide the status it backs.

    ``is_global``: the route solves a convex problem (its bound is held to the gap
    tolerance); ``conic``: the result is a generic conic backend's, whose ``optimal_inaccurate``
    is promoted to ``optimal`` when every check passes, and whose ``unbounded`` needs no probe.
    The result must carry a value for every variable when its status has a point.
    """
    if has_point(result.status):
        measured = measure(problem, result.primal)
        checks = run_checks(problem, result, is_global, measured)
    else:
        measured, checks = {}, _claim_checks(problem, result)
    status, reasons = _decide(problem, result, checks, conic)
    return Verdict(status, checks, reasons, measured)


def _claim_checks(problem: cp.Problem, result: RouteResult) -> dict[str, Check]:
    """Checks of an infeasible / unbounded claim: the route's own proof (``status_check``)
    and, for infeasible, a feasibility solve that must not find a point."""
    checks: dict[str, Check] = {}
    if result.status_check is not None:
        name, passed, measured, tolerance = result.status_check
        checks[name] = Check(bool(passed), measured, tolerance)
    if result.status == cp.INFEASIBLE and result.farkas is not None:
        proof = farkas_on_problem(problem, result.farkas)
        if proof is not None:
            checks["farkas_on_problem"] = Check(proof[0], proof[1], 1.0 / FARKAS_RADIUS)
    if result.status == cp.UNBOUNDED and result.ray is not None:
        ok, worst, _ = ray_on_problem(problem, *result.ray, feasibility_tol=FEASIBILITY_TOL)
        checks["recession_on_problem"] = Check(ok, worst, FEASIBILITY_TOL)
    if result.status == cp.INFEASIBLE:
        verdict = feasibility_probe(problem)
        if verdict is not None:
            checks["conic_probe"] = _flag(verdict == "infeasible")
    return checks


def _decide(problem: cp.Problem, result: RouteResult, checks: dict[str, Check],
            conic: bool) -> tuple[str, list[str]]:
    """The status ``checks`` back, and why it differs from the route's (adds the probe's
    check to ``checks`` when it reclassifies)."""
    bad = failed(checks)
    reasons: list[str] = []
    status = result.status
    if (not bad and status == cp.OPTIMAL_INACCURATE and conic
            and "gap" in checks and "dual_feasibility" in checks):
        # the gate decides, not the solver's flag: a checked bound within the gap tolerance and
        # a point within the feasibility tolerance are what "optimal" means everywhere else
        reasons.append(f"{result.backend} reported optimal_inaccurate; every gate check passes "
                       f"(relative gap {checks['gap'].measured:.2g}, relative violation "
                       f"{checks['feasibility'].measured:.2g}): optimal")
        status = cp.OPTIMAL
    if bad and status in CERTIFIED:
        reasons.append(f"{status} not certified by the gate ({describe(checks, bad)})")
        status = cp.OPTIMAL_INACCURATE
    if ("feasibility" in bad or "objective" in bad) and status == cp.OPTIMAL_INACCURATE:
        if feasibility_probe(problem) == "infeasible":
            reasons.append("the returned point is infeasible and a conic feasibility probe "
                           "(Clarabel) certifies that the constraints admit no point")
            status = cp.INFEASIBLE
            checks["conic_probe"] = Check(True, 1.0, 1.0)
    status = _proof_held(status, checks, reasons)
    if status == cp.UNBOUNDED and not conic:
        # an unbounded claim needs a feasible set; cross-checked where the probe is cheap
        verdict = feasibility_probe(problem)
        if verdict is not None:
            checks["conic_probe"] = _flag(verdict == "feasible")
            if verdict != "feasible":
                reasons.append("the route said unbounded but the conic feasibility probe "
                               "found the constraints infeasible")
                status = cp.INFEASIBLE
    return status, reasons
