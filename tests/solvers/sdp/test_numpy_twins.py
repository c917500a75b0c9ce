"""The engine's NumPy twins: each equals its compiled kernel, and a small solve in a fresh
process never imports numba (its start-up would be most of the solve) yet gives Clarabel's
answer."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import cvxpy as cp
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specopt.solvers._jit import numpy_twins_active, without_numba
from specopt.solvers.sdp import SparseRows, _kernels, _schur_form, solve_sdp


def _rows(rng: np.random.Generator, n: int, m: int, nnz: int) -> SparseRows:
    return SparseRows(rows=rng.integers(0, m, nnz), ii=rng.integers(0, n, nnz),
                      jj=rng.integers(0, n, nnz), vals=rng.standard_normal(nnz), m=m, n=n)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 12), m=st.integers(1, 15), nnz=st.integers(1, 60),
       r=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_each_twin_equals_its_compiled_kernel(n, m, nnz, r, seed):
    rng = np.random.default_rng(seed)
    A = _rows(rng, n, m, nnz)
    Y, D = rng.standard_normal((n, r)), rng.standard_normal((n, r))
    w = rng.standard_normal(m)
    G = rng.standard_normal((n, n))
    X, Z = G @ G.T, G.T @ G + np.eye(n)
    pr = A.pairs
    cases = [(_kernels.pair_dots, (pr.pi, pr.pj, Y, D)),
              (_kernels.pair_dots_sym, (pr.pi, pr.pj, Y, D)),
              (_kernels.csr_matmat, (pr.indptr, pr.ind, pr.adj_data(w), Y))]
    pf = _schur_form.padded_factors(*_schur_form.row_factors(A.rows, A.ii, A.jj, A.vals, m, n))
    cases.append((_schur_form._schur_kernel, (*pf, X, Z, m)))
    for kernel, args in cases:
        compiled = kernel.dispatcher()(*args)
        twin = kernel.numpy_twin(*args)
        scale = 1.0 + np.abs(compiled).max(initial=0.0)
        assert np.abs(twin - compiled).max(initial=0.0) <= 1e-12 * scale, kernel.__name__


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 12), m=st.integers(1, 15), nnz=st.integers(1, 60),
       r=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_pair_form_equals_the_row_definition(n, m, nnz, r, seed):
    """The entry-grouped kernels against ``A(K)_r = sum_k a_k K[i_k, j_k]`` formed densely
    (repeated entries, both triangles and the diagonal mixed in one row)."""
    rng = np.random.default_rng(seed)
    A = _rows(rng, n, m, nnz)
    Y, D = rng.standard_normal((n, r)), rng.standard_normal((n, r))
    w = rng.standard_normal(m)
    pr = A.pairs

    def a_of(K):
        return np.bincount(A.rows, A.vals * K[A.ii, A.jj], minlength=m)

    adj = np.zeros((n, n))
    np.add.at(adj, (A.ii, A.jj), 0.5 * w[A.rows] * A.vals)
    adj = adj + adj.T
    assert np.allclose(pr.yyt(Y), a_of(Y @ Y.T), atol=1e-12)
    assert np.allclose(pr.ydt(Y, D), a_of(Y @ D.T + D @ Y.T), atol=1e-12)
    assert np.allclose(pr.adj_times(w, Y), adj @ Y, atol=1e-12)
    assert np.allclose(pr.adjoint(w).toarray(), adj, atol=1e-12)
    # the adjoint identity <A^*(w), K> = w^T A(K) on a symmetric K
    K = Y @ Y.T
    assert abs(float(np.sum(adj * K)) - float(w @ a_of(K))) <= 1e-9 * (1 + np.abs(K).sum())


def test_without_numba_switches_only_inside_the_block():
    assert not numpy_twins_active()
    with without_numba():
        assert numpy_twins_active()
        with without_numba(False):  # an inner block does not switch the twins back off
            assert numpy_twins_active()
    with without_numba(False):
        assert not numpy_twins_active()
    assert not numpy_twins_active()


def test_twin_solve_matches_the_compiled_one_and_clarabel():
    rng = np.random.default_rng(3)
    n = 20
    Wt = np.triu((rng.random((n, n)) < 0.3) * rng.uniform(0.5, 2, (n, n)), 1)
    L = np.diag((Wt + Wt.T).sum(1)) - (Wt + Wt.T)
    A = SparseRows(rows=np.arange(n), ii=np.arange(n), jj=np.arange(n), vals=np.ones(n), m=n, n=n)
    b = np.ones(n)
    compiled = solve_sdp(L / 4, A, b, sense="max", tol=1e-7)
    with without_numba():
        twin = solve_sdp(L / 4, A, b, sense="max", tol=1e-7)
    K = cp.Variable((n, n), PSD=True)
    ref = cp.Problem(cp.Maximize(cp.trace(L @ K) / 4), [cp.diag(K) == 1])
    ref.solve(solver=cp.CLARABEL)
    assert compiled.status == twin.status == "optimal"
    for res in (compiled, twin):
        assert abs(res.objective - ref.value) <= 1e-5 * (1 + abs(ref.value))


def test_small_solves_in_a_fresh_process_never_import_numba():
    script = textwrap.dedent("""
        import json, sys
        import cvxpy as cp, numpy as np
        import specopt
        rng = np.random.default_rng(0)
        n = 30
        W = np.triu(rng.random((n, n)) < 0.2, 1).astype(float); W = W + W.T
        L = np.diag(W.sum(1)) - W
        K = cp.Variable((n, n), PSD=True)
        out = {}
        for name, prob in {
            "maxcut": cp.Problem(cp.Maximize(cp.trace(L @ K) / 4), [cp.diag(K) == 1]),
            "theta": cp.Problem(cp.Maximize(cp.sum(K)), [cp.trace(K) == 1]
                                + [K[i, j] == 0 for i, j in zip(*np.nonzero(np.triu(W, 1)))]),
        }.items():
            prob.solve(method="specopt")
            route = prob.solver_stats.solver_name
            ref = cp.Problem(prob.objective, prob.constraints)
            ref.solve(solver=cp.CLARABEL)
            out[name] = [prob.status, prob.value, ref.value, route]
        out["numba"] = "numba" in sys.modules
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=True)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out.pop("numba") is False
    for name, (status, value, ref, route) in out.items():
        assert status == cp.OPTIMAL, name
        assert route.endswith("low_rank_sdp"), (name, route)  # the engine, not conic
        assert abs(value - ref) <= 1e-5 * (1 + abs(ref)), name
