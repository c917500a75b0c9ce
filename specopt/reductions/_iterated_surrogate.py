"""The iterated-SDP route's convex subproblem: the user's problem rebuilt on fresh variables with
each concave spectral part majorized by ``tr(K B)``, ``vec(B)`` a parameter
(:func:`build_surrogate`; the math is in :mod:`specopt.reductions.iterated_sdp`'s docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import cvxpy as cp
import numpy as np

from .._values import constraint_scale
from ..atoms import LinearSpectral
from ..atoms.linear_spectral import sum_largest
from ..solvers.iterated_sdp import concave_weights
from .analysis import short
from .base import RouteMismatch

_VAR_ATTRS = ("nonneg", "nonpos", "pos", "neg", "symmetric", "diag", "PSD", "NSD", "hermitian")


@dataclass
class Node:
    """One linearized spectral term: its matrix (user and fresh variables), weights, parameter."""

    K_user: cp.Expression
    K: cp.Expression
    beta: np.ndarray
    B: cp.Parameter


@dataclass
class Surrogate:
    problem: cp.Problem  # convex subproblem (fresh variables, B parameters)
    true_objective: cp.Expression  # the user's objective on the fresh variables
    sense: int  # +1 minimize, -1 maximize
    nodes: list[Node]
    var_map: dict[int, cp.Variable]  # user var id -> fresh var
    user_vars: list[cp.Variable]
    con_map: list[tuple[int, cp.Constraint]] = field(default_factory=list)
    #: the user's constraints on the fresh variables, where some were rewritten (row centering)
    check_cons: list[cp.Constraint] = field(default_factory=list)
    #: fresh variables whose row centering was rewritten as sum(K) == 0
    centered: list[cp.Variable] = field(default_factory=list)


def _fresh_variable(v: cp.Variable) -> cp.Variable:
    attrs = {k: True for k in _VAR_ATTRS if v.attributes.get(k)}
    if v.attributes.get("bounds") is not None:
        attrs["bounds"] = v.attributes["bounds"]
    return cp.Variable(v.shape, name=v.name(), **attrs)


def contains_spectral(expr: cp.Expression) -> bool:
    if isinstance(expr, LinearSpectral):
        return True
    return any(contains_spectral(a) for a in expr.args)


def _walk_atoms(expr: cp.Expression):
    yield expr
    for a in expr.args:
        yield from _walk_atoms(a)


def _convex_part(K: cp.Expression, w: np.ndarray) -> cp.Expression:
    """``g_w(K) = w_n tr K + sum_{i<n} (w_i - w_{i+1}) f_i(K)`` (w nonincr.; ``f_i`` with the
    fewest PSD blocks, :func:`specopt.atoms.linear_spectral.sum_largest`)."""
    out: cp.Expression = cp.Constant(0.0)
    if w[-1] != 0.0:
        out = w[-1] * cp.trace(K)
    c = w[:-1] - w[1:]
    for i in np.flatnonzero(c > 0):
        out = out + float(c[i]) * sum_largest(K, int(i) + 1)
    return out


def _psd_variable_ids(problem: cp.Problem) -> set[int]:
    """Ids of the variables constrained PSD (``PSD=True``, or a constraint ``K >> 0``)."""
    ids = {v.id for v in problem.variables() if v.attributes.get("PSD")}
    for c in problem.constraints:
        if isinstance(c, cp.constraints.PSD):
            arg = c.args[0]
            if isinstance(arg, cp.Variable):
                ids.add(arg.id)
            elif type(arg).__name__ == "AddExpression":  # K + 0 (the normalized problem's)
                vs = [a for a in arg.args if isinstance(a, cp.Variable)]
                rest = [a for a in arg.args if not isinstance(a, cp.Variable)]
                if len(vs) == 1 and all(a.is_constant() and not np.any(a.value) for a in rest):
                    ids.add(vs[0].id)
    return ids


def _row_centering_var(c: cp.Constraint, psd_ids: set[int]) -> cp.Variable | None:
    """The PSD variable K of a row-centering constraint ``K @ ones == 0`` (also ``ones @ K``,
    ``cp.sum(K, axis=0 / 1)``, either side), else None."""
    if not isinstance(c, cp.constraints.Equality):
        return None
    for e, z in ((c.args[0], c.args[1]), (c.args[1], c.args[0])):
        if not z.is_constant() or np.any(z.value):
            continue
        name = type(e).__name__
        if name == "Sum" and getattr(e, "axis", None) is not None:
            K = e.args[0]
        elif name == "MulExpression":
            a, b = e.args
            K, ones = (a, b) if isinstance(a, cp.Variable) else (b, a)
            if not ones.is_constant() or not np.allclose(ones.value, 1.0):
                continue
        else:
            continue
        if isinstance(K, cp.Variable) and K.id in psd_ids and K.ndim == 2:
            return K
    return None


class _Builder:
    """Rebuilds the user's problem on fresh variables, linearizing the concave spectral parts.

    In the subproblem (not in the true objective) ``normNuc(K)`` of a PSD-constrained variable is
    written ``trace(K)`` (equal on the feasible set): the spelling does not add a 2n x 2n cone
    or move the subproblem to another backend.
    """

    def __init__(self, var_map: dict[int, cp.Variable], psd_ids: set[int] | None = None) -> None:
        self.var_map = var_map
        self.nodes: list[Node] = []
        self.psd_ids = psd_ids or set()

    def _trace_for_nuclear(self, expr: cp.Expression) -> cp.Expression | None:
        if isinstance(expr, cp.normNuc) and isinstance(expr.args[0], cp.Variable) \
                and expr.args[0].id in self.psd_ids:
            return cp.trace(self.var_map[expr.args[0].id])
        return None

    def substitute(self, expr: cp.Expression) -> cp.Expression:
        if isinstance(expr, cp.Variable):
            return self.var_map[expr.id]
        if not expr.args:
            return expr
        return expr.copy([self.substitute(a) for a in expr.args])

    def surrogate(self, expr: cp.Expression, s: int) -> cp.Expression:
        """``expr`` with each non-convex spectral term majorized (``s`` = position sign)."""
        nuc = self._trace_for_nuclear(expr)
        if nuc is not None:
            return nuc
        if not contains_spectral(expr):
            if any(isinstance(a, cp.normNuc) for a in _walk_atoms(expr)):
                return expr.copy([self.surrogate(a, 0) for a in expr.args]) if expr.args \
                    else expr
            return self.substitute(expr)
        if isinstance(expr, LinearSpectral):
            K_user = expr.args[0]
            K = self.substitute(K_user)
            alpha = expr.alpha
            if np.all(np.diff(alpha) == 0):  # a multiple of the trace: affine
                return expr.copy([K])
            if s == 0:
                raise RouteMismatch(
                    f"{expr.name()} sits in a non-monotone position of the objective; the "
                    "iterated-SDP route needs each spectral term to enter monotonically"
                )
            if contains_spectral(K_user):
                raise RouteMismatch("nested linear_spectral terms are not supported")
            a = s * alpha
            beta = concave_weights(a)
            if not np.any(beta):  # convex where it stands: kept as it is
                return expr.copy([K])
            n = K.shape[0]
            # tr(K B) = vec(B) . vec(K): a flat parameter compiles ~80x faster than a
            # symmetric (n, n) one in cp.sum(cp.multiply(B, K)) (0.07 s vs 5.8 s at n = 100)
            B = cp.Parameter(n * n, name=f"vecB{len(self.nodes)}")
            self.nodes.append(Node(K_user, K, beta, B))
            return s * (_convex_part(K, a - beta) + B @ cp.vec(K, order="F"))
        new_args = []
        for i, arg in enumerate(expr.args):
            if expr.is_incr(i):
                child = s
            elif expr.is_decr(i):
                child = -s
            else:
                child = 0
            new_args.append(self.surrogate(arg, child))
        return expr.copy(new_args)


def build_surrogate(problem: cp.Problem, con_ids: list[int] | None = None) -> Surrogate:
    """The convex DPP subproblem of one iteration, or RouteMismatch saying why there is none.

    ``con_ids`` are the ids the duals are reported under (default: the constraints' own).
    """
    _check_applies(problem)
    obj = problem.objective
    sense = 1 if isinstance(obj, cp.Minimize) else -1
    user_vars = problem.variables()
    var_map = {v.id: _fresh_variable(v) for v in user_vars}
    builder = _Builder(var_map, _psd_variable_ids(problem))
    surr_expr = builder.surrogate(obj.expr, sense)
    if not builder.nodes:
        raise RouteMismatch("no spectral term of the wrong curvature was found in the objective")
    ids = con_ids if con_ids is not None else [c.id for c in problem.constraints]
    fresh = _fresh_constraints(problem, ids, builder)
    surr = cp.Problem(cp.Minimize(surr_expr) if sense > 0 else cp.Maximize(surr_expr),
                      fresh.cons)
    if not surr.is_dcp():
        raise RouteMismatch(
            "after linearizing the concave spectral parts the rest of the objective is still not "
            "convex; the iterated-SDP route needs the problem to be convex apart from them"
        )
    if not surr.is_dcp(dpp=True):  # pragma: no cover - parameters enter affinely
        raise RouteMismatch("the linearized subproblem is not DPP")
    return Surrogate(
        problem=surr,
        true_objective=builder.substitute(obj.expr),
        sense=sense,
        nodes=builder.nodes,
        var_map=var_map,
        user_vars=user_vars,
        con_map=fresh.con_map,
        check_cons=fresh.check_cons if fresh.centered else [],
        centered=fresh.centered,
    )


def _check_applies(problem: cp.Problem) -> None:
    """RouteMismatch unless the problem is non-convex through spectral objective terms only
    (continuous, real variables; convex constraints)."""
    if problem.is_dcp():
        raise RouteMismatch(
            "the problem is convex (DCP): solve it with route='conic' (a global solve with a "
            "certificate); the iterated-SDP route is for non-convex spectral objectives"
        )
    for v in problem.variables():
        if v.attributes.get("boolean") or v.attributes.get("integer"):
            raise RouteMismatch(f"variable {v.name()} is integer/boolean; the route is continuous")
        if v.is_complex():
            raise RouteMismatch(f"variable {v.name()} is complex; the route is real-valued")
    for c in problem.constraints:
        if not c.is_dcp():
            raise RouteMismatch(
                f"constraint {short(c)} is not convex; the iterated-SDP route linearizes spectral "
                "terms of the objective only (the feasible set must be convex)"
            )
    if not contains_spectral(problem.objective.expr):
        raise RouteMismatch(
            "the objective has no linear_spectral / mve_cost / eigengap term; its non-convexity "
            "is not of the kind the iterated-SDP route handles"
        )


class _FreshConstraints(NamedTuple):
    """The subproblem's constraints, the dual of each user constraint (by id), the user's
    constraints on the fresh variables and the fresh variables whose centering was rewritten."""

    cons: list[cp.Constraint]
    con_map: list[tuple[int, Any]]
    check_cons: list[cp.Constraint]
    centered: list[cp.Variable]


def _fresh_constraints(problem: cp.Problem, ids: list[int], builder: _Builder
                       ) -> _FreshConstraints:
    """The user's constraints on the fresh variables; a row centering ``K @ ones == 0`` of a
    PSD K becomes ``sum(K) == 0``."""
    out = _FreshConstraints([], [], [], [])
    for cid, c in zip(ids, problem.constraints, strict=True):
        K = _row_centering_var(c, builder.psd_ids)
        if K is not None:
            # K @ ones == 0 with K PSD is sum(K) == 0 (1^T K 1 = 0 iff K 1 = 0): n rows that
            # leave the PSD cone without an interior point made Clarabel fail (NumericalError,
            # spiral kNN graphs); one row does not. Its dual y = mu 1.
            fresh = cp.sum(builder.var_map[K.id]) == 0
            out.cons.append(fresh)
            out.con_map.append((cid, ScaledDual(fresh, c.shape)))
            out.check_cons.append(c.copy([builder.substitute(a) for a in c.args]))
            if not K.attributes.get("PSD"):  # a PSD=True value must pass CVXPY's PSD check
                out.centered.append(builder.var_map[K.id])
            continue
        fresh = c.copy([builder.substitute(a) for a in c.args])
        out.cons.append(fresh)
        out.check_cons.append(fresh)
        out.con_map.append((cid, fresh))
    return out


class ScaledDual:
    """The dual of a rewritten row-centering constraint: ``mu * ones`` in the user's shape."""

    def __init__(self, con: cp.Constraint, shape: tuple[int, ...]) -> None:
        self.con, self.shape = con, shape

    @property
    def dual_value(self) -> Any:
        mu = self.con.dual_value
        return None if mu is None else float(np.asarray(mu)) * np.ones(self.shape)


def center_if_better(surr: Surrogate) -> None:
    """With ``K @ ones == 0`` solved as ``sum(K) == 0``, ``K 1`` is only ~sqrt(PSD accuracy)
    small: replace K by ``J K J`` (``J = I - 11^T/n``: still PSD, same pairwise distances
    ``K_ii + K_jj - 2 K_ij``) when that lowers the largest relative violation of the user's
    constraints (measured as the gate does)."""
    def worst() -> float:
        out = 0.0
        for c in surr.check_cons:
            v = c.violation()
            v = float(np.max(np.abs(v))) if np.size(v) else 0.0
            out = max(out, v / (1.0 + constraint_scale(c)))
        return out

    before = worst()
    old = [np.array(K.value, copy=True) for K in surr.centered]
    for K in surr.centered:
        Kv = np.asarray(K.value, dtype=float)
        Kc = Kv - Kv.mean(axis=0, keepdims=True)
        K.value = Kc - Kc.mean(axis=1, keepdims=True)
    if worst() > before:
        for K, v in zip(surr.centered, old, strict=True):
            K.value = v
