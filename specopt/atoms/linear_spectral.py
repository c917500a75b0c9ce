"""Linear-spectral functions ``g(K) = sum_i alpha_i lambda_i(K)`` and named instances.

Eigenvalues are sorted in decreasing order, ``lambda_1(K) >= ... >= lambda_n(K)``. With
``f_i(K)`` the sum of the ``i`` largest eigenvalues (``cp.lambda_sum_largest``) and
``f_n = tr K``, Abel summation gives the *breakpoint identity*

    g(K) = alpha_n tr K + sum_{i=1}^{n-1} (alpha_i - alpha_{i+1}) f_i(K).           (1)

Each ``f_i`` is convex, so ``g`` is convex when ``alpha`` is nonincreasing (all breakpoint
coefficients >= 0), concave when it is nondecreasing, and a difference of convex functions
otherwise. The variational form ``g(K) = tr(K B)``, ``B = V diag(alpha) V^T`` with ``V`` the
eigenvectors of ``K``, gives the (sub/super)gradient ``V diag(alpha) V^T``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._base import ScalarAtom, SymmetricArgument
from ._checks import as_finite_array


def sum_largest_parts(K, i: int) -> tuple[float, object]:
    """``(t, atom)`` with ``f_i(K) = t tr K + atom``, ``f_i`` the sum of the ``i`` largest
    eigenvalues of the symmetric ``n x n`` affine ``K``, written with the fewest PSD blocks:
    ``lambda_max(K)`` for ``i = 1`` and ``tr K + lambda_max(-K)`` (``= tr K - lambda_min(K)``)
    for ``i = n - 1``, one block of order ``n`` each; else ``lambda_sum_largest(K, i)``, two
    (``f_i(K) = min_{s, Z PSD, Z + s I - K PSD} i s + tr Z``). A conic solver's cost grows with
    every block: ``max eigengap(K, 2)`` keeps ``f_1 + f_3``, and its subproblem had five PSD
    blocks of order n instead of four. The atom is a single CVXPY atom, so canonicalizers can
    compile it directly (:func:`sum_largest_blocks` counts its blocks)."""
    import cvxpy as cp

    n = int(K.shape[0])
    if i == 1:
        return 0.0, cp.lambda_max(K)
    if i == n - 1:
        return 1.0, cp.lambda_max(-K)
    return 0.0, cp.lambda_sum_largest(K, i)


def sum_largest_blocks(n: int, i: int) -> int:
    """The PSD blocks (of order ``n``) of :func:`sum_largest_parts`'s atom for ``f_i``."""
    return 1 if i in (1, n - 1) else 2


def sum_largest(K, i: int):
    """``f_i(K)`` as a CVXPY expression with the fewest PSD blocks (:func:`sum_largest_parts`)."""
    import cvxpy as cp

    t, atom = sum_largest_parts(K, i)
    return t * cp.trace(K) + atom if t else atom


