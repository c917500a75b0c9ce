"""Which conic solvers are usable here, and which one to pick for a problem.

MOSEK is picked when it has a working licence. Otherwise Clarabel (interior point, high accuracy)
or SCS (first order, scales to larger PSD blocks), by the size of the PSD part of the problem.
Clarabel forms a dense block of size M_i = n_i (n_i + 1) / 2 per PSD cone of side n_i in its KKT
system, so its cost grows like sum_i M_i^2 (and its memory too). Measured on this 2-core machine
(`shared/reference/cvxpy-extension-notes.md`, section E): PSDBoost at n = 24 (M^2 = 9e4): Clarabel
0.75 s vs SCS 1.1 s; n = 50 (M^2 = 1.6e6): Clarabel 19.6 s vs SCS 3.7 s; three blocks at n = 50:
Clarabel 8.75 s vs SCS 0.23 s. The crossover sits between the two: Clarabel is chosen while
sum_i M_i^2 <= CLARABEL_MAX_KKT_PSD (3e5, i.e. one block of side ~33 or several smaller).
"""

from __future__ import annotations

import functools
import os

import cvxpy as cp

from ._tree import walk

CLARABEL_MAX_KKT_PSD = 3.0e5
GENERIC_BACKENDS = ("CLARABEL", "SCS", "MOSEK")


def installed_solvers() -> list[str]:
    return list(cp.installed_solvers())


@functools.lru_cache(maxsize=1)
def mosek_status() -> tuple[bool, str]:
    """``(usable, reason)``: whether MOSEK is installed and has a working licence."""
    if os.environ.get("SPECOPT_DISABLE_MOSEK"):
        return False, "disabled by SPECOPT_DISABLE_MOSEK"
    if "MOSEK" not in installed_solvers():
        return False, "MOSEK is not installed (pip install 'specopt[mosek]')"
    try:
        import mosek

        with mosek.Env() as env:
            env.checkoutlicense(mosek.feature.pts)
    except Exception as exc:  # any licence problem: missing file, expired, no server
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return False, f"MOSEK has no working licence ({msg[:120]})"
    return True, "licensed"


def mosek_licensed() -> bool:
    return mosek_status()[0]


def backend_status(name: str) -> tuple[bool, str]:
    """``(usable, reason)`` for a CVXPY solver name."""
    name = name.upper()
    if name == "MOSEK":
        return mosek_status()
    if name not in installed_solvers():
        return False, f"{name} is not installed"
    return True, "installed"


def available_backends() -> list[str]:
    """Generic conic backends usable here, in order of preference."""
    return [b for b in GENERIC_BACKENDS if backend_status(b)[0]]


def psd_block_sides(problem: cp.Problem) -> list[int]:
    """Sides of the PSD cones the conic form of ``problem`` will have (estimated from the tree).

    Counts PSD/NSD variables, ``>>`` constraints and the PSD atoms CVXPY and specopt know
    (one block per lambda_max-type atom, two per lambda_sum_largest breakpoint, 2n for log_det).
    """
    from .atoms import LinearSpectral, LogDetDiv

    sides: list[int] = []
    for var in problem.variables():
        if var.attributes.get("PSD") or var.attributes.get("NSD"):
            sides.append(var.shape[0])
    roots = [problem.objective.expr, *problem.constraints]
    for root in roots:
        if isinstance(root, cp.constraints.PSD):
            sides.append(root.args[0].shape[0])
        for node in walk(root):
            if isinstance(node, LinearSpectral):
                n = node.args[0].shape[0]
                sides.extend([n, n] * len(node.breakpoints()[1]))
            elif isinstance(node, (LogDetDiv, cp.log_det)):
                sides.append(2 * node.args[0].shape[0])
            elif isinstance(node, cp.lambda_sum_largest):
                sides.extend([node.args[0].shape[0]] * 2)
            elif isinstance(node, (cp.lambda_max, cp.normNuc, cp.sigma_max)):
                sides.append(sum(node.args[0].shape))
    return sides


def default_backend(problem: cp.Problem) -> str:
    """MOSEK if licensed; else Clarabel for small PSD parts, SCS for large ones."""
    if mosek_licensed():
        return "MOSEK"
    sides = psd_block_sides(problem)
    kkt = sum((n * (n + 1) / 2) ** 2 for n in sides)
    usable = available_backends()
    if kkt <= CLARABEL_MAX_KKT_PSD and "CLARABEL" in usable:
        return "CLARABEL"
    if "SCS" in usable:
        return "SCS"
    if usable:
        return usable[0]
    raise cp.error.SolverError("no conic solver (Clarabel, SCS or MOSEK) is installed")
