"""specopt.compare: one row per backend, never raising, variables from the best certified run."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import specopt
from tests._helpers import random_symmetric


@pytest.fixture
def problem(rng):
    n = 5
    C = random_symmetric(rng, n)
    X = cp.Variable((n, n), symmetric=True)
    return cp.Problem(cp.Minimize(cp.sum(cp.multiply(C, X))), specopt.spectraplex(X)), X, C


def test_rows_statuses_and_agreement(problem):
    prob, X, C = problem
    table = specopt.compare(prob, backends=("CLARABEL", "SCS", "MOSEK", "specopt", "NOPE"))
    assert [r.backend for r in table.rows] == ["CLARABEL", "SCS", "MOSEK", "specopt", "NOPE"]
    lam_min = np.linalg.eigvalsh(C)[0]
    for name in ("CLARABEL", "SCS", "specopt"):
        row = table.row(name)
        assert row.status == cp.OPTIMAL
        assert np.isclose(row.objective, lam_min, atol=1e-3)
        assert row.rel_diff is not None and row.rel_diff < 1e-3
        assert row.total_time > 0 and row.max_violation < 1e-3
    assert table.row("NOPE").status == "unavailable" and "not installed" in table.row("NOPE").note
    mosek = table.row("MOSEK")
    usable, why = specopt.backends.mosek_status()
    if not usable:
        # absent or unlicensed: a row that says which, with the reason mosek_status gives
        assert mosek.status == "unavailable" and why in mosek.note
        assert ("not installed" in mosek.note) or ("licence" in mosek.note)


def test_variables_hold_the_most_accurate_certified_run(problem):
    prob, X, C = problem
    table = specopt.compare(prob, backends=("SCS", "CLARABEL"))
    best = table.best
    assert best.backend == min(
        (r for r in table.rows if r.certified), key=lambda r: r.gap + r.max_violation
    ).backend
    assert np.isclose(prob.value, best.objective)
    assert np.isclose(np.sum(C * X.value), best.objective)
    assert specopt.certificate(prob) is best.certificate


def test_non_applicable_backend_is_a_row_and_values_survive():
    K = cp.Variable((3, 3), symmetric=True)
    K.value = np.eye(3)
    prob = cp.Problem(cp.Minimize(specopt.linear_spectral(K, [1.0, -1.0, 2.0])),
                      specopt.spectraplex(K))
    table = specopt.compare(prob, backends=("CLARABEL", "specopt:conic"))
    assert all(r.status == "not applicable" for r in table.rows)
    assert all(r.note == "not applicable: non-convex (use method='specopt')" for r in table.rows)
    assert "RouteMismatch" not in table.to_markdown()
    assert table.best is None
    assert np.array_equal(K.value, np.eye(3))


def test_markdown_dict_and_plot(problem):
    prob, _, _ = problem
    table = specopt.compare(prob, backends=("CLARABEL", "MOSEK"))
    md = table.to_markdown()
    assert md.splitlines()[0].startswith("| backend | route | status")
    assert len(md.splitlines()) == 2 + len(table.rows)
    d = table.to_dict()
    assert d["best"] == "CLARABEL" and d["rows"][0]["status"] == cp.OPTIMAL
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ax = table.plot()
    assert len(ax.patches) == 1  # MOSEK unavailable or not: only runs that ran are drawn


@pytest.mark.parametrize("excess, flagged", [(1e-3, True), (1e-9, False)])
@pytest.mark.parametrize("sense", [cp.Minimize, cp.Maximize])
def test_a_bound_beaten_by_another_rows_feasible_point_is_not_certified(excess, flagged, sense):
    """Weak duality across rows: a claimed bound beaten by more than the gate's tolerance makes
    the row uncertified (with a note); a difference within solver accuracy does not."""
    from specopt.compare import CompareRow, _flag_contradicted_bounds

    x = cp.Variable()
    prob = cp.Problem(sense(x), [x >= 0, x <= 1])
    s = 1.0 if sense is cp.Minimize else -1.0
    f = 10.0

    def row(name, objective, bound):
        cert = specopt.Certificate(route="conic", backend=name, status=cp.OPTIMAL,
                                   objective=objective, bound=bound, max_violation=0.0)
        return CompareRow(name, "conic", cp.OPTIMAL, objective=objective, max_violation=0.0,
                          certificate=cert)

    claims = row("A", f + s * excess, f + s * excess)  # its bound lies past B's feasible value
    other = row("B", f, f - s * 1e-12)
    _flag_contradicted_bounds(prob, [claims, other])
    assert claims.bound_contradicted is flagged and claims.certified is not flagged
    assert ("beaten by B" in claims.note) is flagged
    assert not other.bound_contradicted and other.certified
