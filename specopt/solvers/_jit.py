"""Lazy numba compilation: ``import numba`` and the cache load happen at the first call.

Importing numba and initializing its CPU target costs 0.2-1 s per process (measured: 0.3 s
import, 0.2 s first cached dispatch on an idle machine). Paths that never reach a compiled kernel
(small problems, the Newton path of dual CD, users who never solve with a Bregman or dual-CD
route) should not pay it. :func:`lazy_njit` is a drop-in for ``numba.njit(**options)``.

Kernels may call other kernels of the same module: on the first call of any lazy kernel, every
lazy kernel in that module's globals is replaced by its real numba dispatcher, so numba resolves
the callees as ordinary jitted functions.

A kernel may have a NumPy twin (``@kernel.twin``: same arguments, same result up to rounding;
such a kernel is not called from other kernels).
Inside :func:`without_numba` every kernel that has one calls the twin instead, so a small solve
in a process that has not imported numba yet never pays its start-up.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["lazy_njit", "numba_loaded", "numpy_twins_active", "without_numba"]

_TWINS = contextvars.ContextVar("specopt_numpy_twins", default=False)


class _LazyKernel:
    """Callable proxy that builds ``numba.njit(**options)(func)`` on first use."""

    def __init__(self, func: Callable, options: dict[str, Any]) -> None:
        self.py_func = func
        self.options = options
        self._disp: Any = None
        self.__name__ = func.__name__
        self.__qualname__ = func.__qualname__
        self.__doc__ = func.__doc__
        self.__module__ = func.__module__
        self.__wrapped__ = func
        self.numpy_twin: Callable | None = None

    def twin(self, func: Callable) -> Callable:
        """Register ``func`` as this kernel's NumPy twin (a decorator; returns ``func``)."""
        self.numpy_twin = func
        return func

    def dispatcher(self) -> Any:
        if self._disp is None:
            from numba import njit

            glb = self.py_func.__globals__
            lazy = [(k, v) for k, v in glb.items() if isinstance(v, _LazyKernel)]
            for _, v in lazy:
                if v._disp is None:
                    v._disp = njit(**v.options)(v.py_func)
            for k, v in lazy:  # callees resolve to dispatchers when numba compiles callers
                if v.numpy_twin is None:  # (a kernel with a twin stays switchable: no callee)
                    glb[k] = v._disp
        return self._disp

    def __call__(self, *args: Any) -> Any:
        if self.numpy_twin is not None and _TWINS.get():
            return self.numpy_twin(*args)
        return self.dispatcher()(*args)


def lazy_njit(**options: Any) -> Callable[[Callable], _LazyKernel]:
    """``numba.njit(**options)``, deferred until the function is first called."""

    def wrap(func: Callable) -> _LazyKernel:
        return _LazyKernel(func, options)

    return wrap


def numba_loaded() -> bool:
    """Whether numba has been imported in this process (its fixed cost already paid)."""
    return "numba" in sys.modules


def numpy_twins_active() -> bool:
    """Whether kernels with a NumPy twin call it (inside :func:`without_numba`)."""
    return _TWINS.get()


@contextlib.contextmanager
def without_numba(active: bool = True) -> Iterator[None]:
    """Within the block, kernels that have a NumPy twin call it (when ``active``)."""
    token = _TWINS.set(bool(active) or _TWINS.get())
    try:
        yield
    finally:
        _TWINS.reset(token)
