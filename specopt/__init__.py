"""specopt: spectral and PSD matrix atoms for CVXPY, with specialized fast routes.

Importing specopt registers its atoms with CVXPY (conic forms, cone detection) and the solve
method ``prob.solve(method="specopt", route="auto", solver=None, ...)``.
"""

from __future__ import annotations

from . import _cvxpy_compat
from ._version import __version__ as __version__
from .atoms import (
    burg_div,
    eigengap,
    from_rank_one,
    in_spectraplex,
    linear_spectral,
    logdet_div,
    mve_cost,
    rank_one_decomposition,
    row_quad_forms,
    spectraplex,
)
from .backends import available_backends, mosek_licensed
from .certificate import STATIONARY, Certificate
from .io import read_sdpa, write_sdpa
from .reductions import route_names
from .reductions.canonicalize import register_canonicalizers
from .reductions.conic_size import default_backend
from .solve import _solve_method, certificate, dcp_hint, explain, solve

register_canonicalizers()
_cvxpy_compat.register_solve_method("specopt", _solve_method)
_cvxpy_compat.install_dcp_hint(dcp_hint)

last_certificate = certificate

# imported last, and by name, so that ``specopt.compare`` is the function, not the module
from .compare import CompareTable, compare  # noqa: E402

__all__ = [
    "STATIONARY",
    "Certificate",
    "CompareTable",
    "available_backends",
    "burg_div",
    "certificate",
    "compare",
    "default_backend",
    "eigengap",
    "explain",
    "from_rank_one",
    "in_spectraplex",
    "last_certificate",
    "linear_spectral",
    "logdet_div",
    "mosek_licensed",
    "mve_cost",
    "rank_one_decomposition",
    "read_sdpa",
    "route_names",
    "row_quad_forms",
    "solve",
    "spectraplex",
    "write_sdpa",
]
