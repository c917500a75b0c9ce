"""What a specopt solve can prove about its answer.

Every route returns a :class:`Certificate`. ``specopt.certificate(prob)`` gives the one of the last
specopt solve of ``prob``. A status of ``optimal`` is only ever reported together with a dual bound
or a duality gap (specialized routes) or a conic solver's own optimality certificate (conic route);
non-convex routes report :data:`STATIONARY` with their monotone objective trace.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np

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
        """Objective and bound against time since the start (top), relative gap on a log axis
        (bottom panel; on a twin axis when you pass ``ax``).

        Uses ``history["time"]`` with ``"objective"`` (or ``"primal"`` / ``"upper"``) and
        ``"bound"`` (or ``"dual"`` / ``"lower"``); the gap is ``|objective - bound| /
        max(1, |objective|)`` where both are recorded, else ``history["gap"]``. Without time
        stamps the x axis is the iteration. A one-shot solve (the conic route, an interior point
        that recorded no trace) is drawn as a single point at its total time with its gap; a
        non-convex route without a bound shows the relative change of its objective instead of a
        gap. Returns the values' matplotlib ``Axes`` (nothing is shown or saved by itself)::

            ax = specopt.certificate(prob).plot()
            ax.figure.savefig("certificate.png", dpi=150, bbox_inches="tight")
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover - optional extra
            raise ImportError("Certificate.plot() needs matplotlib: pip install 'specopt[plot]'")\
                from exc
        series = _plot_series(self)
        panels = ax is None  # two panels of our own, else a twin axis on the caller's
        if panels:
            fig, (ax, gax) = plt.subplots(2, 1, sharex=True, figsize=(6.4, 4.8),
                                          gridspec_kw={"height_ratios": [2, 1]},
                                          layout="constrained")
        else:
            gax = ax.twinx()
        style = {"ms": 7} if len(series.x) == 1 else {"ms": 3}
        _draw_values(ax, self, series, style)
        _draw_gap(gax, self, series, style)
        _frame(ax, gax, series)
        (gax if panels else ax).set_xlabel(series.xlabel)
        _legend_and_title(ax, gax, self, panels)
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


class _PlotSeries(NamedTuple):
    """What :meth:`Certificate.plot` draws: x (time or iteration), its label, the objective,
    bound and gap series (None where not recorded) and the gap panel's label."""

    x: np.ndarray
    xlabel: str
    obj: np.ndarray | None
    bnd: np.ndarray | None
    gap: np.ndarray | None
    gap_label: str


def _plot_series(cert: Certificate) -> _PlotSeries:
    """The series of ``cert.history`` (see :meth:`Certificate.plot`)."""
    h = cert.history or {}

    def first(*keys):
        return next((np.asarray(h[k], float) for k in keys
                     if isinstance(h.get(k), (list, tuple, np.ndarray)) and len(h[k])), None)

    obj = first("objective", "primal", "upper")
    bnd = first("bound", "dual", "lower")
    n = len(obj) if obj is not None else (len(bnd) if bnd is not None else 0)
    if bnd is not None and len(bnd) != n:
        bnd = None
    gap_label = "relative gap"
    if obj is not None and bnd is not None:
        gap = np.array([relative_gap(float(o), float(b)) for o, b in zip(obj, bnd, strict=True)])
    else:
        gap = first("gap")
        if gap is None and obj is not None and cert.bound is None:
            gap, gap_label = first("rel_change_objective"), "rel. change of objective"
        if gap is not None and len(gap) != n:
            gap = None
    t = first("time")
    if n == 0:  # one-shot solve: the returned point only
        obj = None if cert.objective is None else np.array([cert.objective], float)
        bnd = None if cert.bound is None else np.array([cert.bound], float)
        gap = None if cert.gap is None else np.array([cert.gap], float)
        x = np.array([cert.total_time or cert.solve_time or 0.0], float)
        xlabel = "time since start [s]"
    elif t is not None and len(t) == n:
        x, xlabel = t, "time since start [s]"
    else:
        x, xlabel = np.arange(1, n + 1), "iteration"
    return _PlotSeries(x, xlabel, obj, bnd, gap, gap_label)


