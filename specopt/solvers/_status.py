"""One status vocabulary for every specopt solver.

A solver reports how its loop ended; the route maps that to a CVXPY status (``STATUS_MAP``) and
the gate decides whether the certificate backs it. ``SolverStatus`` is a ``StrEnum``, so a
value compares equal to the plain string older code used (``SolverStatus.OPTIMAL == "optimal"``)
and prints as that string.
"""

from __future__ import annotations

from enum import StrEnum


class SolverStatus(StrEnum):
    """How a specialized solver's loop ended."""

    #: the solver's own optimality test passed (gap or KKT residual under tolerance)
    OPTIMAL = "optimal"
    #: a local method met its stationarity test (non-convex problems)
    STATIONARY = "stationary_point"
    #: the iteration cap was hit before the optimality test passed
    MAX_ITERS = "max_iters"
    #: the time limit was hit before the optimality test passed
    TIME_LIMIT = "time_limit"
    #: no further progress possible (bound and objective stopped moving)
    STALLED = "stalled"
    #: stopped by an iteration or time cap before the tolerance, the two not told apart
    #: (the Bregman solvers' sweep loop)
    INACCURATE = "inaccurate"
    #: stopped early because the measured rate says the cap would come before the tolerance;
    #: the route switches methods
    SLOW = "slow"
    #: a Farkas-type certificate proves the constraints empty
    INFEASIBLE = "infeasible"
    #: a recession direction proves the objective unbounded
    UNBOUNDED = "unbounded"
    #: the numerical method failed (factorization, inner solver error)
    FAILED = "failed"

    @property
    def is_limit(self) -> bool:
        """Whether the loop was cut short by a cap rather than by its own test."""
        return self in (SolverStatus.MAX_ITERS, SolverStatus.TIME_LIMIT, SolverStatus.STALLED,
                        SolverStatus.INACCURATE, SolverStatus.SLOW)
