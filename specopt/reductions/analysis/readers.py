r"""Reading the objective: weights distributed down the tree, leaves classified.

``ObjectiveReader.read(node, W)`` records ``sum(W .* node)``: constants and (strictly) affine
nodes directly, every other node through the reader ``_READERS`` holds for its class (exact class
first, then along the MRO, as CVXPY's ``CANON_METHODS`` is keyed by class). A reader returns
True when it read the node, False when the node is not in the form its identity covers; the node
is then kept as an ``OtherTerm`` with its weight. There is one reader per atom family:

* structure (weights pushed to the arguments): ``+``, ``-``, ``promote``, ``reshape``,
  ``transpose``, ``index``, ``sum``, elementwise and matrix products and divisions by constants;
* quadratic forms: ``power(., 2)`` (``square``, ``norm(.)**2``), ``quad_over_lin``,
  ``quad_form``, ``multiply(u, u)`` / ``u @ u``;
* hinges: ``maximum`` / ``minimum`` of affine arguments (``pos`` is ``maximum(., 0)``);
* spectral: ``lambda_max``, ``lambda_sum_largest``, ``linear_spectral`` (``lambda_min`` and
  ``lambda_sum_smallest`` are CVXPY's negations of those);
* divergences and barriers: ``logdet_div``, ``burg_div``, ``log_det``, ``log``;
* ``abs`` / ``norm1`` / ``pnorm(., 1)`` of a nonnegative argument (the argument itself).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..._cvxpy_compat import (
    Abs,
    AddExpression,
    DivExpression,
    Index,
    LambdaMax,
    LambdaSumLargest,
    Log,
    Log1p,
    LogDet,
    Maximum,
    Minimum,
    MulExpression,
    Multiply,
    NegExpression,
    Norm1,
    Pnorm,
    Power,
    Promote,
    PsdWrap,
    QuadForm,
    QuadOverLin,
    Reshape,
    Sum,
    Transpose,
)
from ..._tree import ByClass
from ...atoms import BurgDiv, LinearSpectral, LogDetDiv
from .names import short
from .terms import BurgTerm, HingeTerm, LogDetTerm, OtherTerm, QuadTerm, SpectralTerm, Term
from .values import const_value, is_linear, reduce_to, same_expr


class ObjectiveReader:
    """Expands the objective into weighted leaves: the constant, affine leaves, classified terms,
    and the ``log_det`` / ``log`` leaves that the objective pass pairs with affine parts."""

    def __init__(self) -> None:
        self.constant = 0.0
        self.affine: list[tuple[np.ndarray, Any]] = []
        self.terms: list[Term] = []
        self.raw_logdet: list[tuple[float, Any, Any]] = []  # (weight, X, node)
        self.raw_log: list[tuple[np.ndarray, Any, Any]] = []  # (weights, u, node)
        self.spectral: dict[Any, SpectralTerm] = {}

    def read(self, node: Any, W: np.ndarray) -> None:
        """Record ``sum(W .* node)`` (``W`` broadcastable to ``node.shape``)."""
        W = np.asarray(W, dtype=float)
        if not np.any(W):
            return
        cv = const_value(node)
        if cv is not None:
            self.constant += float(np.sum(W * cv))
            return
        if is_linear(node):
            self.affine.append((W, node))
            return
        reader = _READERS.get(type(node))
        if reader is None or not reader(self, node, W):
            self.terms.append(OtherTerm("other", node, weight=W if W.size > 1 else float(W)))

    def add_hinge(self, node: Any, Wf: np.ndarray, inner: Any, sign: float) -> bool:
        """Record ``sign * sum(Wf * max(inner, 0))`` for the atom ``node`` (``inner`` broadcast
        to its shape); returns True (the atom was read)."""
        if inner.shape != node.shape:
            inner = inner + np.zeros(node.shape)
        if Wf.size and not any(Wf.strides):  # one weight (a broadcast view): keep it a view,
            flat = np.broadcast_to(sign * float(Wf.flat[0]), (Wf.size,))  # O(1) for |S| rows
        else:
            flat = sign * Wf.ravel(order="F")
        self.terms.append(HingeTerm("hinge", node, inner=inner, weights=flat))
        return True

    def add_quad(self, node: Any, u: Any, P: np.ndarray | sp.sparray) -> bool:
        """Record ``u^T P u``; returns True."""
        self.terms.append(QuadTerm("quadratic", node, u=u, P=P))
        return True

    def add_spectral(self, node: Any, K: Any, alpha: np.ndarray) -> None:
        """Add ``sum_i alpha_i lambda_i(K)`` to the one spectral term of ``K``."""
        key = K.id if isinstance(K, cp.Variable) else ("expr", str(K))
        t = self.spectral.get(key)
        if t is None:
            t = SpectralTerm("spectral", node, K=K, alpha=np.zeros(K.shape[0]))
            self.spectral[key] = t
            self.terms.append(t)
        t.alpha = t.alpha + alpha
        t.sources.append(short(node, 30))


Reader = Callable[[ObjectiveReader, Any, np.ndarray], bool]


def _scalar(W: np.ndarray) -> float | None:
    return float(W.ravel()[0]) if W.size == 1 else None


# --------------------------------------------------------------------------------------------
# Structure: weights pushed down to the arguments
# --------------------------------------------------------------------------------------------
def _read_add(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``sum(W .* (a + b)) = sum(W_a .* a) + sum(W_b .* b)``, ``W_a`` = ``W`` summed over the
    dimensions ``a`` is broadcast along."""
    for a in node.args:
        r.read(a, reduce_to(np.broadcast_to(W, node.shape), a.shape))
    return True


