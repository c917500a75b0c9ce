"""Reading the structure of CVXPY expressions: tree walks, tables keyed by class, identity maps."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

import cvxpy as cp
import scipy.sparse as sp

from ._cvxpy_compat import affine_coefficients

T = TypeVar("T")


def walk(expr) -> Iterator:
    """Pre-order walk over an expression or constraint and all its arguments."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(getattr(node, "args", [])))


def problem_nodes(problem: cp.Problem) -> Iterator:
    """Every node of the objective and the constraints."""
    yield from walk(problem.objective.expr)
    for con in problem.constraints:
        yield from walk(con)


def find_atoms(problem: cp.Problem, types: type | tuple[type, ...]) -> list:
    return [node for node in problem_nodes(problem) if isinstance(node, types)]


def is_identity_of(expr: cp.Expression, var: cp.Variable) -> bool:
    """Whether ``expr`` is exactly ``var`` (an affine map with identity coefficients, no offset)."""
    if any(v.id != var.id for v in expr.variables()) or expr.parameters():
        return False
    if not expr.is_affine() or expr.size != var.size:
        return False
    coeffs, off = affine_coefficients(expr, [var])
    A = sp.csr_array(coeffs[var.id])
    if A.shape[0] != A.shape[1] or off.any():
        return False
    return (A - sp.identity(A.shape[0], format="csr")).count_nonzero() == 0


class ByClass(Generic[T]):
    """A table keyed by class (as CVXPY's ``CANON_METHODS``), looked up by the exact class first,
    then along its MRO, so that a subclass (``PowerApprox`` of ``Power``) finds its base's entry
    unless it has its own. An entry ``None`` stops the search: the class has no entry even
    though a base has one. Lookups are memoized per class."""

    def __init__(self, entries: Mapping[type, T | None]) -> None:
        self._entries = dict(entries)
        self._memo: dict[type, T | None] = {}

    def get(self, cls: type) -> T | None:
        try:
            return self._memo[cls]
        except KeyError:
            pass
        found = next((self._entries[b] for b in cls.__mro__ if b in self._entries), None)
        self._memo[cls] = found
        return found
