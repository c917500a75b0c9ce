"""LogDet (Burg matrix) divergence and its vector version.

    D_ld(X, X0) = tr(X X0^{-1}) - log det(X X0^{-1}) - n                              (1)
                = <X0^{-1}, X> - log det X + log det X0 - n,

the Bregman divergence of ``phi(X) = -log det X``: convex in ``X`` on the PD cone, zero exactly at
``X = X0``, invariant under scaling ``D(cX, cX0) = D(X, X0)`` and congruence
``D(A^T X A, A^T X0 A) = D(X, X0)``; gradient ``X0^{-1} - X^{-1}``. The conic form is (1) with
``cp.log_det`` (exponential and PSD cones). The vector version, used for slack variables, is

    burg(x, x0) = sum_i x_i / x0_i - log(x_i / x0_i) - 1.                             (2)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._base import ConvexDivergence, SymmetricArgument
from ._checks import as_finite_array, symmetric_pd_matrix


class LogDetDiv(SymmetricArgument, ConvexDivergence):
    """``D_ld(X, X0)`` of (1); ``X0`` is a constant symmetric positive definite matrix."""

    def __init__(self, X, X0) -> None:
        self.X0 = symmetric_pd_matrix(X0, "X0")
        self.X0_inv = np.linalg.inv(self.X0)
        self.X0_inv = 0.5 * (self.X0_inv + self.X0_inv.T)
        self.logdet_X0 = float(np.linalg.slogdet(self.X0)[1])
        super().__init__(X)

    def get_data(self) -> list:
        return [self.X0]

    def validate_arguments(self) -> None:
        X = self.args[0]
        if X.ndim != 2 or X.shape[0] != X.shape[1]:
            raise ValueError(f"logdet_div needs a square matrix X, got shape {X.shape}")
        if X.shape != self.X0.shape:
            raise ValueError(
                f"logdet_div: X has shape {X.shape} but X0 has shape {self.X0.shape}"
            )
        if X.is_complex():
            raise ValueError("logdet_div supports real symmetric matrices only")
        super().validate_arguments()

    def _domain(self) -> list:
        X = self.args[0]
        return [X == X.T, X >> 0]

    def numeric(self, values):
        X = np.asarray(values[0], dtype=float)
        sign, logdet = np.linalg.slogdet(X)
        if sign <= 0 or not np.all(np.linalg.eigvalsh(0.5 * (X + X.T)) > 0):
            return np.inf
        n = X.shape[0]
        return float(np.sum(self.X0_inv * X) - logdet + self.logdet_X0 - n)

    def _grad(self, values):
        X = 0.5 * (values[0] + values[0].T)
        try:
            np.linalg.cholesky(X)
        except np.linalg.LinAlgError:
            return [None]
        D = self.X0_inv - np.linalg.inv(X)
        return [sp.csc_array(D.ravel(order="F")[:, None])]

    def name(self) -> str:
        return f"logdet_div({self.args[0].name()}, X0)"


class BurgDiv(ConvexDivergence):
    """``sum_i x_i/x0_i - log(x_i/x0_i) - 1`` of (2); ``x0 > 0`` constant, same shape as ``x``."""

    def __init__(self, x, x0) -> None:
        self.x0 = as_finite_array(x0, "x0")
        if np.any(self.x0 <= 0):
            raise ValueError("burg_div: x0 must be strictly positive")
        super().__init__(x)

    def get_data(self) -> list:
        return [self.x0]

    def validate_arguments(self) -> None:
        x = self.args[0]
        if self.x0.shape not in ((), x.shape):
            raise ValueError(f"burg_div: x has shape {x.shape} but x0 has shape {self.x0.shape}")
        super().validate_arguments()

    def _domain(self) -> list:
        return [self.args[0] >= 0]

    def numeric(self, values):
        x = np.asarray(values[0], dtype=float)
        if np.any(x <= 0):
            return np.inf
        r = x / self.x0
        return float(np.sum(r - np.log(r) - 1.0))

    def _grad(self, values):
        x = np.asarray(values[0], dtype=float)
        if np.any(x <= 0):
            return [None]
        g = 1.0 / self.x0 - 1.0 / x
        g = np.broadcast_to(g, x.shape)
        return [sp.csc_array(np.asarray(g).ravel(order="F")[:, None])]

    def name(self) -> str:
        return f"burg_div({self.args[0].name()}, x0)"


def logdet_div(X, X0) -> LogDetDiv:
    """LogDet divergence ``tr(X X0^{-1}) - log det(X X0^{-1}) - n`` (convex in ``X``)."""
    return LogDetDiv(X, X0)


def burg_div(x, x0) -> BurgDiv:
    """Vector LogDet (Burg) divergence ``sum x/x0 - log(x/x0) - 1`` (convex in ``x``)."""
    return BurgDiv(x, x0)
