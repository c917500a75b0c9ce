"""specopt.explain points to the tool that fits when a route's form is close but not met."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

import specopt


def test_nuclear_norm_completion_points_to_the_learner():
    rng = np.random.default_rng(0)
    M, mask = rng.standard_normal((5, 4)), rng.random((5, 4)) < 0.6
    X = cp.Variable((5, 4))
    prob = cp.Problem(cp.Minimize(cp.normNuc(X)), [X[mask] == M[mask]])
    line = next(ln for ln in str(specopt.explain(prob)).splitlines()
                if ln.startswith("- low_rank_sdp"))
    assert "not a square matrix" in line and "NuclearNormCompletion" in line
    # without a nuclear norm the reason stays plain
    plain = cp.Problem(cp.Minimize(cp.sum_squares(X)), [X[mask] == M[mask]])
    line = next(ln for ln in str(specopt.explain(plain)).splitlines()
                if ln.startswith("- low_rank_sdp"))
    assert "not a square matrix" in line and "NuclearNormCompletion" not in line
