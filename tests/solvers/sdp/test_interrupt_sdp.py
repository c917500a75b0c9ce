"""Ctrl-C stops the sphere method (compiled sweeps and truncated-CG steps return to Python
between stages) with a KeyboardInterrupt, soon after the signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHILD = r"""
import time, numpy as np, scipy.sparse as sp
from specopt.solvers.sdp import SparseRows, solve_sdp
n = 30000
rng = np.random.default_rng(0)
i, j = rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n)
W = sp.coo_array((rng.choice([-1.0, 1.0], 3 * n), (i, j)), shape=(n, n)).tocsr()
W = W + W.T
W.setdiag(0)
L = sp.csr_array(sp.diags_array(np.asarray(W.sum(axis=1)).ravel()) - W) / 4
A = SparseRows.from_entries(np.arange(n), np.arange(n), n)
solve_sdp(L[:50, :50], SparseRows.from_entries(np.arange(50), np.arange(50), 50), np.ones(50),
          sense="max", method="bm")
print("ready", flush=True)
try:
    solve_sdp(L, A, np.ones(n), sense="max", method="bm", tol=1e-12)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
"""


def _interrupted_after(child: str, wait: float = 3.0) -> float:
    """Run ``child`` (prints ``ready``, then ``interrupted <time>`` on KeyboardInterrupt), send
    SIGINT ``wait`` seconds after ``ready``; the seconds until it stopped."""
    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(wait)  # inside the compiled stages
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=60)[0].split()
    finally:
        proc.kill()
    assert out[0] == "interrupted"
    return float(out[1]) - sent


@pytest.mark.slow
def test_sigint_interrupts_the_sphere_method():
    # one compiled stage at most (sweeps / Newton steps; loaded 2-core machine)
    assert _interrupted_after(CHILD) < 10.0


CHILD_BM = r"""
import signal, time, numpy as np
signal.signal(signal.SIGINT, signal.default_int_handler)
from specopt.solvers.sdp import SparseRows, SymOp, solve_sdp
n = 4000
rng = np.random.default_rng(0)
X = rng.standard_normal((n, 5))
pairs = np.array([(i, (i + s) % n) for i in range(n) for s in (1, 2, 3)])
d2 = np.sum((X[pairs[:, 0]] - X[pairs[:, 1]]) ** 2, axis=1)
small = pairs[pairs.max(axis=1) < 40][:60]
solve_sdp(SymOp.identity(40), SparseRows.from_pairs(small, 40),
          np.sum((X[small[:, 0]] - X[small[:, 1]]) ** 2, axis=1), sense="max", centered=True,
          trace_bound=1e3, method="bm", inner="lbfgs-exact", max_iters=2)
print("ready", flush=True)
try:
    solve_sdp(SymOp.identity(n), SparseRows.from_pairs(pairs, n), d2, sense="max",
              centered=True, trace_bound=1e6, method="bm", inner="lbfgs-exact", tol=1e-12)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
"""


@pytest.mark.slow
def test_sigint_interrupts_the_exact_step_lbfgs():
    assert _interrupted_after(CHILD_BM) < 10.0  # inside the inner L-BFGS steps
