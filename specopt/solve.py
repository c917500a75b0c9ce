"""``method="specopt"``: analyze -> choose a route -> run -> verify -> unpack, plus ``explain``.

``run_route`` orchestrates: the route's ``solve`` (values restored afterwards, ``_values``), the
gate's verdict (``gate.verify``: checks and the status they back), a retry on the other conic
backend when a conic result fails the gate, and the :class:`Certificate`. The user's problem is
only written to at the very end, through ``Problem.unpack``; if anything fails before, every
variable and dual value is restored and the error propagates.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import weakref
from dataclasses import dataclass
from typing import Any

import cvxpy as cp

from . import _cvxpy_compat as compat
from . import gate
from ._interrupt import interrupts_as_keyboard_interrupt
from ._progress import Progress, take_current
from ._solver_names import check_solver_name
from ._threads import check_threads, limit_threads, problem_size
from ._tree import problem_nodes
from ._values import restore, snapshot
from .atoms import SPECOPT_ATOM_TYPES
from .atoms.row_quad_forms import DASK_REFUSAL, uses_dask
from .backends import backend_status
from .certificate import STATIONARY, Certificate, relative_gap
from .memory import check_fits
from .reductions import Match, Route, RouteMismatch, RouteResult, get_route, routes_in_order
from .reductions.conic_size import default_backend
from .validate import check_numeric_options, check_problem

_CERTIFICATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# --------------------------------------------------------------------------------------------
# Route choice and explanation
# --------------------------------------------------------------------------------------------
@dataclass
class RouteVerdict:
    route: str
    matches: bool
    reason: str
    chosen_by_auto: bool = False
    pays_off: bool | None = None
    pays_off_reason: str = ""


@dataclass
class Explanation:
    """What ``specopt.explain`` returns; ``str()`` gives the explanation in words."""

    verdicts: list[RouteVerdict]

    @property
    def auto_route(self) -> str | None:
        return next((v.route for v in self.verdicts if v.chosen_by_auto), None)

    def verdict(self, route: str) -> RouteVerdict:
        return next(v for v in self.verdicts if v.route == route)

    def __str__(self) -> str:
        lines = []
        for v in self.verdicts:
            mark = "matches" if v.matches else "does not match"
            line = f"- {v.route}: {mark}: {v.reason}"
            if v.matches and v.pays_off is not None and v.route != "conic":
                line += f"; auto would {'use' if v.pays_off else 'skip'} it ({v.pays_off_reason})"
            lines.append(line)
        auto = self.auto_route
        lines.append(
            f"route='auto' picks: {auto}" if auto else "route='auto' has no route for this problem"
        )
        return "\n".join(lines)

    __repr__ = __str__


def explain(problem: cp.Problem) -> Explanation:
    """Which routes match ``problem`` and why the others don't (``print(specopt.explain(p))``)."""
    if not isinstance(problem, cp.Problem):
        raise TypeError(f"explain expects a cvxpy.Problem, got {type(problem).__name__}")
    verdicts: list[RouteVerdict] = []
    chosen = None
    for route in routes_in_order():
        match = check_fits(route, problem, _recognize(route, problem))
        verdict = RouteVerdict(route.name, match.ok, match.reason)
        if match.ok:
            verdict.pays_off, verdict.pays_off_reason = route.pays_off(problem, match)
            if chosen is None and verdict.pays_off:
                chosen = verdict
        verdicts.append(verdict)
    if chosen is None:  # as choose_route: the first matching route when none pays off
        chosen = next((v for v in verdicts if v.matches), None)
    if chosen is not None:
        chosen.chosen_by_auto = True
    return Explanation(verdicts)


def _recognize(route: Route, problem: cp.Problem) -> Match:
    if not route.accepts_dask:
        if uses_dask(problem):
            return Match.no(DASK_REFUSAL)
    try:
        match = route.recognize(problem)
    except Exception as exc:  # a recognizer bug must not hide the other routes
        match = Match.no(f"recognizer failed: {type(exc).__name__}: {exc}")
    match.reason = short_reason(match.reason)
    return match


#: Longest reason ``explain`` prints for a route (matrices in expressions are elided).
MAX_REASON_CHARS = 300
_ARRAY_LITERAL = re.compile(r"\[\[.*?\]\]", re.DOTALL)


