"""Child process of tests/test_interrupt.py: start a long solve on one route, report Ctrl-C.

Prints ``ready`` just before the solve, then on KeyboardInterrupt one line
``interrupted <time.monotonic()> <values untouched> <status is None>`` (CLOCK_MONOTONIC is
system-wide on Linux, so the parent can subtract the time it sent SIGINT).
"""

from __future__ import annotations

import os
import sys
import time

import cvxpy as cp
import numpy as np

import specopt


def long_problem(route: str):
    rng = np.random.default_rng(0)
    if route in ("conic-SCS", "conic-CLARABEL", "conic-CLARABEL-setup"):
        # Clarabel: ~30 s on a quiet core at n = 110 (n = 60 finished in under 3 s)
        n = 140 if route.endswith("setup") else 110
        C = rng.standard_normal((n, n))
        X = cp.Variable((n, n), symmetric=True)
        prob = cp.Problem(cp.Minimize(cp.trace((C + C.T) @ X) + cp.sum_squares(X)),
                          [X >> 0, cp.trace(X) == 1, X[0, 1] >= 0.01])
        if route == "conic-SCS":  # a badly scaled instance SCS converges on very slowly
            sys.path.insert(0, "tests")
            from test_gate import _badly_scaled

            prob, X = _badly_scaled(12, 0, 3)
            opts = dict(route="conic", solver="SCS", max_iters=10**8, eps_abs=1e-12,
                        eps_rel=1e-12)
        else:
            opts = dict(route="conic", solver="CLARABEL", max_iter=10**6, tol_gap_abs=1e-30,
                        tol_gap_rel=1e-30, tol_feas=1e-30)
        return prob, X, opts
    if route in ("iterated_sdp-SCS", "iterated_sdp-CLARABEL"):
        # n = 50: ~25 s with Clarabel on a quiet core (the stationarity stop ends n = 30 in 2.6 s,
        # before the signal)
        n = 50
        G = rng.standard_normal((n, 3))
        D = np.sum((G[:, None, :] - G[None, :, :]) ** 2, axis=2)
        K = cp.Variable((n, n), symmetric=True)
        cons = [K >> 0, cp.sum(K) == 0]
        cons += [K[i, i] + K[j, j] - 2 * K[i, j] == D[i, j] for i in range(n) for j in
                 range(i + 1, min(n, i + 3))]
        prob = cp.Problem(cp.Minimize(specopt.mve_cost(K, 2)), cons)
        solver = route.split("-")[1]
        opts = dict(route="iterated_sdp", solver=solver, max_iters=10**6, tol=0.0, tol_K=0.0)
        if solver == "SCS":
            opts.update(eps_abs=1e-12, eps_rel=1e-12)
        return prob, K, opts
    if route == "bregman":
        sys.path.insert(0, "tests")
        from test_gate import _wine_itml

        prob, W = _wine_itml()  # infeasible: runs until max_sweeps
        return prob, W, dict(route="bregman", max_sweeps=10**9, tol=1e-300, slow_after=None)
    if route == "matrix_generation":
        n = 120
        C = rng.standard_normal((n, n))
        X = cp.Variable((n, n), symmetric=True)
        A = [rng.standard_normal((n, n)) for _ in range(3)]
        cons = [X >> 0, cp.trace(X) == 1] + [cp.trace((a + a.T) @ X) <= 0.1 for a in A]
        prob = cp.Problem(cp.Maximize(cp.trace((C + C.T) @ X)), cons)
        return prob, X, dict(route="matrix_generation", tol=1e-300, max_iters=10**7,
                             master="lp", max_rank=0)
    if route in ("matrix_generation-psd", "matrix_generation-extraction"):
        # the PSD-block master (Clarabel) / minutes of coefficient extraction (large dense rows)
        n, k = (150, 60) if route.endswith("psd") else (60, 2500)
        C = rng.standard_normal((n, n))
        X = cp.Variable((n, n), symmetric=True)
        B = rng.standard_normal((k, n * n))
        cons = [X >> 0, cp.trace(X) == 1, B @ cp.vec(X, order="F") <= 0.05]
        prob = cp.Problem(cp.Maximize(cp.trace((C + C.T) @ X)), cons)
        return prob, X, dict(route="matrix_generation", tol=1e-300, max_iters=10**7,
                             max_rank=60, columns_per_round=20)
    if route == "matrix_generation-cuts":  # the 1-slack cut master over 6000 hinge rows
        m, D = 6000, 60
        P, Q = rng.standard_normal((m, D)), rng.standard_normal((m, D))
        X = cp.Variable((D, D), PSD=True)
        rho, xi = cp.Variable(), cp.Variable(m)
        margins = specopt.row_quad_forms(P, X) - specopt.row_quad_forms(Q, X)
        prob = cp.Problem(cp.Maximize(rho - 0.01 * cp.sum(xi)),
                          [cp.trace(X) == 1, margins >= rho - xi, xi >= 0])
        return prob, X, dict(route="matrix_generation", tol=1e-300, max_iters=10**7,
                             cuts=True)
    if route == "low_rank_sdp":
        n = 400
        W = np.abs(rng.standard_normal((n, n)))
        L = np.diag((W + W.T).sum(1)) - (W + W.T)
        X = cp.Variable((n, n), symmetric=True)
        prob = cp.Problem(cp.Maximize(cp.trace(L @ X)), [X >> 0, cp.diag(X) == 1])
        return prob, X, dict(route="low_rank_sdp", tol=1e-300, max_iters=10**9)
    if route == "dual_cd":
        m, d = 20000, 30
        Z = rng.standard_normal((m, d))
        w = cp.Variable(d)
        prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + cp.sum(cp.pos(1 - Z @ w))))
        return prob, w, dict(route="dual_cd", tol=1e-300, max_passes=10**9, polish=False)
    raise ValueError(route)


