"""User-written non-convex spectral models on the iterated-SDP route (issue 21), default options.

Usage: python benchmarks/iterated_sdp.py [--sizes 15 30 60] [--families swiss scurve digits
       spokes spiral] [--models issue_alpha atom_sum ...] [--timeout SECONDS] [--mve 400 1000]
       [--out NAME] [--merge NAME]  (re-run some cases and merge them into an earlier table)

Each model is written the way papers and course notes write it, on a kNN graph (k = 4) of N
points of a family (digits subsets, swiss roll, S-curve, hubs and spokes, a 2-turn spiral):

* ``issue_alpha``  ``min linear_spectral(K, (-2, -1, 1, ..., 1))``, ``K @ ones == 0``;
* ``atom_sum``     ``min mve_cost(K, 2)``, ``cp.sum(K) == 0``;
* ``maximize``     ``max 2 lambda_sum_largest(K, 2) - trace(K)``, ``K @ ones == 0``;
* ``normnuc``      ``min normNuc(K) - 2 lambda_sum_largest(K, 2)`` (the nuclear norm as the trace);
* ``nonshrink``    ``min mve_cost(K, 2)`` with non-shrink rows ``>=`` on a third of the non-edges;
* ``eigengap``     ``max eigengap(K, 2)``;
* ``concave``      ``min linear_spectral(K, (-3, -1, 0, ..., 0))`` (nondecreasing alpha: concave);
* ``nonexpand``    ``min mve_cost(K, 2)`` with the kNN rows as ``<=`` (distances may shrink) and
                   ``trace(K) <= `` the data's (round 10).

All with ``K >> 0`` and the squared kNN distances as equality rows; ``specopt.solve(prob)`` with
default options. Each case runs in its own process with a time cap; the table gives, per model
and N, the statuses, the median and worst time over the families, and the route's own counters
(MM steps, tie-check solves and their share of the time). ``--mve`` also times the
``MinimumVolumeEmbedding`` learner (digits subsets) at the given sizes. The load average is
recorded with every row. Writes benchmarks/results/iterated_sdp.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import markdown_table, run_json_subprocess, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent
MODELS = ("issue_alpha", "atom_sum", "maximize", "normnuc", "nonshrink", "eigengap", "concave",
          "nonexpand")
FAMILIES = ("swiss", "scurve", "digits", "spokes", "spiral")


def points(family: str, n: int, seed: int = 0) -> np.ndarray:
    """N points of a family."""
    if family == "swiss":
        from sklearn.datasets import make_swiss_roll

        return make_swiss_roll(n, noise=0.05, random_state=seed)[0]
    if family == "scurve":
        from sklearn.datasets import make_s_curve

        return make_s_curve(n, noise=0.05, random_state=seed)[0]
    if family == "digits":
        from sklearn.datasets import load_digits

        X = load_digits().data
        return X[np.random.default_rng(seed).choice(len(X), n, replace=False)] / 16.0
    if family == "spokes":
        from specopt.learn.embedding import make_hubs_and_spokes

        X, _ = make_hubs_and_spokes(n_spokes=4, points_per_spoke=(n - 1) // 4, noise=0.2,
                                    random_state=seed)
        return X
    if family == "spiral":
        from specopt.learn.embedding import make_spiral

        return make_spiral(n, turns=2.0)
    raise ValueError(family)


def knn_graph(X: np.ndarray, k: int = 4) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Edges of the symmetrized kNN graph (plus a chain through the points in order, so that it
    is connected) and the squared distances."""
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    edges = {(i, i + 1) for i in range(len(X) - 1)}
    for i in range(len(X)):
        for j in np.argsort(D[i])[1:k + 1]:
            edges.add((min(i, int(j)), max(i, int(j))))
    return sorted(edges), D


