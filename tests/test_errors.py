"""Errors that say what is wrong (issue 13): bad input gets a message naming the problem."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import specopt
from specopt import linear_spectral, logdet_div, mve_cost, rank_one_decomposition
from specopt.solve import MAX_REASON_CHARS


def _itml_problem(d=3):
    W = cp.Variable((d, d), PSD=True)
    v = np.eye(d)[0]
    return cp.Problem(cp.Minimize(logdet_div(W, np.eye(d))), [cp.quad_form(v, W) <= 0.5]), W


def test_non_pd_itml_prior_is_named():
    from specopt.learn import ITMLSupervised

    X = np.random.default_rng(0).standard_normal((30, 3))
    y = np.r_[np.zeros(15), np.ones(15)]
    with pytest.raises(ValueError, match="positive definite") as info:
        ITMLSupervised(prior=np.diag([1.0, 1.0, -1.0])).fit(X, y)
    assert "coincide" not in str(info.value)


def test_complex_rank_one_decomposition_and_none_alpha():
    with pytest.raises(ValueError, match="complex") as info:
        rank_one_decomposition(np.array([[1, 1j], [-1j, 1]]))
    assert "trace" not in str(info.value)
    K = cp.Variable((3, 3), symmetric=True)
    with pytest.raises(ValueError, match="got None") as info:
        linear_spectral(K, None)
    assert "NaN" not in str(info.value)


@pytest.mark.parametrize(
    ("route", "problem", "bad", "suggestion"),
    [
        ("bregman", "itml", "max_sweep", "max_sweeps"),
        ("iterated_sdp", "mve", "max_iter", "max_iters"),
        ("conic", "itml", "max_iter", "max_iters"),  # on SCS
    ],
)
def test_unknown_option_names_the_known_ones(route, problem, bad, suggestion):
    if problem == "itml":
        prob, var = _itml_problem()
    else:
        var = cp.Variable((4, 4), symmetric=True)
        prob = cp.Problem(cp.Minimize(mve_cost(var, 1)), [var >> 0, cp.trace(var) == 1])
    solver = "SCS" if route == "conic" else None
    with pytest.raises(ValueError, match=f"did you mean '{suggestion}'") as info:
        specopt.solve(prob, route=route, solver=solver, **{bad: 3})
    assert "known options are" in str(info.value)
    assert prob.status is None and var.value is None


def test_integer_and_boolean_variables_are_refused():
    for attr in ("integer", "boolean"):
        z = cp.Variable(2, **{attr: True})
        prob = cp.Problem(cp.Minimize(cp.sum(z)), [z >= 0, z <= 1])
        with pytest.raises(cp.error.SolverError, match="do not handle integer variables"):
            prob.solve(method="specopt")


@pytest.mark.parametrize(("name", "value"), [("tol", float("nan")), ("max_sweeps", -1),
                                             ("max_sweeps", 2.5), ("time_limit", -1.0),
                                             ("tol", float("inf"))])
def test_bad_numeric_options_are_rejected(name, value):
    prob, W = _itml_problem()
    with pytest.raises(ValueError, match=f"option {name} must be"):
        specopt.solve(prob, route="bregman", **{name: value})
    assert W.value is None


def test_explain_needs_a_problem():
    with pytest.raises(TypeError, match="cvxpy.Problem"):
        specopt.explain("x")


def test_learners_refuse_nan_labels():
    from specopt.learn import (
        ITML,
        ITMLSupervised,
        PSDBoostMetric,
        RelativeComparisonMetric,
        TransformationSVM,
    )

    X = np.random.default_rng(0).standard_normal((30, 3))
    y = np.r_[np.zeros(15), np.ones(15)]
    y[3] = np.nan
    for est in (ITMLSupervised(), PSDBoostMetric(), TransformationSVM()):
        with pytest.raises(ValueError, match="NaN"):
            est.fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        RelativeComparisonMetric().fit_supervised(X, y)
    pairs = np.stack([X[:10], X[10:20]], axis=1)
    with pytest.raises(ValueError, match="NaN"):
        ITML().fit(pairs, np.r_[np.ones(9), np.nan])


def test_explain_reasons_never_print_a_matrix():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((30, 30))
    K = cp.Variable((30, 30), symmetric=True)
    prob = cp.Problem(cp.Minimize(cp.trace(big @ K) + cp.sum(cp.abs(K - big))), [K >> 0])
    text = str(specopt.explain(prob))
    for v in specopt.explain(prob).verdicts:
        assert "\n" not in v.reason and len(v.reason) <= MAX_REASON_CHARS
    assert f"{big[0, 0]:.2f}" not in text
