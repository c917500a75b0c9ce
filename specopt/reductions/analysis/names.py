"""Short names for expressions and constraints (explain's reasons: never a matrix dump)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cvxpy as cp
import numpy as np

from ..._cvxpy_compat import (
    AddExpression,
    DivExpression,
    LambdaSumLargest,
    Maximum,
    MulExpression,
    Multiply,
    NegExpression,
    Pnorm,
    Power,
    Promote,
    QuadForm,
    Sum,
    Trace,
    Transpose,
)
from ..._tree import ByClass

#: a formatter gets the node and its arguments' names; None means "the default form"
Formatter = Callable[[Any, list[str]], "str | None"]

_CONSTRAINT_OPS: ByClass[str] = ByClass({
    cp.constraints.Equality: " == ", cp.constraints.Zero: " == 0",
    cp.constraints.Inequality: " <= ", cp.constraints.PSD: " >> 0",
    cp.constraints.NonNeg: " >= 0", cp.constraints.NonPos: " <= 0",
})


def _infix(sep: str) -> Formatter:
    return lambda node, args: "(" + sep.join(args) + ")" if len(args) >= 2 else None


def _labelled(label: str) -> Formatter:
    return lambda node, args: f"{label}({', '.join(args)})"


_FORMATS: ByClass[Formatter] = ByClass({
    AddExpression: _infix(" + "), MulExpression: _infix(" @ "), Multiply: _infix(" * "),
    DivExpression: _infix(" / "),
    NegExpression: lambda node, args: "-" + args[0],
    Promote: lambda node, args: args[0],
    Transpose: lambda node, args: args[0] + ".T",
    Power: lambda node, args: f"{args[0]}**{float(np.asarray(node.p.value)):g}",
    Maximum: _labelled("maximum"), Sum: _labelled("sum"), Trace: _labelled("trace"),
    QuadForm: _labelled("quad_form"), Pnorm: _labelled("norm"),
    LambdaSumLargest: lambda node, args: f"{_atom_label(node)}({', '.join(args)}, {node.k:g})",
})


def _atom_label(node: Any) -> str:
    try:
        return node.name().split("(")[0] if hasattr(node, "name") else type(node).__name__
    except Exception:  # pragma: no cover - defensive: name() of a foreign atom
        return type(node).__name__


def _fmt(node: Any, depth: int = 0) -> str:
    if depth > 12:
        return "..."
    if isinstance(node, (cp.Variable, cp.Parameter)):
        return node.name()
    if isinstance(node, cp.Constant):
        if node.size == 1:
            return f"{float(np.real(np.asarray(node.value)).ravel()[0]):.4g}"
        return "[" + "x".join(map(str, node.shape)) + " const]"
    args = [_fmt(a, depth + 1) for a in getattr(node, "args", [])]
    if isinstance(node, cp.constraints.constraint.Constraint):
        op = _CONSTRAINT_OPS.get(type(node))
        if op is None:
            return f"{type(node).__name__}({', '.join(args)})"
        return op.join(args) if len(args) == 2 else args[0] + op
    form = _FORMATS.get(type(node))
    text = form(node, args) if form is not None else None
    return text if text is not None else f"{_atom_label(node)}({', '.join(args)})"


def short(expr: Any, width: int = 60) -> str:
    """A one-line name of an expression or constraint, at most ``width`` characters.

    Constant matrices are shown by their shape (``[3x3 const]``), never their entries.
    """
    text = _fmt(expr)
    text = text[1:-1] if text.startswith("(") and text.endswith(")") else text
    return text if len(text) <= width else text[: width - 3] + "..."