def model(kind: str, X: np.ndarray, k: int = 4, d: int = 2):
    import cvxpy as cp

    from specopt import eigengap, linear_spectral, mve_cost

    n = len(X)
    edges, D = knn_graph(X, k)
    K = cp.Variable((n, n), symmetric=True)
    rows = [K[i, i] + K[j, j] - 2 * K[i, j] == D[i, j] for i, j in edges]
    rowc = [K >> 0, K @ np.ones(n) == 0, *rows]
    sumc = [K >> 0, cp.sum(K) == 0, *rows]
    if kind == "issue_alpha":
        return cp.Problem(cp.Minimize(linear_spectral(K, np.r_[-2.0, -1.0, np.ones(n - 2)])), rowc)
    if kind == "atom_sum":
        return cp.Problem(cp.Minimize(mve_cost(K, d)), sumc)
    if kind == "maximize":
        return cp.Problem(cp.Maximize(2 * cp.lambda_sum_largest(K, d) - cp.trace(K)), rowc)
    if kind == "normnuc":
        return cp.Problem(cp.Minimize(cp.normNuc(K) - 2 * cp.lambda_sum_largest(K, d)), sumc)
    if kind == "nonshrink":
        es = set(edges)
        extra = [K[i, i] + K[j, j] - 2 * K[i, j] >= D[i, j] for i in range(n)
                 for j in range(i + 1, n) if (i, j) not in es and (i + j) % 3 == 0]
        return cp.Problem(cp.Minimize(mve_cost(K, d)), rowc + extra)
    if kind == "eigengap":
        return cp.Problem(cp.Maximize(eigengap(K, d)), sumc)
    if kind == "nonexpand":
        le = [K[i, i] + K[j, j] - 2 * K[i, j] <= D[i, j] for i, j in edges]
        return cp.Problem(cp.Minimize(mve_cost(K, d)), [K >> 0, cp.sum(K) == 0,
                                                       cp.trace(K) <= float(np.sum(D)) / (2 * n),
                                                       *le])
    if kind == "concave":
        return cp.Problem(cp.Minimize(linear_spectral(K, np.r_[-3.0, -1.0, np.zeros(n - 2)])),
                          rowc)
    raise ValueError(kind)


def run_one(kind: str, family: str, n: int, inner: str | None = None,
            tol: float | None = None, extrapolation: float | None = None) -> dict:
    """One case with default options (``inner``, ``tol``: the route's ``inner=`` and ``tol=``,
    e.g. ``"conic"`` and 1e-5 for the all-Clarabel reference run at the hybrid steps'
    stationarity tolerance, 1e-4; ``extrapolation``: the route's option, e.g. 0 for plain MM)."""
    import warnings

    import specopt

    warnings.simplefilter("ignore")
    prob = model(kind, points(family, n))
    t0, c0 = time.perf_counter(), time.process_time()
    opts = {k: v for k, v in (("inner", inner), ("tol", tol), ("extrapolation", extrapolation))
            if v is not None}
    value = specopt.solve(prob, **opts)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    cert = specopt.certificate(prob)
    ex = cert.extra
    return {"model": kind, "family": family, "N": n, "status": cert.status, "value": value,
            "time": elapsed, "cpu": cpu, "backend": cert.backend,
            "stop_reason": ex.get("stop_reason"), "hybrid_phases": ex.get("hybrid_phases"),
            "bounded_steps": ex.get("hybrid_bounded_steps"),
            "fallbacks": [f.get("reason") for f in ex.get("backend_fallbacks") or []],
            "solves": ex.get("subproblem_solves"), "tie_solves": ex.get("tie_check_solves"),
            "tie_time": ex.get("tie_check_time"), "stationarity": ex.get("stationarity"),
            "steps": ex.get("total_iterations"), "extrapolated": ex.get("extrapolated_steps"),
            "extrapolation_rejected": ex.get("extrapolation_rejected"),
            "gate": cert.gate_reasons, "load": os.getloadavg()[0]}


