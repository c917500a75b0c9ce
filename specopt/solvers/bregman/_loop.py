"""The outer loop shared by every Bregman form: sweeps in chunks, a cheap violation test, the
full certificate (primal, dual) when it may pass, the Farkas test, and the budget."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._status import SolverStatus

#: Stopped by ``max_sweeps`` or ``time_limit`` before the tolerance (the routes report
#: ``optimal_inaccurate``).
INACCURATE = SolverStatus.INACCURATE
#: Stopped early because the measured rate says ``max_sweeps`` would come before the tolerance
#: (``slow_after``); the route then switches methods.
SLOW = SolverStatus.SLOW


@dataclass(frozen=True)
class Certified:
    """Primal value, dual bound, relative gap and relative violation at one point."""

    primal: float
    dual: float
    gap: float
    violation: float


@dataclass(frozen=True)
class LoopOutcome:
    """How the loop ended: status, sweeps done, the last certificate and a Farkas ray."""

    status: str
    sweeps: int
    cert: Certified
    ray: np.ndarray | None = None


@dataclass(frozen=True)
class Stages:
    """What the loop drives: ``sweep(n)`` runs n sweeps in place; ``violation()`` returns the
    relative violation and the complementarity |sum lam delta (p - xi)|; ``certificate()``
    returns (primal, dual); ``infeasible()`` a Farkas ray or None."""

    sweep: Callable[[int], None]
    violation: Callable[[], tuple[float, float]]
    certificate: Callable[[], tuple[float, float]]
    infeasible: Callable[[], np.ndarray | None]


def new_history() -> dict[str, list[float]]:
    return {"sweep": [], "dual": [], "primal": [], "gap": [], "max_violation": [], "time": []}


def record(hist: dict[str, list[float]], sweeps: int, cert: Certified, elapsed: float) -> None:
    """Append one certificate to the history."""
    for k, v in zip(("sweep", "dual", "primal", "gap", "max_violation"),
                    (sweeps, cert.dual, cert.primal, cert.gap, cert.violation), strict=True):
        hist[k].append(float(v))
    hist["time"].append(elapsed)


def certify(certificate: Callable[[], tuple[float, float]], viol: float) -> Certified:
    """The certificate at the current point, with the relative gap."""
    primal, dual = certificate()
    return Certified(primal, dual, abs(primal - dual) / max(1.0, abs(primal)), viol)


class Loop:
    """Shared outer loop: sweeps in chunks, cheap violation test, expensive certificate."""

    def __init__(self, tol, max_sweeps, time_limit, check_every, growth=2, sweep_work=1.0,
                 callback=None, slow_after=None):
        self.growth = growth
        self.slow_after = slow_after
        self.callback = callback
        # sweeps per compiled call: up to ~1e6 flops of work per call, at most 1024
        self.max_chunk = int(min(1024, max(1, 1e6 // max(sweep_work, 1.0))))
        self.tol = float(tol)
        self.max_sweeps = int(max_sweeps)
        self.time_limit = time_limit
        self.check_every = check_every
        self.hist = new_history()

    def run(self, stages: Stages) -> LoopOutcome:
        """Sweep until the certificate passes, a Farkas ray is found, the rate is too slow
        (``slow_after``) or the budget is spent."""
        t0 = time.perf_counter()
        done = 0
        chunk = 1 if self.check_every is None else int(self.check_every)
        next_full = 1
        cert = Certified(math.nan, math.nan, math.nan, math.inf)
        while True:
            n = min(chunk, self.max_sweeps - done)
            if n > 0:
                stages.sweep(n)
                done += n
                if self.check_every is None:
                    # amortize the per-call overhead on cheap sweeps; deterministic (no timing)
                    chunk = min(2 * chunk, self.max_chunk)
            # cheap test first: violation and complementarity |sum lam delta (p - xi)|, which
            # equals primal - dual at an exact iterate; the full certificate confirms it
            viol, comp = stages.violation()
            cert = Certified(cert.primal, cert.dual, cert.gap, viol)
            out_of_budget = done >= self.max_sweeps or (
                self.time_limit is not None and time.perf_counter() - t0 > self.time_limit
            )
            if self._full_check(viol, comp, cert.primal, done, next_full) or out_of_budget:
                cert = self._certify(stages, done, viol, t0)
                if cert.gap <= self.tol and viol <= self.tol:
                    return LoopOutcome(SolverStatus.OPTIMAL, done, cert)
                if self.check_every is None:
                    next_full = max(self.growth * done, done + 1)
                ray = stages.infeasible()
                if ray is not None:
                    return LoopOutcome(SolverStatus.INFEASIBLE, done, cert, ray)
                if not out_of_budget and self._slow(time.perf_counter() - t0):
                    return LoopOutcome(SLOW, done, cert)
            if out_of_budget:
                return LoopOutcome(INACCURATE, done, cert)

    def _full_check(self, viol: float, comp: float, primal: float, done: int,
                    next_full: int) -> bool:
        """Whether to compute the full certificate now."""
        cheap_ok = viol <= self.tol and comp <= self.tol * max(
            1.0, abs(primal) if math.isfinite(primal) else 1.0
        )
        return self.check_every is not None or cheap_ok or done >= next_full

    def _certify(self, stages: Stages, done: int, viol: float, t0: float) -> Certified:
        """Full certificate, recorded and reported."""
        cert = certify(stages.certificate, viol)
        record(self.hist, done, cert, time.perf_counter() - t0)
        if self.callback is not None:
            self.callback(done, objective=cert.primal, bound=cert.dual, gap=cert.gap,
                          violation=viol)
        return cert

    def _slow(self, elapsed: float) -> bool:
        """Whether the sweeps, at the rate measured between the last two certificates, would
        reach ``max_sweeps`` before the tolerance (only from ``slow_after`` seconds on).

        The error ``e = max(gap, violation) / tol`` is taken to fall geometrically (linear
        convergence): ``rate = log(e_prev / e_now) / sweeps between``, and the sweeps still
        needed are ``log(e_now) / rate`` (infinite when ``e`` did not fall)."""
        h = self.hist
        if self.slow_after is None or elapsed < self.slow_after or len(h["sweep"]) < 2:
            return False
        tol = max(self.tol, 1e-300)
        e0 = max(h["gap"][-2], h["max_violation"][-2]) / tol
        e1 = max(h["gap"][-1], h["max_violation"][-1]) / tol
        ds = h["sweep"][-1] - h["sweep"][-2]
        if not (math.isfinite(e0) and math.isfinite(e1)) or ds <= 0 or e1 <= 1.0:
            return False
        rate = math.log(e0 / e1) / ds if e1 < e0 else 0.0
        need = math.log(e1) / rate if rate > 0 else math.inf
        return h["sweep"][-1] + need > self.max_sweeps
