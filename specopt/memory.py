"""Will a route's working form fit in the machine's memory? (used by ``route="auto"``)

The conic route (and the iterated-SDP route, whose subproblems are conic) builds CVXPY's conic
form: every row of ``row_quad_forms(V, X)`` on an ``n x n`` variable becomes a dense row of
``n^2`` coefficients (``v v^T``), so the form has about

    nnz = sum over row_quad_forms nodes (rows * n^2) + sum over constant data (its entries)

nonzeros, and the canonicalization plus the solver's KKT system hold each several times:
:data:`CONIC_BYTES_PER_NONZERO` bytes per counted nonzero (22.6 GB measured, still growing, for
an in-memory PSDBoost with D = 50 and m = 1e5, issue 23: two row_quad_forms, nnz = 2 m D^2 =
5e8). The factored routes keep the data as given plus small working sets:
:data:`FACTORED_BYTES_PER_ENTRY` bytes per data entry (0.5 GB measured for the same 1e7 entries
of P and Q). A route fits when its estimate is at most :data:`MEMORY_FRACTION` of the physical
memory (``os.sysconf``, else ``/proc/meminfo``; unknown memory: everything fits).
"""

from __future__ import annotations

import os
from typing import Any

import cvxpy as cp
import numpy as np

from ._tree import problem_nodes

#: bytes per nonzero of the conic form at the conic route's peak (CVXPY + the solver)
CONIC_BYTES_PER_NONZERO = 45.0
#: bytes per data entry (V, constants) at a factored route's peak (matrix generation)
FACTORED_BYTES_PER_ENTRY = 64.0
#: share of the physical memory a route may plan to use
MEMORY_FRACTION = 0.7
#: the routes that build the conic form of the whole problem
CONIC_FORM_ROUTES = ("conic", "iterated_sdp")


def physical_memory() -> int | None:
    """Bytes of physical memory, or None when the platform does not say."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        if pages > 0 and size > 0:
            return int(pages) * int(size)
    except (AttributeError, ValueError, OSError):
        pass
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _constant_entries(node: Any) -> int:
    value = getattr(node, "_value", None)
    if value is None:
        value = node.value
    nnz = getattr(value, "nnz", None)
    return int(nnz) if nnz is not None else int(np.size(value))


def form_sizes(problem: cp.Problem) -> tuple[float, float]:
    """``(conic nonzeros, data entries)``: the estimates of the module docstring."""
    from .atoms.row_quad_forms import RowQuadForms

    nnz = data = 0.0
    seen: set[int] = set()
    for node in problem_nodes(problem):
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, RowQuadForms):
            m, n = node.V.shape
            nnz += float(m) * n * n
            data += float(m) * n
        elif isinstance(node, cp.Constant):
            k = _constant_entries(node)
            nnz += k
            data += k
    return nnz, data


def route_memory(route: str, problem: cp.Problem) -> float:
    """Estimated peak bytes of ``route`` on ``problem``."""
    nnz, data = form_sizes(problem)
    if route in CONIC_FORM_ROUTES:
        return CONIC_BYTES_PER_NONZERO * nnz
    return FACTORED_BYTES_PER_ENTRY * data


def check_fits(route: Any, problem: cp.Problem, match: Any) -> Any:
    """``match``, or a no-match saying why when ``route``'s estimated memory exceeds
    :data:`MEMORY_FRACTION` of the machine's (``route="auto"`` then takes another route)."""
    if not match.ok:
        return match
    total = physical_memory()
    if total is None:
        return match
    need = route_memory(route.name, problem)
    if need <= MEMORY_FRACTION * total:
        return match
    what = "conic form" if route.name in CONIC_FORM_ROUTES else "data and working sets"
    return type(match).no(
        f"would need about {_size(need)} ({what}), more than {MEMORY_FRACTION:.0%} of the "
        f"machine's {_size(total)} of memory")


def _size(nbytes: float) -> str:
    return f"{nbytes / 1e9:.1f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.3g} MB"
