r"""One analysis pass: a normalized description of a problem that every route matches against.

The objective is read once into a signed, scaled sum of classified terms

    objective = constant + a^T vec(x) + sum_t term_t,

where the weights of every term are obtained by distributing constants through sums, negations,
scalar/elementwise products, matrix products with constants, divisions by constants, ``sum`` and
promotions, so that equivalent spellings give the same description:

* ``QuadTerm``      ``u^T P u`` with ``u`` affine: ``sum_squares``, ``quad_form``,
  ``norm(.)**2`` / ``power(norm(., 2), 2)``, ``square(norm(.))``, ``sum(square(.))``,
  ``quad_over_lin(., y)`` (y > 0 constant), elementwise ``square`` with any weights;
* ``HingeTerm``     ``sum_i w_i max(g_i, 0)`` with ``g`` affine: ``pos``, ``maximum(., 0)``,
  ``maximum(0, .)`` and ``maximum(., c)`` (= ``c + max(. - c, 0)``), any weights;
* ``SpectralTerm``  ``sum_i alpha_i lambda_i(K)``: ``lambda_max``, ``lambda_min``,
  ``lambda_sum_largest`` (fractional k too), ``lambda_sum_smallest``, specopt's
  ``linear_spectral`` / ``mve_cost`` / ``eigengap`` and ``trace(K)``; all terms on the same
  matrix are merged into one alpha (e.g. ``2 lsl(K, 2) - lambda_max(K) - lsl(K, 3)`` is the
  eigengap ``lambda_2 - lambda_3``);
* ``LogDetTerm``    ``c * logdet_div(X, X0)``, also written by hand as
  ``c (tr(S X) - log det X)`` = ``c logdet_div(X, S^{-1}) + c (log det S + n)``;
* ``BurgTerm``      ``c * burg_div(x, x0)``, also by hand as ``c sum(x / x0 - log x)``;
* ``OtherTerm``     anything else (kept with its weight, named in ``explain``).

Constraints are classified (``ConstraintInfo``): PSD (on a variable or an LMI), affine
``==``/``<=``/``>=`` rows (read as an ``AffineMap``; ``row_quad_forms(V, X)`` rows stay factored
as ``M @ q_V(X)`` with ``V`` kept as the user gave it, never the |S| x n^2 matrix), bounds, trace
bounds and centering rows (``K @ ones == 0`` and ``sum(K) == 0`` alike), and other cones.

Parameters are bound to their current values (the description is of the problem as it would be
solved now). The description is cached per problem; the affine maps of parameter-free
constraints are kept across parameter changes, so a sweep only re-reads the objective and the
constraints that contain parameters.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .._cvxpy_compat import affine_coefficients
from .._interrupt import call_interruptibly

# --------------------------------------------------------------------------------------------
# Short names for expressions (explain reasons: never a matrix dump)
# --------------------------------------------------------------------------------------------
_INFIX = {"AddExpression": " + ", "MulExpression": " @ ", "multiply": " * ",
          "DivExpression": " / "}


def _is(node: Any, name: str) -> bool:
    return any(c.__name__ == name for c in type(node).__mro__)


def _fmt(node: Any, depth: int = 0) -> str:
    if depth > 12:
        return "..."
    if isinstance(node, (cp.Variable, cp.Parameter)):
        return node.name()
    if isinstance(node, cp.Constant):
        if node.size == 1:
            return f"{float(np.real(np.asarray(node.value)).ravel()[0]):.4g}"
        return "[" + "x".join(map(str, node.shape)) + " const]"
    if isinstance(node, cp.constraints.constraint.Constraint):
        op = {"Equality": " == ", "Zero": " == 0", "Inequality": " <= ", "PSD": " >> 0",
              "NonNeg": " >= 0", "NonPos": " <= 0"}.get(type(node).__name__)
        args = [_fmt(a, depth + 1) for a in node.args]
        if op is None:
            return f"{type(node).__name__}({', '.join(args)})"
        return op.join(args) if len(args) == 2 else args[0] + op
    name = type(node).__name__
    args = [_fmt(a, depth + 1) for a in getattr(node, "args", [])]
    if name in _INFIX and len(args) >= 2:
        return "(" + _INFIX[name].join(args) + ")"
    if name == "NegExpression":
        return "-" + args[0]
    if name == "Promote":
        return args[0]
    if name == "transpose":
        return args[0] + ".T"
    if name in ("PowerApprox", "Power", "power"):
        return f"{args[0]}**{float(np.asarray(node.p.value)):g}"
    label = {"maximum": "maximum", "Sum": "sum", "Trace": "trace", "QuadForm": "quad_form",
             "PnormApprox": "norm", "Pnorm": "norm"}.get(name)
    if label is None:
        try:
            label = node.name().split("(")[0] if hasattr(node, "name") else name
        except Exception:  # pragma: no cover - defensive: name() of a foreign atom
            label = name
    extra = ""
    if name == "lambda_sum_largest":
        extra = f", {node.k:g}"
    return f"{label}({', '.join(args)}{extra})"


def short(expr: Any, width: int = 60) -> str:
    """A one-line name of an expression or constraint, at most ``width`` characters.

    Constant matrices are shown by their shape (``[3x3 const]``), never their entries.
    """
    text = _fmt(expr)
    text = text[1:-1] if text.startswith("(") and text.endswith(")") else text
    return text if len(text) <= width else text[: width - 3] + "..."


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------
def bind_parameters(expr: Any) -> Any:
    """``expr`` (expression or constraint) with every Parameter replaced by its current value."""
    if not expr.parameters():
        return expr
    return _bind(expr)


def _bind(node: Any) -> Any:
    if isinstance(node, cp.Parameter):
        if node.value is None:
            raise ValueError(f"parameter {node.name()} has no value")
        return cp.Constant(node.value)
    args = getattr(node, "args", None)
    if not args or not node.parameters():
        return node
    return node.copy([_bind(a) for a in args])


def parameter_signature(problem: cp.Problem) -> tuple:
    """The current values of the problem's parameters (what a cached description depends on)."""
    sig = []
    for p in problem.parameters():
        v = p.value
        sig.append((p.id, None if v is None else np.asarray(v, dtype=float).tobytes()))
    return tuple(sig)


