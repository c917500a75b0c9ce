"""Back to CVXPY: the normalized problem (merged spectral terms, bound parameters)."""

from __future__ import annotations

from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ...atoms import burg_div, linear_spectral, logdet_div, row_quad_forms
from .affine import AffineMap
from .cache import analyze
from .description import Description
from .terms import BurgTerm, HingeTerm, LogDetTerm, OtherTerm, QuadTerm, SpectralTerm, Term


def affine_expr(amap: AffineMap, variables: list[cp.Variable]) -> Any:
    """A CVXPY expression of a one-row affine map (without its offset)."""
    out: Any = cp.Constant(0.0)
    for v in variables:
        c = amap.coeffs.get(v.id)
        if c is not None and c.nnz:
            row = c.toarray().ravel()
            out = out + row @ cp.vec(v, order="F")
        for M, V in amap.factored.get(v.id, []):
            M = sp.csr_array(M)
            if M.nnz:
                out = out + M.toarray().ravel() @ row_quad_forms(V, v)
    return out


def term_expr(t: Term) -> Any:
    """A CVXPY expression equal to the term's contribution to the objective."""
    if isinstance(t, SpectralTerm):
        a = np.asarray(t.alpha, dtype=float)
        if np.allclose(a, a[0]):
            return float(a[0]) * cp.trace(t.K)
        return linear_spectral(t.K, a)
    if isinstance(t, QuadTerm):
        u = cp.vec(t.u, order="F") if t.u.ndim != 1 else t.u
        if sp.issparse(t.P):  # diagonal: sum_i d_i u_i^2 without an n x n matrix
            d = t.P.diagonal()
            if np.all(d >= 0):
                return cp.sum_squares(cp.multiply(np.sqrt(d), u))
            if np.all(d <= 0):
                return -cp.sum_squares(cp.multiply(np.sqrt(-d), u))
            return cp.sum(cp.multiply(d, cp.square(u)))
        P = 0.5 * (t.P + t.P.T)
        ev = np.linalg.eigvalsh(P) if P.size else np.zeros(1)
        if ev.min() >= -1e-12 * max(1.0, abs(ev).max()):
            return cp.quad_form(u, cp.psd_wrap(P))
        if ev.max() <= 1e-12 * max(1.0, abs(ev).max()):
            return -cp.quad_form(u, cp.psd_wrap(-P))
        return cp.quad_form(u, P)
    if isinstance(t, HingeTerm):
        inner = cp.vec(t.inner, order="F") if t.inner.ndim != 1 else t.inner
        return t.weights @ cp.pos(inner) if t.weights.size > 1 else \
            float(t.weights[0]) * cp.sum(cp.pos(inner))
    if isinstance(t, LogDetTerm):
        return t.scale * logdet_div(t.X, t.X0)
    if isinstance(t, BurgTerm):
        return t.scale * burg_div(t.x, t.x0)
    if isinstance(t, OtherTerm):
        w = np.asarray(t.weight, dtype=float)
        return float(w) * t.expr if w.size == 1 else cp.sum(cp.multiply(w, t.expr))
    raise TypeError(f"unknown term {type(t).__name__}")  # pragma: no cover


def normalized_problem(problem: cp.Problem, desc: Description | None = None) -> cp.Problem:
    """The problem rebuilt from its description: same value and feasible set, parameters bound,
    spectral terms on one matrix merged into one ``linear_spectral``. Its constraints are the
    bound constraints, in the user's order (``desc.constraints[i].con`` is the user's)."""
    desc = analyze(problem) if desc is None else desc
    expr: Any = cp.Constant(desc.constant) + affine_expr(desc.affine, desc.variables)
    for t in desc.terms:
        expr = expr + term_expr(t)
    obj = cp.Minimize(expr) if desc.sense == 1 else cp.Maximize(expr)
    return cp.Problem(obj, [c.bound for c in desc.constraints])
