r"""One analysis pass: a normalized description of a problem that every route matches against.

The objective is read once into a signed, scaled sum of classified terms

    objective = constant + a^T vec(x) + sum_t term_t,

where the weights of every term are obtained by distributing constants through sums, negations,
scalar/elementwise products, matrix products with constants, divisions by constants, ``sum`` and
promotions, so that equivalent spellings give the same description:

* ``QuadTerm``      ``u^T P u`` with ``u`` affine: ``sum_squares``, ``quad_form``,
  ``norm(.)**2`` / ``power(norm(., 2), 2)``, ``square(norm(.))``, ``sum(square(.))``,
  ``quad_over_lin(., y)`` (y > 0 constant), elementwise ``square`` with any weights;
* ``HingeTerm``     ``sum_i w_i max(g_i, 0)`` with ``g`` affine: ``pos``, ``maximum(., 0)``,
  ``maximum(0, .)`` and ``maximum(., c)`` (= ``c + max(. - c, 0)``), any weights;
* ``SpectralTerm``  ``sum_i alpha_i lambda_i(K)``: ``lambda_max``, ``lambda_min``,
  ``lambda_sum_largest`` (fractional k too), ``lambda_sum_smallest``, specopt's
  ``linear_spectral`` / ``mve_cost`` / ``eigengap`` and ``trace(K)``; all terms on the same
  matrix are merged into one alpha (e.g. ``2 lsl(K, 2) - lambda_max(K) - lsl(K, 3)`` is the
  eigengap ``lambda_2 - lambda_3``);
* ``LogDetTerm``    ``c * logdet_div(X, X0)``, also written by hand as
  ``c (tr(S X) - log det X)`` = ``c logdet_div(X, S^{-1}) + c (log det S + n)``;
* ``BurgTerm``      ``c * burg_div(x, x0)``, also by hand as ``c sum(x / x0 - log x)``;
* ``OtherTerm``     anything else (kept with its weight, named in ``explain``).

Constraints are classified (``ConstraintInfo``): PSD (on a variable or an LMI), affine
``==``/``<=``/``>=`` rows (read as an ``AffineMap``; ``row_quad_forms(V, X)`` rows stay factored
as ``M @ q_V(X)`` with ``V`` kept as the user gave it, never the |S| x n^2 matrix), bounds, trace
bounds and centering rows (``K @ ones == 0`` and ``sum(K) == 0`` alike), and other cones.

Parameters are bound to their current values (the description is of the problem as it would be
solved now). The description is cached per problem; the affine maps of parameter-free
constraints are kept across parameter changes, so a sweep only re-reads the objective and the
constraints that contain parameters.

Layout (imports point down the list): ``values`` and ``names`` (small questions about
expressions, short names) -> ``affine`` (``AffineMap``, reading coefficients) -> ``terms`` ->
``readers`` (``_READERS``: one reader per atom family, keyed by class) -> ``objective`` and
``constraints`` (the two passes) -> ``description`` -> ``cache`` (``analyze``) -> ``rebuild``
(``normalized_problem``).
"""


from __future__ import annotations

from .affine import AffineMap, affine_maps, cached_maps, zero_map
from .cache import analyze, bind_parameters, clear_cache, parameter_signature, try_analyze
from .constraints import ConstraintInfo
from .description import Description, objective_summary
from .names import short
from .rebuild import affine_expr, normalized_problem, term_expr
from .terms import (
    BurgTerm,
    HingeTerm,
    LogDetTerm,
    OtherTerm,
    QuadTerm,
    SpectralTerm,
    Term,
    spectral_name,
)
from .values import dense_value, is_linear

__all__ = [
    "AffineMap",
    "BurgTerm",
    "ConstraintInfo",
    "Description",
    "HingeTerm",
    "LogDetTerm",
    "OtherTerm",
    "QuadTerm",
    "SpectralTerm",
    "Term",
    "affine_expr",
    "affine_maps",
    "analyze",
    "bind_parameters",
    "cached_maps",
    "clear_cache",
    "dense_value",
    "is_linear",
    "normalized_problem",
    "objective_summary",
    "parameter_signature",
    "short",
    "spectral_name",
    "term_expr",
    "try_analyze",
    "zero_map",
]
