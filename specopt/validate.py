"""Input checks shared by the routes: clear errors for what specopt cannot handle."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import Any

import cvxpy as cp


def check_problem(problem: cp.Problem) -> None:
    """Reject what no specopt route handles (integer / boolean variables)."""
    for v in problem.variables():
        if v.attributes.get("boolean") or v.attributes.get("integer"):
            raise cp.error.SolverError(
                f"specopt routes do not handle integer variables: variable {v.name()!r} is "
                f"{'boolean' if v.attributes.get('boolean') else 'integer'}; solve the problem "
                "with a mixed-integer solver (prob.solve(solver=...)) instead"
            )


def check_options(route: str, given: Iterable[str], known: Iterable[str]) -> None:
    """Unknown options are an error naming the known ones (and the closest match)."""
    known = sorted(set(known))
    unknown = sorted(set(given) - set(known))
    if not unknown:
        return
    hints = []
    for u in unknown:
        close = difflib.get_close_matches(u, known, n=1)
        if close:
            hints.append(f"{u!r} (did you mean {close[0]!r}?)")
        else:
            hints.append(repr(u))
    raise ValueError(
        f"unknown option(s) for route {route!r}: {', '.join(hints)}; "
        f"the route's options are: {', '.join(known)}"
    )


def check_positive(name: str, value: Any, *, allow_none: bool = False, integer: bool = False,
                   allow_zero: bool = False) -> None:
    """``value`` must be a finite number > 0 (>= 0 with ``allow_zero``), or None if allowed."""
    if value is None and allow_none:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if ok and integer:
        ok = float(value).is_integer()
    if not ok:
        kind = "an integer" if integer else "a finite number"
        rel = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {kind} {rel}, got {value!r}")