#: ``--mve-variants``: the learner's engine options per variant. ``exact``: every MM step to the
#: inner tolerance, each interior point from its cold start (the scheme before the inexact,
#: warm-started steps); ``default``: the learner's defaults; ``bm``: every MM step on the
#: factored (Burer-Monteiro) method, warm-started from the previous step's ``(Y, y, sigma)``
#: (the same inexact schedule), capped at 600 s of wall clock (then ``optimal_inaccurate``).
#: ``sde``: the learner's ``init="sde"`` (the SDE kernel as the start), engine defaults.
#: ``noaccept``: the interior point of every step runs on to its own tolerance instead of
#: stopping at the first certified iterate; ``ip``: every step on the interior point whatever
#: the size (above ``IP_MAX_N`` / ``IP_MAX_M``); ``capped``: the defaults with an 18-minute
#: ``time_limit`` (the fit stops itself and reports, for the N = 5000 run); ``cap600`` /
#: ``ip600``: the defaults / every step on the interior point, with a 600 s ``time_limit``
#: (``cap300``: the defaults, 300 s).
MVE_VARIANTS = {"default": {}, "exact": {"inexact": False, "warm_ip": False},
                "bm": {"method": "bm", "time_limit": 600.0}, "sde": {"init": "sde"},
                "noaccept": {"ip_accept": False}, "ip": {"method": "ip"},
                "capped": {"time_limit": 1080.0}, "cap600": {"time_limit": 600.0},
                "ip600": {"method": "ip", "time_limit": 600.0}, "cap300": {"time_limit": 300.0},
                "cap900": {"time_limit": 900.0},
                "plain": {"extrapolation": 0.0}}


#: ``--mve-families``: the learner's neighbours per family (digits: the embedding benchmark's
#: subsets and k = 5, one more while the kNN graph is disconnected)
MVE_NEIGHBORS = {"digits": 5, "spokes": 6, "swiss": 6, "scurve": 6}


def mve_data(family: str, n: int, seed: int) -> tuple[np.ndarray, dict]:
    """The points and learner parameters of one ``--mve`` case."""
    if family == "digits":
        from benchmarks.embedding import load_case

        return load_case("digits", n, seed)
    return points(family, n, seed), {"n_components": 2, "n_neighbors": MVE_NEIGHBORS[family]}


def run_mve(n: int, seed: int, variant: str = "default", family: str = "digits") -> dict:
    """One ``MinimumVolumeEmbedding`` fit on N points of a family (a warm-up fit at N = 60
    first, so that compilation is timed apart); wall and CPU time, the interior point's steps
    per MM step and the inexact schedule's tolerances."""
    import warnings

    from benchmarks.embedding import load_case
    from specopt.learn import MinimumVolumeEmbedding

    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    MinimumVolumeEmbedding(**load_case("digits", 60, 0)[1]).fit(load_case("digits", 60, 0)[0])
    compile_s = time.perf_counter() - t0
    X, kw = mve_data(family, n, seed)
    opts = dict(MVE_VARIANTS[variant])
    kw.update({k: opts.pop(k) for k in ("init",) if k in opts})  # learner parameters
    for _ in range(4):  # a disconnected kNN graph (digits, N = 1000, k = 5): one more neighbour
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            est = MinimumVolumeEmbedding(**kw, solver_options=opts).fit(X)
            break
        except ValueError as exc:
            if "connected components" not in str(exc):
                raise
            kw["n_neighbors"] += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    cert = est.certificate_
    name = "MinimumVolumeEmbedding" + ("" if variant == "default" else f"[{variant}]")
    return {"model": name, "family": f"{family}:{seed}", "N": n, "points": len(X),
            "status": cert.status, "time": wall, "cpu": cpu, "compile": compile_s,
            "steps": est.n_iter_, "stop_reason": cert.extra.get("stop_reason"),
            "energy": est.energy_, "objective": est.objective_,
            "stationarity": cert.extra.get("stationarity"), "n_neighbors": kw["n_neighbors"],
            "ip_steps": [s[0] for s in cert.extra.get("inner_summary", [])],
            "step_s": [s[4] for s in cert.extra.get("inner_summary", [])],
            "methods": cert.extra.get("inner_methods"),
            "step_tols": cert.extra.get("step_tols"), "load": os.getloadavg()[0]}


