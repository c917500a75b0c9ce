"""An exactly feasible point for SDPLIB problems whose rows only fix diagonal entries (max-cut:
``Y_ii = b_i``), from the factor ``R`` of specopt's answer: each row of ``R`` rescaled to
``||r_i||^2 = b_i / a_i`` gives ``Y = R R^T`` PSD with every row exact (to rounding). Its
objective, evaluated on the user's CVXPY problem, is a rigorous bound on the optimum (a lower
bound when maximizing): when it lies beyond a published optimum, the published value does not
belong to the file's problem (maxG55)."""

from __future__ import annotations

from typing import Any

import numpy as np


def exactly_feasible_value(prob: Any, certificate: Any) -> dict | None:
    """``{"exact_value", "exact_violation"}`` at the rescaled factor, or None when the rows are
    not all single diagonal entries or specopt returned no factor."""
    import cvxpy as cp

    from specopt import gate
    from specopt._values import values_set
    from specopt.reductions.low_rank_sdp import recognize_low_rank_sdp

    R = certificate.extra.get("factor") if certificate is not None else None
    if R is None:
        return None
    try:
        d = recognize_low_rank_sdp(prob)
    except Exception:  # not the engine's form
        return None
    A = d.A
    if d.centered or A.m == 0 or np.any(A.ii != A.jj) or np.bincount(A.rows).max() > 1:
        return None
    target = np.full(d.n, np.nan)
    target[A.ii] = d.b[A.rows] / A.vals
    if np.any(~np.isfinite(target)) or np.any(target < 0):
        return None  # a diagonal entry no row fixes, or a negative one
    R = np.asarray(R, dtype=float)
    norms = np.linalg.norm(R, axis=1)
    if np.any(norms == 0):
        return None
    R = R * (np.sqrt(target) / norms)[:, None]
    point = {v.id: v.value for v in prob.variables()}
    point[d.K.id] = R @ R.T
    rows_only = cp.Problem(cp.Minimize(0), [c for c in prob.constraints
                                            if not isinstance(c, cp.constraints.PSD)])
    with values_set(prob, point):  # R R^T is PSD by construction: only the rows are measured
        value = float(prob.objective.value)
        worst = max((r for _, _, r in gate.relative_violations(rows_only)), default=0.0)
    return {"exact_value": value, "exact_violation": worst}
