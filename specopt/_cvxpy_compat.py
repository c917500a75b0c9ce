"""Every use of CVXPY internals, in one place.

CVXPY (checked on 1.9.x) has no public registry for external atoms. specopt therefore

* adds its canonicalizers to ``CANON_METHODS`` (looked up by exact ``type(expr)`` and called as
  ``canon(expr, args, solver_context=...)``),
* appends its atoms to the cone-detection lists ``PSD_ATOMS`` / ``EXP_ATOMS`` so that automatic
  solver choice never hands them to a QP solver,
* registers ``method="specopt"`` through the public ``Problem.register_solve``,
* reads affine maps through ``CoeffExtractor`` (routes need the data matrices of affine
  expressions), and writes results through ``Problem.unpack`` with a ``Solution``.

Registration is idempotent. Nothing else in specopt imports from ``cvxpy.reductions``,
``cvxpy.utilities`` or ``cvxpy.atoms.__init__`` lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

try:  # CVXPY >= 1.4
    from cvxpy.reductions.dcp2cone.canonicalizers import CANON_METHODS
except ImportError as exc:  # pragma: no cover - only on unsupported versions
    raise ImportError(
        "specopt needs cvxpy >= 1.9 (cvxpy.reductions.dcp2cone.canonicalizers not found)"
    ) from exc

import cvxpy.atoms as _cvxpy_atoms
from cvxpy.problems.problem import SolverStats
from cvxpy.reductions.dcp2cone.dcp2cone import Dcp2Cone
from cvxpy.reductions.inverse_data import InverseData
from cvxpy.reductions.solution import Solution
from cvxpy.utilities.coeff_extractor import CoeffExtractor

MIN_CVXPY = (1, 9)


def cvxpy_version() -> tuple[int, ...]:
    parts = []
    for p in cp.__version__.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


if cvxpy_version()[:2] < MIN_CVXPY:  # pragma: no cover
    raise ImportError(f"specopt needs cvxpy >= 1.9, found {cp.__version__}")


# --------------------------------------------------------------------------------------------
# Atom registration
# --------------------------------------------------------------------------------------------
def expand_canonicalizer(
    expand: Callable[[Any, list], cp.Expression],
) -> Callable[..., tuple[cp.Expression, list]]:
    """Wrap ``expand(expr, args) -> expression in public CVXPY atoms`` as a canonicalizer.

    CVXPY does not re-canonicalize what a canonicalizer returns, so the expanded tree is run
    through ``Dcp2Cone.canonicalize_tree`` here; the result is affine plus cone constraints.
    """

    def canon(expr, args, solver_context=None):
        tree = expand(expr, args)
        return Dcp2Cone(solver_context=solver_context).canonicalize_tree(tree, False)

    return canon


def register_atom(
    atom_type: type, canon: Callable[..., Any], cones: Iterable[str] = ("PSD",)
) -> None:
    """Register ``atom_type`` with its canonicalizer and the cone families it needs."""
    CANON_METHODS[atom_type] = canon
    lists = {"PSD": _cvxpy_atoms.PSD_ATOMS, "EXP": _cvxpy_atoms.EXP_ATOMS}
    for cone in cones:
        target = lists[cone]
        if atom_type not in target:
            target.append(atom_type)


def register_solve_method(name: str, func: Callable[..., Any]) -> None:
    cp.Problem.register_solve(name, func)


def is_registered(atom_type: type) -> bool:
    return atom_type in CANON_METHODS


# --------------------------------------------------------------------------------------------
# Reading affine maps
# --------------------------------------------------------------------------------------------
def affine_coefficients(
    expr: cp.Expression, variables: list[cp.Variable]
) -> tuple[dict[int, sp.csr_array], np.ndarray]:
    """Coefficients of an affine, parameter-free expression.

    Returns ``(coeffs, offset)`` with ``vec(expr) = sum_v coeffs[v.id] @ vec(v) + offset``,
    vectorization column-major (CVXPY's convention) and ``coeffs[v.id]`` of shape
    ``(expr.size, v.size)``. Variables of the expression not in ``variables`` are an error.
    """
    if not expr.is_affine():
        raise ValueError("affine_coefficients needs an affine expression")
    if expr.parameters():
        raise ValueError("affine_coefficients does not accept parameters")
    missing = {v.id for v in expr.variables()} - {v.id for v in variables}
    if missing:
        raise ValueError("expression has variables outside the given list")
    holder = cp.Problem(cp.Minimize(0), [v == 0 for v in variables])
    inverse = InverseData(holder)
    tensor = CoeffExtractor(inverse, None).affine(expr)
    full = sp.csr_array(tensor.reshape((expr.size, inverse.x_length + 1), order="F"))
    coeffs: dict[int, sp.csr_array] = {}
    for v in variables:
        start = inverse.var_offsets[v.id]
        coeffs[v.id] = sp.csr_array(full[:, start : start + v.size])
    offset = full[:, [inverse.x_length]].toarray().ravel()
    return coeffs, offset


# --------------------------------------------------------------------------------------------
# Writing results back
# --------------------------------------------------------------------------------------------
def unpack_result(
    problem: cp.Problem,
    status: str,
    primal: dict[int, np.ndarray],
    dual: dict[int, Any],
    opt_val: float | None,
    solver_name: str,
    attr: dict[str, Any],
    reported_status: str | None = None,
) -> None:
    """Write values, duals and status into ``problem`` the way CVXPY's own solve does.

    ``reported_status`` replaces the status afterwards (used for statuses CVXPY does not know,
    such as a stationary point of a non-convex route).
    """
    solution = Solution(status, opt_val, primal, dual, attr)
    problem.unpack(solution)
    problem._solver_stats = SolverStats.from_dict(attr, solver_name)
    if reported_status is not None:
        problem._status = reported_status


def set_compilation_time(problem: cp.Problem, seconds: float) -> None:
    problem._compilation_time = seconds


SOLUTION_PRESENT = tuple(cp.settings.SOLUTION_PRESENT)
INF_OR_UNB = tuple(cp.settings.INF_OR_UNB)
