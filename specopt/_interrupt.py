"""Ctrl-C during long inner solves.

Compiled solvers do not return to Python while they iterate, so a SIGINT is only acted on when
they finish (Clarabel), or is swallowed by the solver's own handler and turned into a failure
status (SCS: status ``interrupted``). :func:`call_interruptibly` runs the call in a worker thread
while the main thread waits in short slices: Python's SIGINT handler then runs in the main thread
within ~0.05 s and raises KeyboardInterrupt there. The abandoned worker (a daemon thread) runs
its solve to the end in the background and its result is discarded; it never touches the user's
problem. A solve that SCS itself reports as interrupted is also turned into KeyboardInterrupt.

Two details keep a signal from being swallowed. SCS installs its own C-level SIGINT handler for
the length of a solve (process-wide, from the worker thread): a signal that reaches it after
SCS's last iteration check is lost, and an abandoned SCS that ends later restores whatever
handler it saw at its start. The waiting main thread therefore re-installs Python's handler
every slice and once more when the call returns, so the signal always reaches Python. And
``on_interrupt`` (e.g. HiGHS's ``cancelSolve``) stops an abandoned compiled solve that would
otherwise keep a core busy, or loop for ever, in the background.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

#: Seconds between two checks for a pending KeyboardInterrupt in the main thread.
SLICE = 0.05


def _reclaim_sigint(handler: Any) -> None:
    """Re-install Python's SIGINT handler (``handler``, a Python-level one) over any C-level
    handler a compiled solver put in its place; a no-op when Python did not own SIGINT."""
    if callable(handler) or handler in (signal.SIG_IGN, signal.SIG_DFL):
        try:
            signal.signal(signal.SIGINT, handler)
        except (ValueError, OSError):  # pragma: no cover - not the main thread / no SIGINT
            pass


def call_interruptibly(fn: Callable[..., T], *args: Any,
                       on_interrupt: Callable[[], Any] | None = None, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, run so that Ctrl-C interrupts it within ~:data:`SLICE` s.

    ``on_interrupt`` is called (in the main thread) when KeyboardInterrupt abandons the call,
    before it propagates: a way to tell the compiled solver to stop.
    """
    if threading.current_thread() is not threading.main_thread():
        return fn(*args, **kwargs)  # signals are only delivered to the main thread anyway
    handler = signal.getsignal(signal.SIGINT)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="specopt-inner-solve", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(SLICE)
            _reclaim_sigint(handler)
    except KeyboardInterrupt:
        if on_interrupt is not None:
            on_interrupt()
        raise
    finally:
        _reclaim_sigint(handler)
    if "error" in box:
        raise box["error"]
    return box["value"]


def scs_interrupted(raw: Any) -> bool:
    """Whether a raw SCS result says that SCS caught SIGINT (``status == "interrupted"``)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("info"), dict):
        return False
    info = raw["info"]
    return str(info.get("status", "")).lower() == "interrupted" or info.get("status_val") == -5


@contextmanager
def interrupts_as_keyboard_interrupt() -> Iterator[None]:
    """Re-raise a Ctrl-C that a compiled kernel turned into ``SystemError`` as KeyboardInterrupt.

    A SIGINT that arrives while a numba kernel runs is noticed when the kernel boxes its
    results (arrays, tuples): CPython then reports "returned a result with an exception set",
    a SystemError whose cause is the KeyboardInterrupt (or a chain of them: numba's own
    unpickling helper can be the call that noticed it). Any other SystemError passes through.
    """
    try:
        yield
    except SystemError as exc:
        cause: BaseException | None = exc
        for _ in range(16):  # the chain is short; bounded against a cycle
            if cause is None or isinstance(cause, KeyboardInterrupt):
                break
            cause = cause.__cause__ or cause.__context__
        if isinstance(cause, KeyboardInterrupt):
            raise KeyboardInterrupt from exc
        raise



def _die_with_parent(parent: int, use_prctl: bool = True) -> None:
    """End this child when its parent ends without killing it (a ``kill -9``, a benchmark's
    timeout on the parent): an orphaned solve would go on holding its memory and CPU (one
    orphaned Clarabel solve held 20 GB here). On Linux the kernel sends SIGKILL at the
    parent's death (``prctl(PR_SET_PDEATHSIG)``, no GIL needed while a solver holds it);
    everywhere a daemon thread checks every 10 :data:`SLICE` s that the parent is still ours."""
    import os
    import sys
    import time

    if use_prctl and sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):  # no prctl: the thread below still watches
            pass
    if os.getppid() != parent:  # the parent died before the watch started
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(10 * SLICE)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="specopt-parent-watch", daemon=True).start()


def _child_main() -> None:
    """Body of :func:`call_in_subprocess`'s child: read ``(fn, args, kwargs)`` pickled on stdin,
    write ``(ok, value)`` pickled to the file descriptor named in ``argv[1]``."""
    import os
    import pickle
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it kills us on Ctrl-C
    _die_with_parent(int(sys.argv[2]) if len(sys.argv) > 2 else os.getppid())
    fn, args, kwargs = pickle.load(sys.stdin.buffer)
    try:
        payload: tuple[bool, Any] = (True, fn(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - re-raised in the parent
        payload = (False, exc)
    try:
        blob = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result
        blob = pickle.dumps((False, RuntimeError(f"result could not be sent back: {exc!r}")))
    with os.fdopen(int(sys.argv[1]), "wb") as out:
        out.write(blob)


def call_in_subprocess(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a child interpreter, so that Ctrl-C interrupts it within
    ~:data:`SLICE` s even when ``fn`` holds the GIL for seconds (Clarabel's constructor does:
    a worker thread cannot help there, as Python's SIGINT handler needs the GIL to run).

    A fresh ``python`` with the parent's ``sys.path``, not ``multiprocessing``: its spawn and
    forkserver modes re-run the user's main script (which may itself call the solve at top
    level), and a fork of a process with BLAS/numba threads can deadlock. ``fn``, the arguments
    and the result must pickle; the child's stdout/stderr are the parent's, so a verbose solver
    still prints. On KeyboardInterrupt the child is killed: nothing keeps running in the
    background and the parent's state is untouched. A child that dies without an answer (out
    of memory, a crash in compiled code) raises RuntimeError.
    """
    import os
    import pickle
    import subprocess
    import sys

    read_fd, write_fd = os.pipe()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = subprocess.Popen(
        [sys.executable, "-c", "from specopt._interrupt import _child_main; _child_main()",
         str(write_fd), str(os.getpid())], stdin=subprocess.PIPE, pass_fds=(write_fd,),
        env=env)
    os.close(write_fd)
    chunks: list[bytes] = []
    try:
        assert child.stdin is not None
        child.stdin.write(pickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL))
        child.stdin.close()
        chunks = _read_until_eof(read_fd)
        code = child.wait()
    except BaseException:
        child.kill()
        child.wait()
        raise
    finally:
        os.close(read_fd)
    if not chunks:
        raise RuntimeError(f"the isolated solve's process ended without an answer (exit code "
                           f"{code}; out of memory or a crash in compiled code)")
    ok, value = pickle.loads(b"".join(chunks))
    if not ok:
        raise value
    return value


def _read_until_eof(fd: int) -> list[bytes]:
    """Everything written to pipe ``fd`` until its writer closes it, waiting in slices of
    :data:`SLICE` s so that a SIGINT raises KeyboardInterrupt promptly."""
    import os
    import select

    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([fd], [], [], SLICE)
        if ready:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return chunks
            chunks.append(chunk)
