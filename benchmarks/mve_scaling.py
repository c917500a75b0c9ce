"""MinimumVolumeEmbedding: CPU time vs N over the families, from the ``--mve`` runs of
``benchmarks/iterated_sdp.py`` (no new solves): a markdown table (per N: runs, statuses, CPU
median / worst, the local exponent ``d log(cpu) / d log(N)`` between consecutive sizes, which a
cliff would show as a jump), JSON in ``results/mve_scaling.json`` and a log-log plot.

Rows used: the learner on its defaults (``MinimumVolumeEmbedding``) and the defaults with only a
``time_limit`` added (``[capped]``, ``[cap300]``, ``[cap600]``, ``[cap900]``, ``[cap1800]``:
unfinished runs, drawn hollow, their CPU a lower bound of the fit's). A later file's row for the
same (family, N) replaces an earlier one.

    python benchmarks/mve_scaling.py results/iterated_sdp_mve_r4.json ... --plot docs/img/x.png
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import RESULTS  # noqa: E402

#: the learner's defaults, alone or with a wall-clock cap
DEFAULT_NAMES = ("MinimumVolumeEmbedding",) + tuple(
    f"MinimumVolumeEmbedding[{v}]" for v in ("capped", "cap300", "cap600", "cap900", "cap1800"))
#: the issue's goals (N, seconds)
GOALS = ((400, 15.0), (1000, 60.0), (5000, 900.0))


def load_rows(paths: list[Path]) -> list[dict]:
    """Default-learner rows of the files, the last file winning per (family, N)."""
    rows: dict[tuple[str, int], dict] = {}
    for path in paths:
        data = json.loads(path.read_text())
        for r in data["rows"] if isinstance(data, dict) else data:
            if r.get("model") in DEFAULT_NAMES and r.get("cpu") is not None:
                rows[(r["family"], int(r["N"]))] = dict(r, source=path.name)
    return sorted(rows.values(), key=lambda r: (r["N"], r["family"]))


def summarize(rows: list[dict]) -> list[dict]:
    """Per N: runs, stationary count, CPU median / worst, local exponent to the previous N
    (medians of the finished runs; unfinished runs are lower bounds and excluded)."""
    out: list[dict] = []
    for n in sorted({r["N"] for r in rows}):
        at = [r for r in rows if r["N"] == n]
        done = [r["cpu"] for r in at if r["status"] == "stationary_point"]
        med = statistics.median(done) if done else None
        prev = next((s for s in reversed(out) if s["cpu_median"] is not None), None)
        slope = (math.log(med / prev["cpu_median"]) / math.log(n / prev["N"])
                 if med is not None and prev is not None else None)
        out.append({"N": n, "runs": len(at), "stationary": len(done), "cpu_median": med,
                    "cpu_worst": max(done) if done else None,
                    "unfinished": [f"{r['family']}: {r['status']} after {r['cpu']:.0f} s CPU "
                                   f"({r.get('steps')} MM steps)" for r in at
                                   if r["status"] != "stationary_point"],
                    "exponent": slope, "families": sorted({r["family"] for r in at}),
                    "load": [round(r.get("load") or math.nan, 1) for r in at]})
    return out


def table(summary: list[dict]) -> str:
    """The markdown table."""
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3g}"

    lines = ["| N | runs | stationary | CPU s median | CPU s worst | exponent | not finished |",
             "|---|---|---|---|---|---|---|"]
    for s in summary:
        lines.append(f"| {s['N']} | {s['runs']} | {s['stationary']} | {f(s['cpu_median'])} | "
                     f"{f(s['cpu_worst'])} | {f(s['exponent'])} | "
                     f"{'; '.join(s['unfinished']) or '-'} |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    """CPU s vs N, log-log, one marker style per family (hollow: not finished), the goals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    fams = sorted({r["family"].split(":")[0] for r in rows})
    marks = dict(zip(fams, "osD^v<>", strict=False))
    for fam in fams:
        rs = [r for r in rows if r["family"].split(":")[0] == fam]
        for done in (True, False):
            pts = [(r["N"], r["cpu"]) for r in rs if (r["status"] == "stationary_point") == done]
            if pts:
                ax.scatter(*zip(*pts, strict=True), marker=marks[fam],
                           facecolors=None if done else "none", edgecolors="C0" if done else "C3",
                           label=f"{fam}" + ("" if done else " (not finished)"))
    ax.scatter(*zip(*GOALS, strict=True), marker="_", s=400, color="k", label="goal")
    ax.set(xscale="log", yscale="log", xlabel="N (points)", ylabel="CPU seconds",
           title="MinimumVolumeEmbedding, default settings")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="results JSON files (under benchmarks/ or absolute)")
    ap.add_argument("--plot", type=Path, help="write the plot here (PNG)")
    ap.add_argument("--out", default="mve_scaling", help="results/<out>.json")
    args = ap.parse_args()
    paths = [Path(f) if Path(f).exists() else RESULTS / Path(f).name for f in args.files]
    rows = load_rows(paths)
    summary = summarize(rows)
    print(table(summary))
    (RESULTS / f"{args.out}.json").write_text(json.dumps(
        {"benchmark": "mve_scaling", "sources": [p.name for p in paths], "summary": summary,
         "rows": rows}, indent=1, default=float))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
