"""Variable and dual values of a CVXPY problem: snapshot, restore, evaluate at a point, and the
scale of a constraint at the current values (the gate's relative violation).

A route never leaves values in the user's problem (``solve.py`` writes the accepted result
through ``Problem.unpack``); these helpers let the gate and the routes evaluate the user's
objective and constraints at a point and put every value back afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from . import _cvxpy_compat as compat


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


def objective_value(problem: cp.Problem) -> Any:
    """``problem.objective.value`` at the variables' current values; a hinge or sum over
    Dask-backed ``row_quad_forms`` rows is evaluated as one Dask graph (only scalars reach the
    client, :mod:`specopt._lazy_value`) instead of one array entry per row."""
    expr = problem.objective.expr
    if _dask_backed(expr):
        from ._lazy_value import NotLazy, lazy_value

        try:
            return lazy_value(expr)
        except NotLazy:
            pass
    return problem.objective.value


def evaluate_at(problem: cp.Problem, primal: dict[int, Any]) -> float | None:
    """The user's objective at ``primal`` (variables are left as they were)."""
    with values_set(problem, primal):
        val = objective_value(problem)
    return None if val is None else float(val)


#: :func:`expanded_term_scale` reads coefficients of constraints up to this many entries.
EXPANDED_SCALE_MAX_SIZE = 100_000


def expanded_term_scale(con: cp.Constraint) -> float | None:
    """The largest term ``|a_rk x_k|`` (and constant ``|c_r|``) of the constraint's affine sides
    written out as ``sum_k a_rk x_k + c_r`` at the variables' values: ``1^T K 1 == 0`` adds up
    the entries of ``K``, which :func:`constraint_scale` sees only through ``cp.sum``, ``trace``
    and ``+``. None when it does not apply (not affine, parameters, Dask rows, too large): the
    gate asks for it only for a constraint that fails on :func:`constraint_scale`."""
    if isinstance(con, (cp.constraints.PSD, cp.constraints.SOC)) or _dask_backed(con):
        return None
    scale = 0.0
    for arg in con.args:
        if not arg.is_affine() or arg.parameters() or arg.size > EXPANDED_SCALE_MAX_SIZE:
            return None
        variables = arg.variables()
        if any(v.value is None for v in variables):
            return None
        try:
            coeffs, offset = compat.affine_coefficients(arg, variables)
        except ValueError:
            return None
        scale = max(scale, float(np.max(np.abs(offset), initial=0.0)))
        for v in variables:
            A = abs(coeffs[v.id]).multiply(np.abs(np.asarray(v.value, dtype=float)).ravel(
                order="F")[None, :])
            scale = max(scale, float(A.max()) if A.nnz else 0.0)
    return scale


def _inf_norm(value: Any) -> float:
    if value is None:
        return math.nan
    if sp.issparse(value):  # a sparse constant's value (``cp.trace(L @ K)``, L scipy sparse)
        return float(abs(value).max()) if value.nnz else 0.0
    arr = np.abs(np.asarray(value, dtype=complex if np.iscomplexobj(value) else float))
    return float(np.max(arr)) if arr.size else 0.0


def _summands(expr: cp.Expression) -> list[cp.Expression]:
    """The terms ``expr`` adds up: an ``AddExpression``'s terms; for ``cp.sum(X)`` the entries
    of ``X`` (its value's largest entry is the largest summand), for ``trace(X)`` the diagonal
    of ``X`` (so ``cp.sum(K) == 0`` is scaled by the size of ``K``'s entries, not by its own
    value near 0). A Dask-backed argument is not descended into: its value would be one entry
    per data row."""
    if isinstance(expr, compat.AddExpression):
        return [t for a in expr.args for t in _summands(a)]
    if isinstance(expr, (compat.Sum, compat.Trace)) and not _dask_backed(expr):
        inner = expr.args[0]
        return [expr, cp.diag(inner) if isinstance(expr, compat.Trace) else inner]
    return [expr]


def _dask_backed(expr: cp.Expression) -> bool:
    """Whether ``expr`` (or a constraint) has Dask-backed ``row_quad_forms`` rows."""
    from .atoms.row_quad_forms import uses_dask  # (the atoms import this package's compat)

    return uses_dask(expr)


def constraint_scale(con: cp.Constraint) -> float:
    """``scale(c)`` of :mod:`specopt.gate` (the constraint's variables must hold values)."""
    scale = 0.0
    for arg in con.args:
        scale = max(scale, _inf_norm(arg.value))
        for t in _summands(arg):
            scale = max(scale, _inf_norm(t.value))
    return scale
