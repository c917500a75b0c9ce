r"""The objective pass: the weighted leaves of :class:`ObjectiveReader` turned into the
description's terms, affine part and constant.

Beyond reading, it pairs leaves that only together are one term:

* ``trace(K)`` on a matrix with a spectral term joins its alpha (``tr K = sum_i lambda_i(K)``);
* ``-c log det X + c <S, X>`` is ``c logdet_div(X, S^-1) + c (log det S + n)``, and an affine
  part beside a ``logdet_div`` moves into it: ``c D(X, X0) + <S, X> = c D(X, X0') +
  c (log det X0 - log det X0')`` with ``X0'^-1 = X0^-1 + S / c``;
* ``-c log x + (c / x0) x`` is ``c burg_div(x, x0) + c sum(1 - log x0)``, and likewise
  ``c burg(x, x0) + a^T x = c burg(x, x0') + c sum(log x0 - log x0')`` with
  ``1/x0' = 1/x0 + a/c``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cvxpy as cp
import numpy as np

from .affine import AffineMap, affine_maps, identity_multiple, maps_or_none, zero_map
from .readers import ObjectiveReader
from .terms import BurgTerm, LogDetTerm, OtherTerm, SpectralTerm, Term


@dataclass(frozen=True)
class Objective:
    """The objective read: ``constant + affine + sum(terms)``."""

    terms: list[Term]
    affine: AffineMap
    constant: float


def read_objective(expr: Any, variables: list[cp.Variable],
                   cache: dict | None = None) -> Objective:
    """Read ``expr`` (parameters bound) into terms, an affine part and a constant; ``cache``
    keeps the affine maps of its leaves across parameter changes."""
    r = ObjectiveReader()
    r.read(expr, np.ones(expr.shape) if expr.shape else np.asarray(1.0))
    affine = _affine_part(r, variables, {} if cache is None else cache)
    constant = r.constant + float(affine.offset[0])
    affine.offset = np.zeros(1)
    affine = _merge_trace(r.terms, affine)
    affine, constant = _pair_barriers(r, affine, constant)
    return Objective(r.terms, affine, constant)


def _affine_part(r: ObjectiveReader, variables: list[cp.Variable], cache: dict) -> AffineMap:
    """``sum_l W_l .* leaf_l`` over the affine leaves as one one-row map (all leaves read in one
    pass); a leaf CVXPY cannot read becomes an ``OtherTerm``."""
    affine = zero_map(1)
    if not r.affine:
        return affine
    maps = maps_or_none([e for _, e in r.affine], variables, cache)
    for (W, e), m in zip(r.affine, maps, strict=True):
        if m is None:
            r.terms.append(OtherTerm("other", e, weight=W if W.size > 1 else float(W)))
    for (W, e), m in zip(r.affine, maps, strict=True):
        if m is not None:
            affine = affine + m.weighted(np.broadcast_to(W, e.shape).ravel(order="F"))
    return affine


def _merge_trace(terms: list[Term], affine: AffineMap) -> AffineMap:
    """``a tr(K)`` in the affine part joins the spectral term of ``K``: ``alpha + a``."""
    for t in [t for t in terms if isinstance(t, SpectralTerm)]:
        if isinstance(t.K, cp.Variable) and t.K.id in affine.coeffs \
                and not affine.factored.get(t.K.id):
            a = identity_multiple(affine.coeffs[t.K.id], t.K.shape[0])
            if a:
                t.alpha = t.alpha + a
                t.sources.append(f"{a:g}*trace")
                affine = affine.without(t.K.id)
    return affine


def _pair_barriers(r: ObjectiveReader, affine: AffineMap,
                   constant: float) -> tuple[AffineMap, float]:
    """``log det`` leaves (summed per matrix), then ``log`` leaves, paired with the affine part
    into ``LogDetTerm`` / ``BurgTerm`` (else ``OtherTerm``); then the affine part on each
    divergence the user wrote as an atom absorbed into its reference point."""
    by_X: dict[int, list] = {}
    for w, X, node in r.raw_logdet:
        by_X.setdefault(X.id if isinstance(X, cp.Variable) else id(X), []).append((w, X, node))
    logdet_leaves = [(sum(it[0] for it in items), items[0][1], items[0][2])
                     for items in by_X.values()]
    for leaves, handwritten, cls, absorb in (
            (logdet_leaves, _handwritten_logdet, LogDetTerm, _absorb_logdet),
            (r.raw_log, _handwritten_burg, BurgTerm, _absorb_burg)):
        for weight, arg, node in leaves:
            res = handwritten(weight, arg, node, affine)
            if res is None:
                r.terms.append(OtherTerm("other", node, weight=weight))
                continue
            term, const, affine = res
            r.terms.append(term)
            constant += const
        for t in r.terms:
            if isinstance(t, cls) and not t.handwritten:
                affine, const = absorb(t, affine)
                constant += const
    return affine, constant


def _absorb_logdet(t: LogDetTerm, affine: AffineMap) -> tuple[AffineMap, float]:
    """``c D(X, X0) + <cS, X> = c D(X, X0') + c (log det X0 - log det X0')``, ``X0'^-1 =
    X0^-1 + (S + S^T) / 2`` (when that is positive definite): the affine part on ``X`` moves
    into ``t.X0``; returns the rest of the affine part and the constant."""
    X, c = t.X, t.scale
    row = affine.coeffs.get(X.id) if isinstance(X, cp.Variable) else None
    if row is None or not row.nnz or c <= 0 or affine.factored.get(X.id):
        return affine, 0.0
    n = X.shape[0]
    S = row.toarray().reshape((n, n), order="F") / c
    P = np.linalg.inv(t.X0) + 0.5 * (S + S.T)
    try:
        np.linalg.cholesky(P)
    except np.linalg.LinAlgError:
        return affine, 0.0
    X0 = np.linalg.inv(P)
    X0 = 0.5 * (X0 + X0.T)
    const = c * (np.linalg.slogdet(t.X0)[1] - np.linalg.slogdet(X0)[1])
    t.X0 = X0
    return affine.without(X.id), float(const)


def _absorb_burg(t: BurgTerm, affine: AffineMap) -> tuple[AffineMap, float]:
    """``c burg(x, x0) + a^T x = c burg(x, x0') + c sum(log x0 - log x0')``, ``1/x0' = 1/x0 +
    a/c`` (when positive): the affine part on ``x`` moves into ``t.x0``."""
    x, c = t.x, t.scale
    row = affine.coeffs.get(x.id) if isinstance(x, cp.Variable) else None
    if row is None or not row.nnz or c <= 0:
        return affine, 0.0
    a = row.toarray().ravel().reshape(x.shape, order="F")
    p = 1.0 / t.x0 + a / c
    if np.any(p <= 0):
        return affine, 0.0
    x0 = 1.0 / p
    const = c * float(np.sum(np.log(t.x0) - np.log(x0)))
    t.x0 = x0
    return affine.without(x.id), const


def _handwritten_logdet(w: float, X: Any, node: Any, affine: AffineMap):
    """``-c log det X + <cS, X> = c logdet_div(X, S^-1) + c (log det S + n)`` (``w = -c < 0``,
    ``S`` the symmetric part of the affine coefficients of ``X`` over c, positive definite):
    ``(term, constant, rest of the affine part)``, or None."""
    if not (w < 0 and isinstance(X, cp.Variable)) or affine.factored.get(X.id):
        return None
    c = -w
    n = X.shape[0]
    row = affine.coeffs.get(X.id)
    if row is None or not row.nnz:
        return None
    S = row.toarray().reshape((n, n), order="F") / c
    S = 0.5 * (S + S.T)
    try:
        L = np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        return None
    logdet_S = 2.0 * float(np.sum(np.log(np.diag(L))))
    X0 = np.linalg.inv(S)
    X0 = 0.5 * (X0 + X0.T)
    term = LogDetTerm("logdet", node, X=X, X0=X0, scale=c, handwritten=True)
    return term, c * (logdet_S + n), affine.without(X.id)


def _handwritten_burg(W: np.ndarray, u: Any, node: Any, affine: AffineMap):
    """``-c sum(log(D x)) + a^T x = c burg_div(x, c / a) + const`` (``W = -c`` equal entries,
    ``D`` positive diagonal, ``a > 0``): ``(term, constant, rest of the affine part)``, or
    None."""
    if u.parameters() or len(u.variables()) != 1:
        return None
    x = u.variables()[0]
    if u.size != x.size or np.any(W >= 0):
        return None
    (m,) = affine_maps([u], [x])
    D = m.coef(x).toarray()
    d = np.diag(D)
    if np.any(m.offset) or not np.allclose(D, np.diag(d)) or np.any(d <= 0):
        return None
    c_vec = -np.asarray(W, dtype=float).ravel(order="F")
    c = float(c_vec[0])
    if not np.allclose(c_vec, c):
        return None
    row = affine.coeffs.get(x.id)
    if row is None:
        return None
    a = row.toarray().ravel()
    if np.any(a <= 0):
        return None
    x0 = c / a  # c (x / x0 - log x)
    # W log(d x) = -c log x - c log d
    const = -c * float(np.sum(np.log(d)))
    # c sum(x/x0 - log x) = c burg(x, x0) - c sum(log x0) + c m
    const += -c * float(np.sum(np.log(x0))) + c * x.size
    bt = BurgTerm("burg", node, x=x, x0=x0.reshape(x.shape, order="F"), scale=c,
                  handwritten=True)
    return bt, const, affine.without(x.id)
