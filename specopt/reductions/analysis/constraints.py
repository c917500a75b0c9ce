"""Reading the constraints: each classified (PSD, affine rows, other cones), its affine map
read (cached per constraint when it holds no parameter), redundant symmetry rows dropped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..._cvxpy_compat import AddExpression, LambdaMax, MulExpression, NegExpression, Sum
from ..._tree import ByClass, is_identity_of
from .affine import AffineMap, identity_multiple, maps_or_none
from .names import short
from .values import dense_value, is_linear

#: the kind of each constraint class (exact class first, then along the MRO); others: "cone"
_KINDS: ByClass[str] = ByClass({
    cp.constraints.PSD: "psd", cp.constraints.Equality: "eq", cp.constraints.Zero: "eq",
    cp.constraints.Inequality: "le", cp.constraints.NonPos: "le", cp.constraints.NonNeg: "ge",
})


@dataclass
class ConstraintInfo:
    """A classified constraint.

    ``kind``: ``"psd"`` (``expr >> 0``; ``var`` set when expr is a variable), ``"eq"``
    (``map == 0``), ``"le"`` (``map <= 0``), ``"ge"`` (``map >= 0``), ``"cone"`` (another cone),
    ``"nonaffine"``, ``"unreadable"`` (affine, but CVXPY gave no coefficients, e.g. complex).
    ``con`` is the user's constraint, ``bound`` the same with parameters bound.
    """

    con: Any
    bound: Any
    kind: str
    map: AffineMap | None = None
    var: cp.Variable | None = None

    @property
    def label(self) -> str:
        return short(self.con)

    def is_bound(self) -> bool:
        """Every row is ``a x_j + c`` on one entry of one variable (a bound, not a coupling)."""
        m = self.map
        if m is None or self.kind not in ("eq", "le", "ge") or m.factored:
            return False
        ids = m.variable_ids()
        if len(ids) != 1:
            return False
        C = sp.csr_array(m.coeffs[next(iter(ids))])
        return bool(np.all(np.diff(C.indptr) == 1))

    def trace_scale(self, X: cp.Variable) -> float:
        """``a`` if this is one row ``a tr(X) + c`` (nothing else), else 0."""
        m = self.map
        if m is None or m.size != 1 or m.variable_ids() != {X.id}:
            return 0.0
        if m.factored.get(X.id):
            return 0.0
        return identity_multiple(m.coef(X), X.shape[0])

    def is_centering(self, K: cp.Variable) -> bool:
        """``K @ ones == 0``, ``ones @ K == 0`` or ``sum(K) == 0`` (alike for PSD K)."""
        m = self.map
        if self.kind != "eq" or m is None or m.variable_ids() != {K.id} or np.any(m.offset):
            return False
        n = K.shape[0]
        A = sp.coo_array(m.coef(K))
        if A.nnz == 0:
            return False
        c = A.data[0]
        if c == 0 or not np.all(A.data == c):
            return False
        if m.size == 1:
            return A.nnz == n * n
        if m.size != n or A.nnz != n * n:
            return False
        i, j = A.col % n, A.col // n  # entry K[i, j] (column-major vec)
        return bool(np.array_equal(A.row, i) or np.array_equal(A.row, j))


def _constraint_kind(con: Any) -> tuple[str, Any]:
    """``(kind, expr)``: ``psd`` with the matrix, ``eq`` / ``le`` / ``ge`` with the expression
    compared to 0, or ``("cone", None)``."""
    kind = _KINDS.get(type(con))
    if kind is None:
        return "cone", None
    return kind, con.args[0] if kind == "psd" else con.expr


def read_constraints(cons: list, bound: list, variables: list, cache: dict) -> list:
    """Classified ``cons`` (``bound``: the same with parameters bound); ``cache`` keeps the maps
    of parameter-free constraints by constraint id. Equalities every symmetric value of their
    symmetric variables satisfies (``W == W.T``) are dropped."""
    infos: list[ConstraintInfo] = []
    todo: list[tuple[int, Any]] = []
    for con, b in zip(cons, bound, strict=True):
        info, expr = _classify(con, b, cache)
        if expr is not None:
            todo.append((len(infos), expr))
        infos.append(info)
    maps = maps_or_none([e for _, e in todo], variables) if todo else []
    for (i, _), m in zip(todo, maps, strict=True):
        if m is None:
            infos[i].kind = "unreadable"  # CVXPY could not give its coefficients
            continue
        infos[i].map = m
        if infos[i].bound is infos[i].con:
            cache[infos[i].con.id] = m
    # W == W.T (and any equality that holds on every symmetric value of symmetric / PSD
    # variables): redundant, dropped rather than handed to the routes as n^2 zero rows
    return [i for i in infos if not _redundant_symmetry(i, variables)]


def _classify(con: Any, b: Any, cache: dict) -> tuple[ConstraintInfo, Any]:
    """The constraint classified without reading coefficients, and the expression whose map is
    still to read (None when the map is known: cached, centering, or not affine rows)."""
    kind, expr = _constraint_kind(b)
    lam = _lambda_min_psd(b)
    if lam is not None:  # lambda_min(X) >= 0: X >> 0 spelled through its eigenvalue
        kind, expr = "psd", lam
    info = ConstraintInfo(con, b, kind)
    if kind == "psd":
        vs = expr.variables()
        if len(vs) == 1 and expr.ndim == 2 and not expr.parameters() \
                and (_is_var_plus_zero(expr, vs[0]) or is_identity_of(expr, vs[0])):
            info.var = vs[0]
        return info, None
    if kind not in ("eq", "le", "ge"):
        return info, None
    cmap = _centering_map(b) if kind == "eq" else None
    if cmap is not None:
        info.map = cmap
    elif not is_linear(expr):
        info.kind = "nonaffine"
    elif b is con and con.id in cache:
        info.map = cache[con.id]
    else:
        return info, expr
    return info, None


def _is_var_plus_zero(expr: Any, X: cp.Variable) -> bool:
    """``X`` or ``X + 0`` (what ``X >> 0`` builds), read on the tree (no coefficients)."""
    if isinstance(expr, cp.Variable):
        return expr.id == X.id
    if isinstance(expr, AddExpression):
        var = [a for a in expr.args if isinstance(a, cp.Variable) and a.id == X.id]
        rest = [a for a in expr.args if not (isinstance(a, cp.Variable) and a.id == X.id)]
        return len(var) == 1 and all(a.is_constant() and not a.parameters()
                                     and not np.any(dense_value(a.value)) for a in rest)
    return False


def _centering_map(con: Any) -> AffineMap | None:
    """The map of ``sum(K) == 0`` / ``K @ c1 == 0`` / ``c1 @ K == 0`` (either side, c != 0),
    built directly from the tree (CVXPY's extraction of its n^2 coefficients is skipped); None
    for anything else (read the general way)."""
    if not isinstance(con, cp.constraints.Equality):
        return None
    lhs, rhs = con.args
    sign = 1.0
    if isinstance(lhs, cp.Constant) and not np.any(lhs.value):
        lhs, rhs, sign = rhs, lhs, -1.0
    if not (isinstance(rhs, cp.Constant) and not np.any(rhs.value)):
        return None
    operand = _centering_operand(lhs)
    if operand is None:
        return None
    K, c, by = operand
    n = K.shape[0]
    if K.shape != (n, n) or K.is_complex() or (by is None and rhs.size != 1) \
            or (by is not None and rhs.size not in (1, n)):
        return None
    idx = np.arange(n * n)
    if by is None:
        A = sp.csr_array((np.full(n * n, sign * c), (np.zeros(n * n, dtype=np.int64), idx)),
                         shape=(1, n * n))
        return AffineMap(1, {K.id: A}, {}, np.zeros(1))
    rows = idx % n if by == "row" else idx // n  # K[i, j] at i + j n (column-major)
    A = sp.csr_array((np.full(n * n, sign * c), (rows, idx)), shape=(n, n * n))
    return AffineMap(n, {K.id: A}, {}, np.zeros(n))


def _centering_operand(lhs: Any) -> tuple[cp.Variable, float, str | None] | None:
    """``(K, c, by)`` when ``lhs`` is ``sum(K)`` (``by`` None, c = 1), ``K @ (c 1)`` (``"row"``)
    or ``(c 1) @ K`` (``"col"``), K a matrix variable and c != 0; else None."""
    if isinstance(lhs, Sum) and lhs.axis is None \
            and isinstance(lhs.args[0], cp.Variable) and lhs.args[0].ndim == 2:
        return lhs.args[0], 1.0, None
    if type(lhs) is not MulExpression:  # a matrix product, not its subclass multiply
        return None
    a, v = lhs.args
    by = "row"
    if isinstance(v, cp.Variable):
        a, v, by = v, a, "col"
    if not (isinstance(a, cp.Variable) and isinstance(v, cp.Constant) and a.ndim == 2):
        return None
    vals = np.asarray(dense_value(v.value), dtype=float)
    if vals.ndim != 1 or vals.size != a.shape[0] or vals[0] == 0 or np.any(vals != vals[0]):
        return None
    return a, float(vals[0]), by


def _lambda_min_psd(con: Any) -> Any:
    """``expr`` when ``con`` is ``lambda_min(expr) >= 0`` or ``lambda_max(-expr) <= 0`` (CVXPY
    builds ``lambda_min(A)`` as ``-lambda_max(-A)``), else None. ``lambda_max`` exactly, not its
    subclass ``lambda_sum_largest``: ``lambda_sum_largest(-A, k) <= 0`` (k > 1) allows A with a
    negative eigenvalue."""
    if not isinstance(con, cp.constraints.Inequality):
        return None
    lhs, rhs = con.args  # lhs <= rhs

    def zero(e: Any) -> bool:
        return e.is_constant() and not e.parameters() and e.size == 1 \
            and float(dense_value(e.value).ravel()[0]) == 0.0

    def neg_arg(e: Any) -> Any:
        return e.args[0] if isinstance(e, NegExpression) else None

    if zero(lhs):  # 0 <= -lambda_max(-A)
        inner = neg_arg(rhs)
        if type(inner) is LambdaMax:
            return neg_arg(inner.args[0])
    if zero(rhs) and type(lhs) is LambdaMax:  # lambda_max(-A) <= 0
        return neg_arg(lhs.args[0])
    return None


def _redundant_symmetry(info: ConstraintInfo, variables: list) -> bool:
    """Whether ``info`` is an equality ``A vec(W) == 0`` that every symmetric ``W`` satisfies,
    on variables declared symmetric (``symmetric=True`` / ``PSD=True`` / ``NSD=True``): its
    coefficients are antisymmetric in ``W`` (``A + A P = 0``, ``P`` the transposition)."""
    m = info.map
    if info.kind != "eq" or m is None or m.factored or np.any(m.offset):
        return False
    byid = {v.id: v for v in variables}
    ids = m.variable_ids()
    if not ids:
        return False
    for vid in ids:
        v = byid.get(vid)
        if v is None or v.ndim != 2 or v.shape[0] != v.shape[1] or not v.is_symmetric():
            return False
        n = v.shape[0]
        perm = np.arange(n * n).reshape(n, n).T.ravel()
        A = m.coef(v)
        if sp.csr_array(A + A[:, perm]).count_nonzero():
            return False
    return True
