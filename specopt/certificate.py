"""What a specopt solve can prove about its answer.

Every route returns a :class:`Certificate`. ``specopt.certificate(prob)`` gives the one of the last
specopt solve of ``prob``. A status of ``optimal`` is only ever reported together with a dual bound
or a duality gap (specialized routes) or a conic solver's own optimality certificate (conic route);
non-convex routes report :data:`STATIONARY` with their monotone objective trace.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

#: Status of a non-convex route that converged to a stationary point (a local solution).
STATIONARY = "stationary_point"


@dataclass
class Certificate:
    """Evidence for the quality of a solution, in the user's objective sense.

    Attributes
    ----------
    route, backend:
        Which route ran, and which numerical engine (``"CLARABEL"``, ``"highs+lanczos"``, ...).
    status:
        The status written to the problem (a CVXPY status string or :data:`STATIONARY`).
    objective:
        Objective value of the returned point, evaluated on the user's problem.
    bound:
        A proven bound on the optimal value (lower bound when minimizing, upper when
        maximizing), or ``None`` when the route has none or could not prove one (then
        ``extra["bound_unproven"]`` says why, e.g. a conic backend's dual point that fails its
        dual-feasibility check; no gap is claimed).
    gap:
        Relative gap ``|objective - bound| / max(1, |objective|)`` where a bound is known.
    max_violation:
        Largest constraint violation of the returned point, measured on the user's problem
        (``max_c constraint.violation()``; PSD constraints count ``-lambda_min``).
    iterations, setup_time, solve_time, total_time:
        Work done; times in seconds.
    history:
        Per-iteration traces (``"objective"``, ``"bound"``, ``"gap"``, ...).
    is_global:
        True when the route solves a convex problem (its bound certifies global optimality).
    extra:
        Route-specific data (e.g. the factored solution ``theta, U`` of matrix generation).
    relative_violation:
        Largest relative violation ``violation / (1 + scale of the constraint)`` (see
        :mod:`specopt.gate`), the quantity the gate holds to its tolerance.
    checks:
        The verification gate's checks: ``name -> (passed, measured, tolerance)``
        (:class:`specopt.gate.Check`). ``optimal`` / ``stationary_point`` mean all passed.
    gate_reasons:
        Why the gate changed the route's status (empty when it did not).
    attempts:
        Earlier attempts of the conic route that failed the gate and were retried on another
        backend (backend, status, the failing checks).
    """

    route: str
    backend: str
    status: str
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    max_violation: float | None = None
    iterations: int | None = None
    setup_time: float | None = None
    solve_time: float | None = None
    total_time: float | None = None
    history: dict[str, list[float]] = field(default_factory=dict)
    is_global: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    relative_violation: float | None = None
    checks: dict[str, Any] = field(default_factory=dict)
    gate_reasons: list[str] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data view (arrays in ``extra`` are left out)."""
        d = asdict(self)
        d["extra"] = {k: v for k, v in self.extra.items() if isinstance(v, (int, float, str, bool))}
        d["checks"] = {k: list(v) for k, v in self.checks.items()}
        return d

    def plot(self, ax=None):
        """Objective and bound against time (left axis), relative gap on a log axis (right).

        Uses ``history["time"]`` with ``"objective"`` (or ``"primal"`` / ``"upper"``) and
        ``"bound"`` (or ``"dual"`` / ``"lower"``), and ``"gap"``; without time stamps the x axis
        is the iteration. Returns the matplotlib ``Axes`` (nothing is shown or saved by itself)::

            ax = specopt.certificate(prob).plot()
            ax.figure.savefig("certificate.png", dpi=150, bbox_inches="tight")
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover - optional extra
            raise ImportError("Certificate.plot() needs matplotlib: pip install 'specopt[plot]'")\
                from exc
        import numpy as np

        h = self.history or {}

        def first(*keys):
            return next((np.asarray(h[k], float) for k in keys if len(h.get(k, ()))), None)

        obj = first("objective", "primal", "upper")
        bnd = first("bound", "dual", "lower")
        gap = first("gap")
        if obj is None and bnd is None:
            raise ValueError(f"route {self.route!r} recorded no objective/bound history to plot")
        n = len(obj if obj is not None else bnd)
        if self.route == "dual_cd" and obj is not None and gap is not None and len(gap) == n:
            # dual_cd records the absolute gap P - D at each check (and D every pass)
            bnd = obj - gap
            gap = gap / np.maximum(1.0, np.abs(obj))
        t = first("time")
        if t is not None and len(t) == n:
            x, xlabel = t, "time [s]"
        else:
            x, xlabel = np.arange(1, n + 1), "iteration"
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        if obj is not None:
            ax.plot(x[: len(obj)], obj, "o-", ms=3, label="objective")
        if bnd is not None and len(bnd) == n:
            ok = np.isfinite(bnd)
            ax.plot(x[ok], bnd[ok], "s--", ms=3, label="bound")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("value")
        if gap is not None and len(gap) == n:
            g = np.abs(gap)
            ok = np.isfinite(g) & (g > 0)
            if ok.any():
                ax2 = ax.twinx()
                ax2.semilogy(x[ok], g[ok], "C2:", label="relative gap")
                ax2.set_ylabel("relative gap")
                ax2.legend(loc="upper center", fontsize=8)
        ax.legend(loc="upper right", fontsize=8)
        ax.set_title(f"{self.route} ({self.backend}): {self.status}")
        return ax

    def __str__(self) -> str:
        def fmt(x: Any) -> str:
            if x is None:
                return "-"
            if isinstance(x, float):
                return f"{x:.6g}"
            return str(x)

        rows = [
            ("route", self.route),
            ("backend", self.backend),
            ("status", self.status),
            ("objective", self.objective),
            ("bound", self.bound if self.bound is not None or "bound_unproven" not in self.extra
             else f"unproven ({self.extra['bound_unproven']})"),
            ("relative gap", self.gap),
            ("max violation", self.max_violation),
            ("rel. violation", self.relative_violation),
            ("iterations", self.iterations),
            ("total time [s]", self.total_time),
            ("global", self.is_global),
        ]
        for name, c in self.checks.items():
            rows.append((f"check {name}",
                         f"{'pass' if c[0] else 'FAIL'} ({fmt(c[1])} vs tol {fmt(c[2])})"))
        for reason in self.gate_reasons:
            rows.append(("gate", reason))
        return "\n".join(f"{k:>15}: {fmt(v)}" for k, v in rows)


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """``|objective - bound| / max(1, |objective|)``, or None when either is unknown."""
    if objective is None or bound is None:
        return None
    if not (math.isfinite(objective) and math.isfinite(bound)):
        return math.inf
    return abs(objective - bound) / max(1.0, abs(objective))
