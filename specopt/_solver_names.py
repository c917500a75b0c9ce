"""The ``solver=`` name check shared by every route (convex or not), as CVXPY does it."""

from __future__ import annotations

from cvxpy.error import SolverError


def check_solver_name(solver: str | None) -> None:
    """Raise CVXPY's :class:`~cvxpy.error.SolverError` for a ``solver`` that is not installed.

    ``None`` (the route's default) passes; names are compared upper-cased, as CVXPY does. The
    message names the installed solvers (``solver="CLARABLE"``: "The solver CLARABLE is not
    installed; installed solvers: CLARABEL, SCS, ...").
    """
    if solver is None:
        return
    from .backends import installed_solvers

    if not isinstance(solver, str):
        raise SolverError(f"solver must be a solver name (a string), got {solver!r}")
    installed = installed_solvers()
    if solver.upper() not in installed:
        raise SolverError(f"The solver {solver.upper()} is not installed; installed solvers: "
                          + ", ".join(installed))
