"""Small helpers shared by the tests (import as ``from tests._helpers import ...``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


def random_symmetric(rng: np.random.Generator, n: int) -> np.ndarray:
    A = rng.standard_normal((n, n))
    return (A + A.T) / 2


def random_spd(rng: np.random.Generator, n: int, cond: float = 10.0) -> np.ndarray:
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.geomspace(1.0, cond, n)
    return (Q * lam) @ Q.T


def psdboost_triplet_factors(D: int, S: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Factors (P, Q) of PSDBoost triplets on 3 Gaussian classes: A_r = p_r p_r^T - q_r q_r^T with
    p = x_i - x_k (nearest other-class), q = x_i - x_j (nearest same-class), scaled by 1/sqrt(D)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, S)
    X = rng.normal(size=(3, D))[y] + rng.normal(size=(S, D)) * rng.uniform(0.5, 2, D)
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    same = y[:, None] == y[None]
    j = np.argmin(np.where(same, d2, np.inf), 1)
    k = np.argmin(np.where(~same, d2, np.inf), 1)
    return (X - X[k]) / np.sqrt(D), (X - X[j]) / np.sqrt(D)


#: Largest relative constraint violation (``specopt.gate``'s measure) of a trusted reference.
REFERENCE_MAX_VIOLATION = 1e-6


def reference_problem_issue(prob, max_violation: float = REFERENCE_MAX_VIOLATION,
                            require_optimal: bool = True) -> str | None:
    """Why a solved reference ``prob`` cannot be trusted (None when it can): its status must be
    ``optimal`` (unless ``require_optimal=False``: then only its point is used, as a feasible
    point) and its point must satisfy the constraints to ``max_violation`` (relative, as the
    gate measures it). A reference that ends ``optimal_inaccurate`` (seen: Clarabel on an SDE
    whose Slater condition fails, violation 9.2e-5) says nothing about the method tested."""
    import cvxpy as cp

    from specopt.gate import relative_violations

    if prob.status not in ((cp.OPTIMAL,) if require_optimal else cp.settings.SOLUTION_PRESENT):
        return f"the reference solve ended {prob.status}"
    rows = relative_violations(prob)
    worst = max((r[2] for r in rows), default=0.0)
    if not worst <= max_violation:
        return f"the reference point violates its constraints by {worst:.2g} (relative)"
    return None


def checked_reference(prob, solver: str = "CLARABEL", max_violation: float =
                      REFERENCE_MAX_VIOLATION, **opts) -> float:
    """Solve the reference ``prob`` with ``solver`` and return its value, or skip the test (with
    the reason) when the reference is not trustworthy (:func:`reference_problem_issue`); inside
    a hypothesis test the example is rejected instead (``assume``)."""
    import warnings

    import cvxpy as cp

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*may be inaccurate.*")
            prob.solve(solver=solver, **opts)
        issue = reference_problem_issue(prob, max_violation)
    except cp.error.SolverError as exc:
        issue = f"the reference solver failed: {exc}"
    if issue is not None:
        _skip(f"{solver} reference not trusted: {issue}")
    return float(prob.value)


def _skip(reason: str) -> None:
    import pytest
    from hypothesis import assume, note
    from hypothesis.control import currently_in_test_context

    if currently_in_test_context():
        note(reason)
        assume(False)
    pytest.skip(reason)


@contextmanager
def recorded_kwarg(owner: Any, name: str, key: str) -> Iterator[list]:
    """Within the block, calls of ``owner.name`` go through unchanged and the keyword ``key`` of
    each (None when absent) is appended to the yielded list; ``owner.name`` is restored on exit
    (usable inside hypothesis tests, which cannot take ``monkeypatch``)."""
    seen: list = []
    original = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get(key))
        return original(*args, **kwargs)

    setattr(owner, name, spy)
    try:
        yield seen
    finally:
        setattr(owner, name, original)
