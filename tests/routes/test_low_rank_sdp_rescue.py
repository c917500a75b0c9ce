"""The engine's Clarabel rescue on small problems it has not certified within the first budget:
the degenerate swiss-roll SDE that ran 52 s uncertified, the hand-over itself, and where it
does not apply (larger n, the user's own caps)."""

from __future__ import annotations

import cvxpy as cp
import pytest

import specopt
from benchmarks.low_rank_auto import model
from specopt.reductions import low_rank_sdp


def _sde(n: int, seed: int) -> cp.Problem:
    """Maximum variance unfolding of a swiss roll on its connected k-NN graph (k >= 6, squared
    distances scaled to mean 1): the SDE family of ``benchmarks/low_rank_auto.py``."""
    return model("sde", n, seed)


def _clarabel_value(prob: cp.Problem) -> float:
    ref = cp.Problem(prob.objective, prob.constraints)
    ref.solve(solver=cp.CLARABEL)
    assert ref.status == cp.OPTIMAL
    return float(ref.value)


def test_degenerate_swiss_roll_is_certified_through_clarabel():
    prob = _sde(30, 0)  # nearly rigid: the engine's 1e-6 residual moves the value by 0.5 %
    ref = _clarabel_value(prob)
    prob.solve(method="specopt", route="low_rank_sdp")
    cert = specopt.certificate(prob)
    assert prob.status == cp.OPTIMAL
    assert cert.backend == "CLARABEL" and cert.route == "low_rank_sdp"
    assert abs(prob.value - ref) <= 1e-5 * (1 + abs(ref))


def test_rescue_after_the_first_budget(monkeypatch):
    monkeypatch.setattr(low_rank_sdp, "FIRST_BUDGET", 1e-4)  # the engine stops at once
    prob = _sde(20, 1)
    ref = _clarabel_value(prob)
    prob.solve(method="specopt", route="low_rank_sdp")
    assert prob.status == cp.OPTIMAL
    assert specopt.certificate(prob).backend == "CLARABEL"
    assert abs(prob.value - ref) <= 1e-5 * (1 + abs(ref))


@pytest.mark.parametrize("case", ["above_the_size", "users_time_limit"])
def test_no_rescue_above_the_size_or_under_the_users_time_limit(monkeypatch, case):
    opts = {}
    if case == "above_the_size":
        monkeypatch.setattr(low_rank_sdp, "FIRST_BUDGET", 1e-4)
        monkeypatch.setattr(low_rank_sdp, "CLARABEL_RESCUE_MAX_N", 10)
    else:
        opts = {"time_limit": 1e-3}  # below the first budget: the user's limit, no hand-over
    prob = _sde(20, 1)
    prob.solve(method="specopt", route="low_rank_sdp", **opts)
    assert specopt.certificate(prob).backend == "low_rank_sdp"
    if case == "above_the_size":  # the engine goes on after its first budget and certifies
        assert prob.status == cp.OPTIMAL
    else:  # stopped uncertified by the user's limit, and says so
        assert prob.status == cp.OPTIMAL_INACCURATE
