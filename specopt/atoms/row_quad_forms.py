"""Row quadratic forms ``q(X)_r = v_r^T X v_r`` over the rows ``v_r`` of a constant matrix V.

    q(X) = (V ⊙ V) vec(X),   (V ⊙ V)_{r, i + n j} = V_{ri} V_{rj}                      (1)

(row-wise Khatri-Rao product, column-major vec). ``q`` is affine in ``X``; the atom keeps ``V`` so
that routes can evaluate ``q`` and its adjoint ``q^*(y) = V^T diag(y) V`` matrix-free in
``O(m n)`` memory instead of the ``m x n^2`` matrix (1). Its conic form is the single stacked
linear map (1), never a loop of ``m`` traces, built as ``sum((V X) .* V, axis=1)`` so that only
``V`` reaches CVXPY's matrix builder.
"""

from __future__ import annotations

import numpy as np

from .._cvxpy_compat import AffAtom, linop_row_quad_forms
from ._checks import as_finite_array


class RowQuadForms(AffAtom):
    """``(v_r^T X v_r)_{r=1..m}`` for the rows of a constant ``V`` (m x n) and ``X`` (n x n)."""

    def __init__(self, X, V) -> None:
        self.V = as_finite_array(V, "V", ndim=2)
        super().__init__(X)

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
        return np.einsum("ri,ri->r", self.V @ X, self.V)  # BLAS product: O(m n^2) fast

    def khatri_rao(self) -> np.ndarray:
        """The dense ``m x n^2`` matrix ``V ⊙ V`` of (1) (the Jacobian; for checks)."""
        m, n = self.V.shape
        return (self.V[:, None, :] * self.V[:, :, None]).reshape(m, n * n)

    def graph_implementation(self, arg_objs, shape, data=None):
        return linop_row_quad_forms(self.V, arg_objs[0]), []

    def name(self) -> str:
        return f"row_quad_forms(V, {self.args[0].name()})"


def row_quad_forms(V, X) -> RowQuadForms:
    """The vector ``(v_r^T X v_r)_r`` over the rows ``v_r`` of the constant matrix ``V``."""
    return RowQuadForms(X, V)
