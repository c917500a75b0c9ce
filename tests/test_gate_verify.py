"""The shared route skeleton (Route.solve: options, run, invert, STATUS_MAP), RouteResult.no_point
and the gate as a function of (problem, result) that leaves the problem as it found it."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

import specopt
from specopt import gate
from specopt.reductions import Match, Route, RouteResult
from specopt.reductions import registry as registry_module
from specopt.reductions.base import RunContext


def _simplex_lp(sense=cp.Minimize):
    x = cp.Variable(3, nonneg=True)
    c = np.array([1.0, 2.0, 3.0])
    return cp.Problem(sense(c @ x), [cp.sum(x) == 1]), x


@pytest.mark.parametrize(("status", "sense", "expected"), [
    (cp.INFEASIBLE, 1, math.inf), (cp.INFEASIBLE, -1, -math.inf),
    (cp.UNBOUNDED, 1, -math.inf), (cp.UNBOUNDED, -1, math.inf),
    (cp.INFEASIBLE_INACCURATE, 1, math.inf), (cp.UNBOUNDED_INACCURATE, -1, math.inf),
])
def test_no_point_follows_cvxpy_sign_convention(status, sense, expected):
    r = RouteResult.no_point(status, sense, backend="b", iterations=3)
    assert r.objective == expected and r.status == status
    assert r.primal == {} and r.dual == {} and r.bound is None and r.gap is None
    assert r.iterations == 3 and r.backend == "b"
    # reclassifying a result with a point keeps its bookkeeping, drops the point
    full = RouteResult(cp.OPTIMAL, {1: np.ones(2)}, 1.0, "b", dual={2: 1.0}, bound=0.5,
                       iterations=7, extra={"k": 1})
    gone = full.without_point(status, sense)
    assert gone.objective == expected and gone.primal == {} and gone.dual == {}
    assert gone.bound is None and gone.iterations == 7 and gone.extra == {"k": 1}


def test_verify_is_a_function_of_problem_and_result():
    prob, x = _simplex_lp()
    x.value = np.array([0.2, 0.3, 0.5])  # the user's values must survive the check
    point = {x.id: np.array([1.0, 0.0, 0.0])}
    good = RouteResult(cp.OPTIMAL, point, 1.0, "test", bound=1.0, converged=True)
    verdict = gate.verify(prob, good, is_global=True)
    assert np.array_equal(x.value, [0.2, 0.3, 0.5])
    assert verdict.status == cp.OPTIMAL and not verdict.failed and not verdict.reasons
    assert verdict.measured["objective"] == pytest.approx(1.0)
    assert verdict.checks["gap"].passed and verdict.checks["converged"].passed
    # the same point claimed with a bound on the wrong side: downgraded, with the reason
    bad = RouteResult(cp.OPTIMAL, point, 1.0, "test", bound=1.5)
    verdict = gate.verify(prob, bad, is_global=True)
    assert verdict.status == cp.OPTIMAL_INACCURATE and "bound_side" in verdict.failed
    assert verdict.reasons and "not certified" in verdict.reasons[0]
    # a route that says it did not converge is not certified either (typed field)
    verdict = gate.verify(prob, RouteResult(cp.OPTIMAL, point, 1.0, "test", converged=False),
                          is_global=True)
    assert verdict.status == cp.OPTIMAL_INACCURATE and verdict.failed == ["converged"]
    assert np.array_equal(x.value, [0.2, 0.3, 0.5])


class _SimplexVertexRoute(Route):
    """A toy route on the shared skeleton: min c^T x over the simplex is the smallest c_i."""

    name = "toy_simplex_vertex"
    priority = 2
    OPTIONS = ("pick",)
    UNIT = None
    STATUS_MAP = {"vertex": cp.OPTIMAL}

    def recognize(self, problem):
        x = problem.variables()[0]
        c = problem.objective.expr.args[0].value
        return Match(True, "simplex LP", (x, np.asarray(c, float)))

    def run(self, data, ctx: RunContext, pick=None):
        x, c = data
        i = int(np.argmin(c)) if pick is None else pick
        return {"status": "vertex" if pick is None else "guess", "i": i, "x": x, "c": c}

    def invert(self, raw, ctx: RunContext):
        point = np.zeros(raw["c"].size)
        point[raw["i"]] = 1.0
        value = float(raw["c"][raw["i"]])
        return RouteResult(self.map_status(raw["status"]), {raw["x"].id: point}, value, "toy",
                           bound=float(raw["c"].min()), solve_time=ctx.elapsed())


@pytest.fixture
def toy_route(monkeypatch):
    """The toy route, registered for one test (the registry's dict, restored afterwards)."""
    route = _SimplexVertexRoute()
    monkeypatch.setitem(registry_module._ROUTES, route.name, route)  # noqa: SLF001
    return route


def test_a_route_written_as_run_and_invert(toy_route):
    prob, x = _simplex_lp()
    specopt.solve(prob, route=toy_route.name)
    assert prob.status == cp.OPTIMAL and np.allclose(x.value, [1, 0, 0])
    ref = _simplex_lp()[0]
    ref.solve(solver="CLARABEL")
    assert prob.value == pytest.approx(ref.value, abs=1e-6)
    # a solver status outside STATUS_MAP is a point the gate checks, never "optimal"
    prob2, _ = _simplex_lp()
    specopt.solve(prob2, route=toy_route.name, pick=1)
    assert prob2.status == cp.OPTIMAL_INACCURATE
    assert specopt.certificate(prob2).gap == pytest.approx(0.5)  # |2 - 1| / max(1, 2)


@pytest.mark.parametrize("route", ["toy_simplex_vertex", "low_rank_sdp", "dual_cd"])
def test_unknown_options_are_one_kind_of_error(route, toy_route):
    if route == "toy_simplex_vertex":
        prob, x = _simplex_lp()
    elif route == "low_rank_sdp":
        x = cp.Variable((3, 3), symmetric=True)
        prob = cp.Problem(cp.Maximize(cp.trace(x)), [x >> 0, cp.diag(x) == 1])
    else:
        x = cp.Variable(2)
        prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(x)
                                      + cp.sum(cp.pos(1 - np.ones((3, 2)) @ x))))
    with pytest.raises(ValueError, match="known options are") as info:
        specopt.solve(prob, route=route, bogus_option=1)
    assert "bogus_option" in str(info.value) and route in str(info.value)
    assert x.value is None and prob.status is None
