"""``verbose`` prints the user's objective: the route passes its constant to the engine, whose
interior-point and factored stages both show ``<C, K> + offset`` in the model's sense."""

from __future__ import annotations

import re

import cvxpy as cp
import numpy as np
import pytest

import specopt


def _maxcut_model(n: int, seed: int, offset: float) -> cp.Problem:
    rng = np.random.default_rng(seed)
    W = np.triu(rng.random((n, n)) < 0.3, 1) * rng.uniform(0.5, 2.0, (n, n))
    W = W + W.T
    L = np.diag(W.sum(axis=1)) - W
    X = cp.Variable((n, n), symmetric=True)
    return cp.Problem(cp.Maximize(cp.trace(L @ X) / 4 + offset), [X >> 0, cp.diag(X) == 1])


@pytest.mark.parametrize(("n", "stage"), [(12, r"\[sparse_ip\]\s+\d+\s+(\S+)"),
                                          (120, r"\[sdp\] it .* obj (\S+) ")])
def test_verbose_lines_show_the_models_objective(capsys, n, stage):
    offset = 1000.0
    prob = _maxcut_model(n, 0, offset)
    specopt.solve(prob, route="low_rank_sdp", verbose=True, tol=1e-7)
    shown = [float(v) for v in re.findall(stage, capsys.readouterr().out)]
    assert shown, "no iteration line"
    assert shown[-1] == pytest.approx(prob.value, rel=1e-6)
    assert prob.value > offset  # the constant is in the value shown, not only in the result
