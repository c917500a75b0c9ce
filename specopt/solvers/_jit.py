"""Lazy numba compilation: ``import numba`` and the cache load happen at the first call.

Importing numba and initializing its CPU target costs 0.2-1 s per process (measured: 0.3 s
import, 0.2 s first cached dispatch on an idle machine). Paths that never reach a compiled kernel
(small problems, the Newton path of dual CD, users who never solve with a Bregman or dual-CD
route) should not pay it. :func:`lazy_njit` is a drop-in for ``numba.njit(**options)``.

Kernels may call other kernels of the same module: on the first call of any lazy kernel, every
lazy kernel in that module's globals is replaced by its real numba dispatcher, so numba resolves
the callees as ordinary jitted functions.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_njit", "numba_loaded"]


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

    def dispatcher(self) -> Any:
        if self._disp is None:
            from numba import njit

            glb = self.py_func.__globals__
            lazy = [(k, v) for k, v in glb.items() if isinstance(v, _LazyKernel)]
            for _, v in lazy:
                if v._disp is None:
                    v._disp = njit(**v.options)(v.py_func)
            for k, v in lazy:  # callees resolve to dispatchers when numba compiles callers
                glb[k] = v._disp
        return self._disp

    def __call__(self, *args: Any) -> Any:
        return self.dispatcher()(*args)


def lazy_njit(**options: Any) -> Callable[[Callable], _LazyKernel]:
    """``numba.njit(**options)``, deferred until the function is first called."""

    def wrap(func: Callable) -> _LazyKernel:
        return _LazyKernel(func, options)

    return wrap


def numba_loaded() -> bool:
    """Whether numba has been imported in this process (its fixed cost already paid)."""
    return "numba" in sys.modules
