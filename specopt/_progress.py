"""One progress printer for every iterative route, in CVXPY's verbose style.

The solvers in ``specopt/solvers`` stay free of CVXPY and of printing: they accept a plain
``callback(iteration, objective=..., bound=..., gap=..., violation=..., **extra)`` and call it
once per round / sweep check / pass. :class:`Progress` is such a callable. It prints a header
(``=`` rules, ``specopt`` and the version, ``(specopt) <time>: ...`` lines like CVXPY's
``(CVXPY) ...``), then a table line every ``every`` calls (and always for the first call), and
``finish(certificate)`` prints the summary.

Solvers work in their own units (a minimization form, a dropped constant, a scaling): a route
passes ``transform``, the map from the solver's objective to the user's (e.g.
``lambda v: sense * (v + offset)``), so that the printed objective and bound are the ones the
certificate reports; :func:`user_history` applies the same map to a solver's history.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

_WIDTH = 79
_COLUMNS = ("iter", "objective", "bound", "gap", "violation", "time [s]")


def _stamp() -> str:
    return time.strftime("%b %d %I:%M:%S %p")


def _num(x: Any, width: int = 14) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-".rjust(width)
    if isinstance(x, (int,)) and not isinstance(x, bool):
        return str(x).rjust(width)
    return f"{float(x):+.6e}".rjust(width)


def _small(x: Any, width: int = 10) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-".rjust(width)
    return f"{float(x):.2e}".rjust(width)


class Progress:
    """Progress printer; pass it as ``callback`` to a solver in ``specopt.solvers``.

    Parameters
    ----------
    route : the route's name (shown in the header).
    what : one line describing the problem (e.g. ``"d=13, 300 constraints"``).
    unit : what one iteration is ("round", "sweep", "pass", "MM step").
    every : print every this many calls (the first call is always printed).
    stream : where to print (``sys.stdout`` by default, looked up at print time).
    transform : maps the solver's objective / bound values to the user's objective and sign
        (None: the identity). With a transform and both values known, the printed gap is
        recomputed as the certificate's ``|objective - bound| / max(1, |objective|)``.
    """

    def __init__(self, route: str, what: str = "", unit: str = "iteration", every: int = 1,
                 stream: TextIO | None = None,
                 transform: Callable[[float], float] | None = None) -> None:
        self.route = route
        self.transform = transform
        self.what = what
        self.unit = unit
        self.every = max(1, int(every))
        self._stream = stream
        self.t0 = time.perf_counter()
        self.calls = 0
        self.lines = 0
        self._last: tuple | None = None
        self._header_done = False

    # -- output -------------------------------------------------------------------------
    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    def _print(self, text: str = "") -> None:
        print(text, file=self.stream, flush=True)

    def log(self, message: str) -> None:
        """A ``(specopt) <time>: message`` line."""
        self._print(f"(specopt) {_stamp()}: {message}")

    def header(self) -> None:
        if self._header_done:
            return
        self._header_done = True
        from ._version import __version__

        rule = "=" * _WIDTH
        self._print(rule)
        self._print("specopt".center(_WIDTH))
        self._print(f"v{__version__}".center(_WIDTH))
        self._print(rule)
        self.log(f"route {self.route}" + (f": {self.what}" if self.what else ""))
        self._print("-" * _WIDTH)
        self._print("Iterations".center(_WIDTH))
        self._print("-" * _WIDTH)
        self._print(f"{self.unit:>8}  {'objective':>14}  {'bound':>14}  {'gap':>10}  "
                    f"{'violation':>10}  {'time [s]':>8}")

    def _line(self, it, objective, bound, gap, violation, elapsed) -> None:
        self._print(f"{it:>8}  {_num(objective)}  {_num(bound)}  {_small(gap)}  "
                    f"{_small(violation)}  {elapsed:8.2f}")
        self.lines += 1
        self._printed = objective

    def _result_line(self, cert: Any) -> None:
        """A ``result`` line with the returned point's values when they are not the last
        printed ones (routes that return the best iterate, or polish the last one)."""
        obj = getattr(cert, "objective", None)
        if not isinstance(obj, (int, float)) or not math.isfinite(obj) or not self.lines:
            return
        last = getattr(self, "_printed", None)
        if isinstance(last, (int, float)) and abs(last - obj) <= 1e-9 * max(1.0, abs(obj)):
            return
        self._line("result", obj, getattr(cert, "bound", None), getattr(cert, "gap", None),
                   getattr(cert, "relative_violation", None), time.perf_counter() - self.t0)

    # -- the callback -------------------------------------------------------------------
    def __call__(self, iteration: int, objective: float | None = None,
                 bound: float | None = None, gap: float | None = None,
                 violation: float | None = None, **extra: Any) -> None:
        """Called by a solver once per round; prints every ``every``-th call."""
        self.header()
        elapsed = time.perf_counter() - self.t0
        if self.transform is not None:
            objective, bound = _mapped(self.transform, objective), _mapped(self.transform, bound)
            if objective is not None and bound is not None:
                from .certificate import relative_gap

                gap = relative_gap(objective, bound)
        row = (int(iteration), objective, bound, gap, violation, elapsed)
        if self.calls % self.every == 0:
            self._line(*row)
            self._last = None
        else:
            self._last = row
        self.calls += 1

    def finish(self, certificate: Any = None) -> None:
        """The last line (if not printed yet) and the summary with the certificate."""
        self.header()
        if self._last is not None:
            self._line(*self._last)
            self._last = None
        self._result_line(certificate)
        self._print("-" * _WIDTH)
        self._print("Summary".center(_WIDTH))
        self._print("-" * _WIDTH)
        if certificate is not None:
            self._print(str(certificate))
        else:
            self.log(f"finished after {time.perf_counter() - self.t0:.2f} s")


def _mapped(transform: Callable[[float], float], value: Any) -> float | None:
    return None if value is None else float(transform(float(value)))


#: history keys that hold objective values (and bounds on them) in the solver's units
VALUE_KEYS = ("objective", "primal", "upper", "bound", "dual", "lower")


def user_history(history: dict[str, list], transform: Callable[[float], float] | None
                 ) -> dict[str, list]:
    """A copy of a solver's ``history`` with its objective / bound series (:data:`VALUE_KEYS`)
    mapped by ``transform`` to the user's objective and sign (the other series unchanged)."""
    out = {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in history.items()}
    if transform is not None:
        for k in VALUE_KEYS:
            if k in out and isinstance(out[k], list):
                out[k] = [_mapped(transform, v) for v in out[k]]
    return out


_current = threading.local()


def progress_for(verbose: bool | Progress | Callable | None, route: str, what: str = "",
                 unit: str = "iteration", every: int = 1,
                 transform: Callable[[float], float] | None = None) -> Callable | None:
    """The callback a route hands to its solver: None unless ``verbose``; an existing
    :class:`Progress` (or any callable) is passed through. The printer is remembered (per
    thread) so that ``specopt.solve`` can print the summary with the certificate.
    ``transform`` maps the solver's objective values to the user's (:class:`Progress`)."""
    if verbose is None or verbose is False:
        return None
    cb = verbose if callable(verbose) else Progress(route, what, unit, every,
                                                    transform=transform)
    if isinstance(cb, Progress):
        cb.header()
    _current.progress = cb
    return cb


def take_current() -> Callable | None:
    """The printer of the last ``progress_for`` in this thread (and forget it)."""
    cb = getattr(_current, "progress", None)
    _current.progress = None
    return cb


def finish(callback: Callable | None, certificate: Any = None) -> None:
    """Print the summary if ``callback`` is a :class:`Progress`."""
    if isinstance(callback, Progress):
        callback.finish(certificate)