# --------------------------------------------------------------------------------------------
# Affine maps (row_quad_forms kept factored)
# --------------------------------------------------------------------------------------------
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
    from ..atoms import RowQuadForms

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


def affine_maps(exprs: list, variables: list[cp.Variable] | None = None) -> list[AffineMap]:
    """Affine maps of several parameter-free affine expressions, read in one pass."""
    if not exprs:
        return []
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


# --------------------------------------------------------------------------------------------
# Terms
# --------------------------------------------------------------------------------------------
@dataclass
class Term:
    """One classified objective term; ``expr`` is the node it was read from (for names)."""

    kind: str
    expr: Any

    @property
    def label(self) -> str:
        return short(self.expr)


@dataclass
class QuadTerm(Term):
    """``u^T P u`` (P symmetric, weights included) with ``u`` an affine expression."""

    u: Any = None
    #: dense, or sparse diagonal for sum_squares / square / quad_over_lin (O(size), not size^2)
    P: np.ndarray | sp.sparray | None = None


@dataclass
class HingeTerm(Term):
    """``sum_i w_i max(g_i, 0)`` with ``g`` affine (``inner``, flattened column-major)."""

    inner: Any = None
    weights: np.ndarray | None = None


@dataclass
class SpectralTerm(Term):
    """``sum_i alpha_i lambda_i(K)`` (eigenvalues decreasing); ``sources`` names the pieces."""

    K: Any = None
    alpha: np.ndarray | None = None
    sources: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{spectral_name(self.alpha)}({short(self.K, 20)})"


@dataclass
class LogDetTerm(Term):
    """``scale * logdet_div(X, X0)``; ``handwritten`` when read from ``tr(S X) - log det X``."""

    X: Any = None
    X0: np.ndarray | None = None
    scale: float = 1.0
    handwritten: bool = False

    @property
    def label(self) -> str:
        return f"{self.scale:.4g} * logdet_div({short(self.X, 20)}, X0)"


@dataclass
class BurgTerm(Term):
    """``scale * burg_div(x, x0)`` (x0 of x's shape)."""

    x: Any = None
    x0: np.ndarray | None = None
    scale: float = 1.0
    handwritten: bool = False

    @property
    def label(self) -> str:
        return f"{self.scale:.4g} * burg_div({short(self.x, 20)}, x0)"


@dataclass
class OtherTerm(Term):
    """A term none of the classes above covers, with its weight (scalar or per entry)."""

    weight: Any = 1.0


def spectral_name(alpha: np.ndarray) -> str:
    """``mve_cost`` / ``eigengap`` / ``lambda_sum_largest`` / ``trace`` / ``linear_spectral``."""
    a = np.asarray(alpha, dtype=float)
    n = a.size
    if np.allclose(a, a[0]):
        return "trace"
    for d in range(1, n):
        if np.array_equal(a, np.concatenate([-np.ones(d), np.ones(n - d)])):
            return f"mve_cost[d={d}]"
        e = np.zeros(n)
        e[d - 1], e[d] = 1.0, -1.0
        if np.allclose(a, e, atol=1e-12):
            return f"eigengap[d={d}]"
        if np.array_equal(a, np.concatenate([np.ones(d), np.zeros(n - d)])):
            return f"lambda_sum_largest[k={d}]"
    return "linear_spectral"


