"""Row quadratic forms ``q(X)_r = v_r^T X v_r`` over the rows ``v_r`` of a constant matrix V.

    q(X) = (V ⊙ V) vec(X),   (V ⊙ V)_{r, i + n j} = V_{ri} V_{rj}                      (1)

(row-wise Khatri-Rao product, column-major vec). ``q`` is affine in ``X``; the atom keeps ``V`` so
that routes can evaluate ``q`` and its adjoint ``q^*(y) = V^T diag(y) V`` matrix-free in
``O(m n)`` memory instead of the ``m x n^2`` matrix (1). Its conic form is the single stacked
linear map (1), never a loop of ``m`` traces, built as ``sum((V X) .* V, axis=1)`` so that only
``V`` reaches CVXPY's matrix builder.

``V`` may be a ``dask.array`` (rows chunked) for data that do not fit one machine: the atom then
never materializes it. Its value (1) is one Dask pass over the row blocks (on the active
scheduler), only the matrix-generation route can solve problems with it (it keeps the data
distributed), and the conic graph refuses it instead of computing V into memory.
"""

from __future__ import annotations

import numpy as np

from .._cvxpy_compat import AffAtom, linop_row_quad_forms
from ..solvers.mg.dask_rows import is_dask_array, row_quad_values
from ._checks import as_finite_array

#: why routes other than matrix generation refuse a problem with a Dask-backed ``row_quad_forms``
DASK_REFUSAL = (
    "the data are a Dask array (row_quad_forms(V, X) with a dask.array V); this route would "
    "have to compute them into memory. Use route='matrix_generation', which keeps them "
    "distributed"
)


class RowQuadForms(AffAtom):
    """``(v_r^T X v_r)_{r=1..m}`` for the rows of a constant ``V`` (m x n) and ``X`` (n x n)."""

    def __init__(self, X, V) -> None:
        if is_dask_array(V):
            if V.ndim != 2 or not np.issubdtype(V.dtype, np.number):
                raise ValueError(f"V must be a numeric matrix, got a {V.ndim}-d {V.dtype} array")
            if any(np.isnan(c) for c in V.shape):
                raise ValueError("the Dask array V needs known chunk sizes "
                                 "(call V.compute_chunk_sizes() first)")
            self.V = V  # kept lazy: never materialized
        else:
            self.V = as_finite_array(V, "V", ndim=2)
        if self.V.shape[0] == 0:
            raise ValueError("row_quad_forms: V has no rows (shape "
                             f"{tuple(self.V.shape)}); it needs at least one")
        super().__init__(X)

    @property
    def is_dask(self) -> bool:
        """Whether ``V`` is a Dask array."""
        return is_dask_array(self.V)

    def get_data(self) -> list:
        return [self.V]

    def validate_arguments(self) -> None:
        X = self.args[0]
        if X.ndim != 2 or X.shape[0] != X.shape[1]:
            raise ValueError(f"row_quad_forms needs a square matrix X, got shape {X.shape}")
        if self.V.shape[1] != X.shape[0]:
            raise ValueError(
                f"row_quad_forms: V has {self.V.shape[1]} columns but X is {X.shape[0]} x "
                f"{X.shape[1]}"
            )
        super().validate_arguments()

    def shape_from_args(self) -> tuple[int, ...]:
        return (self.V.shape[0],)

    def sign_from_args(self) -> tuple[bool, bool]:
        X = self.args[0]
        return X.is_psd(), X.is_nsd()

    def is_incr(self, idx: int) -> bool:
        return False

    def is_decr(self, idx: int) -> bool:
        return False

    def numeric(self, values):
        X = np.asarray(values[0], dtype=float)
        if self.is_dask:
            return row_quad_values(self.V, X)  # one pass over the row blocks
        return np.einsum("ri,ri->r", self.V @ X, self.V)  # BLAS product: O(m n^2) fast

    def khatri_rao(self) -> np.ndarray:
        """The dense ``m x n^2`` matrix ``V ⊙ V`` of (1) (the Jacobian; for checks)."""
        if self.is_dask:
            raise ValueError("khatri_rao of a Dask-backed row_quad_forms would materialize V")
        m, n = self.V.shape
        return (self.V[:, None, :] * self.V[:, :, None]).reshape(m, n * n)

    def graph_implementation(self, arg_objs, shape, data=None):
        if self.is_dask:
            raise ValueError(f"row_quad_forms: conic compilation refused: {DASK_REFUSAL}")
        return linop_row_quad_forms(self.V, arg_objs[0]), []

    def name(self) -> str:
        return f"row_quad_forms(V, {self.args[0].name()})"


def row_quad_forms(V, X) -> RowQuadForms:
    """The vector ``(v_r^T X v_r)_r`` over the rows ``v_r`` of the constant matrix ``V``.

    ``V``: numpy array (m, n), or a ``dask.array`` chunked by rows (kept lazy, see the module
    docstring).
    """
    return RowQuadForms(X, V)


def uses_dask(problem) -> bool:
    """Whether any ``row_quad_forms`` in ``problem`` (a Problem or an expression) is Dask-backed."""
    from .._tree import problem_nodes, walk

    nodes = problem_nodes(problem) if hasattr(problem, "constraints") else walk(problem)
    return any(isinstance(node, RowQuadForms) and node.is_dask for node in nodes)
