"""Ctrl-C: every route stops within about a second of SIGINT, raises KeyboardInterrupt and
leaves the model untouched (issue 13, case 5). Each test runs tests/_interrupt_child.py in a
subprocess, sends SIGINT while the solve runs and measures the time to the KeyboardInterrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: seconds from SIGINT to KeyboardInterrupt in the child (the issue's "about a second"), on a
#: machine with a core to spare; on an oversubscribed one (load above the core count) the child
#: waits for the scheduler too, so the limit scales with load / cores
MAX_DELAY = 1.0


@pytest.fixture(autouse=True)
def _python_owns_sigint():
    """Python's KeyboardInterrupt handler for SIGINT during each test, whatever the run inherited:
    a test run started in the background by a non-interactive shell (``cmd &``, ``nohup``)
    starts with SIGINT ignored, which Python then leaves alone and every child inherits."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _max_delay() -> float:
    """``MAX_DELAY`` scaled by how oversubscribed the cores are: the 1-minute load average, or at
    least the processes this run itself keeps busy (the pytest-xdist workers plus the child),
    since the load average lags a run that just started (CI: -n 2 on 2 cores, 1.13 s measured
    with a load average below 2)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    by_load = max(1.0, max(load, workers + 1) / (os.cpu_count() or 1))
    # the load average lags a burst that just started: measure the share of a core a busy loop
    # gets now as well, and allow for the slower of the two
    return MAX_DELAY * max(by_load, 1.0 / _cpu_share())


def _cpu_share(seconds: float = 0.3) -> float:
    """CPU time over wall time of a busy loop in this process (1.0 on an idle core)."""
    w0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - w0 < seconds:
        pass
    return max(0.05, min(1.0, (time.process_time() - c0) / (time.perf_counter() - w0)))


ROUTES = ["conic-SCS", "conic-CLARABEL", "conic-CLARABEL-setup", "iterated_sdp-SCS",
          "iterated_sdp-CLARABEL", "bregman",
          "matrix_generation", "matrix_generation-psd", "matrix_generation-cuts",
          "matrix_generation-extraction", "low_rank_sdp", "dual_cd", "highs"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("route", ROUTES)
def test_sigint_stops_the_solve_within_a_second(route):
    if route.endswith("setup") and not sys.platform.startswith("linux"):
        pytest.skip("the child-process check reads /proc (Linux)")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    child = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "_interrupt_child.py"), route], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        # well inside the solve (each instance runs for minutes); the setup case early, while
        # Clarabel's constructor would hold the GIL (7.9 s from SIGINT to KeyboardInterrupt at
        # load 7 when it ran in a thread of this process; 0.01 s in its own process)
        time.sleep(1.0 if route.endswith("setup") else 3.0)
        assert child.poll() is None, "the solve ended before the signal"
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    lines = [ln for ln in out.splitlines() if ln.startswith("interrupted")]
    assert lines, (f"no KeyboardInterrupt (exit code {child.returncode}); stdout: "
                   f"{out[-500:]!r} stderr: {err[-1500:]!r}")
    _, when, untouched, no_status = lines[0].split()
    delay = float(when) - sent
    limit = _max_delay()
    assert 0.0 <= delay <= limit, f"KeyboardInterrupt {delay:.2f} s after SIGINT (max {limit:.1f})"
    assert untouched == "True" and no_status == "True"  # values as before, no status written
    if route == "highs":  # the abandoned solve was cancelled, not left running
        assert "cancelled HighsModelStatus.kInterrupt" in out, out
    else:  # SIGINT still reaches Python afterwards, and the next solve works
        assert "usable True True" in out, out
    if route == "conic-CLARABEL-setup":  # the isolated solve's process was killed, not left
        assert "children 0" in out, out


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_reaches_python_after_a_solver_replaces_the_handler():
    """A compiled solver that installs its own C-level SIGINT handler from the worker thread
    (SCS does; here: SIG_IGN through libc) no longer swallows Ctrl-C: the waiting main thread
    re-installs Python's handler, and it is Python's again after the call."""
    import ctypes
    import threading

    from specopt._interrupt import call_interruptibly

    libc = ctypes.CDLL(None)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]

    def solver_like() -> str:
        libc.signal(signal.SIGINT, ctypes.c_void_p(1))  # SIG_IGN at the C level
        end = time.monotonic() + 5.0
        while time.monotonic() < end:
            time.sleep(0.01)
        return "finished"

    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        call_interruptibly(solver_like)
    assert time.monotonic() - t0 < 0.5 + _max_delay()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):  # Python's handler is installed at the C level too
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1.0)


def test_sigint_inside_a_compiled_kernel_is_a_keyboard_interrupt():
    """A SIGINT noticed while a numba kernel boxes its results surfaces as SystemError (cause:
    KeyboardInterrupt); specopt re-raises it as KeyboardInterrupt, other SystemErrors pass."""
    from specopt._interrupt import interrupts_as_keyboard_interrupt

    def interrupted_kernel():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise SystemError("returned a result with an exception set") from exc

    def nested():  # numba's unpickling helper noticed it inside the kernel's call
        try:
            interrupted_kernel()
        except SystemError as exc:
            raise SystemError("kernel returned a result with an exception set") from exc

    for kernel in (interrupted_kernel, nested):
        with pytest.raises(KeyboardInterrupt), interrupts_as_keyboard_interrupt():
            kernel()
    with pytest.raises(SystemError), interrupts_as_keyboard_interrupt():
        raise SystemError("something else")


def test_call_in_subprocess_returns_raises_and_reports_a_dead_child():
    """The isolated call returns the child's value, re-raises its exception, and says so when
    the child dies without an answer (instead of hanging)."""
    import math

    from specopt._interrupt import call_in_subprocess

    assert call_in_subprocess(math.hypot, 3.0, 4.0) == 5.0
    with pytest.raises(ValueError, match="math domain error"):
        call_in_subprocess(math.sqrt, -1.0)
    with pytest.raises(RuntimeError, match="without an answer .exit code 3"):
        call_in_subprocess(os._exit, 3)


def test_isolated_clarabel_solve_agrees_with_the_in_process_one(monkeypatch):
    """A Clarabel solve run in its own process (forced here by a zero threshold) gives the same
    status, value, primal and duals as the in-process one."""
    import cvxpy as cp
    import numpy as np

    import specopt
    from specopt import _cvxpy_compat as compat

    rng = np.random.default_rng(3)
    C = rng.standard_normal((6, 6))
    X = cp.Variable((6, 6), symmetric=True)
    cons = [X >> 0, cp.trace(X) == 1, X[0, 1] >= 0.05]
    prob = cp.Problem(cp.Minimize(cp.trace((C + C.T) @ X)), cons)
    specopt.solve(prob, route="conic", solver="CLARABEL")
    ref = (prob.status, prob.value, X.value.copy(), cons[1].dual_value, cons[0].dual_value.copy())
    monkeypatch.setattr(compat, "CLARABEL_ISOLATE_MIN_PSD_WORK", 0.0)
    prob2 = cp.Problem(cp.Minimize(cp.trace((C + C.T) @ X)), cons)
    specopt.solve(prob2, route="conic", solver="CLARABEL")
    assert prob2.status == ref[0] == "optimal"
    assert prob2.value == pytest.approx(ref[1], abs=1e-9)
    np.testing.assert_allclose(X.value, ref[2], atol=1e-8)
    np.testing.assert_allclose(cons[1].dual_value, ref[3], atol=1e-8)
    np.testing.assert_allclose(cons[0].dual_value, ref[4], atol=1e-8)



def _alive(pid: int) -> bool:
    """Running (a zombie whose new parent has not reaped it yet counts as ended)."""
    import os

    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


@pytest.mark.parametrize("how", ["call_in_subprocess", "watching thread only"])
def test_isolated_solve_ends_when_its_parent_is_killed(tmp_path, how):
    """A parent killed without killing its isolated child (``kill -9``, a benchmark's timeout)
    leaves no orphan holding memory (one orphaned Clarabel solve held 20 GB): the child ends
    within seconds, by prctl's parent-death signal on Linux and by the watching thread alone
    where prctl is not there."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "child.pid"
    sleeper = (f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
               "time.sleep(120)")
    if how == "call_in_subprocess":
        code = ("import time; from specopt._interrupt import call_in_subprocess; "
                f"call_in_subprocess(exec, {sleeper!r})")
    else:  # the child runs the watch without prctl, then sleeps
        child_code = ("import os; from specopt._interrupt import _die_with_parent; "
                      f"_die_with_parent(os.getppid(), use_prctl=False); {sleeper}")
        code = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
                f"{child_code!r}]); time.sleep(120)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    parent = subprocess.Popen([sys.executable, "-c", code], env=env)
    child = None
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the isolated child never started"
            time.sleep(0.05)
        child = int(pid_file.read_text())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(child):
            assert time.monotonic() < deadline, "the child outlived its killed parent by 10 s"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
