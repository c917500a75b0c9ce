"""The entry point: :func:`analyze`, cached per problem.

The description is of the problem as it would be solved now (parameters bound to their current
values). The same parameter values return the same object; new values re-read the objective
and the constraints that hold parameters only: the affine maps of parameter-free constraints
(by constraint) and of the objective's affine leaves (by expression) are kept.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np

from .constraints import read_constraints
from .description import Description
from .objective import read_objective


def bind_parameters(expr: Any) -> Any:
    """``expr`` (expression or constraint) with every Parameter replaced by its current value."""
    if not expr.parameters():
        return expr
    return _bind(expr)


def _bind(node: Any) -> Any:
    if isinstance(node, cp.Parameter):
        if node.value is None:
            raise ValueError(f"parameter {node.name()} has no value")
        return cp.Constant(node.value)
    args = getattr(node, "args", None)
    if not args or not node.parameters():
        return node
    return node.copy([_bind(a) for a in args])


def parameter_signature(problem: cp.Problem) -> tuple:
    """The current values of the problem's parameters (what a cached description depends on)."""
    sig = []
    for p in problem.parameters():
        v = p.value
        sig.append((p.id, None if v is None else np.asarray(v, dtype=float).tobytes()))
    return tuple(sig)


@dataclass
class _Entry:
    """What is kept per problem: the maps of its parameter-free constraints (by constraint id),
    of its objective's affine leaves (by expression), and the last description with the
    parameter values it was read at."""

    maps: dict = field(default_factory=dict)
    exprs: dict = field(default_factory=dict)
    sig: tuple | None = None
    desc: Description | None = None


_CACHE: weakref.WeakKeyDictionary[cp.Problem, _Entry] = weakref.WeakKeyDictionary()
_MAX_CACHED_EXPRS = 512


def analyze(problem: cp.Problem) -> Description:
    """The normalized description of ``problem`` with its parameters' current values.

    Cached per problem: the same parameter values return the same object; new values re-read
    the objective and the constraints with parameters only.
    """
    entry = _CACHE.get(problem)
    if entry is None:
        entry = _CACHE[problem] = _Entry()
    sig = parameter_signature(problem)
    if entry.desc is not None and entry.sig == sig:
        return entry.desc
    if len(entry.exprs) > _MAX_CACHED_EXPRS:  # bound copies of a long sweep
        entry.exprs = {}
    variables = problem.variables()
    obj = problem.objective
    objective = read_objective(bind_parameters(obj.expr), variables, entry.exprs)
    bound = [bind_parameters(c) for c in problem.constraints]
    infos = read_constraints(list(problem.constraints), bound, variables, entry.maps)
    desc = Description(
        sense=1 if isinstance(obj, cp.Minimize) else -1,
        variables=variables,
        terms=objective.terms,
        affine=objective.affine,
        constant=objective.constant,
        constraints=infos,
        has_parameters=bool(problem.parameters()),
        _expr_maps=entry.exprs,
    )
    entry.sig, entry.desc = sig, desc
    return desc


def try_analyze(problem: cp.Problem) -> tuple[Description | None, str]:
    """``(description, "")``, or ``(None, reason)`` when the problem cannot be read (a parameter
    without a value, an expression CVXPY cannot extract coefficients from)."""
    try:
        return analyze(problem), ""
    except ValueError as exc:
        return None, f"the problem cannot be analyzed: {exc}"
    except Exception as exc:  # noqa: BLE001 - reported as the reason, never raised
        return None, f"the problem cannot be analyzed ({type(exc).__name__}: {exc})"[:200]


def clear_cache() -> None:
    """Forget every cached description (tests, benchmarks)."""
    _CACHE.clear()
