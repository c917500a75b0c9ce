"""``SemidefiniteEmbedding`` on its defaults against the same learner on Clarabel.

Issue 21 asks that the learner's default path is never slower than Clarabel where Clarabel runs.
For each size and family member (digits subsets, swiss rolls, S-curves, hubs and spokes) both
fits run in their own fresh process (``--one``), one after the other, with a wall-clock cap:

  default   ``SemidefiniteEmbedding(n_neighbors=k)`` (Clarabel below ``LOW_RANK_MIN_N`` points,
            the low-rank engine from there)
  CLARABEL  the same with ``solver="CLARABEL"`` (the conic route)

Reported per fit: wall and CPU seconds (the fit's process and its children), status, the SDE
objective ``tr K`` in the data's units, energy; per case the ratio default / Clarabel (wall and
CPU) and the relative difference of ``tr K``. The first (numba) compile is paid by every fresh
process; ``--warm`` fits once untimed on a small instance first, to report it apart.

    python benchmarks/sde_learner.py --sizes 40 60 100 --cap 120
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))

from benchmarks._common import (  # noqa: E402
    cpu_seconds,
    markdown_table,
    run_json_subprocess,
    write_json,
)

FAMILY = ("digits:0", "digits:1", "swiss:0", "scurve:0", "spokes:0")


def load(name: str, n: int, seed: int):
    """(X, n_neighbors) of a family member with ``n`` points: the swiss roll and the S-curve of
    benchmarks/iterated_sdp.py (``points``), digits subsets unscaled and hubs and spokes with
    five spokes (the learner's own units; ``points`` scales digits by 1/16 and uses four)."""
    import numpy as np

    from benchmarks.iterated_sdp import points

    if name in ("swiss", "scurve"):
        return points(name, n, seed), 6
    if name == "digits":
        from sklearn.datasets import load_digits

        X, _ = load_digits(return_X_y=True)
        return X[np.random.default_rng(seed).choice(len(X), n, replace=False)], 5
    if name == "spokes":
        from specopt.learn.embedding import make_hubs_and_spokes

        X, _ = make_hubs_and_spokes(n_spokes=5, points_per_spoke=max(2, n // 5), noise=0.2,
                                    random_state=seed)
        return X, 3
    raise ValueError(name)


def run_one(method: str, name: str, n: int, seed: int, warm: bool) -> dict:
    import numpy as np

    from specopt.learn.embedding import SemidefiniteEmbedding

    if warm:  # compile what the fit will use, untimed
        Xw, kw_ = load(name, 60, seed)
        SemidefiniteEmbedding(n_neighbors=kw_, solver=None if method == "default"
                              else method).fit(Xw)
    X, k = load(name, n, seed)
    kw = {"n_neighbors": k}
    if method != "default":
        kw["solver"] = method
    c0, t0 = cpu_seconds(), time.perf_counter()
    est = SemidefiniteEmbedding(**kw).fit(X)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    cert = getattr(est, "certificate_", None)
    return {"N": int(X.shape[0]), "time": wall, "cpu": cpu,
            "status": None if cert is None else cert.status,
            "route": None if cert is None else cert.route,
            "trace": float(np.trace(est.kernel_)), "energy": float(est.energy_)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", type=int, default=[40, 60, 100])
    ap.add_argument("--family", nargs="*", default=list(FAMILY))
    ap.add_argument("--cap", type=float, default=120.0)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--out", default="sde_learner")
    ap.add_argument("--one", nargs=4, metavar=("METHOD", "NAME", "N", "SEED"))
    args = ap.parse_args(argv)
    if args.one:
        m, name, n, seed = args.one
        print(json.dumps(run_one(m, name, int(n), int(seed), args.warm)))
        return
    rows = []
    for n in args.sizes:
        for case in args.family:
            name, seed = case.split(":")
            row = {"N": n, "case": case, "load": os.getloadavg()[0]}
            for m in ("default", "CLARABEL"):
                extra = ["--warm"] if args.warm else []
                r = run_json_subprocess([__file__, "--one", m, name, str(n), seed, *extra],
                                        args.cap, ROOT.parent)
                row[m] = r
            d, c = row["default"], row["CLARABEL"]
            if "error" not in d and "error" not in c:
                row["ratio_wall"] = d["time"] / c["time"]
                row["ratio_cpu"] = d["cpu"] / c["cpu"]
                row["trace_rel_diff"] = (d["trace"] - c["trace"]) / max(1.0, abs(c["trace"]))
            elif "error" not in d:  # Clarabel over the cap: the default is faster
                row["ratio_wall"] = d["time"] / args.cap
            rows.append(row)
            print(f"N={n} {case}: default {d.get('time', d.get('error'))} "
                  f"{d.get('status')} | CLARABEL {c.get('time', c.get('error'))} "
                  f"{c.get('status')}", flush=True)
    table = []
    for r in rows:
        d, c = r["default"], r["CLARABEL"]
        table.append({"N": r["N"], "case": r["case"],
                      "default s (cpu)": _fmt(d),
                      "default status": d.get("status", d.get("error")),
                      "Clarabel s (cpu)": _fmt(c),
                      "Clarabel status": c.get("status", c.get("error")),
                      "ratio wall": r.get("ratio_wall"), "ratio cpu": r.get("ratio_cpu"),
                      "tr K rel diff": r.get("trace_rel_diff"), "load": r["load"]})
    print(markdown_table(table, list(table[0])))
    summary = []
    for n in args.sizes:
        rw = [r["ratio_wall"] for r in rows if r["N"] == n and "ratio_wall" in r]
        rc = [r["ratio_cpu"] for r in rows if r["N"] == n and "ratio_cpu" in r]
        if rw:
            summary.append({"N": n, "cases": len(rw), "wall ratio median": statistics.median(rw),
                            "wall ratio worst": max(rw),
                            "cpu ratio median": statistics.median(rc) if rc else None,
                            "cpu ratio worst": max(rc) if rc else None})
    if summary:
        print()
        print(markdown_table(summary, list(summary[0])))
    print(write_json(args.out, rows, {"sizes": args.sizes, "family": args.family,
                                      "cap": args.cap, "warm": args.warm, "summary": summary}))


def _fmt(r: dict) -> str:
    if "error" in r:
        return r["error"]
    return f"{r['time']:.2f} ({r['cpu']:.2f})"


if __name__ == "__main__":
    main()
