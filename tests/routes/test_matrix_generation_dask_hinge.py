"""A user's CVXPY model with a hinge over Dask-backed ``row_quad_forms`` rows in the objective:
the analysis keeps the hinge as one symbolic term and lifts it with a slack symbol (no CVXPY
variable of size |S|), and the matrix-generation route certifies the optimum of the same
model on numpy rows."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is an optional extra (specopt[dask])")
import dask  # noqa: E402

import specopt  # noqa: E402
from specopt.reductions.analysis import HingeTerm, analyze  # noqa: E402


def _model(P, Q, C):
    D = P.shape[1]
    M, rho = cp.Variable((D, D), PSD=True), cp.Variable()
    margins = specopt.row_quad_forms(P, M) - specopt.row_quad_forms(Q, M)
    return cp.Problem(cp.Maximize(rho - C / P.shape[0] * cp.sum(cp.pos(rho - margins))),
                      [cp.trace(M) == 1])


def _rows(seed, m=600, D=4):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(m, D)) + 0.2, rng.normal(size=(m, D))


def test_dask_hinge_is_one_term_and_builds_no_variable_of_size_m(monkeypatch):
    P, Q = _rows(0)
    m = P.shape[0]
    ref = _model(P, Q, 10.0)
    specopt.solve(ref, route="matrix_generation", tol=1e-8)
    sizes = []
    orig = cp.Variable.__init__

    def record(self, shape=(), *a, **k):
        sizes.append(int(np.prod(shape)))
        orig(self, shape, *a, **k)

    prob = _model(da.from_array(P, chunks=(150, -1)), da.from_array(Q, chunks=(150, -1)), 10.0)
    monkeypatch.setattr(cp.Variable, "__init__", record)
    desc = analyze(prob)
    hinges = [t for t in desc.terms if isinstance(t, HingeTerm)]
    assert len(hinges) == 1 and len(desc.terms) == 1
    with dask.config.set(scheduler="sync"):
        specopt.solve(prob, route="matrix_generation", tol=1e-8)
    assert all(s < m for s in sizes), sizes
    cert = specopt.certificate(prob)
    assert prob.status == cp.OPTIMAL and cert.gap <= 1e-8
    assert abs(prob.value - ref.value) <= 1e-7 * max(1.0, abs(ref.value))
