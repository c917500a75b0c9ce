"""Small questions about expressions the readers ask: constant values, strict linearity, sameness,
weights of broadcast operands."""

from __future__ import annotations

from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..._cvxpy_compat import Conj


def dense_value(value: Any) -> np.ndarray:
    """A constant's value as a dense float array (scipy sparse constants included)."""
    if sp.issparse(value):
        value = value.toarray()
    return np.asarray(value, dtype=float)


def const_value(node: Any) -> np.ndarray | None:
    """The value of a parameter-free constant expression, else None."""
    if isinstance(node, cp.Expression) and node.is_constant() and not node.parameters():
        return dense_value(node.value)
    return None


def is_linear(node: Any) -> bool:
    """Affine in the strict sense: only affine atoms in the tree (CVXPY's ``is_affine`` also
    says yes to ``0 * neg(x)``, which its coefficient extractor cannot read)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if hasattr(n, "is_atom_affine") and not n.is_atom_affine():
            return False
        stack.extend(getattr(n, "args", []))
    return bool(node.is_affine())


def same_expr(a: Any, b: Any) -> bool:
    """Whether two expressions are the same (identical object or identical text and variables);
    ``conj(u)`` is ``u`` (a real ``u``: what ``cp.vdot`` builds)."""
    if a is b:
        return True
    if type(a) is Conj:
        a = a.args[0]
    if type(b) is Conj:
        b = b.args[0]
    if a is b:
        return True
    return a.shape == b.shape and str(a) == str(b) and \
        {v.id for v in a.variables()} == {v.id for v in b.variables()}


def reduce_to(W: np.ndarray, shape: tuple) -> np.ndarray:
    """Weights of a broadcast operand: sum over the broadcast dimensions."""
    W = np.asarray(W, dtype=float)
    if W.shape == tuple(shape):
        return W
    size = int(np.prod(shape)) if shape else 1
    if size == 1:
        return np.asarray(W.sum()).reshape(shape)
    # numpy-style broadcasting: sum over leading dims and dims of size 1
    out = W
    while out.ndim > len(shape):
        out = out.sum(axis=0)
    for i, s in enumerate(shape):
        if s == 1 and out.shape[i] != 1:
            out = out.sum(axis=i, keepdims=True)
    return out.reshape(shape)
