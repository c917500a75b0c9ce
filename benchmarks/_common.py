"""Shared helpers for the benchmark scripts: timing medians, tables, JSON output."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

RESULTS = Path(__file__).resolve().parent / "results"


def timed(func: Callable[[], Any], repeats: int = 5) -> tuple[float, Any]:
    """Median wall time of ``repeats`` calls, and the last call's return value."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = func()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def timed_interleaved(
    funcs: dict[str, Callable[[], Any]], repeats: int = 5
) -> dict[str, tuple[float, Any]]:
    """Median wall time per function, calling them round-robin after one untimed warm-up round.

    Interleaving matters for compile-time comparisons: whichever form runs first after a large
    allocation pays the page faults, which is not a property of the form.
    """
    times: dict[str, list[float]] = {k: [] for k in funcs}
    outs: dict[str, Any] = {}
    for rep in range(repeats + 1):
        for key, func in funcs.items():
            t0 = time.perf_counter()
            outs[key] = func()
            if rep:
                times[key].append(time.perf_counter() - t0)
    return {k: (statistics.median(v), outs[k]) for k, v in times.items()}


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (the conic route runs Clarabel and
    SCS in an isolated child process, which ``time.process_time`` does not see)."""
    import resource

    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def markdown_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        return "-" if v is None else str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def write_json(name: str, rows: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "benchmark": name,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "meta": meta or {},
        "rows": rows,
    }
    path.write_text(json.dumps(payload, indent=2, default=float))
    return path


def run_json_subprocess(args: list[str], timeout: float, root: Path) -> dict[str, Any]:
    """Run ``python <args>`` with ``root`` on PYTHONPATH and a wall-clock ``timeout``; return the
    last stdout line that is a JSON object, or ``{"error": ...}`` (with ``time`` on a timeout)."""
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout > {timeout:.0f} s", "time": time.perf_counter() - t0}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(lines[-1])
