"""What a matrix-generation run returns, its errors, and the per-round log every master shares."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._status import SolverStatus

__all__ = ["MasterInfeasible", "MatrixGenerationResult", "RoundLog", "UnboundedProblem"]


class UnboundedProblem(ValueError):
    """The objective is unbounded above on the feasible set."""


class MasterInfeasible(RuntimeError):
    """The restricted (PSD-block) master is infeasible: not a proof that the problem is."""


@dataclass
class MatrixGenerationResult:
    """Outcome of :func:`~specopt.solvers.mg.solve_spectraplex_lp`.

    ``X = U @ diag(theta) @ U.T`` (columns of ``U`` unit vectors, ``theta >= 0``,
    ``sum theta = t`` or ``<= t``); ``z`` the LP variables; ``y`` the row duals (max-sense:
    ``OPT <= bound(y)``), ``mu`` the trace-row dual. ``objective`` is the master value (attained
    by the returned point), ``bound`` the best Lagrangian bound, ``gap`` their relative gap.
    """

    status: SolverStatus
    objective: float
    bound: float
    gap: float
    theta: np.ndarray
    U: np.ndarray
    z: np.ndarray
    y: np.ndarray
    mu: float
    row_activity: np.ndarray
    iterations: int
    n_columns: int
    solve_time: float
    history: dict[str, list[float]] = field(default_factory=dict)
    artificial: float = 0.0
    #: the multipliers behind ``bound`` (LP master; None where not kept)
    y_bound: np.ndarray | None = None

    @property
    def X(self) -> np.ndarray:
        return (self.U * self.theta) @ self.U.T


def relative_gap(bound: float, obj: float) -> float:
    """``(bound - obj) / max(1, |obj|)``: the stopping test of every master."""
    return (bound - obj) / max(1.0, abs(obj))


class RoundLog:
    """The history of one run (objective, bound, gap, columns, time, lambda and any ``extra``
    series), its clock and the progress ``callback`` (``specopt._progress.Progress``); values
    are logged with the problem's constant ``offset``."""

    def __init__(self, t0: float, offset: float, callback: Callable[..., None] | None,
                 extra: tuple[str, ...] = ()):
        self.t0, self.offset, self.callback = t0, offset, callback
        self.hist: dict[str, list[float]] = {
            k: [] for k in ("objective", "bound", "gap", "columns", "time", "lambda", *extra)}

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def record(self, it: int, obj: float, bound: float, columns: int, lam: float,
               **extra: float) -> float:
        """Append one master round, call the callback; return the relative gap."""
        off = self.offset
        gap = relative_gap(bound, obj)
        for key, val in (("objective", obj + off), ("bound", bound + off), ("gap", gap),
                         ("columns", columns), ("time", self.elapsed()), ("lambda", lam),
                         *extra.items()):
            self.hist[key].append(val)
        if self.callback is not None:
            self.callback(it, objective=obj + off, bound=bound + off, gap=gap)
        return gap

    def result(self, status: SolverStatus, obj: float, bound: float, **fields
               ) -> MatrixGenerationResult:
        """The result at master value ``obj`` and bound ``bound`` (offset added here)."""
        return MatrixGenerationResult(
            status=status, objective=float(obj + self.offset), bound=float(bound + self.offset),
            gap=float(relative_gap(bound, obj)), solve_time=self.elapsed(), history=self.hist,
            **fields)