# --------------------------------------------------------------------------------------------
# Constraints
# --------------------------------------------------------------------------------------------
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
        return _identity_multiple(m.coef(X), X.shape[0])

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


def _identity_multiple(row, n: int) -> float:
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


# --------------------------------------------------------------------------------------------
# The description
# --------------------------------------------------------------------------------------------
@dataclass
class Description:
    """The normalized problem: objective terms, affine part, constant, classified constraints.

    ``sense`` is +1 for minimize, -1 for maximize; the objective (in the user's sense) is
    ``constant + affine + sum(terms)``.
    """

    sense: int
    variables: list[cp.Variable]
    terms: list[Term]
    affine: AffineMap
    constant: float
    constraints: list[ConstraintInfo]
    has_parameters: bool = False
    _hinge_maps: list | None = field(default=None, repr=False)
    _expr_maps: dict = field(default_factory=dict, repr=False)  # shared per-problem cache

    # -- objective queries ---------------------------------------------------------------------
    def of_kind(self, *kinds: str) -> list[Term]:
        return [t for t in self.terms if t.kind in kinds]

    def affine_variable_ids(self) -> set[int]:
        return self.affine.variable_ids()

    # -- constraint queries --------------------------------------------------------------------
    def psd_variables(self) -> list[cp.Variable]:
        """Variables declared PSD or constrained ``X >> 0`` directly."""
        out: list[cp.Variable] = [v for v in self.variables if v.attributes.get("PSD")]
        for c in self.constraints:
            if c.kind == "psd" and c.var is not None and all(c.var is not v for v in out):
                out.append(c.var)
        return out

    def psd_constraints(self) -> list[ConstraintInfo]:
        return [c for c in self.constraints if c.kind == "psd"]

    def affine_constraints(self) -> list[ConstraintInfo]:
        return [c for c in self.constraints if c.kind in ("eq", "le", "ge")]

    def hinge_maps(self) -> list[AffineMap]:
        """Affine maps of the hinge terms' arguments (rows of their slack lift), read once."""
        if self._hinge_maps is None:
            hinges = [t for t in self.terms if isinstance(t, HingeTerm)]
            self._hinge_maps = cached_maps([t.inner for t in hinges], self.variables,
                                           self._expr_maps)
        return self._hinge_maps

    def hinge_slack_rows(self) -> list[tuple[cp.Variable, AffineMap, np.ndarray]]:
        """Hinge terms lifted for LP-type routes: for ``sum_i w_i max(g_i, 0)`` a slack
        ``t >= 0`` (fresh variable), the rows ``g - t <= 0`` and the objective weights ``w``
        (``w^T t`` replaces the term where it is convex in the minimized objective)."""
        out = []
        hinges = [t for t in self.terms if isinstance(t, HingeTerm)]
        for t, g in zip(hinges, self.hinge_maps(), strict=True):
            k = int(np.asarray(t.weights).size)
            slack = cp.Variable(k, nonneg=True, name="hinge_slack")
            rows = AffineMap(k, dict(g.coeffs), g.factored, g.offset)
            rows.coeffs[slack.id] = sp.csr_array(-sp.identity(k, format="csr"))
            out.append((slack, rows, np.asarray(t.weights, dtype=float)))
        return out

    def dense_rows(self, psd_vars: list[cp.Variable] | None = None) -> int:
        """Rows coupling densely to a PSD matrix (more than n entries of an n x n PSD variable,
        or a factored ``row_quad_forms`` row), in constraints and in hinge arguments (which a
        conic form lifts to rows): what the KKT estimate of ``backends`` counts. The same for
        every spelling of the rows (``row_quad_forms``, a list of ``trace(A_r @ X)``, hinges)."""
        psd_vars = self.psd_variables() if psd_vars is None else psd_vars
        maps = [c.map for c in self.affine_constraints() if c.map is not None]
        maps += self.hinge_maps()
        total = 0
        for m in maps:
            dense = np.zeros(m.size, dtype=bool)
            for X in psd_vars:
                n = X.shape[0]
                C = m.coeffs.get(X.id)
                if C is not None and C.nnz:
                    dense |= np.diff(sp.csr_array(C).indptr) > n
                for M, _ in m.factored.get(X.id, []):
                    dense |= np.diff(sp.csr_array(M).indptr) > 0
            total += int(dense.sum())
        return total


