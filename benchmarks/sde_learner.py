"""``SemidefiniteEmbedding`` on its defaults against the same learner on Clarabel.

Issue 21 asks that the learner's default path is never slower than Clarabel where Clarabel runs.
For each size and family member (digits subsets, swiss rolls, S-curves, hubs and spokes, a noisy
planar spiral) both
fits run in their own fresh process (``--one``), one after the other, with a wall-clock cap:

  default   ``SemidefiniteEmbedding(n_neighbors=k)`` (Clarabel below ``LOW_RANK_MIN_N`` points,
            the low-rank engine from there)
  CLARABEL  the same with ``solver="CLARABEL"`` (the conic route)

Reported per fit: wall and CPU seconds (the fit's process and its children), status, the SDE
objective ``tr K`` in the data's units, energy; per case the ratio default / Clarabel (wall and
CPU) and the relative difference of ``tr K``; per answer its largest edge-row residual and how
far it is off the face of the rigid cliques (``<W, K> / tr K``; every exactly feasible kernel has
0, so a larger ``tr K`` bought with a positive one is the conic tolerance, not a better optimum).
The first (numba) compile is paid by every fresh
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

FAMILY = ("digits:0", "digits:1", "swiss:0", "swiss:1", "swiss:2", "scurve:0", "scurve:1",
          "scurve:2", "spokes:0", "spiral:0")


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
    if name == "spiral":  # a 2-turn planar spiral, a little noise (seeded) so no two sets agree
        from specopt.learn.embedding import make_spiral

        return make_spiral(n, turns=2.0, noise=0.05, random_state=seed), 4
    raise ValueError(name)


def run_one(method: str, name: str, n: int, seed: int, warm: bool) -> dict:
    import numpy as np

    import specopt.learn.embedding as emb
    from specopt.learn.embedding import SemidefiniteEmbedding

    if method == "noface":  # the default as before the rigid face: Clarabel's leg on the set
        emb.SemidefiniteEmbedding._rigid_face = lambda self, A, C: None
    solver = None if method in ("default", "noface") else method
    if warm:  # compile what the fit will use, untimed
        Xw, kw_ = load(name, 60, seed)
        SemidefiniteEmbedding(n_neighbors=kw_, solver=solver).fit(Xw)
    X, k = load(name, n, seed)
    kw = {"n_neighbors": k}
    if solver is not None:
        kw["solver"] = solver
    c0, t0 = cpu_seconds(), time.perf_counter()
    import cvxpy as cp

    try:
        est = SemidefiniteEmbedding(**kw).fit(X)
    except cp.error.SolverError as err:  # a failed fit is a result: its time counts
        return {"N": int(X.shape[0]), "time": time.perf_counter() - t0,
                "cpu": cpu_seconds() - c0, "status": f"failed: {err}"[:120]}
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    cert = getattr(est, "certificate_", None)
    return {"N": int(X.shape[0]), "time": wall, "cpu": cpu,
            "status": None if cert is None else cert.status,
            "route": None if cert is None else cert.route,
            "legs": None if cert is None else cert.extra.get("legs"),
            "trace": float(np.trace(est.kernel_)), "energy": float(est.energy_),
            **kernel_quality(est)}


def kernel_quality(est) -> dict:
    """Of the fitted kernel, on the learner's own graph: the largest relative edge-row residual
    ``|K_ii + K_jj - 2 K_ij - d2_ij| / (1 + d2_ij)`` and ``<W, K> / tr K`` for the rigid cliques'
    exposing matrix ``W`` (0 on the face every exactly feasible ``K`` lies on; None without one:
    see specopt/learn/_sde_face.py)."""
    import numpy as np

    from specopt.learn._sde_face import face_violation
    from specopt.solvers.sdp.facial import clique_face

    K, A = est.kernel_, est.affinity_
    edges = np.argwhere(np.triu(est.connectivity_, 1))
    i, j = edges[:, 0], edges[:, 1]
    d2 = A[i, i] + A[j, j] - 2 * A[i, j]
    rows = float(np.max(np.abs(K[i, i] + K[j, j] - 2 * K[i, j] - d2) / (1 + d2)))
    face = clique_face(K.shape[0], edges, d2, centered=True)
    return {"rows": rows, "face_dim": None if face is None else face.dim,
            "face_violation": None if face is None else face_violation(face, K)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", type=int, default=[40, 60, 100])
    ap.add_argument("--family", nargs="*", default=list(FAMILY))
    ap.add_argument("--cap", type=float, default=120.0)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--out", default="sde_learner")
    ap.add_argument("--one", nargs=4, metavar=("METHOD", "NAME", "N", "SEED"))
    ap.add_argument("--also", nargs="*", default=[], choices=["noface"],
                    help="more fits per case, in the same run: noface = the default with the "
                         "raced Clarabel leg on the set as written (no rigid face)")
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
            for m in ("default", "CLARABEL", *args.also):
                extra = ["--warm"] if args.warm else []
                r = run_json_subprocess([__file__, "--one", m, name, str(n), seed, *extra],
                                        args.cap, ROOT.parent)
                row[m] = r
            d, c = row["default"], row["CLARABEL"]
            if "error" not in d and "error" not in c:
                row["ratio_wall"] = d["time"] / c["time"]
                row["ratio_cpu"] = d["cpu"] / c["cpu"]
                if "trace" in d and "trace" in c:
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
                      "tr K rel diff": r.get("trace_rel_diff"),
                      "rows default / Clarabel": _pair(d, c, "rows"),
                      "<W,K>/tr K default / Clarabel": _pair(d, c, "face_violation"),
                      **({"no-face s, status, ratio": _noface(r["noface"], c)}
                         if "noface" in r else {}),
                      "load": r["load"]})
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
            nf = [r["noface"]["time"] / r["CLARABEL"]["time"] for r in rows
                  if r["N"] == n and "time" in r.get("noface", {}) and "error" not in r["noface"]
                  and "time" in r["CLARABEL"] and "error" not in r["CLARABEL"]]
            if nf:
                summary[-1].update({"no-face wall ratio median": statistics.median(nf),
                                    "no-face wall ratio worst": max(nf)})
    if summary:
        print()
        print(markdown_table(summary, list(summary[0])))
    print(write_json(args.out, rows, {"sizes": args.sizes, "family": args.family,
                                      "cap": args.cap, "warm": args.warm, "summary": summary}))


def _noface(f: dict, c: dict) -> str:
    if "error" in f:
        return f["error"]
    ratio = f"{f['time'] / c['time']:.3g}" if "time" in c and "error" not in c else "-"
    return f"{f['time']:.2f}, {f.get('status')}, {ratio}"


def _pair(d: dict, c: dict, key: str) -> str:
    def f(v):
        return "-" if v is None else f"{v:.1e}"
    return f"{f(d.get(key))} / {f(c.get(key))}"


def _fmt(r: dict) -> str:
    if "error" in r:
        return r["error"]
    return f"{r['time']:.2f} ({r['cpu']:.2f})"


if __name__ == "__main__":
    main()
