"""Memory-aware routing: ``route="auto"`` never picks a route whose estimated working form does
not fit the machine (the conic form of m rows of row_quad_forms on an n x n variable has m n^2
nonzeros); the machine's memory is monkeypatched on both sides of the estimate."""

from __future__ import annotations

import cvxpy as cp
import pytest

import specopt
from specopt import memory
from tests._helpers import psdboost_triplet_factors


def _psdboost(D=4, S=30):
    P, Q = psdboost_triplet_factors(D, S, 0)
    m = P.shape[0]
    X = cp.Variable((D, D), PSD=True)
    rho, xi = cp.Variable(), cp.Variable(m)
    margins = specopt.row_quad_forms(P, X) - specopt.row_quad_forms(Q, X)
    prob = cp.Problem(cp.Maximize(rho - 0.1 * cp.sum(xi)),
                      [cp.trace(X) == 1, margins >= rho - xi, xi >= 0])
    return prob, X, m, D


def test_estimate_counts_m_n_squared_per_row_quad_forms():
    prob, _, m, D = _psdboost()
    nnz, data = memory.form_sizes(prob)
    assert nnz >= 2 * m * D * D and data >= 2 * m * D
    # the measurement: D = 50, m = 1e5, two row_quad_forms -> 5e8 nonzeros, 22.6 GB
    assert memory.CONIC_BYTES_PER_NONZERO * 2 * 1e5 * 50**2 == pytest.approx(22.6e9, rel=0.01)
    assert memory.physical_memory() is None or memory.physical_memory() > 0


def test_auto_avoids_the_conic_form_when_it_cannot_fit(monkeypatch):
    prob, X, m, D = _psdboost()
    roomy = specopt.explain(prob).auto_route
    assert roomy == "conic"  # small: the conic route pays off when memory is no object
    need = memory.route_memory("conic", prob)
    small = need / memory.MEMORY_FRACTION / 2  # the conic form needs twice what is allowed
    assert memory.route_memory("matrix_generation", prob) <= memory.MEMORY_FRACTION * small
    monkeypatch.setattr(memory, "physical_memory", lambda: small)
    ex = specopt.explain(prob)
    assert ex.auto_route == "matrix_generation"
    assert "memory" in ex.verdict("conic").reason and not ex.verdict("conic").matches
    specopt.solve(prob)
    assert specopt.certificate(prob).route == "matrix_generation"
    assert prob.status == cp.OPTIMAL
    value = prob.value
    # a named route is the user's choice: still solved
    specopt.solve(prob, route="conic", solver="CLARABEL")
    assert prob.value == pytest.approx(value, rel=1e-5, abs=1e-6)
    # enough memory again: conic, as before
    monkeypatch.setattr(memory, "physical_memory", lambda: 2 * need / memory.MEMORY_FRACTION)
    assert specopt.explain(prob).auto_route == "conic"
    # unknown memory: no refusal
    monkeypatch.setattr(memory, "physical_memory", lambda: None)
    assert specopt.explain(prob).auto_route == "conic"


def test_nothing_fits_is_an_error_naming_memory(monkeypatch):
    prob, X, _, _ = _psdboost()
    monkeypatch.setattr(memory, "physical_memory", lambda: 1.0)
    with pytest.raises(cp.error.DCPError, match="memory"):
        specopt.solve(prob)
    assert X.value is None


def test_physical_memory_from_proc_meminfo(monkeypatch):
    import os

    monkeypatch.setattr(os, "sysconf", lambda name: -1)
    got = memory.physical_memory()
    if os.path.exists("/proc/meminfo"):
        with open("/proc/meminfo") as fh:
            total = next(int(ln.split()[1]) for ln in fh if ln.startswith("MemTotal:"))
        assert got == total * 1024
