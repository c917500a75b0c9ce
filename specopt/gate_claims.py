"""Proofs of ``infeasible`` and ``unbounded`` re-derived by the gate on the user's problem.

A route that claims one of these statuses may hand the gate the objects of its proof in CVXPY's
own terms, and the gate checks them on the user's constraints, not on the route's internal data:

**Farkas multipliers** (``infeasible``): one multiplier per constraint in CVXPY's dual convention
(the shape of ``constraint.dual_value``): ``nu`` free for ``lhs == rhs`` and ``Zero``,
``lam >= 0`` for ``lhs <= rhs`` / ``NonPos`` / ``NonNeg``, ``Z`` PSD for ``A >> B``. With each
constraint's expression ``e_c(x)`` (``lhs - rhs``, or the cone's argument) the weighted sum

    L(x) = sum_eq <nu, e(x)> + sum_<= <lam, e(x)> - sum_NonNeg <lam, e(x)> - sum_PSD <Z, e(x)>

is ``<= 0`` at every feasible ``x``. The multipliers are first projected onto their cones (so
a slightly indefinite ``Z`` costs only its negative part); ``L`` is affine, ``L(x) = c0 +
<G, x>``, read exactly from CVXPY's coefficients (``analysis.affine_maps``). Then no feasible
point lies in the ball ``||x||_2 < R = c0 / ||G||_2`` (where ``c0 > 0``), and none at all when
``G = 0``. The check passes when ``c0 > 0`` and ``R`` exceeds the data's own scale by
:data:`FARKAS_RADIUS` (measured: ``scale / R``, ``scale = (1 + ||offsets||_inf) /
||coefficients||_max``, the size of a point the constraints' data speak about).

**A recession direction** (``unbounded``): a point ``x0`` and a direction ``d``. The check
evaluates the user's problem at ``x0 + t d`` for ``t = tau, 10 tau, 100 tau``, ``tau = (1 +
||x0||) / ||d||`` (a step as long as the point itself): ``x0`` and ``x0 + tau d`` within the
gate's feasibility tolerance (relative violation, ``gate.relative_violations``), and the
objective improving in proportion to ``t`` (strictly better than at ``x0``, and at least half of
linear growth from the first to the last step). The farther steps test the growth only: a
numerically exact ray (the route's own check bounds ``||A(d)||``) still drifts off the rows in
proportion to ``t``, and an unbounded problem's ``x0`` is large (the solver chased the
objective).
"""

from __future__ import annotations

import math
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ._values import values_set

#: A Farkas proof passes when no feasible point lies within this many times the data's scale.
FARKAS_RADIUS = 1e6
#: The recession check's steps along the ray (multiples of ``tau``).
RAY_STEPS = (1.0, 10.0, 100.0)

_EQ = (cp.constraints.Equality, cp.constraints.Zero)
_LE = (cp.constraints.Inequality, cp.constraints.NonPos)


def farkas_on_problem(problem: cp.Problem, multipliers: dict[int, Any]
                      ) -> tuple[bool, float, float] | None:
    """``(passed, scale / R, c0)`` for the Farkas multipliers ``multipliers`` (by constraint
    id; a constraint missing from it gets zero), or None when a constraint is neither affine
    nor of a supported kind (equality, inequality, nonnegativity, PSD). See the module
    docstring for the inequality this checks."""
    from .reductions.analysis import affine_maps

    exprs, weights = [], []
    for con in problem.constraints:
        kind = _kind(con)
        if kind is None or not con.expr.is_affine():
            return None
        lam = multipliers.get(con.id)
        if lam is None:
            continue
        w = _projected(kind, np.asarray(lam, dtype=float), con.expr.shape)
        if w is None:
            return None
        exprs.append(con.expr)
        weights.append((-1.0 if kind in ("nonneg", "psd") else 1.0) * w.ravel(order="F"))
    if not exprs:
        return None
    variables = problem.variables()
    maps = affine_maps(exprs, variables)
    c0 = 0.0
    grad = {v.id: np.zeros(v.size) for v in variables}
    coef_max, off_max = 0.0, 0.0
    for amap, w in zip(maps, weights, strict=True):
        if any(fs for fs in amap.factored.values()):
            return None  # a row_quad_forms term: not read here
        off = np.asarray(amap.offset, dtype=float).ravel(order="F")
        c0 += float(w @ off)
        off_max = max(off_max, float(np.max(np.abs(off), initial=0.0)))
        for vid, M in amap.coeffs.items():
            M = sp.csr_array(M)
            grad[vid] += M.T @ w
            coef_max = max(coef_max, float(np.max(np.abs(M.data), initial=0.0)))
    for v in variables:  # on symmetric variables only the symmetric part of G acts
        if v.ndim == 2 and v.is_symmetric():
            Gv = grad[v.id].reshape(v.shape, order="F")
            grad[v.id] = (0.5 * (Gv + Gv.T)).ravel(order="F")
    g = math.sqrt(sum(float(v @ v) for v in grad.values()))
    if not (c0 > 0 and math.isfinite(c0) and math.isfinite(g)):
        return False, math.inf, c0
    scale = (1.0 + off_max) / max(coef_max, 1e-300)
    inv_radius = scale * g / c0
    return inv_radius <= 1.0 / FARKAS_RADIUS, inv_radius, c0