def short_reason(reason: str) -> str:
    """A route's reason on one line: array literals (printed matrices) elided, length capped."""
    text = _ARRAY_LITERAL.sub("[[...]]", str(reason))
    text = " ".join(text.split())
    if len(text) > MAX_REASON_CHARS:
        text = text[: MAX_REASON_CHARS - 3] + "..."
    return text


def choose_route(problem: cp.Problem, route: str = "auto") -> tuple[Route, Match]:
    """Resolve ``route`` to a route and its match; a named route that does not match raises."""
    if route != "auto":
        chosen = get_route(route)
        match = _recognize(chosen, problem)
        if not match.ok:
            raise RouteMismatch(f"route {route!r} does not apply: {match.reason}")
        return chosen, match
    fallback = None
    for candidate in routes_in_order():
        match = check_fits(candidate, problem, _recognize(candidate, problem))
        if not match.ok:
            continue
        pays, _ = candidate.pays_off(problem, match)
        if pays:
            return candidate, match
        fallback = fallback or (candidate, match)
    if fallback is not None:
        return fallback
    raise cp.error.DCPError(
        "no specopt route can solve this problem:\n" + str(explain(problem))
    )


# --------------------------------------------------------------------------------------------
# Solve
# --------------------------------------------------------------------------------------------
def run_route(
    problem: cp.Problem,
    route: str = "auto",
    solver: str | None = None,
    verbose: bool = False,
    retry: bool = True,
    **opts: Any,
) -> tuple[RouteResult, Certificate]:
    """Solve without writing into ``problem``; returns the gated result and its certificate.

    The result passes the verification gate (``specopt.gate``) before it is returned: a status
    of ``optimal`` / ``stationary_point`` that fails a check is downgraded (or reclassified
    ``infeasible``); on the conic route a failing result is first retried on the other backend
    (SCS <-> Clarabel) unless ``retry=False``.

    ``threads`` (an option of every route) is the number of BLAS/OpenMP threads of the solve:
    None (default) one thread, except for large problems on a machine with idle cores; a
    positive integer; or -1 for every core (``specopt._threads``).
    """
    if not isinstance(problem, cp.Problem):
        raise TypeError(f"expected a cvxpy.Problem, got {type(problem).__name__}")
    threads = check_threads(opts.pop("threads", None))
    with limit_threads(threads, size=problem_size(problem)), interrupts_as_keyboard_interrupt():
        return _run_route(problem, route, solver, verbose, retry, opts)


def _run_route(
    problem: cp.Problem, route: str, solver: str | None, verbose: bool, retry: bool,
    opts: dict[str, Any],
) -> tuple[RouteResult, Certificate]:
    check_problem(problem)
    check_numeric_options(opts)
    check_solver_name(solver)
    t0 = time.perf_counter()
    chosen, match = choose_route(problem, route)
    attempts: list[dict[str, Any]] = []
    result, verdict = _first_attempt(problem, chosen, match, solver, verbose, retry, opts,
                                     attempts)
    if verdict.failed and retry and chosen.name == "conic":
        result, verdict = _retry_failing(problem, chosen, match, verbose, opts, result, verdict,
                                         attempts)
    if result.status == cp.INFEASIBLE and "conic_probe" in verdict.failed:
        raise cp.error.SolverError(
            f"route {chosen.name} ({result.backend}) reported the problem infeasible, but a "
            "feasibility solve (Clarabel, zero objective) found a point that satisfies every "
            "constraint to the gate's tolerance: the infeasibility claim is wrong (badly "
            "scaled data?); try another solver, or rescale the problem"
            + (f"; attempts: {attempts}" if attempts else "")
        )
    if verdict.status != result.status:
        result = _with_status(result, verdict.status, problem)
    return result, _certificate(chosen, result, verdict, attempts, time.perf_counter() - t0)


def _first_attempt(
    problem: cp.Problem, chosen: Route, match: Match, solver: str | None, verbose: bool,
    retry: bool, opts: dict[str, Any], attempts: list[dict[str, Any]],
) -> tuple[RouteResult, gate.Verdict]:
    """The chosen route's solve and verdict; when the backend specopt picked for the conic
    route fails outright (Clarabel on SDPLIB hinf13), the other one with its own defaults (a
    backend the user named is not replaced)."""
    try:
        return _attempt(problem, chosen, match, solver, verbose, opts)
    except cp.error.SolverError as exc:
        alt = first = None
        if chosen.name == "conic" and solver is None and retry:
            first = default_backend(problem)
            alt = _alternative_backend(first)
        if alt is None:
            raise
        attempts.append({"backend": first, "status": "solver_error", "failed": str(exc)})
        return _attempt(problem, chosen, match, alt, verbose, _retry_options(opts))


