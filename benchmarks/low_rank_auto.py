"""``route="auto"``'s choice for the low_rank_sdp route: the engine vs Clarabel and SCS.

Usage: python benchmarks/low_rank_auto.py [--families sde maxcut theta completion] [--sizes 20 30
       50 80 120 200 300] [--seeds 0] [--cap 60] [--clarabel-max-n 120] [--out low_rank_auto]
       python benchmarks/low_rank_auto.py --race [--sdplib theta3 theta4 mcp124-1 ...]
       (the race's measurement: auto vs min(engine, SCS, Clarabel) per instance, see --race)

Families (CVXPY models as a user writes them, one symmetric ``K``): ``sde`` (maximize tr K,
``K >> 0``, ``sum(K) == 0``, squared k-NN distances of a swiss roll, k = 6, as rows
``K[I, I] + K[J, J] - 2 K[I, J] == d2``), ``maxcut`` (maximize ``tr(L K) / 4``, ``diag(K) == 1``,
G(n, 0.1)), ``theta`` (Lovasz theta of G(n, 0.2): maximize ``sum(K)``, ``tr K == 1``,
``K[I, J] == 0`` on the edges), ``completion`` (nuclear-norm completion of a rank-2 ``p x p``
matrix, 40% observed, as ``minimize tr K`` with ``K[i, p + j] == M_ij`` on the observed entries,
``n = 2p``). Backends, each (instance, backend) in its own subprocess with the wall-clock cap:
``engine`` (``specopt.solve(route="low_rank_sdp")``, tol 1e-5: status after the gate; the
first call in the process, numba's start-up included), ``engine_warm`` (the same after one small
solve of the family in the process: the start-up paid),
``conic`` (``specopt.solve(route="conic")``: what ``auto`` runs when it does not pick the engine,
Clarabel on the given or the LMI form of ``specopt.conic_lmi`` by ``_cvxpy_compat``'s rule, SCS
above Clarabel's size, the gate's retries), ``auto`` (the default route), ``clarabel`` (CVXPY,
defaults; skipped above ``--clarabel-max-n``: dense KKT of side n(n+1)/2),
``scs`` (CVXPY, ``eps = 1e-5``). Time is the solve call, CVXPY's compile included. Prints the
table (per family and n: median / worst over seeds) and writes JSON with the load average.

``--race``: backends ``auto engine conic clarabel scs``, each run's wall and CPU seconds (the
child's ``time.process_time()``: SCS / Clarabel / the engine all run in it) and the load; per
instance ``best`` = the fastest of engine / conic / clarabel / scs that ends ``optimal``,
``auto / best`` (after: this tree's ``auto``, the race) and ``before / best``: backend
``before`` is ``auto`` of another tree, ``$LOW_RANK_AUTO_BEFORE`` (e.g. ``git archive <rev>
specopt | tar -x -C /tmp/before``); without it, the previous rule's pick (conic below n = 24 or
with more than 9 rows per n up to n = 300, else the engine) and that backend's time. A run that
does not end ``optimal`` counts as its cap (a lower bound); ``best`` is the fastest optimal
run. ``--reuse FILE`` takes the runs of the backends not in ``--race-backends`` from an earlier
JSON (e.g. only ``auto`` re-run after a change). ``--sdplib NAME ...`` adds SDPLIB files read from
``../shared/data/sdplib`` (GPL data, never copied; ``--sdplib-cap`` per run).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks._common import markdown_table, run_json_subprocess, write_json  # noqa: E402

SDPLIB = ROOT.parent / "shared" / "data" / "sdplib"
if not SDPLIB.is_dir():
    SDPLIB = Path("/work/shared/data/sdplib")


def model(family: str, n: int, seed: int):
    """The CVXPY problem of one instance (family "sdplib": ``seed`` is ignored, ``n`` indexes
    ``SDPLIB_NAMES``)."""
    import cvxpy as cp
    import numpy as np

    if family.startswith("sdplib:"):
        import specopt

        return specopt.read_sdpa(SDPLIB / f"{family.split(':', 1)[1]}.dat-s")

    rng = np.random.default_rng(seed)
    if family == "sde":
        from scipy.sparse.csgraph import connected_components
        from sklearn.datasets import make_swiss_roll
        from sklearn.neighbors import kneighbors_graph

        X, _ = make_swiss_roll(n, random_state=seed)
        k = 6
        while True:
            G = kneighbors_graph(X, k)
            G = ((G + G.T) > 0).astype(float)
            if connected_components(G)[0] == 1:
                break
            k += 1
        I, J = np.nonzero(np.triu(G.toarray(), 1))
        d2 = np.sum((X[I] - X[J]) ** 2, axis=1)
        d2 /= d2.mean()
        K = cp.Variable((n, n), symmetric=True)
        return cp.Problem(cp.Maximize(cp.trace(K)),
                          [K >> 0, cp.sum(K) == 0, K[I, I] + K[J, J] - 2 * K[I, J] == d2])
    if family == "maxcut":
        W = np.triu(rng.random((n, n)) < 0.1, 1).astype(float)
        W = W + W.T
        L = np.diag(W.sum(1)) - W
        K = cp.Variable((n, n), symmetric=True)
        return cp.Problem(cp.Maximize(cp.trace(L @ K) / 4), [K >> 0, cp.diag(K) == 1])
    if family == "theta":
        I, J = np.nonzero(np.triu(rng.random((n, n)) < 0.2, 1))
        K = cp.Variable((n, n), symmetric=True)
        return cp.Problem(cp.Maximize(cp.sum(K)), [K >> 0, cp.trace(K) == 1, K[I, J] == 0])
    if family == "completion":
        p = n // 2
        M = rng.standard_normal((p, 2)) @ rng.standard_normal((2, p))
        I, J = np.nonzero(rng.random((p, p)) < 0.4)
        K = cp.Variable((2 * p, 2 * p), symmetric=True)
        return cp.Problem(cp.Minimize(cp.trace(K)), [K >> 0, K[I, p + J] == M[I, J]])
    raise ValueError(f"unknown family {family}")


def _route_of(prob) -> str | None:
    """The route specopt ran (its certificate), or None."""
    import specopt

    try:
        cert = specopt.certificate(prob)
        return f"{cert.route}:{cert.backend}"
    except Exception:
        return None


def child(family: str, n: int, seed: int, backend: str) -> None:
    if backend == "before":  # auto of the tree in $LOW_RANK_AUTO_BEFORE (a `git archive` export)
        sys.path.insert(0, os.environ["LOW_RANK_AUTO_BEFORE"])
    import cvxpy as cp

    import specopt

    prob = model(family, n, seed)
    if backend == "engine_warm":  # numba's start-up paid first (a process that solved before)
        specopt.solve(model(family, 20, seed + 1000), route="low_rank_sdp")
    t0, c0 = time.perf_counter(), time.process_time()
    if backend in ("engine", "engine_warm"):
        specopt.solve(prob, route="low_rank_sdp")
    elif backend == "conic":  # what auto would run instead: the conic route (Clarabel's LMI form)
        specopt.solve(prob, route="conic")
    elif backend in ("auto", "before"):
        specopt.solve(prob)
    elif backend == "clarabel":
        prob.solve(solver=cp.CLARABEL)
    elif backend == "scs":
        prob.solve(solver=cp.SCS, eps=1e-5)
    else:
        raise ValueError(backend)
    out = {"time": time.perf_counter() - t0, "cpu": time.process_time() - c0,
           "status": prob.status, "value": prob.value}
    if backend in ("auto", "before", "conic", "engine", "engine_warm"):
        out["route"] = _route_of(prob)
    if backend == "auto":
        try:
            out["legs"] = [(leg["leg"], round(leg["seconds"], 3), leg["status"])
                           for leg in specopt.certificate(prob).extra.get("legs", [])]
        except ValueError:
            pass
    print(json.dumps(out, default=float))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", nargs="*", default=["sde", "maxcut", "theta", "completion"])
    ap.add_argument("--sizes", nargs="*", type=int, default=[20, 30, 50, 80, 120, 200, 300])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0])
    ap.add_argument("--backends", nargs="*", default=["engine", "engine_warm", "clarabel", "scs"])
    ap.add_argument("--cap", type=float, default=60.0)
    ap.add_argument("--clarabel-max-n", type=int, default=120)
    ap.add_argument("--out", default="low_rank_auto")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--race", action="store_true", help="auto vs min(engine, SCS, Clarabel)")
    ap.add_argument("--sdplib", nargs="*", default=[])
    ap.add_argument("--sdplib-cap", type=float, default=200.0)
    ap.add_argument("--race-backends", nargs="*", default=list(RACE_BACKENDS))
    ap.add_argument("--reuse", default=None,
                    help="a previous --race JSON: its runs of the backends not in "
                         "--race-backends are reused (same instances; e.g. only auto re-run)")
    ap.add_argument("--before-cap", type=float, default=None,
                    help="cap of the previous tree's auto (default: --cap)")
    ap.add_argument("--conic-cap", type=float, default=None,
                    help="cap of the conic / scs / clarabel runs (default: --cap)")
    args = ap.parse_args()
    if args.child:
        f, n, s, b = args.child
        child(f, int(n), int(s), b)
        return
    if args.race:
        race(args)
        return
    rows = []
    load0 = os.getloadavg()
    for fam in args.families:
        for n in args.sizes:
            for seed in args.seeds:
                for b in args.backends:
                    row = {"family": fam, "n": n, "seed": seed, "backend": b}
                    if b == "clarabel" and n > args.clarabel_max_n:
                        row["status"] = "skipped"
                    else:
                        res = run_json_subprocess([str(Path(__file__).resolve()), "--child", fam,
                                                   str(n), str(seed), b], args.cap, ROOT)
                        if "error" in res:
                            row.update(status="timeout" if "timeout" in res["error"] else
                                       "error", time=res.get("time"), error=res["error"])
                        else:
                            row.update(res)
                    row["load"] = os.getloadavg()[0]
                    rows.append(row)
                    print(json.dumps(row, default=float), flush=True)
    table = []
    for fam in args.families:
        for n in args.sizes:
            line = {"family": fam, "n": n}
            picks = {r.get("route") for r in rows if r["family"] == fam and r["n"] == n
                     and r["backend"] == "auto"} - {None}
            if picks:
                line["auto picks"] = "/".join(sorted(picks))
            for b in args.backends:
                ts = [r["time"] for r in rows if r["family"] == fam and r["n"] == n
                      and r["backend"] == b and r.get("status") == "optimal"]
                st = {r.get("status") for r in rows if r["family"] == fam and r["n"] == n
                      and r["backend"] == b}
                line[b] = (f"{statistics.median(ts):.3g} / {max(ts):.3g}" if ts
                           else "/".join(sorted(str(s) for s in st)))
            table.append(line)
    write_json(args.out, rows, {"cap_s": args.cap, "load_start": load0,
                                "load_end": os.getloadavg()})
    cols = ["family", "n", *(["auto picks"] if "auto" in args.backends else []), *args.backends]
    print(markdown_table(table, cols))
    print(f"\ntimes (s, median / worst over seeds, status optimal only); load {load0[0]:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")


RACE_BACKENDS = ("auto", "before", "engine", "conic", "clarabel", "scs")


def _shape(family: str, n: int, seed: int) -> tuple[int, int]:
    """``(n, m)`` of an instance as the route reads it (centering counted as a row)."""
    from specopt.reductions.low_rank_sdp import recognize_low_rank_sdp

    d = recognize_low_rank_sdp(model(family, n, seed))
    return d.n, d.A.m + int(d.centered)


def before_pick(n: int, m: int) -> str:
    """The previous ``auto`` rule (PAYS_OFF_MIN_N = 24, 9 rows per n, any m above n = 300)."""
    if n < 24 or (n <= 300 and m > 9 * n):
        return "conic"
    return "engine"


def _counted(run: dict, cap: float) -> float:
    """A run's time; one that is not optimal counts as its cap (a lower bound), skipped inf."""
    if run.get("status") == "optimal":
        return run["time"]
    return math.inf if run.get("status") == "skipped" else cap


