"""Affine maps: ``vec(expr) = sum_v C_v vec(v) + sum_v sum_j M_j q_{V_j}(v) + offset``, read from
CVXPY's coefficient extraction, with ``row_quad_forms(V, X)`` rows kept factored (``V`` as the
user gave it, never the |S| x n^2 matrix), and cached per expression for parameter sweeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..._cvxpy_compat import affine_coefficients
from ..._interrupt import call_interruptibly
from ...atoms import RowQuadForms
from ...solvers.mg.dask_rows import is_dask_array
from .values import dense_value


@dataclass
class AffineMap:
    """``vec(expr) = sum_v coeffs[v] vec(v) + sum_v sum_j M_j q_{V_j}(v) + offset``.

    ``coeffs[v.id]`` is ``(size, v.size)`` sparse; ``factored[v.id]`` lists ``(M_j, V_j)`` with
    ``M_j`` ``(size, k_j)`` sparse and ``q_V(X) = (v_r^T X v_r)_r`` over the rows of ``V_j``
    (``V_j`` exactly as given to ``row_quad_forms``, e.g. a dask array). Vectorization is
    column-major (CVXPY's).
    """

    size: int
    coeffs: dict[int, sp.csr_array] = field(default_factory=dict)
    factored: dict[int, list[tuple[sp.csr_array, Any]]] = field(default_factory=dict)
    offset: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def coef(self, var: cp.Variable) -> sp.csr_array:
        c = self.coeffs.get(var.id)
        return sp.csr_array((self.size, var.size)) if c is None else c

    def variable_ids(self) -> set[int]:
        ids = {vid for vid, c in self.coeffs.items() if c.nnz}
        ids |= {vid for vid, fs in self.factored.items() if any(M.nnz for M, _ in fs)}
        return ids

    def rows_with(self, vid: int) -> np.ndarray:
        """Boolean mask of the rows that involve variable ``vid``."""
        mask = np.zeros(self.size, dtype=bool)
        c = self.coeffs.get(vid)
        if c is not None and c.nnz:
            mask |= np.diff(sp.csr_array(c).indptr) > 0
        for M, _ in self.factored.get(vid, []):
            mask |= np.diff(sp.csr_array(M).indptr) > 0
        return mask

    def weighted(self, w: np.ndarray) -> AffineMap:
        """The one-row map ``w^T (this map)``."""
        w = np.asarray(w, dtype=float).reshape(1, -1)
        return AffineMap(
            1,
            {k: sp.csr_array(w @ c) for k, c in self.coeffs.items()},
            {k: [(sp.csr_array(w @ M), V) for M, V in fs] for k, fs in self.factored.items()},
            np.ravel(w @ self.offset).astype(float),
        )

    def __add__(self, other: AffineMap) -> AffineMap:
        if other.size != self.size:
            raise ValueError("adding affine maps of different sizes")
        coeffs = dict(self.coeffs)
        for k, c in other.coeffs.items():
            coeffs[k] = sp.csr_array(coeffs[k] + c) if k in coeffs else c
        fac = {k: list(v) for k, v in self.factored.items()}
        for k, fs in other.factored.items():
            fac.setdefault(k, []).extend(fs)
        return AffineMap(self.size, coeffs, fac, self.offset + other.offset)

    def scaled(self, s: float) -> AffineMap:
        return AffineMap(
            self.size,
            {k: sp.csr_array(s * c) for k, c in self.coeffs.items()},
            {k: [(sp.csr_array(s * M), V) for M, V in fs] for k, fs in self.factored.items()},
            s * self.offset,
        )

    def without(self, vid: int) -> AffineMap:
        return AffineMap(self.size, {k: c for k, c in self.coeffs.items() if k != vid},
                         {k: f for k, f in self.factored.items() if k != vid}, self.offset)


def zero_map(size: int = 1) -> AffineMap:
    return AffineMap(size, {}, {}, np.zeros(size))


def cached_maps(exprs: list, variables: list[cp.Variable], cache: dict) -> list[AffineMap]:
    """:func:`affine_maps` with a cache keyed by expression object (parameter-free only): a
    parameter sweep re-reads only the expressions that hold parameters."""
    out: list[AffineMap | None] = []
    todo = []
    for i, e in enumerate(exprs):
        hit = cache.get(id(e))
        if hit is not None and hit[0] is e:
            out.append(hit[1])
        else:
            out.append(None)
            todo.append(i)
    if todo:
        maps = affine_maps([exprs[i] for i in todo], variables)
        for i, m in zip(todo, maps, strict=True):
            out[i] = m
            cache[id(exprs[i])] = (exprs[i], m)  # the reference keeps the id unique
    return out  # type: ignore[return-value]


def _substitute_rqf(expr: Any, found: list) -> Any:
    """Replace ``row_quad_forms(V, X)`` (X a variable) by placeholder variables."""
    if isinstance(expr, RowQuadForms) and isinstance(expr.args[0], cp.Variable):
        aux = cp.Variable(expr.shape)
        found.append((aux, expr.args[0].id, expr.V))
        return aux
    args = getattr(expr, "args", [])
    if not args:
        return expr
    new = [_substitute_rqf(a, found) for a in args]
    if all(a is b for a, b in zip(new, args, strict=True)):
        return expr
    return expr.copy(new)


class _NotRows(Exception):
    """The expression is not row-aligned (see :func:`_row_map`)."""


def _has_dask_rows(expr: Any) -> bool:
    if isinstance(expr, RowQuadForms):
        return is_dask_array(expr.V)
    return any(_has_dask_rows(a) for a in getattr(expr, "args", []))


def _const_rows(e: Any, m: int):
    """A constant as a scalar or an (m,) vector, else _NotRows."""
    v = dense_value(e.value) if isinstance(e, cp.Constant) else None
    if v is None:
        v = dense_value(e.value) if not e.variables() and not e.parameters() else None
    if v is None or v.size not in (1, m):
        raise _NotRows
    return float(v.ravel()[0]) if v.size == 1 else v.ravel(order="F").astype(float)


def _row_read(e: Any, m: int, w, acc: dict) -> None:
    """Add ``w * e`` (``w`` scalar or (m,)) to ``acc``: ``fac`` {(X id, id(V)): [w, V]},
    ``lin`` {var id: [kind, w, var]} (kind "bcast": a scalar variable in every row, "diag": a
    variable with one entry per row), ``off`` (scalar or (m,))."""
    if isinstance(e, RowQuadForms) and isinstance(e.args[0], cp.Variable):
        key = (e.args[0].id, id(e.V))
        acc["fac"].setdefault(key, [0.0, e.V, e.args[0].id])[0] += w
    elif isinstance(e, cp.Variable):
        kind = "bcast" if e.size == 1 else "diag" if e.size == m and e.ndim == 1 else None
        if kind is None:
            raise _NotRows
        acc["lin"].setdefault(e.id, [kind, 0.0, e])[1] += w
    elif not e.variables():
        acc["off"] = acc["off"] + w * _const_rows(e, m)
    elif isinstance(e, cp.atoms.affine.add_expr.AddExpression):
        for a in e.args:
            _row_read(a, m, w, acc)
    elif isinstance(e, cp.atoms.affine.unary_operators.NegExpression):
        _row_read(e.args[0], m, -w, acc)
    elif isinstance(e, cp.atoms.affine.promote.Promote):
        if e.shape not in ((m,),):
            raise _NotRows
        _row_read(e.args[0], m, w, acc)
    elif isinstance(e, (cp.multiply, cp.atoms.affine.binary_operators.MulExpression)):
        a, b = e.args
        if not a.variables():
            _row_read(b, m, w * _const_rows(a, m), acc)
        elif not b.variables():
            _row_read(a, m, w * _const_rows(b, m), acc)
        else:
            raise _NotRows
    elif isinstance(e, cp.atoms.affine.binary_operators.DivExpression):
        if e.args[1].variables():
            raise _NotRows
        _row_read(e.args[0], m, w / _const_rows(e.args[1], m), acc)
    else:
        raise _NotRows


def _row_map(expr: Any) -> AffineMap | None:
    """The map of a *row-aligned* expression with Dask-backed ``row_quad_forms`` read without
    CVXPY's coefficient extraction (which compiles objects with one entry per row): row ``r``
    is ``sum_j w_j[r] q_{V_j}(X)_r + (scalar variables) + (row r of variables with one entry
    per row) + c_r``, built from sums, negations, scalings by constants (scalar or per row),
    divisions by constants and broadcasts. None when ``expr`` has no Dask rows or another
    form (CVXPY reads it then)."""
    if expr.ndim != 1 or not _has_dask_rows(expr):
        return None
    m = int(expr.shape[0])
    acc: dict = {"fac": {}, "lin": {}, "off": 0.0}
    try:
        _row_read(expr, m, 1.0, acc)
    except _NotRows:
        return None

    def diag(w):
        return sp.csr_array(sp.diags_array(np.broadcast_to(w, (m,)).astype(float), format="csr"))

    coeffs = {}
    for vid, (kind, w, _) in acc["lin"].items():
        if kind == "bcast":
            col = np.broadcast_to(np.asarray(w, dtype=float), (m,))
            coeffs[vid] = sp.csr_array((col, np.zeros(m, dtype=np.int64), np.arange(m + 1)),
                                       shape=(m, 1))
        else:
            coeffs[vid] = diag(w)
    fac: dict[int, list] = {}
    for (xid, _), (w, V, _) in acc["fac"].items():
        fac.setdefault(xid, []).append((diag(w), V))
    return AffineMap(m, coeffs, fac, np.broadcast_to(acc["off"], (m,)).astype(float))


def affine_maps(exprs: list, variables: list[cp.Variable] | None = None) -> list[AffineMap]:
    """Affine maps of several parameter-free affine expressions, read in one pass
    (row-aligned expressions with Dask rows by :func:`_row_map`, no CVXPY compilation)."""
    if not exprs:
        return []
    direct = [_row_map(e) for e in exprs]
    if any(d is not None for d in direct):
        rest = [i for i, d in enumerate(direct) if d is None]
        for i, mp in zip(rest, affine_maps([exprs[i] for i in rest], variables), strict=True):
            direct[i] = mp
        return direct  # type: ignore[return-value]
    found: list = []
    subs = [_substitute_rqf(e, found) for e in exprs]
    if variables is None:
        seen: dict[int, cp.Variable] = {}
        for e in exprs:
            for v in e.variables():
                seen.setdefault(v.id, v)
        variables = list(seen.values())
    aux = [a for a, _, _ in found]
    allvars = [*variables, *aux]
    flat = [cp.vec(e, order="F") if e.ndim > 1 else e for e in subs]
    stacked = flat[0] if len(flat) == 1 else cp.hstack(flat)
    if not allvars:
        offs = dense_value(stacked.value).ravel(order="F")
        coeffs: dict = {}
    else:
        # CVXPY's coefficient extraction is compiled code that can run for minutes on large
        # data: run it so that Ctrl-C interrupts it (worker thread, specopt._interrupt)
        coeffs, offs = call_interruptibly(affine_coefficients, stacked, allvars)
    out = []
    start = 0
    aux_owner = {a.id: (vid, V) for a, vid, V in found}
    for e in subs:
        k = e.size
        rows = slice(start, start + k)
        cmap = {v.id: sp.csr_array(coeffs[v.id][rows]) for v in variables if v.id in coeffs}
        fac: dict[int, list] = {}
        for a in aux:
            M = sp.csr_array(coeffs[a.id][rows])
            if M.nnz:
                vid, V = aux_owner[a.id]
                fac.setdefault(vid, []).append((M, V))
        out.append(AffineMap(k, cmap, fac, np.asarray(offs[rows], dtype=float).copy()))
        start += k
    return out


def identity_multiple(row, n: int) -> float:
    """``a`` when the one-row map ``row`` (1 x n^2) is ``a tr(X)`` for an n x n ``X``, else 0."""
    r = sp.csr_array(row)
    if r.shape != (1, n * n):
        return 0.0
    dense = r.toarray().ravel()
    a = dense[0]
    if a == 0:
        return 0.0
    target = np.zeros(n * n)
    target[np.arange(n) * (n + 1)] = a
    return float(a) if np.allclose(dense, target, rtol=0, atol=1e-12 * abs(a)) else 0.0


def maps_or_none(exprs: list, variables: list[cp.Variable],
                 cache: dict | None = None) -> list[AffineMap | None]:
    """:func:`affine_maps` of ``exprs`` in one pass (through :func:`cached_maps` when ``cache``
    is given); when CVXPY cannot read one of them (complex, ...), expression by expression,
    with None for each one it cannot read."""
    try:
        if cache is None:
            return list(affine_maps(exprs, variables))
        return list(cached_maps(exprs, variables, cache))
    except Exception:
        out: list[AffineMap | None] = []
        for e in exprs:
            try:
                out.append(affine_maps([e], variables)[0])
            except Exception:
                out.append(None)
        return out
