"""Ctrl-C during long inner solves.

Compiled solvers do not return to Python while they iterate, so a SIGINT is only acted on when
they finish (Clarabel), or is swallowed by the solver's own handler and turned into a failure
status (SCS: status ``interrupted``). :func:`call_interruptibly` runs the call in a worker thread
while the main thread waits in short slices: Python's SIGINT handler then runs in the main thread
within ~0.05 s and raises KeyboardInterrupt there. The abandoned worker (a daemon thread) runs
its solve to the end in the background and its result is discarded; it never touches the user's
problem. A solve that SCS itself reports as interrupted is also turned into KeyboardInterrupt.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Seconds between two checks for a pending KeyboardInterrupt in the main thread.
SLICE = 0.05


def call_interruptibly(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, run so that Ctrl-C interrupts it within ~:data:`SLICE` s."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args, **kwargs)  # signals are only delivered to the main thread anyway
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="specopt-inner-solve", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(SLICE)
    if "error" in box:
        raise box["error"]
    return box["value"]


def scs_interrupted(raw: Any) -> bool:
    """Whether a raw SCS result says that SCS caught SIGINT (``status == "interrupted"``)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("info"), dict):
        return False
    info = raw["info"]
    return str(info.get("status", "")).lower() == "interrupted" or info.get("status_val") == -5