class LinearSpectral(SymmetricArgument, ScalarAtom):
    """``sum_i alpha_i lambda_i(K)`` for a symmetric affine ``K`` (see module docstring)."""

    def __init__(self, K, alpha) -> None:
        self.alpha = as_finite_array(alpha, "alpha")
        super().__init__(K)

    def get_data(self) -> list:
        return [self.alpha]

    # --- structure -------------------------------------------------------------------------
    def validate_arguments(self) -> None:
        K = self.args[0]
        if K.ndim != 2 or K.shape[0] != K.shape[1]:
            raise ValueError(
                f"linear_spectral needs a square matrix argument, got shape {K.shape}"
            )
        if K.is_complex():
            raise ValueError("linear_spectral supports real symmetric matrices only")
        n = K.shape[0]
        if self.alpha.ndim != 1 or self.alpha.size != n:
            raise ValueError(
                f"alpha must be a vector of length n = {n} (one weight per eigenvalue), "
                f"got shape {self.alpha.shape}"
            )
        super().validate_arguments()

    def sign_from_args(self) -> tuple[bool, bool]:
        K = self.args[0]
        a = self.alpha
        psd, nsd = K.is_psd(), K.is_nsd()
        nonneg = (psd and bool(np.all(a >= 0))) or (nsd and bool(np.all(a <= 0)))
        nonpos = (psd and bool(np.all(a <= 0))) or (nsd and bool(np.all(a >= 0)))
        return nonneg, nonpos

    def is_atom_convex(self) -> bool:
        return bool(np.all(np.diff(self.alpha) <= 0))

    def is_atom_concave(self) -> bool:
        return bool(np.all(np.diff(self.alpha) >= 0))

    def _domain(self) -> list:
        K = self.args[0]
        return [K == K.T]

    # --- numbers -----------------------------------------------------------------------------
    def numeric(self, values):
        X = np.asarray(values[0], dtype=float)
        eig = np.linalg.eigvalsh(0.5 * (X + X.T))[::-1]
        return float(eig @ self.alpha)

    def _grad(self, values):
        X = np.asarray(values[0], dtype=float)
        eig, vecs = np.linalg.eigh(0.5 * (X + X.T))
        V = vecs[:, ::-1]
        D = (V * self.alpha) @ V.T
        return [sp.csc_array(D.ravel(order="F")[:, None])]

    # --- breakpoint identity -----------------------------------------------------------------
    def breakpoints(self) -> tuple[float, list[tuple[int, float]]]:
        """``(alpha_n, [(i, c_i)])`` with ``c_i = alpha_i - alpha_{i+1} != 0`` (identity (1))."""
        a = self.alpha
        coeffs = a[:-1] - a[1:]
        return float(a[-1]), [(i + 1, float(c)) for i, c in enumerate(coeffs) if c != 0.0]

    def convex_concave_parts(self, K):
        """Split (1) into ``(convex, concave)`` expressions of ``K`` (either may be ``0``)."""
        import cvxpy as cp

        a_n, bps = self.breakpoints()
        convex = a_n * cp.trace(K)
        concave = 0
        for i, c in bps:
            term = c * sum_largest(K, i)
            if c > 0:
                convex = convex + term
            else:
                concave = concave + term
        return convex, concave

    def name(self) -> str:
        return f"linear_spectral({self.args[0].name()}, alpha)"


def linear_spectral(K, alpha) -> LinearSpectral:
    """``sum_i alpha_i lambda_i(K)``, eigenvalues of the symmetric ``K`` in decreasing order.

    Convex for nonincreasing ``alpha``, concave for nondecreasing ``alpha``, neither otherwise
    (solve such problems with ``method="specopt"``: the iterated-SDP route).
    """
    return LinearSpectral(K, alpha)


def _n_of(K) -> int:
    shape = getattr(K, "shape", np.shape(K))
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"expected a square matrix, got shape {tuple(shape)}")
    return int(shape[0])


def _check_d(d, n: int, name: str, upper: int) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
        raise ValueError(f"{name}: d must be an integer, got {d!r}")
    if not 1 <= d <= upper:
        raise ValueError(f"{name}: d must satisfy 1 <= d <= {upper} for n = {n}, got {d}")
    return int(d)


def mve_cost(K, d: int) -> LinearSpectral:
    """Minimum-volume-embedding cost ``-sum_{i<=d} lambda_i(K) + sum_{i>d} lambda_i(K)``.

    Concave (alpha nondecreasing): maximizing it is DCP, minimizing it is the non-convex MVE
    problem solved by ``method="specopt"`` (iterated SDP).
    """
    n = _n_of(K)
    d = _check_d(d, n, "mve_cost", n - 1)
    alpha = np.concatenate([-np.ones(d), np.ones(n - d)])
    return LinearSpectral(K, alpha)


def eigengap(K, d: int) -> LinearSpectral:
    """Eigen-gap ``lambda_d(K) - lambda_{d+1}(K)`` (neither convex nor concave for n > 2)."""
    n = _n_of(K)
    d = _check_d(d, n, "eigengap", n - 1)
    alpha = np.zeros(n)
    alpha[d - 1], alpha[d] = 1.0, -1.0
    return LinearSpectral(K, alpha)