def highs_lp():
    """A random LP that HiGHS's simplex takes ~15 s on (the masters' solver, on its own)."""
    import highspy
    import scipy.sparse as sp

    from specopt.solvers._highs import new_highs

    rng = np.random.default_rng(0)
    m, n = 1500, 3000
    A = sp.random(m, n, density=0.05, random_state=1, format="csc")
    h = new_highs()
    h.addRows(m, np.full(m, -np.inf), np.ones(m), 0, np.zeros(0, np.int32),
              np.zeros(0, np.int32), np.zeros(0))
    h.addCols(n, -rng.random(n), np.zeros(n), np.full(n, highspy.kHighsInf), A.nnz,
              A.indptr.astype(np.int32), A.indices.astype(np.int32), A.data)
    h.setOptionValue("solver", "simplex")
    h.setOptionValue("presolve", "off")
    return h


def clarabel_setup() -> None:
    """Ctrl-C while Clarabel's constructor holds the GIL: compile first, so that the signal
    lands in the constructor or the solve (n = 140: a dense KKT block of 9870^2, 2-5 s to
    assemble on a quiet core, during which the GIL is held), then report the interrupt and
    whether a child process was left behind."""
    from specopt import _cvxpy_compat as compat

    prob, var, _ = long_problem("conic-CLARABEL-setup")
    data, chain, _ = prob.get_problem_data("CLARABEL")
    assert compat.clarabel_setup_work(data) > compat.CLARABEL_ISOLATE_MIN_PSD_WORK
    opts = dict(max_iter=10**6, tol_gap_abs=1e-30, tol_gap_rel=1e-30, tol_feas=1e-30)
    print("ready", flush=True)
    try:
        compat._solve_via_data(chain, prob, data, False, False, opts)
    except KeyboardInterrupt:
        t = time.monotonic()
        print(f"interrupted {t!r} True True", flush=True)
        print(f"children {len(_children())}", flush=True)
        usable(prob, var)
        os._exit(0)
    print("finished", flush=True)


def _children() -> list[str]:
    """Process ids of this process's live children (Linux /proc)."""
    kids: list[str] = []
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        with open(f"/proc/{os.getpid()}/task/{task}/children") as fh:
            kids += fh.read().split()
    return kids


def usable(prob, var) -> None:
    """After the interrupt: SIGINT reaches Python again (no compiled solver's handler left
    installed) and a small solve works; prints ``usable <bool> <bool>``."""
    import signal

    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1.0)
        caught = False
    except KeyboardInterrupt:
        caught = True
    x = cp.Variable(2)
    small = cp.Problem(cp.Minimize(cp.sum_squares(x - 1)), [cp.sum(x) <= 1])
    specopt.solve(small, route="conic", solver="CLARABEL")
    print(f"usable {caught} {abs(small.value - 0.5) < 1e-6}", flush=True)


def main() -> None:
    import signal

    # Python's handler even when this process inherited SIGINT ignored (a test run started in
    # the background by a non-interactive shell): the test is about what specopt does with it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    route = sys.argv[1]
    if route == "highs":
        from specopt.solvers._highs import run_highs

        h = highs_lp()
        print("ready", flush=True)
        try:
            run_highs(h)
        except KeyboardInterrupt:
            print(f"interrupted {time.monotonic()!r} True True", flush=True)
            time.sleep(0.5)  # the cancelled solve stops (HiGHS's user interrupt)
            print(f"cancelled {h.getModelStatus()}", flush=True)
            os._exit(0)
        print(f"finished {h.getModelStatus()}", flush=True)
        return
    if route == "conic-CLARABEL-setup":
        clarabel_setup()
        return
    prob, var, opts = long_problem(route)
    before = np.full(var.shape, 0.125)
    var.value = before
    print("ready", flush=True)
    try:
        specopt.solve(prob, **opts)
    except KeyboardInterrupt:
        t = time.monotonic()
        untouched = var.value is not None and np.array_equal(var.value, before)
        print(f"interrupted {t!r} {untouched} {prob.status is None}", flush=True)
        usable(prob, var)
        os._exit(0)  # do not wait for an abandoned inner solve (a daemon thread) to finish
    print(f"finished {prob.status}", flush=True)


if __name__ == "__main__":
    main()
