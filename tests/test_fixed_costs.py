"""Fixed costs of a specopt solve that do not depend on the problem."""

import cvxpy as cp
import numpy as np

import specopt
from specopt import backends


def test_installed_solvers_is_asked_once_per_process(monkeypatch):
    """cp.installed_solvers() re-imports every solver module (~8 ms per call); a solve used to
    ask it three times, which made specopt.solve up to 2x slower than CVXPY on small problems."""
    calls = []
    real = cp.installed_solvers
    monkeypatch.setattr(cp, "installed_solvers", lambda: calls.append(1) or real())
    backends._installed_solvers.cache_clear()
    X = cp.Variable((3, 3), PSD=True)
    for c in (1.0, 2.0):
        prob = cp.Problem(cp.Minimize(cp.trace(np.diag([c, 2.0, 3.0]) @ X)), [cp.trace(X) == 1])
        specopt.solve(prob, solver="CLARABEL")
        assert prob.status == cp.OPTIMAL
        assert np.isclose(prob.value, min(c, 2.0), atol=1e-6)
    assert len(calls) == 1
    assert "CLARABEL" in backends.installed_solvers()