# --------------------------------------------------------------------------------------------
# Reading the objective
# --------------------------------------------------------------------------------------------
def is_linear(node: Any) -> bool:
    """Affine in the strict sense: only affine atoms in the tree (CVXPY's ``is_affine`` also
    says yes to ``0 * neg(x)``, which its coefficient extractor cannot read)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if hasattr(n, "is_atom_affine") and not n.is_atom_affine():
            return False
        stack.extend(getattr(n, "args", []))
    return bool(node.is_affine())


def _same(a: Any, b: Any) -> bool:
    """Whether two expressions are the same (identical object or identical text and variables)."""
    if a is b:
        return True
    if type(a).__name__ == "conj":  # conj of a real expression is itself (cp.vdot)
        a = a.args[0]
    if type(b).__name__ == "conj":
        b = b.args[0]
    if a is b:
        return True
    return a.shape == b.shape and str(a) == str(b) and \
        {v.id for v in a.variables()} == {v.id for v in b.variables()}


def dense_value(value: Any) -> np.ndarray:
    """A constant's value as a dense float array (scipy sparse constants included)."""
    if sp.issparse(value):
        value = value.toarray()
    return np.asarray(value, dtype=float)


def _const_value(node: Any) -> np.ndarray | None:
    if isinstance(node, cp.Expression) and node.is_constant() and not node.parameters():
        return dense_value(node.value)
    return None


def _reduce_to(W: np.ndarray, shape: tuple) -> np.ndarray:
    """Weights of a broadcast operand: sum over the broadcast dimensions."""
    W = np.asarray(W, dtype=float)
    if W.shape == tuple(shape):
        return W
    size = int(np.prod(shape)) if shape else 1
    if size == 1:
        return np.asarray(W.sum()).reshape(shape)
    # numpy-style broadcasting: sum over leading dims and dims of size 1
    out = W
    while out.ndim > len(shape):
        out = out.sum(axis=0)
    for i, s in enumerate(shape):
        if s == 1 and out.shape[i] != 1:
            out = out.sum(axis=i, keepdims=True)
    return out.reshape(shape)