def _read_neg(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``sum(W .* -a) = sum(-W .* a)``."""
    r.read(node.args[0], -W)
    return True


def _read_promote(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``sum(W .* promote(a)) = sum(W) a`` (``a`` scalar)."""
    a = node.args[0]
    r.read(a, np.asarray(W.sum()).reshape(a.shape))
    return True


def _read_reshape(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``sum(W .* reshape(a)) = sum(reshape^-1(W) .* a)`` (same order, C or F)."""
    a = node.args[0]
    order = getattr(node, "order", "F")
    full = np.broadcast_to(W, node.shape).ravel(order=order)
    r.read(a, full.reshape(a.shape, order=order))
    return True


def _read_transpose(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``sum(W .* A^T) = sum(W^T .* A)`` (matrices, no axes permutation)."""
    a = node.args[0]
    if a.ndim != 2 or node.axes is not None:
        return False
    r.read(a, np.broadcast_to(W, node.shape).T.copy())
    return True


def _read_index(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``sum(W .* a[key]) = sum(W_a .* a)``, ``W_a`` zero outside ``key`` and ``W`` on it."""
    a = node.args[0]
    Wa = np.zeros(a.shape)
    Wa[node.key] = np.broadcast_to(W, node.shape)
    r.read(a, Wa)
    return True


def _read_sum(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``sum(W .* sum(a, axis)) = sum(W' .* a)``, ``W'`` = ``W`` repeated along ``axis``."""
    a = node.args[0]
    axis = node.axis
    if axis is None:
        r.read(a, np.broadcast_to(float(np.sum(W)), a.shape))  # no array per entry
        return True
    Wk = np.asarray(W).reshape(node.shape)
    if not node.keepdims:
        Wk = np.expand_dims(Wk, axis)
    r.read(a, np.broadcast_to(Wk, a.shape).copy())
    return True


def _self_product(node: Any) -> Any:
    """``u`` when ``node`` is ``u * u`` (``multiply``) or ``u @ u`` (``u`` a vector) with ``u``
    affine and not constant, else None."""
    a, b = node.args
    if const_value(a) is not None or const_value(b) is not None or not same_expr(a, b):
        return None
    if not is_linear(b) or (type(node) is not Multiply and b.ndim > 1):
        return None
    return b


def _read_multiply(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``sum(W .* (u .* u)) = u^T diag(W) u`` (u affine); ``sum(W .* (c .* e)) = sum((W .* c)
    .* e)`` (c constant, broadcast, its weights summed over the broadcast dimensions)."""
    u = _self_product(node)
    if u is not None:
        Wd = np.broadcast_to(W, node.shape)
        P = sp.diags_array(np.broadcast_to(Wd, u.shape).ravel(order="F"), format="csr")
        return r.add_quad(node, u, P)
    for c, e in ((node.args[0], node.args[1]), (node.args[1], node.args[0])):
        cv = const_value(c)
        if cv is not None:
            full = np.broadcast_to(W, node.shape) * np.broadcast_to(cv, node.shape)
            r.read(e, reduce_to(full, e.shape))
            return True
    return False


def _read_matmul(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``w (u @ u) = u^T (w I) u`` (u an affine vector); ``sum(W .* (C @ X)) = sum((C^T W) .*
    X)`` and ``sum(W .* (X @ C)) = sum((W C^T) .* X)`` (C constant; vectors as rows/columns)."""
    u = _self_product(node)
    if u is not None:
        w = float(np.broadcast_to(W, node.shape))
        return r.add_quad(node, u, w * sp.eye_array(u.size, format="csr"))
    A, B = node.args
    ca, cb = const_value(A), const_value(B)
    W = np.asarray(W, dtype=float).reshape(node.shape)
    if ca is not None and cb is None:
        if B.ndim == 1 and ca.ndim == 1:  # c @ x (scalar)
            r.read(B, float(W) * ca)
        elif B.ndim == 1:  # C @ x
            r.read(B, ca.T @ W)
        elif ca.ndim == 1:  # c @ X -> row vector
            r.read(B, np.outer(ca, W))
        else:
            r.read(B, ca.T @ W)
        return True
    if cb is not None and ca is None:
        if A.ndim == 1 and cb.ndim == 1:
            r.read(A, float(W) * cb)
        elif A.ndim == 1:  # x @ C
            r.read(A, cb @ W)
        elif cb.ndim == 1:  # X @ c
            r.read(A, np.outer(W, cb))
        else:
            r.read(A, W @ cb.T)
        return True
    return False


def _read_divide(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``sum(W .* (e / c)) = sum((W / c) .* e)`` (c constant, no zero entry)."""
    e, c = node.args
    cv = const_value(c)
    if cv is None or not np.all(cv != 0):
        return False
    full = np.broadcast_to(W, node.shape) / np.broadcast_to(cv, node.shape)
    r.read(e, reduce_to(full, e.shape))
    return True


def _read_abs(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``|x| = x`` elementwise when CVXPY knows ``x >= 0``."""
    a = node.args[0]
    if not a.is_nonneg():
        return False
    r.read(a, np.broadcast_to(W, node.shape))
    return True


def _read_norm1(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``norm1(x) = pnorm(x, 1) = sum(x)`` (no axis) when CVXPY knows ``x >= 0``."""
    a = node.args[0]
    if (isinstance(node, Pnorm) and node.p != 1) or not a.is_nonneg() or node.axis is not None:
        return False
    r.read(a, np.full(a.shape, float(W)))
    return True


# --------------------------------------------------------------------------------------------
# Quadratic forms
# --------------------------------------------------------------------------------------------
def _read_power(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``w norm(u, 2)^2 = u^T (w I) u``; ``sum(W .* u^2) = u^T diag(W) u`` (u affine, p = 2)."""
    if float(np.asarray(node.p.value)) != 2.0:
        return False
    inner, w = node.args[0], _scalar(W)
    if isinstance(inner, Pnorm) and inner.p == 2 and inner.axis is None and w is not None:
        u = inner.args[0]
        if is_linear(u):
            return r.add_quad(node, u, w * sp.eye_array(u.size, format="csr"))
    if is_linear(inner):
        d = np.broadcast_to(W, inner.shape).ravel("F")
        return r.add_quad(node, inner, sp.diags_array(d, format="csr"))
    return False


def _read_quad_over_lin(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``w quad_over_lin(u, y) = u^T (w / y I) u`` (u affine, y > 0 constant; ``sum_squares``
    is ``quad_over_lin(u, 1)``)."""
    w = _scalar(W)
    if w is None or node.axis is not None:
        return False
    u, y = node.args
    yv = const_value(y)
    if yv is None or not is_linear(u) or float(yv) <= 0:
        return False
    return r.add_quad(node, u, (w / float(yv)) * sp.eye_array(u.size, format="csr"))


def _read_quad_form(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``w quad_form(u, P) = u^T (w (P + P^T) / 2) u`` (u affine, P constant or ``psd_wrap``
    of a constant)."""
    w = _scalar(W)
    if w is None:
        return False
    u, P = node.args
    Pv = const_value(P)
    if Pv is None and type(P) is PsdWrap:
        Pv = const_value(P.args[0])
    if Pv is None or not is_linear(u):
        return False
    Pv = np.atleast_2d(Pv)
    return r.add_quad(node, u, w * 0.5 * (Pv + Pv.T))


# --------------------------------------------------------------------------------------------
# Hinges
# --------------------------------------------------------------------------------------------
def _read_maximum(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``max(e, c) = c + max(e - c, 0)`` (c constant), ``max(u, v) = v + max(u - v, 0)`` (u, v
    affine): a constant or affine part and a hinge with weights ``W``."""
    if len(node.args) != 2:
        return False
    Wf = np.broadcast_to(np.asarray(W, dtype=float), node.shape)
    for e, c in ((node.args[0], node.args[1]), (node.args[1], node.args[0])):
        cv = const_value(c)
        if cv is not None and is_linear(e):
            if np.any(cv):
                r.constant += float(np.sum(Wf * np.broadcast_to(cv, node.shape)))
            return r.add_hinge(node, Wf, e - cv if np.any(cv) else e, 1.0)
    u, v = node.args
    if not (is_linear(u) and is_linear(v)):
        return False
    r.read(v, reduce_to(Wf, v.shape))
    return r.add_hinge(node, Wf, u - v, 1.0)


def _read_minimum(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``min(u, v) = v - max(v - u, 0)`` (u, v affine; v the non-constant one): an affine part
    and a hinge with weights ``-W``."""
    if len(node.args) != 2 or not (is_linear(node.args[0]) and is_linear(node.args[1])):
        return False
    u, v = node.args
    if const_value(v) is None and const_value(u) is not None:
        u, v = v, u
    Wf = np.broadcast_to(np.asarray(W, dtype=float), node.shape)
    r.read(v, reduce_to(Wf, v.shape))
    return r.add_hinge(node, Wf, v - u, -1.0)


# --------------------------------------------------------------------------------------------
# Spectral
# --------------------------------------------------------------------------------------------
def _peel_neg(K: Any, s: float) -> tuple[Any, float] | None:
    return K.args[0], -s


def _peel_product(K: Any, s: float) -> tuple[Any, float] | None:
    if len(K.args) != 2:
        return None
    a, b = K.args
    ca, cb = const_value(a), const_value(b)
    if ca is not None and ca.size == 1 and float(ca) != 0 and cb is None:
        return b, s * float(ca)
    if cb is not None and cb.size == 1 and float(cb) != 0 and ca is None:
        return a, s * float(cb)
    return None


def _peel_division(K: Any, s: float) -> tuple[Any, float] | None:
    cb = const_value(K.args[1])
    if cb is not None and cb.size == 1 and float(cb) != 0:
        return K.args[0], s / float(cb)
    return None


_SCALINGS: ByClass[Callable[[Any, float], tuple[Any, float] | None]] = ByClass({
    NegExpression: _peel_neg, Multiply: _peel_product, MulExpression: _peel_product,
    DivExpression: _peel_division,
})


def scalar_multiple(K: Any) -> tuple[Any, float]:
    """``K = s * base`` with s a nonzero scalar constant (negations, products, divisions)."""
    s = 1.0
    while (peel := _SCALINGS.get(type(K))) is not None:
        step = peel(K, s)
        if step is None:
            break
        K, s = step
    return K, s


def _read_spectral(r: ObjectiveReader, node: Any, W: np.ndarray,
                   alpha_of: Callable[[int], np.ndarray]) -> bool:
    """``w sum_i a_i lambda_i(s K) = sum_i (w s a'_i) lambda_i(K)``, ``a' = a`` for s > 0 and
    ``a`` reversed for s < 0 (``lambda_i(s K) = s lambda_{n+1-i}(K)``)."""
    w = _scalar(W)
    if w is None:
        return False
    base, s = scalar_multiple(node.args[0])
    alpha = alpha_of(base.shape[0])
    alpha = s * (alpha if s > 0 else alpha[::-1])
    r.add_spectral(node, base, w * alpha)
    return True


def _read_lambda_max(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``lambda_max(K) = lambda_1(K)``: alpha = e_1 (``lambda_min(K) = -lambda_max(-K)``)."""
    def alpha_of(n: int) -> np.ndarray:
        alpha = np.zeros(n)
        alpha[0] = 1.0
        return alpha

    return _read_spectral(r, node, W, alpha_of)


def _read_lambda_sum_largest(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``lambda_sum_largest(K, k) = sum_{i <= floor k} lambda_i(K) + (k - floor k)
    lambda_{floor k + 1}(K)`` (fractional k too; ``lambda_sum_smallest(K, k) =
    -lambda_sum_largest(-K, k)``)."""
    k = float(node.k)

    def alpha_of(n: int) -> np.ndarray:
        alpha = np.zeros(n)
        alpha[: int(math.floor(k))] = 1.0
        if k % 1 and int(k) < n:
            alpha[int(k)] = k % 1
        return alpha

    return _read_spectral(r, node, W, alpha_of)


def _read_linear_spectral(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``linear_spectral(K, alpha) = sum_i alpha_i lambda_i(K)`` (eigenvalues decreasing;
    ``mve_cost`` and ``eigengap`` are its instances)."""
    return _read_spectral(r, node, W, lambda n: np.asarray(node.alpha, dtype=float))


# --------------------------------------------------------------------------------------------
# Divergences and barriers
# --------------------------------------------------------------------------------------------
def _read_logdet_div(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``w logdet_div(X, X0) = w (tr(X0^-1 X) - log det(X0^-1 X) - n)``: a LogDetTerm."""
    w = _scalar(W)
    if w is None:
        return False
    r.terms.append(LogDetTerm("logdet", node, X=node.args[0], X0=node.X0, scale=w))
    return True


def _read_burg_div(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``w burg_div(x, x0) = w sum(x / x0 - log(x / x0) - 1)``: a BurgTerm."""
    w = _scalar(W)
    if w is None:
        return False
    x = node.args[0]
    x0 = np.broadcast_to(node.x0, x.shape).astype(float)
    r.terms.append(BurgTerm("burg", node, x=x, x0=x0, scale=w))
    return True


def _read_log_det(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``w log det X``, kept aside: with ``-w tr(S X)`` in the affine part it is the divergence
    ``-w logdet_div(X, S^-1)`` up to a constant (paired by the objective pass)."""
    w = _scalar(W)
    if w is None:
        return False
    r.raw_logdet.append((w, node.args[0], node))
    return True


def _read_log(r: ObjectiveReader, node: Any, W: np.ndarray) -> bool:
    """``sum(W .* log(u))`` (u affine), kept aside: with ``-W / x0`` times ``x`` in the affine
    part it is ``-W burg_div(x, x0)`` up to a constant (paired by the objective pass)."""
    if not is_linear(node.args[0]):
        return False
    r.raw_log.append((np.broadcast_to(W, node.shape).astype(float), node.args[0], node))
    return True


#: the reader of each atom class (exact class first, then along the MRO)
_READERS: ByClass[Reader] = ByClass({
    AddExpression: _read_add, NegExpression: _read_neg, Promote: _read_promote,
    Reshape: _read_reshape, Transpose: _read_transpose, Index: _read_index, Sum: _read_sum,
    Multiply: _read_multiply, MulExpression: _read_matmul, DivExpression: _read_divide,
    Abs: _read_abs, Norm1: _read_norm1, Pnorm: _read_norm1,
    Power: _read_power, QuadOverLin: _read_quad_over_lin, QuadForm: _read_quad_form,
    Maximum: _read_maximum, Minimum: _read_minimum,
    LambdaMax: _read_lambda_max, LambdaSumLargest: _read_lambda_sum_largest,
    LinearSpectral: _read_linear_spectral,
    LogDetDiv: _read_logdet_div, BurgDiv: _read_burg_div, LogDet: _read_log_det, Log: _read_log,
    # CVXPY's log1p is a subclass of log, but log1p(u) = log(1 + u) is not log(u): kept whole
    Log1p: None,
})