def _retry_failing(
    problem: cp.Problem, chosen: Route, match: Match, verbose: bool, opts: dict[str, Any],
    result: RouteResult, verdict: gate.Verdict, attempts: list[dict[str, Any]],
) -> tuple[RouteResult, gate.Verdict]:
    """A conic result that claims optimal / infeasible and fails the gate: the other backend;
    its result is kept when it passes, or fails closer to feasible."""
    alt = _alternative_backend(result.backend)
    if alt is None or not (result.status in gate.CERTIFIED or result.status == cp.INFEASIBLE):
        return result, verdict
    attempts.append({"backend": result.backend, "status": result.status,
                     "failed": gate.describe(verdict.checks, verdict.failed)})
    try:
        result2, verdict2 = _attempt(problem, chosen, match, alt, verbose, _retry_options(opts))
    except cp.error.SolverError as exc:
        attempts.append({"backend": alt, "status": "solver_error", "failed": str(exc)})
        return result, verdict
    bad2 = verdict2.failed
    attempts.append({"backend": alt, "status": result2.status,
                     "failed": gate.describe(verdict2.checks, bad2) if bad2 else ""})
    if not bad2 or _better(verdict2.checks, verdict.checks):
        return result2, verdict2
    return result, verdict


def _certificate(chosen: Route, result: RouteResult, verdict: gate.Verdict,
                 attempts: list[dict[str, Any]], total: float) -> Certificate:
    """The certificate of the accepted result: values measured on the user's problem."""
    has_point = gate.has_point(verdict.status)
    meas = verdict.measured if has_point else {}
    objective = meas.get("objective") if has_point else result.objective
    bound = result.bound if has_point else None
    return Certificate(
        route=chosen.name,
        backend=result.backend,
        status=verdict.status,
        objective=objective,
        bound=bound,
        # one definition for every route: |objective - bound| / max(1, |objective|)
        gap=relative_gap(objective, bound) if bound is not None else (
            result.gap if has_point else None),
        max_violation=meas.get("max_violation"),
        relative_violation=meas.get("relative_violation"),
        iterations=result.iterations,
        setup_time=result.setup_time,
        solve_time=result.solve_time,
        total_time=total,
        history=result.history,
        is_global=chosen.is_global,
        extra=result.certificate_extra(),
        checks=verdict.checks,
        gate_reasons=verdict.reasons,
        attempts=attempts,
    )


def _attempt(
    problem: cp.Problem, chosen: Route, match: Match, solver: str | None, verbose: bool,
    opts: dict[str, Any],
) -> tuple[RouteResult, gate.Verdict]:
    """One route solve (values restored afterwards, whatever happens) and the gate's verdict."""
    saved = snapshot(problem)
    try:
        result = chosen.solve(problem, match, solver=solver, verbose=verbose, **dict(opts))
    finally:
        restore(saved)  # routes must not leave values behind, whatever happened
    if result.status in cp.settings.ERROR:
        raise cp.error.SolverError(f"route {chosen.name} failed with status {result.status}")
    if not gate.has_point(result.status):
        result = dataclasses.replace(result, primal={})  # infeasible / unbounded: no values
    else:
        missing = [v.name() for v in problem.variables() if v.id not in result.primal]
        if missing:
            raise cp.error.SolverError(
                f"route {chosen.name} returned no value for variable(s) {', '.join(missing)}"
            )
    verdict = gate.verify(problem, result, is_global=chosen.is_global,
                          conic=chosen.name == "conic")
    return result, verdict


def _retry_options(opts: dict[str, Any]) -> dict[str, Any]:
    """The options that carry over to another backend (not the first one's own settings)."""
    return {k: v for k, v in opts.items() if k in ("warm_start",)}


def _alternative_backend(backend: str) -> str | None:
    alt = {"SCS": "CLARABEL", "CLARABEL": "SCS", "MOSEK": "CLARABEL"}.get(str(backend).upper())
    return alt if alt is not None and backend_status(alt)[0] else None


def _better(new: dict[str, gate.Check], old: dict[str, gate.Check]) -> bool:
    """Whether a failing retry is still closer to feasible than the failing first attempt."""
    def viol(c):
        m = c.get("feasibility")
        return math.inf if m is None or m.measured is None else m.measured

    return viol(new) < viol(old)


