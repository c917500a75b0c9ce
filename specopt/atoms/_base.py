"""Shared behaviour of specopt's scalar atoms."""

from __future__ import annotations

import numpy as np

from .._cvxpy_compat import Atom
from ._checks import is_symmetric_value


class ScalarAtom(Atom):
    """A scalar atom that is not elementwise monotone in its (matrix or vector) argument."""

    def shape_from_args(self) -> tuple[int, ...]:
        return ()

    def is_incr(self, idx: int) -> bool:
        return False

    def is_decr(self, idx: int) -> bool:
        return False


class ConvexDivergence(ScalarAtom):
    """A Bregman divergence to a constant: convex and nonnegative."""

    def sign_from_args(self) -> tuple[bool, bool]:
        return True, False

    def is_atom_convex(self) -> bool:
        return True

    def is_atom_concave(self) -> bool:
        return False


class SymmetricArgument:
    """``value`` rejects a non-symmetric matrix argument, as CVXPY's spectral atoms do."""

    @property
    def value(self):
        val = self.args[0].value
        if val is None:
            return None
        if not is_symmetric_value(np.asarray(val)):
            raise ValueError("Input matrix was not symmetric.")
        return self._value_impl()
