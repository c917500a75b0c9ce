"""Run one problem through several backends and routes; a table of what each achieved.

Each backend is one row: status, objective, relative difference to the best certified objective,
certified gap, max constraint violation (measured on the user's problem), compile and solve
seconds, iterations. A backend that is not installed, not licensed, or does not apply is a row
that says why. Afterwards the problem's variables hold the values of the most accurate certified
run (smallest ``gap + violation`` among runs whose status is optimal).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp

from .backends import GENERIC_BACKENDS, backend_status
from .certificate import STATIONARY, Certificate
from .gate import BOUND_TOL
from .reductions import RouteMismatch, RouteResult
from .solve import apply_result, run_route


@dataclass
class CompareRow:
    backend: str
    route: str | None
    status: str
    objective: float | None = None
    rel_diff: float | None = None
    gap: float | None = None
    max_violation: float | None = None
    compile_time: float | None = None
    solve_time: float | None = None
    total_time: float | None = None
    iterations: int | None = None
    note: str = ""
    bound_contradicted: bool = False
    certificate: Certificate | None = field(default=None, repr=False)
    _result: RouteResult | None = field(default=None, repr=False)

    @property
    def certified(self) -> bool:
        return (self.certificate is not None and self.status == cp.OPTIMAL
                and not self.bound_contradicted)

    def to_dict(self) -> dict[str, Any]:
        keys = (
            "backend", "route", "status", "objective", "rel_diff", "gap", "max_violation",
            "compile_time", "solve_time", "total_time", "iterations", "note",
        )
        return {k: getattr(self, k) for k in keys}


COLUMNS = (
    ("backend", "backend"),
    ("route", "route"),
    ("status", "status"),
    ("objective", "objective"),
    ("rel_diff", "rel. diff"),
    ("gap", "gap"),
    ("max_violation", "max viol."),
    ("compile_time", "compile [s]"),
    ("solve_time", "solve [s]"),
    ("total_time", "total [s]"),
    ("iterations", "iters"),
    ("note", "note"),
)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.3g}" if abs(value) < 1e-3 or abs(value) >= 1e4 else f"{value:.6g}"
    return str(value)


@dataclass
class CompareTable:
    """Result of :func:`compare`: ``rows``, ``best`` (the row whose values the variables hold),
    ``name`` (what was solved)."""

    rows: list[CompareRow]
    best: CompareRow | None
    #: what was solved, for titles (``compare(..., name=...)``; default: a short description)
    name: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [r.to_dict() for r in self.rows],
            "best": None if self.best is None else self.best.backend,
        }

    def to_markdown(self) -> str:
        head = "| " + " | ".join(label for _, label in COLUMNS) + " |"
        rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
        body = [
            "| " + " | ".join(_fmt(getattr(r, key)).replace("|", "/") for key, _ in COLUMNS) + " |"
            for r in self.rows
        ]
        return "\n".join([head, rule, *body])

    def row(self, backend: str) -> CompareRow:
        return next(r for r in self.rows if r.backend == backend)

    def plot(self, ax=None):
        """Horizontal bars of total time per backend on a linear axis, each labelled with its
        time, status and gap; rows that did not run (unavailable, not applicable, failed) are
        labelled rows without a bar. The title names the problem (``name``).

        Returns the matplotlib ``Axes``; nothing is shown or saved by itself. From a script::

            ax = table.plot()
            ax.figure.savefig("compare.png", dpi=150, bbox_inches="tight")

        (or ``matplotlib.pyplot.show()`` in an interactive session).
        """
        try:
            import matplotlib.pyplot as plt
            from matplotlib.patches import Patch
        except ImportError as exc:  # pragma: no cover - optional extra
            raise ImportError("compare(...).plot() needs matplotlib: pip install 'specopt[plot]'")\
                from exc
        rows = self.rows
        if ax is None:
            _, ax = plt.subplots(figsize=(7.5, 1.2 + 0.5 * max(1, len(rows))),
                                 layout="constrained")
        times = [r.total_time for r in rows if r.total_time is not None]
        top = max(times, default=1.0)
        scale, unit = (1e3, "ms") if top < 1.0 else (1.0, "s")
        ypos = list(range(len(rows)))[::-1]  # first row on top
        longest = 0
        for y, r in zip(ypos, rows, strict=True):
            if r.total_time is None:
                why = r.note if r.note.startswith(r.status) else f"{r.status}: {r.note}"
                why = why if len(why) <= 70 else why[:67] + "..."
                ax.text(0.0, y, "  " + (why or r.status), va="center", ha="left", fontsize=8,
                        color="0.35", style="italic")
                continue
            color = "C0" if r.certified else "C1"
            ax.barh(y, r.total_time * scale, height=0.6, color=color)
            label = f"  {r.total_time * scale:.3g} {unit}  {r.status}"
            if r.gap is not None:
                label += f", gap {r.gap:.0e}"
            if r.bound_contradicted:
                label += "; bound contradicted"
            longest = max(longest, len(label))
            ax.text(r.total_time * scale, y, label, va="center", ha="left", fontsize=8)
        ax.set_yticks(ypos, [r.backend if r.route in (None, "auto") or r.backend != "specopt"
                             else f"specopt\n(route {r.route})" for r in rows])
        ax.set_ylim(-0.6, len(rows) - 0.4)
        # room for the labels right of the bars (about 90 characters span the axes)
        ax.set_xlim(0.0, top * scale / max(0.3, 1.0 - (longest + 4) / 90))
        ax.set_xlabel(f"total time (compile + solve) [{unit}]")
        handles = [Patch(color=c, label=lab) for c, lab, shown in (
            ("C0", "certified optimal", any(r.certified for r in rows)),
            ("C1", "ran, not certified optimal",
             any(r.total_time is not None and not r.certified for r in rows))) if shown]
        ax.legend(handles=handles, loc="upper center", ncol=2, fontsize=8, frameon=False,
                  bbox_to_anchor=(0.5, -0.12 - 0.6 / (1 + len(rows))))
        title = "specopt.compare" + (f": {self.name}" if self.name else "")
        ax.set_title(textwrap.fill(title, 80), fontsize=10)
        return ax

    def __str__(self) -> str:
        return self.to_markdown()

    __repr__ = __str__


def _note(cert: Certificate) -> str:
    """What the verification gate changed (first reason, short), and local-solution marks."""
    parts = [] if cert.is_global else ["local solution (non-convex route)"]
    if cert.gate_reasons:
        reason = cert.gate_reasons[0]
        parts.append("gate: " + (reason if len(reason) <= 120 else reason[:117] + "..."))
    return "; ".join(parts)


#: Status of a row whose backend cannot take the problem (e.g. a conic solver on a non-DCP one).
NOT_APPLICABLE = "not applicable"


def _not_applicable_note(route: str, message: str) -> str:
    """The note of a "not applicable" row: why, in the user's terms, and what to use instead."""
    why = message.split(" does not apply: ", 1)[-1]
    if route == "conic" and why.startswith("not DCP"):
        return "not applicable: non-convex (use method='specopt')"
    return f"not applicable: {why}"