def _with_status(result: RouteResult, status: str, problem: cp.Problem) -> RouteResult:
    """``result`` with a new status; infeasible/unbounded carry no point and no duals."""
    if status in compat.INF_OR_UNB:
        sense = 1 if isinstance(problem.objective, cp.Minimize) else -1
        return result.without_point(status, sense)
    return dataclasses.replace(result, status=status)


def apply_result(problem: cp.Problem, result: RouteResult, cert: Certificate) -> None:
    """Write a route's result into ``problem`` (values, duals, status, stats, certificate)."""
    status = result.status
    cvxpy_status = cp.OPTIMAL_INACCURATE if status == STATIONARY else status
    attr = {
        cp.settings.SOLVE_TIME: cert.solve_time,
        cp.settings.SETUP_TIME: cert.setup_time,
        cp.settings.NUM_ITERS: cert.iterations,
        cp.settings.EXTRA_STATS: {"route": cert.route, "certificate": cert},
    }
    primal = {v.id: result.primal.get(v.id) for v in problem.variables()}
    compat.unpack_result(
        problem,
        cvxpy_status,
        primal,
        result.dual,
        cert.objective,
        f"specopt:{cert.route}:{cert.backend}",
        attr,
        reported_status=status if status == STATIONARY else None,
    )
    if cert.setup_time is not None:
        compat.set_compilation_time(problem, cert.setup_time)
    # the certificate belongs to this solve: the stats object CVXPY replaces on every solve
    _CERTIFICATES[problem] = (cert, problem.solver_stats)


def solve(
    problem: cp.Problem,
    route: str = "auto",
    solver: str | None = None,
    verbose: bool = False,
    retry: bool = True,
    **opts: Any,
) -> float:
    """Solve ``problem`` with specopt; the same as ``problem.solve(method="specopt", ...)``.

    ``route`` is ``"auto"`` (the first specialized route whose structure matches and that is
    expected to pay off, else the conic route) or a route name (``specopt.route_names()``).
    ``solver`` picks the conic backend (conic route, and inner solves of iterated routes).
    ``retry=False``: a conic result that fails the verification gate is returned downgraded,
    not retried on the other backend (for callers with their own fallback and a time budget).
    Returns the optimal value (or the value at the stationary point for non-convex routes).
    """
    result, cert = run_route(problem, route, solver, verbose, retry, **opts)
    apply_result(problem, result, cert)
    if verbose:
        printer = take_current()
        if isinstance(printer, Progress):
            printer.finish(cert)
        else:
            print(cert)
    return problem.value


def certificate(problem: cp.Problem) -> Certificate:
    """The certificate of the last solve of ``problem``, which must have been a specopt solve.

    Any later solve (``prob.solve(solver="CLARABEL")``, another ``method``) replaces the values the
    certificate spoke about: the certificate is then gone (a ``ValueError`` says so), recognized
    by CVXPY's ``solver_stats`` object, which every solve replaces.
    """
    try:
        cert, stats = _CERTIFICATES[problem]
    except KeyError:
        raise ValueError(
            "this problem has not been solved with method='specopt' yet"
        ) from None
    if problem.solver_stats is not stats:
        now = getattr(problem.solver_stats, "solver_name", None)
        raise ValueError(
            "the last solve of this problem was not a specopt solve"
            + (f" (solver {now}, status {problem.status})" if now else "")
            + ": the certificate of the earlier specopt solve no longer describes its values; "
            "solve it again with method='specopt'"
        )
    return cert


def _solve_method(problem: cp.Problem, *args: Any, **kwargs: Any) -> float:
    if args:
        raise TypeError("method='specopt' takes keyword arguments only (route=, solver=, ...)")
    return solve(problem, **kwargs)


def dcp_hint(problem: cp.Problem) -> str | None:
    """Hint appended to CVXPY's DCPError when specopt can solve the problem."""
    if not any(isinstance(n, SPECOPT_ATOM_TYPES) for n in problem_nodes(problem)):
        return None
    try:
        chosen, _ = choose_route(problem, "auto")
    except Exception:
        return (
            "specopt atoms are in this problem: try prob.solve(method=\"specopt\"); "
            "specopt.explain(prob) says which specopt routes apply and why"
        )
    kind = "a local solution (stationary point)" if not chosen.is_global else "a solution"
    return (
        f"specopt can find {kind} of this problem: "
        f"prob.solve(method=\"specopt\")  (route {chosen.name!r}; see specopt.explain(prob))"
    )
