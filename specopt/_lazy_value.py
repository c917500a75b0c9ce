"""The value of an expression over Dask-backed rows as one Dask graph, not as client arrays.

A hinge over Dask rows, ``sum(w * pos(rho - row_quad_forms(P, M) + row_quad_forms(Q, M)))``, has
CVXPY's value only through ``numeric`` calls that turn every argument into a numpy array: the
rows' values ``q_r = v_r^T M v_r``, then each elementwise step, each an array with one entry per
row on the client (about 37 bytes a row at the gate's check). Here the same tree is evaluated
with Dask's own operations,

    value(f(e_1, ..., e_k)) = f(value(e_1), ..., value(e_k))     (f elementwise or a sum),

so ``q`` stays a lazy array chunked like ``V``, the elementwise steps run per row block where
the block lives (on the workers with a distributed client) and only the reductions' scalars come
back: client memory independent of the number of rows.

Only the nodes between the Dask rows and the first reduction need Dask's operations, and only a
few kinds occur there in practice; an expression with any other node on that path is
:class:`NotLazy` and the caller falls back to CVXPY's evaluation.
"""

from __future__ import annotations

import functools
from typing import Any

import cvxpy as cp
import numpy as np

from ._cvxpy_compat import (
    AddExpression,
    DivExpression,
    MulExpression,
    NegExpression,
    Promote,
    Sum,
)
from .atoms.row_quad_forms import RowQuadForms, uses_dask


class NotLazy(Exception):
    """The expression has a node this evaluator cannot keep lazy over Dask rows."""


def _is_lazy(value: Any) -> bool:
    import dask

    return dask.is_dask_collection(value)


def _rows_value(node: RowQuadForms):
    """``(v_r^T X v_r)_r`` as a lazy array chunked like ``V`` (one task per row block)."""
    from .solvers.mg.dask_rows import lazy_row_quad_values

    X = node.args[0].value
    return None if X is None else lazy_row_quad_values(node.V, X)


def _combine(node: cp.Expression, values: list):
    """``node``'s operation on its arguments' values with Dask's (numpy-dispatching) operations."""
    if isinstance(node, AddExpression):
        return functools.reduce(lambda a, b: a + b, values)
    if isinstance(node, NegExpression):
        return -values[0]
    if isinstance(node, cp.multiply):
        return values[0] * values[1]
    if isinstance(node, MulExpression) and (np.ndim(values[0]) == 0 or np.ndim(values[1]) == 0):
        return values[0] * values[1]
    if isinstance(node, DivExpression):
        return values[0] / values[1]
    if isinstance(node, cp.maximum):
        return functools.reduce(np.maximum, values)
    if isinstance(node, cp.minimum):
        return functools.reduce(np.minimum, values)
    if isinstance(node, cp.abs):
        return np.abs(values[0])
    if isinstance(node, Sum):
        return np.sum(values[0], axis=node.axis, keepdims=node.keepdims)
    raise NotLazy(f"{type(node).__name__} over Dask rows")


def _arg_value(arg: cp.Expression):
    """An argument's value; a scalar promoted to the rows stays a scalar (it broadcasts against
    the Dask rows in the parent's operation; an array of one entry per row would be embedded in
    the graph)."""
    if isinstance(arg, Promote) and arg.args[0].size == 1:
        value = arg.args[0].value
        return None if value is None else np.asarray(value).reshape(())
    return _value(arg)


def _value(node: cp.Expression):
    if isinstance(node, RowQuadForms) and node.is_dask:
        return _rows_value(node)
    if not node.args or not uses_dask(node):
        return node.value  # no Dask rows below: CVXPY's own evaluation
    values = [_arg_value(arg) for arg in node.args]
    if any(v is None for v in values):
        return None
    if not any(_is_lazy(v) for v in values):
        return node.numeric(values)
    return _combine(node, values)


def lazy_value(expr: cp.Expression) -> Any:
    """``expr.value`` at the variables' current values, Dask rows evaluated as one graph.

    Raises :class:`NotLazy` when a node between the Dask rows and a reduction is not one of the
    elementwise operations and sums above (then use ``expr.value``).
    """
    out = _value(expr)
    if out is not None and _is_lazy(out):
        import dask

        (out,) = dask.compute(out)
    return out
