"""How many BLAS / OpenMP threads specopt's kernels use.

specopt's routes run many small dense operations in tight loops: Bregman sweeps, Lanczos steps,
small Cholesky / eigh factorizations, the dual-CD and matrix-generation rounds, SCS's PSD
projections. With OpenBLAS's default (one thread per core) each such call wakes and spins up
worker threads; on a machine whose cores are busy with other processes those threads wait for a
core and every call costs a scheduler time slice. Measured at load 6 on 2 cores
(``benchmarks/threads.py``, issue 23): ``ITMLSupervised().fit`` on wine 1.8-11 s with the
default threading against 0.022-0.032 s with ``OPENBLAS_NUM_THREADS=1``. Kernel by kernel, in the
same run (ratio of the 2-thread time to the 1-thread time, load 6 then load 8 with two more
CPU-bound processes beside it):

=====  ==========  ==========  ==========
 n     eigh        cholesky    A @ A
=====  ==========  ==========  ==========
 100   1.47 / 0.8  0.82 / 0.97 1.0 / 1.0
 200   6.1 / 9.0   2.6 / 1.6   1.2 / 235
 400   14 / 43     0.98 / 163  4.2 / 0.43
 800   14 / 13     3.0 / 85    1.6 / 0.55
1500   7.7 / 6.0   7.1 / 4.1   3.5 / 1.2
=====  ==========  ==========  ==========

Two threads were never reliably faster on a loaded machine, and up to two orders of magnitude
slower. So specopt runs its solves with **one** thread by default, as scikit-learn's
``n_jobs=None`` does, and uses more only

* when the user asks (``threads=`` in ``prob.solve(method="specopt", threads=...)``,
  ``specopt.solve``, ``specopt.compare``; ``n_jobs`` on the learners; ``-1`` means every core), or
* for large dense kernels (problem side ``>= MULTI_THREAD_MIN_SIZE``) on a machine that has
  idle cores by its one-minute load average (``os.getloadavg``): there, on a quiet machine,
  BLAS level-3 kernels scale with the cores.

The limit is applied around a whole solve (``specopt.solve.run_route`` wraps every route, the
gate's checks and the conic backends; the learners that call a solver directly wrap ``fit``),
with threadpoolctl (``user_api=None``: every BLAS and OpenMP runtime loaded) and restored after.
Numba kernels in specopt are compiled without ``parallel=True``; numba's own thread count is
limited too where its threading layer is running.
"""

from __future__ import annotations

import functools
import math
import numbers
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

#: Side (largest variable dimension) from which a solve may use more than one thread when the
#: machine has idle cores; below it every kernel is a "small" one (table above).
MULTI_THREAD_MIN_SIZE = 1000

_F = TypeVar("_F", bound=Callable[..., Any])
_local = threading.local()
_controller_lock = threading.Lock()
_controller: Any = None
_controller_modules = -1


def cpu_count() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def idle_cores() -> int:
    """Cores not busy by the one-minute load average (at least 1)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - no load average
        return 1
    return max(1, cpu_count() - math.ceil(load))


def check_threads(threads: Any, name: str = "threads") -> int | None:
    """``threads`` as given by a user: None (specopt's default), a positive integer, or -1 (every
    core); anything else is a ``ValueError`` naming the option."""
    if threads is None:
        return None
    ok = isinstance(threads, numbers.Integral) and not isinstance(threads, bool) and (
        threads >= 1 or threads == -1)
    if not ok:
        raise ValueError(f"{name} must be None, a positive integer or -1 (every core), "
                         f"got {threads!r}")
    return cpu_count() if threads == -1 else int(threads)


def default_threads(size: int | None = None) -> int:
    """Threads for a solve whose largest dimension is ``size`` (see the module docstring)."""
    if size is None or size < MULTI_THREAD_MIN_SIZE:
        return 1
    return idle_cores()


def _get_controller():
    """A cached ``ThreadpoolController`` (building one scans the loaded libraries: ~4 ms here,
    against ~20 us to apply a limit with a cached one); rebuilt when modules were imported since,
    as an import may have loaded another BLAS (numpy and scipy ship their own OpenBLAS)."""
    global _controller, _controller_modules
    n_modules = len(sys.modules)
    with _controller_lock:
        if _controller is None or n_modules != _controller_modules:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
            _controller_modules = n_modules
        return _controller


def _numba_threads(n: int | None) -> int | None:
    """Set numba's thread count to ``n`` when its threading layer runs; returns the old one."""
    numba = sys.modules.get("numba")
    if numba is None:
        return None
    try:
        from numba.np.ufunc import parallel

        if not getattr(parallel, "_is_initialized", False):
            return None  # no parallel kernel ran: launching the layer would cost more
        old = numba.get_num_threads()
        if n is not None:
            numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
        return old
    except Exception:  # pragma: no cover - numba internals moved: leave numba alone
        return None


def current_threads() -> int:
    """The thread count of the enclosing :func:`limit_threads` block (1 outside any: specopt's
    default), for solvers that take their own thread setting (Clarabel's ``max_threads``)."""
    return int(getattr(_local, "threads", None) or 1)


@contextmanager
def limit_threads(threads: int | None = None, size: int | None = None) -> Iterator[int]:
    """Run the block with ``threads`` BLAS/OpenMP threads (None: :func:`default_threads` of
    ``size``); yields the count used. Nested blocks without an explicit ``threads`` keep the
    outer limit (no work at all), an explicit one applies inside and is undone on exit."""
    requested = check_threads(threads)
    outer = getattr(_local, "threads", None)
    if requested is None and outer is not None:
        yield outer
        return
    n = requested if requested is not None else default_threads(size)
    limiter = _get_controller().limit(limits=n)
    old_numba = _numba_threads(n)
    _local.threads = n
    try:
        yield n
    finally:
        _local.threads = outer
        if old_numba is not None:
            _numba_threads(old_numba)
        limiter.restore_original_limits()


def limited(func: _F) -> _F:
    """Decorator for a learner's ``fit``: runs it under :func:`limit_threads` with the
    estimator's ``n_jobs`` (None when it has none: one thread), with a Ctrl-C that a compiled
    kernel reported as SystemError raised as KeyboardInterrupt (the learners that call a solver
    directly do not pass through ``specopt.solve``)."""
    from ._interrupt import interrupts_as_keyboard_interrupt

    @functools.wraps(func)
    def wrapper(self, *args: Any, **kwargs: Any):
        with limit_threads(getattr(self, "n_jobs", None)), interrupts_as_keyboard_interrupt():
            return func(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def problem_size(problem: Any) -> int:
    """Largest dimension of any variable of a CVXPY problem (the side of its largest matrix)."""
    return max((max(v.shape, default=1) for v in problem.variables()), default=1)