def footnotes(table: CompareTable) -> list[str]:
    """One line per row whose status is not ``optimal``: what the status means for that row."""
    out = []
    for r in table.rows:
        if r.bound_contradicted:
            out.append(f"{r.backend} reported {r.status}, but its {r.note}; the row is not "
                       "counted as certified.")
            continue
        if r.status == cp.OPTIMAL:
            continue
        if r.status == cp.OPTIMAL_INACCURATE:
            raw = (r.certificate.extra.get("solver_status") if r.certificate else None) or ""
            said = f" (it reported {raw!r})" if raw else ""
            line = (f"{r.backend} stopped at its reduced-accuracy tolerances{said}, not its full "
                    "ones, so CVXPY marks the answer optimal_inaccurate")
            if r.gap is not None and r.max_violation is not None:
                line += (f"; measured on your problem it is still within gap {r.gap:.1e} and "
                         f"violation {r.max_violation:.1e}")
            out.append(line + ".")
        elif r.status == STATIONARY:
            out.append(f"{r.backend}: stationary_point = a local solution of a non-convex "
                       "problem (monotone objective trace, no global bound).")
        elif r.status in (NOT_APPLICABLE, "unavailable", "failed"):
            note = r.note[len(r.status):].lstrip(": ") if r.note.startswith(r.status) else r.note
            out.append(f"{r.backend}: {r.status}: {note}")
        else:
            out.append(f"{r.backend}: status {r.status} (no optimal solution certified).")
    return out


#: a point counts as feasible for the bound cross-check up to this max violation
_FEASIBLE_TOL = 1e-7


def _flag_contradicted_bounds(problem: cp.Problem, rows: list[CompareRow]) -> None:
    """Weak duality across rows: a row's bound may not be beaten by another row's feasible point.

    A row whose claimed bound (lower when minimizing) lies above some other row's objective at a
    point with violation <= 1e-7, by more than the gate's bound tolerance (``BOUND_TOL`` relative
    to ``max(1, |f|)``, the same test as the gate's ``bound_side`` check), has a solver-side gap
    that does not hold for the user's problem; it is not used as the reference and its note says
    so. (Differences within solver accuracy, e.g. 1e-9, are not contradictions.)
    """
    sense = 1.0 if isinstance(problem.objective, cp.Minimize) else -1.0
    feasible = [r for r in rows if r.objective is not None and r.max_violation is not None
                and r.max_violation <= _FEASIBLE_TOL]
    for r in rows:
        bound = None if r.certificate is None else r.certificate.bound
        if bound is None:
            continue
        for other in feasible:
            if other is r:
                continue
            slack = BOUND_TOL * max(1.0, abs(other.objective))
            if sense * (bound - other.objective) > slack:
                r.bound_contradicted = True
                r.note = (f"claimed bound {bound:.10g} is beaten by {other.backend}'s feasible "
                          f"objective {other.objective:.10g}: its gap does not hold here")
                break


