"""The user's objective over Dask-backed rows is evaluated as one Dask graph: the same value as
CVXPY's evaluation, with client memory that does not grow with the number of rows."""

from __future__ import annotations

import tracemalloc

import cvxpy as cp
import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is an optional extra (specopt[dask])")
import dask  # noqa: E402

import specopt  # noqa: E402
from specopt import gate  # noqa: E402
from specopt._lazy_value import NotLazy, lazy_value  # noqa: E402
from specopt._values import objective_value  # noqa: E402


def _rows(m, D=4, chunk=250, seed=0):
    rng = np.random.default_rng(seed)
    P, Q = rng.normal(size=(m, D)) + 0.3, rng.normal(size=(m, D))
    return P, Q, da.from_array(P, chunks=(chunk, D)), da.from_array(Q, chunks=(chunk, D))


def _spellings(P, Q, M, rho, w):
    q = specopt.row_quad_forms(P, M) - specopt.row_quad_forms(Q, M)
    m = P.shape[0]
    return {
        "pos": rho - 3.0 / m * cp.sum(cp.pos(rho - q)),
        "maximum": rho - cp.sum(cp.maximum(0, 1 - q)) / m,
        "weights": cp.sum(cp.multiply(w, cp.pos(1 - q))),
        "abs-min": cp.sum(cp.abs(q)) - 2 * cp.sum(cp.minimum(q, rho)),
        "neg-div": -cp.sum(cp.neg(q - rho)) / 7.0 + cp.trace(M),
        "square (not lazy)": cp.sum(cp.square(q)),
    }


@pytest.mark.parametrize("name", ["pos", "maximum", "weights", "abs-min", "neg-div",
                                  "square (not lazy)"])
def test_lazy_value_equals_cvxpy_value(name):
    m, D = 1000, 4
    P, Q, Pd, Qd = _rows(m, D)
    M, rho = cp.Variable((D, D), PSD=True), cp.Variable()
    rng = np.random.default_rng(1)
    A = rng.normal(size=(D, D))
    M.value, rho.value = A @ A.T, 0.7
    w = rng.uniform(size=m)
    ref = _spellings(P, Q, M, rho, w)[name].value
    expr = _spellings(Pd, Qd, M, rho, w)[name]
    prob = cp.Problem(cp.Minimize(expr))
    with dask.config.set(scheduler="sync"):
        if name.endswith("(not lazy)"):
            with pytest.raises(NotLazy):
                lazy_value(expr)
        else:
            assert abs(lazy_value(expr) - ref) <= 1e-10 * (1 + abs(ref))
        assert abs(objective_value(prob) - ref) <= 1e-10 * (1 + abs(ref))


def test_lazy_value_is_none_without_values():
    P, Q, Pd, Qd = _rows(100)
    M, rho = cp.Variable((4, 4), PSD=True), cp.Variable()
    expr = _spellings(Pd, Qd, M, rho, np.ones(100))["pos"]
    assert lazy_value(expr) is None


def _peak_of_measure(m, chunk=40_000, D=4):
    _, _, Pd, Qd = _rows(m, D, chunk=chunk)
    M, rho = cp.Variable((D, D), PSD=True), cp.Variable()
    q = specopt.row_quad_forms(Pd, M) - specopt.row_quad_forms(Qd, M)
    prob = cp.Problem(cp.Maximize(rho - 3.0 / m * cp.sum(cp.pos(rho - q))), [cp.trace(M) == 1])
    point = {M.id: np.eye(D) / D, rho.id: 0.2}
    with dask.config.set(scheduler="sync"):
        gate.measure(prob, point)  # warm caches
        tracemalloc.start()
        try:
            measured = gate.measure(prob, point)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return peak, measured


def test_gate_measure_over_dask_rows_holds_no_array_per_row():
    """5x the rows (in blocks of the same size) cost the check less than a byte per added row
    (the graph's few tasks per block); CVXPY's evaluation held about 32 bytes a row (the rows'
    values and each elementwise step)."""
    small = _peak_of_measure(40_000)[0]
    large, measured = _peak_of_measure(200_000)
    assert measured["objective"] is not None and np.isfinite(measured["objective"])
    assert large - small < 1.0 * (200_000 - 40_000), (small, large)
