"""Conic graph forms of specopt's atoms, registered with CVXPY through ``_cvxpy_compat``.

Each atom expands into public CVXPY atoms, which CVXPY's own canonicalizers then turn into cones:

* ``linear_spectral``: the breakpoint identity
  ``g(K) = alpha_n tr K + sum_i (alpha_i - alpha_{i+1}) lambda_sum_largest(K, i)`` with zero
  breakpoints skipped (2 PSD blocks of size n per nonzero breakpoint);
* ``logdet_div``: ``<X0^{-1}, X> - log_det(X) + log det X0 - n`` (PSD + exponential cones);
* ``burg_div``: ``sum(x / x0) - sum(log x) + sum(log x0) - m`` (exponential cones).

``row_quad_forms`` is affine and needs no canonicalizer (its graph is one stacked linear map).
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from .. import _cvxpy_compat as compat
from ..atoms import BurgDiv, LinearSpectral, LogDetDiv


def expand_linear_spectral(expr: LinearSpectral, args: list) -> cp.Expression:
    K = args[0]
    a_n, bps = expr.breakpoints()
    out = a_n * cp.trace(K) if a_n != 0.0 else cp.Constant(0.0)
    for i, c in bps:
        out = out + c * cp.lambda_sum_largest(K, i)
    return out


def expand_logdet_div(expr: LogDetDiv, args: list) -> cp.Expression:
    X = args[0]
    n = expr.X0.shape[0]
    return cp.sum(cp.multiply(expr.X0_inv, X)) - cp.log_det(X) + (expr.logdet_X0 - n)


def expand_burg_div(expr: BurgDiv, args: list) -> cp.Expression:
    x = args[0]
    x0 = np.broadcast_to(expr.x0, x.shape)
    const = float(np.sum(np.log(x0))) - x0.size
    return cp.sum(cp.multiply(1.0 / x0, x)) - cp.sum(cp.log(x)) + const


def register_canonicalizers() -> None:
    """Idempotently register the expand-canonicalizers and cone families with CVXPY."""
    compat.register_atom(
        LinearSpectral, compat.expand_canonicalizer(expand_linear_spectral), ("PSD",)
    )
    compat.register_atom(
        LogDetDiv, compat.expand_canonicalizer(expand_logdet_div), ("PSD", "EXP")
    )
    compat.register_atom(BurgDiv, compat.expand_canonicalizer(expand_burg_div), ("EXP",))
