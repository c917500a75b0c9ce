"""Variable and dual values of a CVXPY problem: snapshot, restore, evaluate at a point.

A route never leaves values in the user's problem (``solve.py`` writes the accepted result
through ``Problem.unpack``); these helpers let the gate and the routes evaluate the user's
objective and constraints at a point and put every value back afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import cvxpy as cp
import numpy as np


def snapshot(problem: cp.Problem) -> dict[str, list]:
    """Copies of the current values of every variable and dual variable of ``problem``."""
    return {
        "vars": [(v, None if v.value is None else np.array(v.value)) for v in problem.variables()],
        "duals": [
            (dv, None if dv.value is None else np.array(dv.value))
            for c in problem.constraints
            for dv in c.dual_variables
        ],
    }


def restore(saved: dict[str, list]) -> None:
    """Put back the values a :func:`snapshot` recorded."""
    for v, val in saved["vars"]:
        v.save_value(val)
    for dv, val in saved["duals"]:
        dv.save_value(val)


@contextmanager
def values_set(problem: cp.Problem, primal: dict[int, Any]) -> Iterator[None]:
    """Temporarily give the problem's variables the values in ``primal``."""
    saved = snapshot(problem)
    try:
        for v in problem.variables():
            if v.id in primal:
                v.save_value(primal[v.id])
        yield
    finally:
        restore(saved)


def evaluate_at(problem: cp.Problem, primal: dict[int, Any]) -> float | None:
    """The user's objective at ``primal`` (variables are left as they were)."""
    with values_set(problem, primal):
        val = problem.objective.value
    return None if val is None else float(val)
