"""Thread control (specopt._threads): every route solve and learner fit runs with the BLAS thread
count specopt chose (one by default), restores the caller's afterwards, and ``threads=`` is
checked."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import specopt
from specopt import _threads
from specopt.reductions.conic import ConicRoute


def _blas_threads() -> set[int]:
    """Thread counts of the loaded BLAS libraries that can thread (SCS's bundled OpenBLAS is
    built single-threaded: threading layer "disabled")."""
    return {i["num_threads"] for i in threadpool_info()
            if i["user_api"] == "blas" and i.get("threading_layer") != "disabled"}


def _small_sdp():
    rng = np.random.default_rng(0)
    C = rng.standard_normal((5, 5))
    X = cp.Variable((5, 5), symmetric=True)
    return cp.Problem(cp.Minimize(cp.trace((C + C.T) @ X)), [X >> 0, cp.trace(X) == 1])


@pytest.fixture
def seen_in_conic_solve(monkeypatch):
    """The BLAS thread counts in force while the conic route solves."""
    seen: list[set[int]] = []
    original = ConicRoute.solve

    def spy(self, *args, **kwargs):
        seen.append(_blas_threads())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ConicRoute, "solve", spy)
    return seen


def test_route_solve_runs_single_threaded_and_restores(seen_in_conic_solve):
    with threadpool_limits(2):
        specopt.solve(_small_sdp(), route="conic", solver="CLARABEL")
        assert seen_in_conic_solve[-1] == {1}
        assert _blas_threads() == {2}  # the caller's setting is back
        specopt.solve(_small_sdp(), route="conic", solver="CLARABEL", threads=2)
        assert seen_in_conic_solve[-1] == {2}
    with threadpool_limits(1):
        specopt.solve(_small_sdp(), route="conic", solver="CLARABEL", threads=-1)
        assert seen_in_conic_solve[-1] == {_threads.cpu_count()}
        assert _blas_threads() == {1}


def test_learner_fit_runs_single_threaded(monkeypatch):
    from sklearn.datasets import load_iris

    from specopt.learn import ITMLSupervised, itml

    seen = []
    original = itml.itml_linear

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(itml, "itml_linear", spy)
    X, y = load_iris(return_X_y=True)
    with threadpool_limits(2):
        ITMLSupervised(random_state=0).fit(X, y)
        assert seen and seen[-1] == {1}
        assert _blas_threads() == {2}


def test_nested_limits_keep_the_outer_one_and_explicit_ones_apply():
    with threadpool_limits(1):
        with _threads.limit_threads(2) as n:
            assert n == 2 and _blas_threads() == {2}
            with _threads.limit_threads() as inner:  # a nested default keeps the outer limit
                assert inner == 2 and _blas_threads() == {2}
            with _threads.limit_threads(1):
                assert _blas_threads() == {1}
            assert _blas_threads() == {2}
        assert _blas_threads() == {1}


def test_default_threads_by_size_and_idle_cores(monkeypatch):
    monkeypatch.setattr(_threads, "idle_cores", lambda: 2)
    assert _threads.default_threads(None) == 1
    assert _threads.default_threads(_threads.MULTI_THREAD_MIN_SIZE - 1) == 1
    assert _threads.default_threads(_threads.MULTI_THREAD_MIN_SIZE) == 2
    monkeypatch.setattr(_threads, "idle_cores", lambda: 1)  # a busy machine
    assert _threads.default_threads(10 * _threads.MULTI_THREAD_MIN_SIZE) == 1


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2", float("nan")])
def test_bad_threads_option_is_named(bad):
    prob = _small_sdp()
    with pytest.raises(ValueError, match="threads must be None, a positive integer or -1"):
        specopt.solve(prob, route="conic", solver="CLARABEL", threads=bad)
    assert prob.status is None


def test_clarabel_gets_specopt_thread_limit_on_psd_programs():
    """Clarabel's ``max_threads`` (its default, 0, runs its factorization on every core) follows
    specopt's thread limit on programs with a PSD cone; a user's own setting and programs
    without one are left alone."""
    from specopt._cvxpy_compat import clarabel_options

    X = cp.Variable((3, 3), symmetric=True)
    psd = cp.Problem(cp.Minimize(cp.trace(X)), [X >> 0, X[0, 0] == 1])
    x = cp.Variable(2)
    lp = cp.Problem(cp.Minimize(cp.sum(x)), [x >= 1])
    psd_data = psd.get_problem_data("CLARABEL")[0]
    lp_data = lp.get_problem_data("CLARABEL")[0]
    assert clarabel_options(psd_data, {}) == {"max_threads": 1}
    with _threads.limit_threads(2):
        assert clarabel_options(psd_data, {"tol_feas": 1e-7}) == {"tol_feas": 1e-7,
                                                                  "max_threads": 2}
        assert clarabel_options(psd_data, {"max_threads": 3}) == {"max_threads": 3}
        assert clarabel_options(lp_data, {}) == {}
    assert psd.solve(solver="CLARABEL", **clarabel_options(psd_data, {})) == pytest.approx(1.0)
