"""Walking CVXPY expression trees (public API only)."""

from __future__ import annotations

from collections.abc import Iterator

import cvxpy as cp


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