def race(args: argparse.Namespace) -> None:
    """Per instance: every backend in its own process; auto / best and before / best."""
    instances = [(f, n, s) for f in args.families for n in args.sizes for s in args.seeds]
    instances += [(f"sdplib:{name}", 0, 0) for name in args.sdplib]
    rows, summary = [], []
    load0 = os.getloadavg()
    reuse = {}
    if args.reuse:
        for r in json.loads(Path(args.reuse).read_text())["rows"]:
            reuse[(r["family"], r["seed"], r["backend"], r["n"])] = dict(r, reused=args.reuse)
    for fam, n, seed in instances:
        sdplib = fam.startswith("sdplib:")
        cap = args.sdplib_cap if sdplib else args.cap
        nn, m = _shape(fam, n, seed)
        runs = {}
        for b in RACE_BACKENDS:
            other = args.before_cap if b == "before" else args.conic_cap
            bcap = cap if b in ("auto", "engine") or other is None else min(cap, other)
            row = {"family": fam, "n": nn, "m": m, "seed": seed, "backend": b, "cap": bcap}
            if b not in args.race_backends and (fam, seed, b, nn) in reuse:
                row = reuse[(fam, seed, b, nn)]
            elif b not in args.race_backends or (b == "clarabel" and nn > args.clarabel_max_n) or (
                    b == "before" and not os.environ.get("LOW_RANK_AUTO_BEFORE")):
                row["status"] = "skipped"
            else:
                res = run_json_subprocess([str(Path(__file__).resolve()), "--child", fam,
                                           str(n), str(seed), b], bcap, ROOT)
                if "error" in res:
                    row.update(status="timeout" if "timeout" in res["error"] else "error",
                               time=res.get("time"), error=res["error"][-300:])
                else:
                    row.update(res)
            row["load"] = os.getloadavg()[0]
            rows.append(row)
            runs[b] = row
            print(json.dumps(row, default=float), flush=True)
        def t(b: str, runs: dict = runs) -> float:
            return _counted(runs[b], runs[b]["cap"])

        # the fastest optimal one; only when none is optimal, the smallest cap (a lower bound)
        best_b = min(("engine", "conic", "clarabel", "scs"),
                     key=lambda b: (runs[b].get("status") != "optimal", t(b)))
        best = t(best_b)
        pick = "before"
        if runs["before"]["status"] == "skipped":  # no export given: the previous rule's pick
            pick = before_pick(nn, m)
            if pick == "conic" and runs["conic"]["status"] == "skipped":
                pick = "scs"  # not run (SDPLIB): the conic route runs SCS from n = 24
        summary.append({"family": "sdplib" if sdplib else fam,
                        "instance": fam.split(":", 1)[1] if sdplib else f"{fam}{n}-{seed}",
                        "n": nn, "m": m,
                        "seed": seed, "best": best_b, "best_s": best,
                        "auto_s": t("auto"), "auto_cpu": runs["auto"].get("cpu"),
                        "auto_status": runs["auto"].get("status"),
                        "legs": runs["auto"].get("legs"), "auto_route": runs["auto"].get("route"),
                        "before": runs[pick].get("route") or pick,
                        "before_s": t(pick), "before_status": runs[pick].get("status"),
                        "after_ratio": t("auto") / best, "before_ratio": t(pick) / best,
                        "load": runs["auto"]["load"]})
        print(json.dumps(summary[-1], default=float), flush=True)
    fams = list(dict.fromkeys(r["family"] for r in summary))
    table = []
    for fam in fams:
        sel = [r for r in summary if r["family"] == fam]
        a = [r["after_ratio"] for r in sel]
        bf = [r["before_ratio"] for r in sel]
        table.append({"family": fam, "instances": len(sel),
                      "n": "/".join(str(x) for x in sorted({r["n"] for r in sel})),
                      "auto/best median": f"{statistics.median(a):.2f}",
                      "auto/best worst": f"{max(a):.2f}",
                      "before/best median": f"{statistics.median(bf):.2f}",
                      "before/best worst": f"{max(bf):.2f}",
                      "auto optimal": sum(r["auto_status"] == "optimal" for r in sel),
                      "before optimal": sum(r["before_status"] == "optimal" for r in sel)})
    load1 = os.getloadavg()
    write_json(args.out, rows, {"summary": summary, "table": table, "cap_s": args.cap,
                                "sdplib_cap_s": args.sdplib_cap, "load_start": load0,
                                "load_end": load1})
    print(markdown_table(table, list(table[0])))
    print(markdown_table([{k: (f"{v:.3g}" if isinstance(v, float) else v)
                           for k, v in r.items() if k != "legs"} for r in summary],
                         [k for k in summary[0] if k != "legs"]))
    print(f"\nload {load0[0]:.1f} -> {load1[0]:.1f}; times in s, wall; a run not optimal counts "
          "as its cap")


if __name__ == "__main__":
    main()