class _Reader:
    """Expands the objective into weighted leaves (see module docstring)."""

    def __init__(self) -> None:
        self.constant = 0.0
        self.affine: list[tuple[np.ndarray, Any]] = []
        self.terms: list[Term] = []
        self.raw_logdet: list[tuple[float, Any, Any]] = []  # (weight, X, node)
        self.raw_log: list[tuple[np.ndarray, Any, Any]] = []  # (weights, u, node)
        self.spectral: dict[Any, SpectralTerm] = {}

    def _hinge(self, node: Any, Wf: np.ndarray, inner: Any, sign: float) -> bool:
        """Record ``sign * sum(Wf * max(inner, 0))`` for the atom ``node`` (``inner`` broadcast
        to its shape); returns True (the atom was read)."""
        if inner.shape != node.shape:
            inner = inner + np.zeros(node.shape)
        self.terms.append(HingeTerm("hinge", node, inner=inner,
                                    weights=sign * Wf.ravel(order="F")))
        return True

    def read(self, node: Any, W: np.ndarray) -> None:
        W = np.asarray(W, dtype=float)
        if not np.any(W):
            return
        cv = _const_value(node)
        if cv is not None:
            self.constant += float(np.sum(W * cv))
            return
        if is_linear(node):
            self.affine.append((W, node))
            return
        name = type(node).__name__
        args = node.args
        if name in ("norm1", "abs") or (_is(node, "Pnorm") and node.p == 1):
            # |x| summed (or elementwise) on a nonnegative argument is x itself
            if args[0].is_nonneg() and (name == "abs" or node.axis is None):
                full = np.broadcast_to(W, node.shape)
                self.read(args[0], full if name == "abs" else np.full(args[0].shape, float(W)))
                return
        if name == "AddExpression":
            for a in args:
                self.read(a, _reduce_to(np.broadcast_to(W, node.shape), a.shape))
            return
        if name == "NegExpression":
            self.read(args[0], -W)
            return
        if name == "Promote":
            self.read(args[0], np.asarray(W.sum()).reshape(args[0].shape))
            return
        if name == "reshape":
            order = getattr(node, "order", "F")
            full = np.broadcast_to(W, node.shape).ravel(order=order)
            self.read(args[0], full.reshape(args[0].shape, order=order))
            return
        if name == "transpose" and args[0].ndim == 2 and node.axes is None:
            self.read(args[0], np.broadcast_to(W, node.shape).T.copy())
            return
        if name == "index":
            Wa = np.zeros(args[0].shape)
            Wa[node.key] = np.broadcast_to(W, node.shape)
            self.read(args[0], Wa)
            return
        if name in ("multiply", "MulExpression") and _const_value(args[0]) is None \
                and _const_value(args[1]) is None and _same(args[0], args[1]):
            u = args[1]
            if is_linear(u) and (name == "multiply" or u.ndim <= 1):
                Wd = np.broadcast_to(W, node.shape)
                P = (float(Wd) * sp.eye_array(u.size, format="csr") if name == "MulExpression"
                     else sp.diags_array(np.broadcast_to(Wd, u.shape).ravel(order="F"),
                                         format="csr"))
                self._quad(node, u, P)
                return
        if name == "multiply":
            for c, e in ((args[0], args[1]), (args[1], args[0])):
                cv = _const_value(c)
                if cv is not None:
                    full = np.broadcast_to(W, node.shape) * np.broadcast_to(cv, node.shape)
                    self.read(e, _reduce_to(full, e.shape))
                    return
        if name == "DivExpression":
            cv = _const_value(args[1])
            if cv is not None and np.all(cv != 0):
                full = np.broadcast_to(W, node.shape) / np.broadcast_to(cv, node.shape)
                self.read(args[0], _reduce_to(full, args[0].shape))
                return
        if name == "MulExpression":
            if self._matmul(node, W):
                return
        if name == "Sum":
            a = args[0]
            axis = node.axis
            if axis is None:
                self.read(a, np.full(a.shape, float(np.sum(W))))
                return
            Wk = np.asarray(W).reshape(node.shape)
            if not node.keepdims:
                Wk = np.expand_dims(Wk, axis)
            self.read(a, np.broadcast_to(Wk, a.shape).copy())
            return
        if self._leaf(node, W):
            return
        self.terms.append(OtherTerm("other", node, weight=W if W.size > 1 else float(W)))

    def _matmul(self, node: Any, W: np.ndarray) -> bool:
        A, B = node.args
        ca, cb = _const_value(A), _const_value(B)
        W = np.asarray(W, dtype=float).reshape(node.shape)
        if ca is not None and cb is None:
            if B.ndim == 1 and ca.ndim == 1:  # c @ x (scalar)
                self.read(B, float(W) * ca)
            elif B.ndim == 1:  # C @ x
                self.read(B, ca.T @ W)
            elif ca.ndim == 1:  # c @ X -> row vector
                self.read(B, np.outer(ca, W))
            else:
                self.read(B, ca.T @ W)
            return True
        if cb is not None and ca is None:
            if A.ndim == 1 and cb.ndim == 1:
                self.read(A, float(W) * cb)
            elif A.ndim == 1:  # x @ C
                self.read(A, cb @ W)
            elif cb.ndim == 1:  # X @ c
                self.read(A, np.outer(W, cb))
            else:
                self.read(A, W @ cb.T)
            return True
        return False

    # -- leaves --------------------------------------------------------------------------------
    def _leaf(self, node: Any, W: np.ndarray) -> bool:
        from ..atoms import BurgDiv, LinearSpectral, LogDetDiv

        name = type(node).__name__
        args = node.args
        scalar = W.size == 1
        w = float(W.ravel()[0]) if scalar else None
        # quadratic forms
        if _is(node, "Power") and float(np.asarray(node.p.value)) == 2.0:
            inner = args[0]
            if _is(inner, "Pnorm") and inner.p == 2 and inner.axis is None and scalar:
                u = inner.args[0]
                if is_linear(u):
                    self._quad(node, u, w * sp.eye_array(u.size, format="csr"))
                    return True
            if is_linear(inner):
                self._quad(node, inner, sp.diags_array(np.broadcast_to(W, inner.shape).ravel("F"),
                                                       format="csr"))
                return True
            return False
        if name == "quad_over_lin" and scalar and node.axis is None:
            u, y = args
            yv = _const_value(y)
            if yv is not None and is_linear(u) and float(yv) > 0:
                self._quad(node, u, (w / float(yv)) * sp.eye_array(u.size, format="csr"))
                return True
            return False
        if name == "QuadForm" and scalar:
            u, P = args
            Pv = _const_value(P)
            if Pv is None and type(P).__name__ == "psd_wrap":
                Pv = _const_value(P.args[0])
            if Pv is not None and is_linear(u):
                Pv = np.atleast_2d(Pv)
                self._quad(node, u, w * 0.5 * (Pv + Pv.T))
                return True
            return False
        # hinge
        if name == "maximum" and len(args) == 2:
            for e, c in ((args[0], args[1]), (args[1], args[0])):
                cv = _const_value(c)
                if cv is not None and is_linear(e):
                    # max(e, c) = c + max(e - c, 0)
                    Wf = np.broadcast_to(W, node.shape).astype(float)
                    self.constant += float(np.sum(Wf * np.broadcast_to(cv, node.shape)))
                    return self._hinge(node, Wf, e - cv if np.any(cv) else e, 1.0)
            u, v = args
            if is_linear(u) and is_linear(v):  # max(u, v) = v + max(u - v, 0)
                Wf = np.broadcast_to(W, node.shape).astype(float)
                self.read(v, _reduce_to(Wf, v.shape))
                return self._hinge(node, Wf, u - v, 1.0)
            return False
        if name == "minimum" and len(args) == 2 and is_linear(args[0]) and is_linear(args[1]):
            # min(u, v) = v - max(v - u, 0): an affine part and a hinge with weights -W
            u, v = args
            if _const_value(v) is None and _const_value(u) is not None:
                u, v = v, u
            Wf = np.broadcast_to(W, node.shape).astype(float)
            self.read(v, _reduce_to(Wf, v.shape))
            return self._hinge(node, Wf, v - u, -1.0)
        # spectral
        if scalar and isinstance(node, (cp.lambda_max, cp.lambda_sum_largest, LinearSpectral)):
            base, s = _scalar_multiple(args[0])
            n = base.shape[0]
            if isinstance(node, LinearSpectral):
                alpha = np.asarray(node.alpha, dtype=float)
            elif isinstance(node, cp.lambda_sum_largest):
                k = float(node.k)
                alpha = np.zeros(n)
                alpha[: int(math.floor(k))] = 1.0
                if k % 1 and int(k) < n:
                    alpha[int(k)] = k % 1
            else:
                alpha = np.zeros(n)
                alpha[0] = 1.0
            alpha = s * (alpha if s > 0 else alpha[::-1])
            self._spectral(node, base, w * alpha)
            return True
        # divergences
        if isinstance(node, LogDetDiv) and scalar:
            self.terms.append(LogDetTerm("logdet", node, X=args[0], X0=node.X0, scale=w))
            return True
        if isinstance(node, BurgDiv) and scalar:
            x0 = np.broadcast_to(node.x0, args[0].shape).astype(float)
            self.terms.append(BurgTerm("burg", node, x=args[0], x0=x0, scale=w))
            return True
        if isinstance(node, cp.log_det) and scalar:
            self.raw_logdet.append((w, args[0], node))
            return True
        if isinstance(node, cp.log) and is_linear(args[0]):
            self.raw_log.append((np.broadcast_to(W, node.shape).astype(float), args[0], node))
            return True
        return False

    def _quad(self, node: Any, u: Any, P: np.ndarray) -> None:
        self.terms.append(QuadTerm("quadratic", node, u=u, P=P))

    def _spectral(self, node: Any, K: Any, alpha: np.ndarray) -> None:
        key = K.id if isinstance(K, cp.Variable) else ("expr", str(K))
        t = self.spectral.get(key)
        if t is None:
            t = SpectralTerm("spectral", node, K=K, alpha=np.zeros(K.shape[0]))
            self.spectral[key] = t
            self.terms.append(t)
        t.alpha = t.alpha + alpha
        t.sources.append(short(node, 30))


