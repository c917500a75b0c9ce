"""The route registry: every route module registers itself; a new route is one module."""

from __future__ import annotations

from pathlib import Path

import cvxpy as cp
import numpy as np
import pytest

import specopt
import specopt.reductions as reductions
from specopt.reductions import Match, Route, RouteResult, register_route
from specopt.reductions import registry as registry_module


def test_every_route_module_is_imported_and_registered():
    pkg = Path(reductions.__file__).parent
    files = {p.stem for p in pkg.glob("*.py") if not p.stem.startswith("_")}
    assert set(reductions.ROUTE_MODULES) == files - reductions.INFRASTRUCTURE
    assert set(specopt.route_names()) == {
        r.name for r in registry_module._ROUTES.values()  # noqa: SLF001
    }
    assert len(specopt.route_names()) >= len(reductions.ROUTE_MODULES)
    assert specopt.route_names()[-1] == "conic"  # the fallback is asked last


class _HalfRoute(Route):
    """A toy route: minimizes sum_squares(x - c) in closed form (x = c)."""

    name = "toy_closed_form"
    priority = 1

    def recognize(self, problem):
        obj = problem.objective
        if problem.constraints or not isinstance(obj, cp.Minimize):
            return Match.no("needs an unconstrained minimization")
        return Match(True, "toy", data=problem.variables()[0])

    def solve(self, problem, match, *, solver=None, verbose=False, **opts):
        x = match.data
        value = np.full(x.shape, 2.0)
        return RouteResult(cp.OPTIMAL, {x.id: value}, objective=None, backend="closed-form",
                           bound=0.0)


@pytest.fixture
def toy_route():
    route = register_route(_HalfRoute())
    yield route
    registry_module._ROUTES.pop(route.name)  # noqa: SLF001


def test_a_registered_route_is_explained_chosen_and_certified(toy_route):
    x = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - 2.0)))
    ex = specopt.explain(prob)
    assert ex.auto_route == "toy_closed_form"
    prob.solve(method="specopt")
    assert np.allclose(x.value, 2.0) and prob.value == pytest.approx(0.0)
    cert = specopt.certificate(prob)
    assert cert.route == "toy_closed_form" and cert.gap == pytest.approx(0.0)
    assert cert.max_violation == 0.0


def test_missing_variable_values_are_an_error_that_changes_nothing(toy_route):
    x, y = cp.Variable(2), cp.Variable(2)
    y.value = np.ones(2)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x) + cp.sum_squares(y)))
    with pytest.raises(cp.error.SolverError, match="no value"):
        prob.solve(method="specopt", route="toy_closed_form")
    assert np.array_equal(y.value, np.ones(2)) and x.value is None
