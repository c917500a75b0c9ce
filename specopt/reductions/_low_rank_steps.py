"""The iterated-SDP route's linearized steps on the low-rank SDP engine
(:func:`low_rank_subproblem`): each step is, for fixed ``B``, of the low-rank route's form."""

from __future__ import annotations

from typing import Any

import cvxpy as cp
import numpy as np

from ..solvers.sdp import OPTIMAL, SymOp, mm_step_method, solve_low_rank_sdp
from ._low_rank_read import recognize_low_rank_sdp
from .base import RouteMismatch


def substitute_parameters(expr: Any, values: dict[int, Any]) -> Any:
    """``expr`` with the parameters whose ids are in ``values`` replaced by those values."""
    if isinstance(expr, cp.Parameter) and expr.id in values:
        return values[expr.id]
    args = getattr(expr, "args", [])
    if not args:
        return expr
    return expr.copy([substitute_parameters(a, values) for a in args])


def low_rank_subproblem(surr: Any, *, required: bool, min_n: int | None = None,
                        **opts: Any) -> EngineSteps | None:
    """``run(B) -> point`` solving the iterated-SDP route's linearized step with the low-rank
    engine (each step warm-started from the previous one: the interior point in its size range,
    without a trace bound, else the factored method: ``method``, as :func:`low_rank_mm`); None
    when it does
    not apply or, without ``required``, when ``n < min_n`` (or ``min_n`` is None); with
    ``required``, a :class:`RouteMismatch` saying why it does not apply.

    Applies when the subproblem (``surr.problem``, one linearized term with parameter ``B``) is,
    for fixed ``B``, of this route's form: ``C(B) = C_0 + s B`` is read from two extractions
    (``B = 0`` and ``B = I``).
    """
    try:
        if len(surr.nodes) != 1:
            raise RouteMismatch("the low-rank inner solver takes one linearized spectral term")
        n = surr.nodes[0].K.shape[0]
        if not required and (min_n is None or n < min_n):
            return None
        # a square K made symmetric by K == K.T is taken: the engine's K meets it exactly;
        # inequality rows too, for the interior point (its slacks) with a trace bound
        d0 = recognize_low_rank_sdp(_linear_problem(surr, np.zeros((n, n))), True, True)
        d1 = recognize_low_rank_sdp(_linear_problem(surr, np.eye(n)), True, True)
        if d0.ineq is not None:
            _check_inequality_rows(d0, opts.get("method", "auto"))
    except RouteMismatch:
        if required:
            raise
        return None
    return EngineSteps(surr, d0, d1, **opts)


def _check_inequality_rows(d: Any, method: str) -> None:
    """Inequality rows are the interior point's (its size range) and need a trace bound."""
    if mm_step_method(method, d.n, d.A.m, mm=True) != "ip":
        raise RouteMismatch(f"inequality rows need the engine's interior point (n = {d.n}, "
                            f"{d.A.m} rows is beyond its range or method={method!r})")
    if d.trace_bound is None and d.implied_trace_bound is None:
        raise RouteMismatch("inequality rows need a trace bound (tr K <= t, or connected "
                            "equality distance rows with centering)")


def _linear_problem(surr: Any, B: np.ndarray) -> cp.Problem:
    """The subproblem with its one linearization parameter fixed at ``B``."""
    prob, node = surr.problem, surr.nodes[0]
    obj = substitute_parameters(prob.objective.expr, {node.B.id: cp.Constant(B.ravel(order="F"))})
    sense = cp.Minimize if isinstance(prob.objective, cp.Minimize) else cp.Maximize
    return cp.Problem(sense(obj), prob.constraints)


class EngineSteps:
    """``steps(Bs) -> point``: the linearized step at ``B = Bs[0]`` on the engine, with
    ``C(B) = C_0 + s B`` (``d0``: the data at ``B = 0``, ``d1`` at ``B = I``). Each step is
    warm-started from the previous one (the interior point with ``warm_ip`` where there is no
    trace bound, falling back to its cold start when that point does not certify; the factored
    method always); ``tol`` and ``opts`` may be changed between steps (the hybrid steps of the
    route do); ``results`` keeps every engine result."""

    def __init__(self, surr: Any, d0: Any, d1: Any, *, tol: float = 1e-6,
                 method: str = "auto", warm_ip: bool = True, **opts: Any) -> None:
        n = d0.n
        self.surr, self.d0, self.n = surr, d0, n
        self.C0 = d0.C.to_dense()
        self.s = float(np.trace(d1.C.to_dense() - self.C0)) / n
        self.user_id = next(uid for uid, fv in surr.var_map.items() if fv.id == d0.K.id)
        self.tol = float(tol)
        self.method = mm_step_method(method, n, d0.A.m, mm=True)
        self.warm_ip = bool(warm_ip)
        # factored iterations per step after an uncertified interior point / warm: as
        # low_rank_mm
        opts.setdefault("max_iters", 5 if self.method == "ip" else 40)
        self.opts = opts
        self.Y: np.ndarray | None = None
        self.y: np.ndarray | None = None
        self.sigma: float | None = None
        self.results: list[Any] = []

    def __call__(self, Bs: list[np.ndarray]) -> dict[str, Any]:
        d0, surr = self.d0, self.surr
        B = 0.5 * (Bs[0] + Bs[0].T)
        # warm-started from the previous step: the factored method always; the interior point
        # too (``ip_warm``: the previous (K, y) shifted into the interior, its cold start when
        # that point does not certify) where there is no trace bound (its warm start covers
        # the rows' multipliers only)
        warm = self.Y is not None and (
            self.method == "bm" or (self.warm_ip and d0.trace_bound is None))
        res = solve_low_rank_sdp(
            SymOp(self.n, dense=self.C0 + self.s * B), d0.A, d0.b, sense=d0.sense,
            centered=d0.centered, trace_bound=d0.trace_bound,
            implied_trace_bound=d0.implied_trace_bound, Y0=self.Y if warm else None,
            y0=self.y if warm else None, sigma0=min(self.sigma, 1e2) if warm else None,
            tol=self.tol, method=self.method, ip_warm=warm and self.method == "ip",
            ineq=d0.ineq, **self.opts)
        self.Y, self.y, self.sigma = res.Y, res.y, res.sigma
        self.results.append(res)
        Kv = res.Y @ res.Y.T
        d0.K.value = Kv
        value = float(np.asarray(surr.true_objective.value))
        return {"primal": {self.user_id: Kv}, "K": [Kv], "objective": surr.sense * value,
                "dual": {},
                "status": cp.OPTIMAL if res.status == OPTIMAL else cp.OPTIMAL_INACCURATE,
                "low_rank": res}