def _scalar_multiple(K: Any) -> tuple[Any, float]:
    """``K = s * base`` with s a nonzero scalar constant (negations, products, divisions)."""
    s = 1.0
    while True:
        name = type(K).__name__
        if name == "NegExpression":
            s, K = -s, K.args[0]
            continue
        if name in ("multiply", "MulExpression") and len(K.args) == 2:
            a, b = K.args
            ca, cb = _const_value(a), _const_value(b)
            if ca is not None and ca.size == 1 and float(ca) != 0 and cb is None:
                s, K = s * float(ca), b
                continue
            if cb is not None and cb.size == 1 and float(cb) != 0 and ca is None:
                s, K = s * float(cb), a
                continue
        if name == "DivExpression":
            cb = _const_value(K.args[1])
            if cb is not None and cb.size == 1 and float(cb) != 0:
                s, K = s / float(cb), K.args[0]
                continue
        return K, s


def _read_objective(expr: Any, variables: list[cp.Variable], cache: dict | None = None):
    r = _Reader()
    r.read(expr, np.ones(expr.shape) if expr.shape else np.asarray(1.0))
    # the affine part, all leaves in one pass
    affine = zero_map(1)
    terms = r.terms
    if r.affine:
        try:
            maps = cached_maps([e for _, e in r.affine], variables, {} if cache is None else cache)
        except Exception:  # a leaf CVXPY cannot read: classify leaf by leaf
            maps = []
            for W, e in r.affine:
                try:
                    maps.append(affine_maps([e], variables)[0])
                except Exception:
                    maps.append(None)
                    terms.append(OtherTerm("other", e, weight=W if W.size > 1 else float(W)))
        for (W, e), m in zip(r.affine, maps, strict=True):
            if m is not None:
                affine = affine + m.weighted(np.broadcast_to(W, e.shape).ravel(order="F"))
    constant = r.constant + float(affine.offset[0])
    affine.offset = np.zeros(1)
    # trace(K) on a spectral matrix joins its alpha
    for t in [t for t in terms if isinstance(t, SpectralTerm)]:
        if isinstance(t.K, cp.Variable) and t.K.id in affine.coeffs \
                and not affine.factored.get(t.K.id):
            a = _identity_multiple(affine.coeffs[t.K.id], t.K.shape[0])
            if a:
                t.alpha = t.alpha + a
                t.sources.append(f"{a:g}*trace")
                affine = affine.without(t.K.id)
    # - c log det X + c <S, X>  ->  c logdet_div(X, S^-1) + c (log det S + n)
    by_X: dict[int, list] = {}
    for w, X, node in r.raw_logdet:
        by_X.setdefault(X.id if isinstance(X, cp.Variable) else id(X), []).append((w, X, node))
    for items in by_X.values():
        w = sum(it[0] for it in items)
        X, node = items[0][1], items[0][2]
        term = _handwritten_logdet(w, X, node, affine)
        if term is None:
            terms.append(OtherTerm("other", node, weight=w))
            continue
        ld, const, affine = term
        terms.append(ld)
        constant += const
    # c D(X, X0) + <S, X> = c D(X, X0') + c (log det X0 - log det X0'), X0'^-1 = X0^-1 + S / c
    for t in terms:
        if isinstance(t, LogDetTerm) and not t.handwritten:
            affine, const = _absorb_logdet(t, affine)
            constant += const
    # - c log x + (c / x0) x  ->  c burg_div(x, x0) + c sum(1 - log x0)
    for W, u, node in r.raw_log:
        res = _handwritten_burg(W, u, node, affine)
        if res is None:
            terms.append(OtherTerm("other", node, weight=W))
            continue
        bt, const, affine = res
        terms.append(bt)
        constant += const
    # c burg(x, x0) + a^T x = c burg(x, x0') + c sum(log x0 - log x0'), 1/x0' = 1/x0 + a/c
    for t in terms:
        if isinstance(t, BurgTerm) and not t.handwritten:
            affine, const = _absorb_burg(t, affine)
            constant += const
    return terms, affine, constant


