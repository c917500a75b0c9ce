"""``verbose`` prints the user's objective: the engine's interior-point and factored stages
report ``<C, K>`` in the model's sense, and the route's progress lines add its constant."""

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


# the route's iteration lines: step number, then the objective (interior point at n = 12,
# the sphere method at n = 120)
STEP_LINE = re.compile(r"^\s+\d+\s+([+-]\d\.\d+e[+-]\d+)", re.M)


@pytest.mark.parametrize("n", [12, 120])
def test_verbose_lines_show_the_models_objective(capsys, n):
    offset = 1000.0
    prob = _maxcut_model(n, 0, offset)
    specopt.solve(prob, route="low_rank_sdp", verbose=True, tol=1e-7)
    shown = [float(v) for v in STEP_LINE.findall(capsys.readouterr().out)]
    assert shown, "no iteration line"
    assert shown[-1] == pytest.approx(prob.value, rel=1e-6)
    assert prob.value > offset  # the constant is in the value shown, not only in the result