def mve_summary(rows: list[dict]) -> list[dict]:
    """Per variant and N: statuses, median / worst wall and CPU seconds, interior-point steps."""
    out = []
    mve = [r for r in rows if str(r["model"]).startswith("MinimumVolumeEmbedding")]
    for kind, n in sorted({(r["model"], r["N"]) for r in mve}):
        rs = [r for r in mve if r["model"] == kind and r["N"] == n]
        ok = [r for r in rs if "error" not in r]
        wall, cpu = [r["time"] for r in ok], [r["cpu"] for r in ok if "cpu" in r]
        out.append({"model": kind, "N": n, "instances": len(rs),
                    "stationary": sum(r.get("status") == "stationary_point" for r in rs),
                    "wall median / worst s": f"{statistics.median(wall):.1f} / "
                    f"{max(wall):.1f}" if len(ok) == len(rs) and ok else "cap",
                    "CPU median / worst s": f"{statistics.median(cpu):.1f} / {max(cpu):.1f}"
                    if cpu and len(cpu) == len(rs) else "-",
                    "IP steps (total)": "/".join(str(sum(r.get("ip_steps") or [])) for r in ok),
                    "MM steps": "/".join(str(r.get("steps")) for r in ok),
                    "load": round(statistics.median(r["load"] for r in rs), 1)})
    return out