def _absorb_logdet(t: LogDetTerm, affine: AffineMap) -> tuple[AffineMap, float]:
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


# --------------------------------------------------------------------------------------------
# Reading the constraints
# --------------------------------------------------------------------------------------------
def _constraint_kind(con: Any) -> tuple[str, Any]:
    if isinstance(con, cp.constraints.PSD):
        return "psd", con.args[0]
    if isinstance(con, (cp.constraints.Equality, cp.constraints.Zero)):
        return "eq", con.expr
    if isinstance(con, (cp.constraints.Inequality, cp.constraints.NonPos)):
        return "le", con.expr
    if isinstance(con, cp.constraints.NonNeg):
        return "ge", con.expr
    return "cone", None


def _is_var_plus_zero(expr: Any, X: cp.Variable) -> bool:
    """``X`` or ``X + 0`` (what ``X >> 0`` builds), read on the tree (no coefficients)."""
    if isinstance(expr, cp.Variable):
        return expr.id == X.id
    if isinstance(expr, cp.atoms.affine.add_expr.AddExpression):
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
    if isinstance(lhs, cp.atoms.affine.sum.Sum) and lhs.axis is None \
            and isinstance(lhs.args[0], cp.Variable) and lhs.args[0].ndim == 2:
        K, c, by = lhs.args[0], 1.0, None
    elif isinstance(lhs, cp.atoms.affine.binary_operators.MulExpression):
        a, v = lhs.args
        by = "row"
        if isinstance(v, cp.Variable):
            a, v, by = v, a, "col"
        if not (isinstance(a, cp.Variable) and isinstance(v, cp.Constant) and a.ndim == 2):
            return None
        vals = np.asarray(dense_value(v.value), dtype=float)
        if vals.ndim != 1 or vals.size != a.shape[0] or vals[0] == 0 or np.any(vals != vals[0]):
            return None
        K, c = a, float(vals[0])
    else:
        return None
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


