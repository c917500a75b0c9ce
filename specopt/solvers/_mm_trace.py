"""The trace every majorize-minimize loop reports (the generic driver in ``iterated_sdp`` and the
engine's ``sdp.mm``): one base result type, so the fields are declared once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class MMTrace:
    """The best objective over the iterates, the iterations run, whether the loop's test passed
    (``converged``) and why it stopped (``stop_reason``), the per-iteration ``history``, and the
    steps that increased the objective (``monotone_violations``: ``(iteration, increase)``)."""

    objective: float
    iterations: int
    converged: bool
    stop_reason: str
    history: dict[str, list[float]]
    monotone_violations: list[tuple[int, float]]
