"""``auto``'s race between the engine and the conic side (``low_rank_sdp.race_plan``): the
hand-over when a leg's budget passes (forced with capped iterations / tiny budgets, never a
wall-clock assertion), agreement with Clarabel, the user's ``time_limit`` across the legs, and
an interrupted or failing leg."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specopt
from benchmarks.low_rank_auto import model
from specopt.reductions import low_rank_sdp as lr
from specopt.reductions.low_rank_sdp import Leg


def _clarabel_value(prob: cp.Problem) -> float:
    ref = cp.Problem(prob.objective, prob.constraints)
    ref.solve(solver=cp.CLARABEL)
    assert ref.status == cp.OPTIMAL
    return float(ref.value)


def _plan(monkeypatch, *legs: Leg) -> None:
    monkeypatch.setattr(lr, "race_plan", lambda *a, **k: list(legs))


def _legs(prob: cp.Problem) -> list[dict]:
    return specopt.certificate(prob).extra["legs"]


@pytest.fixture
def maxcut():
    prob = model("maxcut", 30, 0)  # n = 30 >= PAYS_OFF_MIN_N: auto picks the route
    assert specopt.explain(prob).auto_route == "low_rank_sdp"
    return prob, _clarabel_value(prob)


def test_conic_first_leg_hands_over_to_the_engine(monkeypatch, maxcut):
    prob, ref = maxcut
    _plan(monkeypatch, Leg("SCS", 30.0, "test: SCS capped", {"max_iters": 3}),
          Leg("engine", None, "test: then the engine"))
    specopt.solve(prob)
    legs = _legs(prob)
    assert [leg["leg"] for leg in legs] == ["SCS", "engine"]
    assert legs[0]["status"] != "certified" and legs[1]["status"] == "optimal"
    assert specopt.certificate(prob).backend == "low_rank_sdp"
    assert prob.status == cp.OPTIMAL
    assert abs(prob.value - ref) <= 1e-5 * (1 + abs(ref))


def test_engine_first_leg_hands_over_to_the_conic_side(monkeypatch, maxcut):
    prob, ref = maxcut
    _plan(monkeypatch, Leg("engine", 1e-4, "test: the engine stops at once"),
          Leg("SCS", None, "test: then SCS"), Leg("engine", None, "test: not reached"))
    specopt.solve(prob)
    legs = _legs(prob)
    assert [leg["leg"] for leg in legs] == ["engine", "SCS"]
    assert legs[1]["status"] == "certified"
    cert = specopt.certificate(prob)
    assert (cert.route, cert.backend) == ("low_rank_sdp", "SCS")
    assert prob.status == cp.OPTIMAL
    assert abs(prob.value - ref) <= 1e-4 * (1 + abs(ref))  # SCS's eps 1e-5 accuracy


def test_first_leg_that_certifies_ends_the_race(monkeypatch, maxcut):
    prob, ref = maxcut
    _plan(monkeypatch, Leg("CLARABEL", 60.0, "test: Clarabel"), Leg("engine", None, "unused"))
    specopt.solve(prob)
    assert [leg["leg"] for leg in _legs(prob)] == ["CLARABEL"]
    assert abs(prob.value - ref) <= 1e-6 * (1 + abs(ref))


def test_conic_legs_status_claim_ends_the_race(monkeypatch, maxcut):
    prob, _ = maxcut
    K = prob.variables()[0]
    bad = cp.Problem(prob.objective, [*prob.constraints, K[0, 0] == 2])  # diag(K) == 1 too
    _plan(monkeypatch, Leg("CLARABEL", 60.0, "test: Clarabel"), Leg("engine", None, "unused"))
    specopt.solve(bad)
    assert bad.status == cp.INFEASIBLE
    assert [leg["leg"] for leg in _legs(bad)] == ["CLARABEL"]


def test_time_limit_caps_every_leg(monkeypatch, maxcut):
    prob, _ = maxcut
    limit = 40.0
    _plan(monkeypatch, Leg("SCS", 1e3, "test: budget above the limit", {"max_iters": 3}),
          Leg("engine", None, "test: the rest"))
    specopt.solve(prob, time_limit=limit)
    first, second = _legs(prob)
    assert first["budget"] <= limit  # the user's limit, not the leg's 1000 s
    assert second["budget"] <= limit - first["seconds"]  # what is left of it
    assert prob.status == cp.OPTIMAL


def test_no_time_left_after_the_first_leg(monkeypatch, maxcut):
    prob, _ = maxcut
    _plan(monkeypatch, Leg("SCS", 1e3, "test", {"max_iters": 3}), Leg("engine", None, "test"))
    specopt.solve(prob, time_limit=1e-6)  # spent before the first leg ends
    legs = _legs(prob)
    assert legs[0]["leg"] == "SCS" and all(leg["leg"] != "engine" or leg["budget"] == 0
                                           for leg in legs)
    assert prob.status != cp.OPTIMAL  # SCS after 3 iterations certifies nothing


def test_failing_conic_leg_hands_over(monkeypatch, maxcut):
    prob, ref = maxcut
    conic = lr.get_route("conic")

    def fail(*a, **k):
        raise cp.error.SolverError("test: the backend failed")

    monkeypatch.setattr(conic, "solve", fail)
    _plan(monkeypatch, Leg("SCS", 30.0, "test"), Leg("engine", None, "test"))
    specopt.solve(prob)
    legs = _legs(prob)
    assert legs[0]["status"].startswith("failed") and legs[1]["status"] == "optimal"
    assert abs(prob.value - ref) <= 1e-5 * (1 + abs(ref))


def test_interrupted_leg_leaves_the_model_unchanged(monkeypatch, maxcut):
    prob, _ = maxcut
    K = prob.variables()[0]
    before = np.eye(K.shape[0])
    K.value = before

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(lr, "solve_low_rank_sdp", interrupt)
    _plan(monkeypatch, Leg("SCS", 30.0, "test", {"max_iters": 3}), Leg("engine", None, "test"))
    with pytest.raises(KeyboardInterrupt):
        specopt.solve(prob)
    assert np.array_equal(K.value, before) and prob.status is None
    with pytest.raises(ValueError, match="not been solved"):
        specopt.certificate(prob)


def test_named_route_does_not_race(maxcut):
    prob, ref = maxcut
    specopt.solve(prob, route="low_rank_sdp")
    assert {leg["leg"] for leg in _legs(prob)} == {"engine"}
    assert abs(prob.value - ref) <= 1e-5 * (1 + abs(ref))


def test_verbose_says_which_leg_ran_and_why(monkeypatch, maxcut, capsys):
    prob, _ = maxcut
    _plan(monkeypatch, Leg("SCS", 30.0, "test: SCS capped", {"max_iters": 3}),
          Leg("engine", None, "test: then the engine"))
    specopt.solve(prob, verbose=True)
    out = capsys.readouterr().out
    assert "leg 1: test: SCS capped" in out and "leg 2: test: then the engine" in out
    assert "SCS ended uncertified" in out


def test_auto_asks_the_race_before_matrix_generation():
    # theta at n = 100 with 2000 rows: matrix generation's size rule would take it (measured
    # > 90 s at n = 150 vs SCS 5 s); the race runs instead
    rng = np.random.default_rng(0)
    I, J = np.triu_indices(100, 1)
    keep = rng.permutation(I.size)[:2000]
    K = cp.Variable((100, 100), symmetric=True)
    prob = cp.Problem(cp.Maximize(cp.sum(K)),
                      [K >> 0, cp.trace(K) == 1, K[I[keep], J[keep]] == 0])
    exp = specopt.explain(prob)
    assert exp.verdict("matrix_generation").matches
    assert exp.auto_route == "low_rank_sdp"


@settings(max_examples=60, deadline=None)
@given(n=st.integers(lr.PAYS_OFF_MIN_N, lr.PAYS_OFF_ANY_M_N), frac=st.floats(0.0, 0.5),
       cold=st.booleans())
def test_race_plan_runs_the_cheaper_predicted_side_first(n, frac, cold):
    m = max(1, int(frac * n * n))
    engine_s, conic_s = lr.predicted_seconds(n, m, cold)
    legs = lr.race_plan(n, m, None, cold)
    first, last = legs[0], legs[-1]
    assert (first.side == "engine") == (engine_s <= conic_s)
    other = conic_s if first.side == "engine" else engine_s
    assert first.budget >= other  # the first leg is stopped no earlier than the other's time
    assert last.budget is None  # the last leg has the rest of the user's time
    assert {leg.side for leg in legs} >= {"engine"} and len({leg.side for leg in legs}) == 2
