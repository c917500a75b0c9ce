"""Conic graph forms of specopt's atoms, registered with CVXPY through ``_cvxpy_compat``.

Each atom is written with public CVXPY atoms, and CVXPY's own canonicalizers for those atoms turn
it into cones (called directly on the already-canonical arguments, so no second ``Dcp2Cone`` pass
over an expanded tree is needed):

* ``linear_spectral``: the breakpoint identity
  ``g(K) = alpha_n tr K + sum_i (alpha_i - alpha_{i+1}) lambda_sum_largest(K, i)`` with zero
  breakpoints skipped (2 PSD blocks of size n per nonzero breakpoint; one for ``i = 1``,
  ``lambda_max``, and for ``i = n - 1``, ``tr K - lambda_min``);
* ``logdet_div``: ``<X0^{-1}, X> - log_det(X) + log det X0 - n`` (PSD + exponential cones);
* ``burg_div``: ``sum(x / x0) - sum(log x) + sum(log x0) - m`` (exponential cones).

``row_quad_forms`` is affine and needs no canonicalizer: its linear-operator graph is
``sum((V @ X) .* V, axis=1)``, so only ``V`` (m x n) reaches CVXPY's matrix builder.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from .. import _cvxpy_compat as compat
from ..atoms import BurgDiv, LinearSpectral, LogDetDiv
from ..atoms.linear_spectral import sum_largest_parts


def canon_linear_spectral(expr: LinearSpectral, args: list, solver_context=None):
    K = args[0]
    a_n, bps = expr.breakpoints()
    out = a_n * cp.trace(K) if a_n != 0.0 else cp.Constant(0.0)
    constraints: list = []
    for i, c in bps:
        # f_i = t_K tr K + atom, the atom with the fewest PSD blocks (lambda_max for i = 1, n - 1)
        t_K, atom = sum_largest_parts(K, i)
        t, cons = compat.canonicalize_atom(atom, solver_context)
        out = out + c * (t_K * cp.trace(K) + t if t_K else t)
        constraints += cons
    return out, constraints


def canon_logdet_div(expr: LogDetDiv, args: list, solver_context=None):
    X = args[0]
    n = expr.X0.shape[0]
    t, constraints = compat.canonicalize_atom(cp.log_det(X), solver_context)
    return cp.sum(cp.multiply(expr.X0_inv, X)) - t + (expr.logdet_X0 - n), constraints


def canon_burg_div(expr: BurgDiv, args: list, solver_context=None):
    x = args[0]
    x0 = np.broadcast_to(expr.x0, x.shape)
    const = float(np.sum(np.log(x0))) - x0.size
    t, constraints = compat.canonicalize_atom(cp.log(x), solver_context)
    return cp.sum(cp.multiply(1.0 / x0, x)) - cp.sum(t) + const, constraints


def register_canonicalizers() -> None:
    """Idempotently register the canonicalizers and cone families with CVXPY."""
    compat.register_atom(LinearSpectral, canon_linear_spectral, ("PSD",))
    compat.register_atom(LogDetDiv, canon_logdet_div, ("PSD", "EXP"))
    compat.register_atom(BurgDiv, canon_burg_div, ("EXP",))