def summary(rows: list[dict]) -> list[dict]:
    out = []
    keys = sorted({(r["model"], r["N"]) for r in rows}, key=lambda t: (t[0], t[1]))
    for kind, n in keys:
        rs = [r for r in rows if r["model"] == kind and r["N"] == n]
        times = [r["time"] for r in rs if "error" not in r]
        cpus = [r["cpu"] for r in rs if "error" not in r and "cpu" in r]
        stat = sum(r.get("status") == "stationary_point" for r in rs)
        tie = [r["tie_time"] / r["time"] for r in rs if r.get("tie_time") is not None
               and r.get("time")]
        out.append({"model": kind, "N": n, "instances": len(rs), "stationary": stat,
                    "median s": statistics.median(times) if times else None,
                    "worst s": max(times) if len(times) == len(rs) and times else "cap",
                    "CPU median s": statistics.median(cpus) if cpus else None,
                    "CPU worst s": max(cpus) if len(cpus) == len(rs) and cpus else "cap",
                    "tie share (worst)": max(tie) if tie else None,
                    "load": statistics.median(r["load"] for r in rs if "load" in r)
                    if any("load" in r for r in rs) else None})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="*", default=[15, 30])
    ap.add_argument("--families", nargs="+", default=list(FAMILIES))
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--mve", type=int, nargs="*", default=[])
    ap.add_argument("--mve-seeds", type=int, default=2)
    ap.add_argument("--mve-variants", nargs="+", default=["default"], choices=list(MVE_VARIANTS),
                    help="engine options per variant, run interleaved (same load)")
    ap.add_argument("--out", default="iterated_sdp", help="results/<out>.json")
    ap.add_argument("--merge", help="results/<name>.json whose rows (other model/N/family "
                    "triples) join this run's table")
    ap.add_argument("--inner", help="the route's inner= for every case (conic: the "
                    "all-Clarabel reference)")
    ap.add_argument("--tol", type=float, help="the route's tol= for every case (the "
                    "stationarity tolerance is 10 tol; Clarabel's default tol 1e-6 gives 1e-5, "
                    "the hybrid steps' 1e-4: pass 1e-5 with --inner conic for the same tolerance)")
    ap.add_argument("--compare", help="results/<name>.json (a reference run): the worst "
                    "relative value difference on the cases stationary in both")
    ap.add_argument("--one", nargs="+", help="MODEL FAMILY N [INNER|-] [TOL|-] [EXTRAPOLATION]")
    ap.add_argument("--extrapolation", type=float, nargs="+",
                    help="the route's extrapolation= per case, each value run interleaved "
                         "(same load); rows named MODEL[x<theta>]")
    ap.add_argument("--one-mve", nargs="+", help="N SEED [VARIANT] [FAMILY]")
    ap.add_argument("--mve-families", nargs="+", default=["digits"],
                    choices=list(MVE_NEIGHBORS))
    a = ap.parse_args()
    if a.one:
        inner = a.one[3] if len(a.one) > 3 and a.one[3] != "-" else None
        tol = float(a.one[4]) if len(a.one) > 4 and a.one[4] != "-" else None
        theta = float(a.one[5]) if len(a.one) > 5 else None
        print(json.dumps(run_one(a.one[0], a.one[1], int(a.one[2]), inner, tol, theta),
                         default=str))
        return
    if a.compare and not (a.sizes or a.mve):
        print(json.dumps(compare(load_rows(a.out), load_rows(a.compare)), indent=1))
        return
    if a.one_mve:
        print(json.dumps(run_mve(int(a.one_mve[0]), int(a.one_mve[1]), *a.one_mve[2:]),
                         default=str))
        return
    rows = []
    for n in a.sizes:
        for kind in a.models:
            for fam in a.families:
                for theta in a.extrapolation or [None]:
                    r = run_json_subprocess(
                        [__file__, "--one", kind, fam, str(n), a.inner or "-",
                         str(a.tol) if a.tol else "-"]
                        + ([] if theta is None else [str(theta)]), a.timeout, ROOT.parent)
                    name = kind if theta is None else f"{kind}[x{theta:g}]"
                    r.update({"model": name, "family": fam, "N": n})
                    r.setdefault("time", a.timeout)
                    r.setdefault("load", os.getloadavg()[0])
                    rows.append(r)
                    print(json.dumps({k: r.get(k) for k in ("model", "family", "N", "status",
                                                            "time", "error")}), flush=True)
    for n in a.mve:
        for fam in a.mve_families:
            for seed in range(a.mve_seeds):
                for variant in a.mve_variants:
                    r = run_json_subprocess([__file__, "--one-mve", str(n), str(seed), variant,
                                             fam], a.timeout, ROOT.parent)
                    name = "MinimumVolumeEmbedding" + (
                        "" if variant == "default" else f"[{variant}]")
                    r.update({"model": name, "N": n, "family": f"{fam}:{seed}"})
                    r.setdefault("time", a.timeout)
                    r.setdefault("load", os.getloadavg()[0])
                    rows.append(r)
                    print(json.dumps({k: r.get(k) for k in ("model", "family", "N", "status",
                                                            "time", "cpu", "error")}),
                          flush=True)
    if a.merge:
        done = {(r["model"], r["family"], r["N"]) for r in rows}
        old = json.loads((ROOT / "results" / f"{a.merge}.json").read_text())["rows"]
        rows = [r for r in old if (r["model"], r["family"], r["N"]) not in done] + rows
    table = summary([r for r in rows if not str(r["model"]).startswith("Minimum")])
    if table:
        print(markdown_table(table, ["model", "N", "instances", "stationary", "median s",
                                     "worst s", "CPU median s", "CPU worst s",
                                     "tie share (worst)", "load"]))
    if a.mve:
        print(markdown_table(mve_summary(rows), ["model", "N", "instances", "stationary",
                                                 "wall median / worst s", "CPU median / worst s",
                                                 "IP steps (total)", "MM steps", "load"]))
    write_json(a.out, rows, {"sizes": a.sizes, "families": a.families, "timeout": a.timeout,
                             "inner": a.inner, "tol": a.tol})
    if a.compare:
        print(json.dumps(compare(rows, load_rows(a.compare)), indent=1))


def load_rows(name: str) -> list[dict]:
    return json.loads((ROOT / "results" / f"{name}.json").read_text())["rows"]


def compare(rows: list[dict], ref: list[dict]) -> dict:
    """Per N, the cases stationary in both runs and the worst relative value difference
    ``|v - v_ref| / (1 + |v_ref|)`` (with the case), against a reference run (all-Clarabel)."""
    stat = "stationary_point"
    refd = {(r["model"], r["family"], r["N"]): r for r in ref if r.get("status") == stat}
    out: dict = {}
    for r in rows:
        key = (r["model"], r["family"], r["N"])
        if r.get("status") != stat or key not in refd:
            continue
        v, w = float(r["value"]), float(refd[key]["value"])
        diff = abs(v - w) / (1.0 + abs(w))
        o = out.setdefault(str(r["N"]), {"both_stationary": 0, "worst": 0.0, "case": None,
                                          "over_1e-4": []})
        o["both_stationary"] += 1
        if diff > 1e-4:
            o["over_1e-4"].append([key[0], key[1], f"{diff:.2e}"])
        if diff >= o["worst"]:
            o["worst"], o["case"] = diff, f"{key[0]} {key[1]}"
    return out


if __name__ == "__main__":
    main()