def ray_on_problem(problem: cp.Problem, point: dict[int, Any], ray: dict[int, Any],
                   feasibility_tol: float) -> tuple[bool, float, float]:
    """``(passed, worst relative violation at x0 and x0 + tau d, growth)`` for the direction ``ray``
    from ``point`` (both by variable id; variables missing from ``ray`` stay at ``point``).
    ``growth`` is the objective's improvement from the first to the last step over the
    improvement linear growth would give (1 for a linear objective along an exact ray)."""
    from .gate import measure

    x0 = {v.id: np.asarray(point[v.id], dtype=float) for v in problem.variables()}
    d = {vid: np.asarray(val, dtype=float) for vid, val in ray.items()}
    dn = math.sqrt(sum(float(np.sum(v * v)) for v in d.values()))
    xn = math.sqrt(sum(float(np.sum(v * v)) for v in x0.values()))
    if not dn > 0 or not math.isfinite(dn):
        return False, math.inf, 0.0
    tau = (1.0 + xn) / dn

    def along(t: float) -> dict[int, np.ndarray]:
        return {vid: x0[vid] + t * d[vid] if vid in d else x0[vid] for vid in x0}

    sgn = 1.0 if isinstance(problem.objective, cp.Minimize) else -1.0
    near = [measure(problem, x0), measure(problem, along(RAY_STEPS[0] * tau))]
    worst = max(m["relative_violation"] for m in near)
    f0, f1 = (math.nan if m["objective"] is None else m["objective"] for m in near)
    far = [_objective_at(problem, along(step * tau)) for step in RAY_STEPS[1:]]
    gains = [sgn * (f0 - f) for f in (f1, *far)]
    lin = gains[0] * RAY_STEPS[-1] / RAY_STEPS[0]
    growth = gains[-1] / lin if gains[0] > 0 and lin > 0 else 0.0
    passed = worst <= feasibility_tol and gains[0] > 0 and growth >= 0.5
    return bool(passed), worst, growth


def _objective_at(problem: cp.Problem, x: dict[int, np.ndarray]) -> float:
    with values_set(problem, x):
        val = problem.objective.value
    return math.nan if val is None else float(np.real(val))


def _kind(con: cp.Constraint) -> str | None:
    if isinstance(con, _EQ):
        return "eq"
    if isinstance(con, _LE):
        return "le"
    if isinstance(con, cp.constraints.NonNeg):
        return "nonneg"
    if isinstance(con, cp.constraints.PSD):
        return "psd"
    return None


def _projected(kind: str, lam: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``lam`` (reshaped to the constraint's shape) projected onto its dual cone, or None when
    its size does not match."""
    size = int(np.prod(shape)) if shape else 1
    if lam.size != size or not np.all(np.isfinite(lam)):
        return None
    lam = lam.reshape(shape, order="F") if shape else lam.reshape(())
    if kind in ("le", "nonneg"):
        return np.maximum(lam, 0.0)
    if kind == "psd":
        S = 0.5 * (lam + lam.T)
        w, V = np.linalg.eigh(S)
        return (V * np.maximum(w, 0.0)) @ V.T
    return lam
