"""New CVXPY atoms: identity, curvature, sign, value, gradient and domain (no routing logic)."""

from .linear_spectral import LinearSpectral, eigengap, linear_spectral, mve_cost
from .logdet_div import BurgDiv, LogDetDiv, burg_div, logdet_div
from .row_quad_forms import RowQuadForms, row_quad_forms
from .spectraplex import from_rank_one, in_spectraplex, rank_one_decomposition, spectraplex

SPECOPT_ATOM_TYPES = (LinearSpectral, LogDetDiv, BurgDiv, RowQuadForms)

__all__ = [
    "BurgDiv",
    "LinearSpectral",
    "LogDetDiv",
    "RowQuadForms",
    "SPECOPT_ATOM_TYPES",
    "burg_div",
    "eigengap",
    "from_rank_one",
    "in_spectraplex",
    "linear_spectral",
    "logdet_div",
    "mve_cost",
    "rank_one_decomposition",
    "row_quad_forms",
    "spectraplex",
]