def _final(v: np.ndarray | None) -> str:
    return f"{v[-1]:.7g}" if v is not None and np.isfinite(v[-1]) else "-"


def _draw_values(ax: Any, cert: Certificate, s: _PlotSeries, style: dict) -> None:
    """Objective and bound (the certificate's bound alone when there is no bound trace)."""
    x, obj, bnd = s.x, s.obj, s.bnd
    if obj is not None:
        ax.plot(x, obj, "o-", color="C0", zorder=2, label=f"objective (final {_final(obj)})",
                **style)
    if bnd is not None:
        ok = np.isfinite(bnd)
        ax.plot(x[ok], bnd[ok], "s--", color="C1", mfc="none", zorder=1,
                label=f"bound (final {_final(bnd)})", **style)
    elif cert.bound is not None and math.isfinite(cert.bound) and len(x):
        # no bound trace (e.g. an interior point's bound comes only with the certificate)
        ax.plot(x[-1:], [cert.bound], "s", color="C1", mfc="none", ms=7, zorder=1,
                label=f"bound (certificate, {cert.bound:.7g})")
    if obj is None and bnd is None:
        ax.text(0.5, 0.5, "no objective recorded", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_ylabel("objective")


def _draw_gap(gax: Any, cert: Certificate, s: _PlotSeries, style: dict) -> None:
    """The gap on a log axis (or why there is none)."""
    x, gap, gap_label = s.x, s.gap, s.gap_label
    ok = np.zeros(0, bool) if gap is None else np.isfinite(gap) & (gap > 0)
    if ok.any():
        gax.semilogy(x[ok], gap[ok], "^:", color="C2",
                     label=f"{gap_label} (final {gap[ok][-1]:.1e})", **style)
    elif gap is not None and np.any(gap == 0):
        gax.text(0.5, 0.5, f"{gap_label}: 0", ha="center", va="center",
                 transform=gax.transAxes)
    else:
        gax.text(0.5, 0.5, "no bound: no gap (non-convex route)" if not cert.is_global
                 else "no gap recorded", ha="center", va="center", transform=gax.transAxes)
    gax.set_ylabel(gap_label)


def _frame(ax: Any, gax: Any, s: _PlotSeries) -> None:
    """Plain tick labels and the axis limits."""
    x = s.x
    for a in (ax, gax):
        for axis in (a.xaxis, a.yaxis):
            fmt = axis.get_major_formatter()
            if hasattr(fmt, "set_useOffset"):
                fmt.set_useOffset(False)
    if len(x) == 1:  # a single point: from the start to past it
        ax.set_xlim(0.0, 1.5 * max(float(x[0]), 1e-3))
    elif s.xlabel.startswith("time") and x[0] <= 0.25 * x[-1]:  # from 0 unless that squashes
        ax.set_xlim(0.0, None)
    # differences below solver accuracy are not drawn as a spread (the gap panel shows them)
    vals = np.concatenate([v[np.isfinite(v)] for v in (s.obj, s.bnd) if v is not None] or
                          [np.zeros(0)])
    if vals.size:
        lo, hi = float(vals.min()), float(vals.max())
        half = max(0.5 * (hi - lo), 5e-4 * max(1.0, abs(vals[-1])))
        mid = 0.5 * (lo + hi)
        ax.set_ylim(mid - 1.1 * half, mid + 1.1 * half)


def _legend_and_title(ax: Any, gax: Any, cert: Certificate, panels: bool) -> None:
    """Legends outside the data area (they never cover a curve) and the title."""
    handles = [hh for a in (ax, gax) for hh in a.get_legend_handles_labels()[0]]
    labels = [lab for a in (ax, gax) for lab in a.get_legend_handles_labels()[1]]
    backend = "" if cert.backend in (None, "", cert.route) else f" on {cert.backend}"
    title = f"specopt route {cert.route}{backend}: {cert.status}"
    if panels:  # legend between the title and the top panel
        if handles:
            ax.legend(handles, labels, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2,
                      fontsize=8, frameon=False, borderaxespad=0.2)
        ax.figure.suptitle(title, fontsize=11)
    else:  # the caller's axes: legend to the right of the twin axis
        if handles:
            ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.15, 1.0),
                      fontsize=8, frameon=False)
        ax.set_title(title, fontsize=11)