def _read_constraints(cons: list, bound: list, variables: list, cache: dict) -> list:
    from .._tree import is_identity_of

    infos: list[ConstraintInfo] = []
    todo: list[tuple[int, Any]] = []
    for con, b in zip(cons, bound, strict=True):
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
        elif kind in ("eq", "le", "ge"):
            cmap = _centering_map(b) if kind == "eq" else None
            if cmap is not None:
                info.map = cmap
            elif not is_linear(expr):
                info.kind = "nonaffine"
            elif b is con and con.id in cache:
                info.map = cache[con.id]
            else:
                todo.append((len(infos), expr))
        infos.append(info)
    if todo:
        try:
            maps: list = affine_maps([e for _, e in todo], variables)
        except Exception:  # one CVXPY cannot read (complex, ...): constraint by constraint
            maps = []
            for _, e in todo:
                try:
                    maps.append(affine_maps([e], variables)[0])
                except Exception:
                    maps.append(None)
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


def _lambda_min_psd(con: Any) -> Any:
    """``expr`` when ``con`` is ``lambda_min(expr) >= 0`` or ``lambda_max(-expr) <= 0`` (CVXPY
    builds ``lambda_min(A)`` as ``-lambda_max(-A)``), else None."""
    if not isinstance(con, cp.constraints.Inequality):
        return None
    lhs, rhs = con.args  # lhs <= rhs

    def zero(e: Any) -> bool:
        return e.is_constant() and not e.parameters() and e.size == 1 \
            and float(dense_value(e.value).ravel()[0]) == 0.0

    def neg_arg(e: Any) -> Any:
        return e.args[0] if isinstance(e, cp.atoms.affine.unary_operators.NegExpression) \
            else None

    lam_max = cp.atoms.lambda_max
    if zero(lhs):  # 0 <= -lambda_max(-A)
        inner = neg_arg(rhs)
        if isinstance(inner, lam_max):
            return neg_arg(inner.args[0])
    if zero(rhs) and isinstance(lhs, lam_max):  # lambda_max(-A) <= 0
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


# --------------------------------------------------------------------------------------------
# Entry point (cached)
# --------------------------------------------------------------------------------------------
_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MAX_CACHED_EXPRS = 512


def analyze(problem: cp.Problem) -> Description:
    """The normalized description of ``problem`` with its parameters' current values.

    Cached per problem: the same parameter values return the same object; new values re-read
    the objective and the constraints with parameters only.
    """
    entry = _CACHE.get(problem)
    if entry is None:
        entry = {"maps": {}, "sig": None, "desc": None}
        _CACHE[problem] = entry
    sig = parameter_signature(problem)
    if entry["desc"] is not None and entry["sig"] == sig:
        return entry["desc"]
    if len(entry.get("exprs", ())) > _MAX_CACHED_EXPRS:  # bound copies of a long sweep
        entry["exprs"] = {}
    variables = problem.variables()
    obj = problem.objective
    expr = bind_parameters(obj.expr)
    terms, affine, constant = _read_objective(expr, variables, entry.setdefault("exprs", {}))
    bound = [bind_parameters(c) for c in problem.constraints]
    infos = _read_constraints(list(problem.constraints), bound, variables, entry["maps"])
    desc = Description(
        sense=1 if isinstance(obj, cp.Minimize) else -1,
        variables=variables,
        terms=terms,
        affine=affine,
        constant=constant,
        constraints=infos,
        has_parameters=bool(problem.parameters()),
        _expr_maps=entry.setdefault("exprs", {}),
    )
    entry["sig"], entry["desc"] = sig, desc
    return desc


def try_analyze(problem: cp.Problem) -> tuple[Description | None, str]:
    """``(description, "")``, or ``(None, reason)`` when the problem cannot be read (a parameter
    without a value, an expression CVXPY cannot extract coefficients from)."""
    try:
        return analyze(problem), ""
    except ValueError as exc:
        return None, f"the problem cannot be analyzed: {exc}"
    except Exception as exc:  # noqa: BLE001 - reported as the reason, never raised
        return None, f"the problem cannot be analyzed ({type(exc).__name__}: {exc})"[:200]


def clear_cache() -> None:
    """Forget every cached description (tests, benchmarks)."""
    _CACHE.clear()


def objective_summary(desc: Description) -> str:
    """One line naming the objective's terms (for explain)."""
    parts = [t.label for t in desc.terms]
    if desc.affine.variable_ids():
        parts.append("affine")
    return " + ".join(parts) if parts else "constant"


# --------------------------------------------------------------------------------------------
# Back to CVXPY: the normalized problem (merged spectral terms, bound parameters)
# --------------------------------------------------------------------------------------------
def affine_expr(amap: AffineMap, variables: list[cp.Variable]) -> Any:
    """A CVXPY expression of a one-row affine map (without its offset)."""
    from ..atoms import row_quad_forms

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
    from ..atoms import burg_div, linear_spectral, logdet_div

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