def _parse_backend(name: str) -> tuple[str, str | None]:
    """``"SCS"`` -> conic route on SCS; ``"specopt"`` -> auto; ``"specopt:<route>"`` -> route."""
    if name == "specopt":
        return "auto", None
    if name.startswith("specopt:"):
        return name.split(":", 1)[1], None
    return "conic", name.upper()


def describe(problem: cp.Problem) -> str:
    """A short name of ``problem`` for titles: sense, variables (shapes), constraints."""
    sense = "minimize" if isinstance(problem.objective, cp.Minimize) else "maximize"
    shapes = ", ".join(f"{v.name()} {'x'.join(map(str, v.shape)) or 'scalar'}"
                       for v in problem.variables()[:3])
    more = ", ..." if len(problem.variables()) > 3 else ""
    return f"{sense} over {shapes}{more}; {len(problem.constraints)} constraints"


def compare(
    problem: cp.Problem,
    backends: Iterable[str] = ("CLARABEL", "SCS", "MOSEK", "specopt"),
    *,
    name: str | None = None,
    **opts: Any,
) -> CompareTable:
    """Solve ``problem`` with each backend and tabulate status, objective, gap, violation, times.

    ``backends`` holds CVXPY solver names (run through the conic route), ``"specopt"`` (route
    ``"auto"``) and ``"specopt:<route>"``. ``name`` says what the problem is (plot titles;
    default: :func:`describe`). ``opts`` go to every solve. Never raises for a backend that is
    unavailable or fails; its row says why.
    """
    rows: list[CompareRow] = []
    for backend in backends:
        route, solver = _parse_backend(backend)
        if solver is not None:
            usable, why = backend_status(solver)
            if not usable:
                rows.append(CompareRow(backend, route, "unavailable", note=why))
                continue
        # a fresh Problem over the same variables and constraints per backend: CVXPY caches
        # compiled data on the Problem object, which would credit later rows with earlier compiles
        fresh = cp.Problem(problem.objective, problem.constraints)
        try:
            # an explicit backend row is that backend's result, gated but not retried elsewhere
            result, cert = run_route(fresh, route=route, solver=solver, retry=solver is None,
                                     **opts)
        except RouteMismatch as exc:  # the backend's route does not apply: say so in words
            rows.append(CompareRow(backend, route if route != "auto" else None, NOT_APPLICABLE,
                                   note=_not_applicable_note(route, str(exc))))
            continue
        except Exception as exc:  # a failing backend is a row, not an exception
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            rows.append(CompareRow(backend, route if route != "auto" else None, "failed",
                                   note=f"{type(exc).__name__}: {msg[:160]}"))
            continue
        rows.append(
            CompareRow(
                backend=backend,
                route=cert.route if solver is None else f"conic/{cert.backend}",
                status=cert.status,
                objective=cert.objective,
                gap=cert.gap,
                max_violation=cert.max_violation,
                compile_time=cert.setup_time,
                solve_time=cert.solve_time,
                total_time=cert.total_time,
                iterations=cert.iterations,
                note=_note(cert),
                certificate=cert,
                _result=result,
            )
        )
    _flag_contradicted_bounds(problem, rows)
    certified = [r for r in rows if r.certified and r.objective is not None
                 and not r.bound_contradicted]
    if certified:
        reference = min(certified, key=lambda r: (r.gap or 0.0) + (r.max_violation or 0.0))
        ref_obj = reference.objective
        for r in rows:
            if r.objective is not None and ref_obj is not None:
                r.rel_diff = abs(r.objective - ref_obj) / max(1.0, abs(ref_obj))
        best = reference
    else:
        present = [r for r in rows if r._result is not None and r.objective is not None]
        best = min(present, key=lambda r: r.max_violation or 0.0) if present else None
    if best is not None and best._result is not None and best.certificate is not None:
        apply_result(problem, best._result, best.certificate)
    return CompareTable(rows, best, describe(problem) if name is None else name)


__all__ = ["GENERIC_BACKENDS", "CompareRow", "CompareTable", "compare"]
