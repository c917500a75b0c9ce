"""Matrix-generation route vs SCS and Clarabel (through CVXPY) on PSDBoost triplet instances.

Instance (seeded): |S| points in D dims from 4 Gaussian classes (random means, per-feature scales
in [0.5, 2]), one triplet per point (nearest same-class j, nearest other-class k),
p_r = (a_i - a_k)/sqrt(D), q_r = (a_i - a_j)/sqrt(D), C = 10/|S|::

    max rho - C sum xi   s.t.  <p p^T - q q^T, X> >= rho - xi,  xi >= 0,  X PSD,  tr X = 1.

Methods (each case in its own subprocess, wall time capped, address space capped at 16 GiB):
  route     specopt.solve(prob, route="matrix_generation", tol=1e-4) with row_quad_forms
            (certified: relative gap (bound - value)/max(1, |value|) <= 1e-4)
  auto      specopt.solve(prob) (route="auto": the route or the conic route by the threshold)
  SCS       prob.solve(solver="SCS", eps_abs=eps_rel=1e-5) on the stacked M vec(X) form
  CLARABEL  prob.solve(solver="CLARABEL") (default tolerances) on the same form
Times are wall seconds from building the CVXPY problem to the returned solution (compilation
included: it is what a user pays). Reported: median of ``--reps`` runs, the value and, for the
generic solvers, their relative distance to the route's certified bound.

Usage: python benchmarks/matrix_generation.py [--D 24 100] [--S 550 2000] [--methods route SCS]
       [--reps 3] [--cap 600] [--pairs 24:550 100:2000 500:10000:route]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "matrix_generation.json"
ALL_METHODS = ("route", "auto", "SCS", "CLARABEL")


def instance(D: int, S: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """(P, Q, C) of the benchmark instance (module docstring)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, S)
    A = (rng.normal(size=(4, D))[y] + rng.normal(size=(S, D))) * rng.uniform(0.5, 2.0, D)
    sq = np.einsum("ij,ij->i", A, A)
    d2 = sq[:, None] + sq[None, :] - 2.0 * A @ A.T
    np.fill_diagonal(d2, np.inf)
    same = y[:, None] == y[None, :]
    j = np.argmin(np.where(same, d2, np.inf), axis=1)
    k = np.argmin(np.where(~same, d2, np.inf), axis=1)
    s = np.sqrt(D)
    return (A - A[k]) / s, (A - A[j]) / s, 10.0 / S


#: what varies over a family (instance i of a size takes entry i modulo the length)
FAMILY_AXES = {
    "C": (0.01, 0.05, 0.2),
    "classes": (4, 3, 6, 5),
    "noise": (1.0, 0.5, 2.0),
    "scales": ("uniform", "loguniform"),
    "triplets": ("nn", "nn", "random"),
    "informative": (None, 3, 10),
}


def family_spec(i: int, S: int) -> dict:
    """Instance ``i`` of a family: C, class count, noise, feature scales, triplet sampling and
    the dimension of the class means (which drives the rank of the solution) all vary.

    ``nn``: one triplet per point (nearest same-class j, nearest other-class k, as in PSDBoost);
    ``random``: random same-class j and other-class k. Above |S| = 20000 triplets are random
    (an exact nearest-neighbour pass would dominate the benchmark)."""
    ax = FAMILY_AXES
    spec = {
        "seed": 1000 + i,
        "C": ax["C"][i % 3],
        "classes": ax["classes"][i % 4],
        "noise": ax["noise"][(i // 2) % 3],
        "scales": ax["scales"][(i // 3) % 2],
        "triplets": ax["triplets"][(i // 2) % 3] if S <= 20000 else "random",
        "informative": ax["informative"][(i // 4) % 3],
    }
    if spec["C"] * S < 1.5:  # C |S| >= 1 is needed for a bounded problem
        spec["C"] = 1.5 / S
    return spec


def family_instance(D: int, S: int, spec: dict) -> tuple[np.ndarray, np.ndarray, float]:
    """(P, Q, C) of one family member (see :func:`family_spec`)."""
    rng = np.random.default_rng(spec["seed"])
    kc = spec["classes"]
    y = rng.integers(0, kc, S)
    means = rng.normal(size=(kc, D))
    if spec["informative"]:  # class means in an r-dimensional subspace
        r = min(spec["informative"], D)
        B = np.linalg.qr(rng.normal(size=(D, r)))[0]
        means = means[:, :r] @ B.T * np.sqrt(D / r)
    if spec["scales"] == "uniform":
        sc = rng.uniform(0.5, 2.0, D)
    else:  # badly scaled features: two decades
        sc = np.exp(rng.uniform(np.log(0.1), np.log(10.0), D))
    A = (means[y] + spec["noise"] * rng.normal(size=(S, D))) * sc
    idx = np.arange(S)
    if spec["triplets"] == "nn":
        sq = np.einsum("ij,ij->i", A, A)
        j = np.empty(S, dtype=int)
        k = np.empty(S, dtype=int)
        for lo in range(0, S, 2000):  # blocks of rows: O(2000 S) memory
            hi = min(S, lo + 2000)
            d2 = sq[lo:hi, None] + sq[None, :] - 2.0 * A[lo:hi] @ A.T
            d2[np.arange(hi - lo), np.arange(lo, hi)] = np.inf
            same = y[lo:hi, None] == y[None, :]
            j[lo:hi] = np.argmin(np.where(same, d2, np.inf), axis=1)
            k[lo:hi] = np.argmin(np.where(~same, d2, np.inf), axis=1)
    else:
        j = np.empty(S, dtype=int)
        k = np.empty(S, dtype=int)
        for cl in range(kc):
            mine, other = np.flatnonzero(y == cl), np.flatnonzero(y != cl)
            j[mine] = rng.choice(mine, mine.size)
            k[mine] = rng.choice(other, mine.size)
    s = np.sqrt(D) * float(np.median(sc))
    return (A[idx] - A[k]) / s, (A[idx] - A[j]) / s, float(spec["C"])


def run_case(method: str, D: int, S: int, seed: int, tol: float) -> dict:
    """One solve in this process; returns a JSON-able record."""
    import cvxpy as cp

    import specopt

    P, Q, C = instance(D, S, seed)
    t0 = time.perf_counter()
    X = cp.Variable((D, D), PSD=True)
    rho, xi = cp.Variable(), cp.Variable(S)
    if method in ("route", "auto"):
        margins = specopt.row_quad_forms(P, X) - specopt.row_quad_forms(Q, X)
    else:
        M = np.einsum("ri,rj->rij", P, P) - np.einsum("ri,rj->rij", Q, Q)
        margins = M.reshape(S, -1, order="F") @ cp.vec(X, order="F")
        del M
    prob = cp.Problem(cp.Maximize(rho - C * cp.sum(xi)),
                      [cp.trace(X) == 1, margins >= rho - xi, xi >= 0])
    rec: dict = {"method": method, "D": D, "S": S, "seed": seed}
    if method == "route":
        specopt.solve(prob, route="matrix_generation", tol=tol)
    elif method == "auto":
        specopt.solve(prob, tol=tol) if specopt.explain(prob).auto_route == "matrix_generation" \
            else specopt.solve(prob)
    elif method == "SCS":
        prob.solve(solver="SCS", eps_abs=1e-5, eps_rel=1e-5)
    elif method == "CLARABEL":
        prob.solve(solver="CLARABEL")
    else:
        raise ValueError(method)
    rec["time"] = time.perf_counter() - t0
    rec["status"] = prob.status
    rec["value"] = None if prob.value is None else float(prob.value)
    if method in ("route", "auto"):
        cert = specopt.certificate(prob)
        rec.update(route=cert.route, bound=cert.bound, gap=cert.gap, iterations=cert.iterations,
                   rank=int(cert.extra.get("rank", -1)) if cert.extra else None)
    return rec


def run_subprocess(method: str, D: int, S: int, seed: int, tol: float, cap: float) -> dict:
    """:func:`run_case` in a fresh process (single-threaded BLAS, 16 GB address cap, ``cap`` s)."""
    return _in_subprocess(f"run_case({method!r}, {D}, {S}, {seed}, {tol!r})", cap,
                          {"method": method, "D": D, "S": S, "seed": seed})


def _build(method: str, P: np.ndarray, Q: np.ndarray, C: float):
    import cvxpy as cp

    import specopt

    S, D = P.shape
    X = cp.Variable((D, D), PSD=True)
    rho, xi = cp.Variable(), cp.Variable(S)
    if method == "route":
        margins = specopt.row_quad_forms(P, X) - specopt.row_quad_forms(Q, X)
    else:
        M = np.einsum("ri,rj->rij", P, P) - np.einsum("ri,rj->rij", Q, Q)
        margins = M.reshape(S, -1, order="F") @ cp.vec(X, order="F")
        del M
    return cp.Problem(cp.Maximize(rho - C * cp.sum(xi)),
                      [cp.trace(X) == 1, margins >= rho - xi, xi >= 0])


def run_family_case(method: str, D: int, S: int, i: int, tol: float,
                    route_time: float = np.inf) -> dict:
    """Family member ``i`` solved once in this (fresh) process; JSON-able record.

    For the route, a tiny instance (D=8, |S|=40) is solved first: its time in the fresh process
    minus its time on a repeat is the first-call (import/compile) cost, reported separately; the
    timed solve of the family member is then a warm one. Times include building the CVXPY
    problem (what a user pays). ``route_time`` caps the route's own time (``time_limit``): an
    uncertified run is recorded with its status and gap."""
    import specopt

    spec = family_spec(i, S)
    rec: dict = {"method": method, "D": D, "S": S, "i": i, "spec": spec,
                 "load_before": os.getloadavg()[0]}
    if method == "route":
        Pt, Qt, _ = family_instance(8, 40, family_spec(0, 40))
        t0 = time.perf_counter()
        specopt.solve(_build("route", Pt, Qt, 0.5), route="matrix_generation", tol=tol)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        specopt.solve(_build("route", Pt, Qt, 0.5), route="matrix_generation", tol=tol)
        rec["first_call_overhead"] = first - (time.perf_counter() - t0)
    P, Q, C = family_instance(D, S, spec)
    t0, c0 = time.perf_counter(), time.process_time()
    prob = _build(method, P, Q, C)
    if method == "route":
        cap = {"time_limit": route_time} if np.isfinite(route_time) else {}
        specopt.solve(prob, route="matrix_generation", tol=tol, **cap)
    elif method == "SCS":
        prob.solve(solver="SCS", eps_abs=1e-5, eps_rel=1e-5)
    else:
        raise ValueError(method)
    rec["time"] = time.perf_counter() - t0
    rec["cpu"] = time.process_time() - c0  # CPU seconds: far less sensitive to machine load
    rec["status"] = prob.status
    rec["value"] = None if prob.value is None else float(prob.value)
    rec["load_after"] = os.getloadavg()[0]
    if method == "route":
        cert = specopt.certificate(prob)
        rec.update(bound=cert.bound, gap=cert.gap, iterations=cert.iterations,
                   rank=int(cert.extra.get("rank", -1)) if cert.extra else None,
                   full_space_round=(cert.history or {}).get("full_space", [None])[0])
        h = cert.history or {}
        rec["solver_wall_to_gap"] = {  # the solver's own (wall) seconds to each gap
            f"{g:.0e}": next((t for t, x in zip(h.get("time", []), h.get("gap", []),
                                                strict=False) if x <= g), None)
            for g in (1e-2, 1e-3, 1e-4)}
    return rec


def _in_subprocess(call: str, cap: float, base: dict) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               NUMBA_NUM_THREADS="1", PYTHONPATH=str(HERE.parent))
    code = (
        f"import json, resource, sys; sys.path.insert(0, {str(HERE)!r});"
        "resource.setrlimit(resource.RLIMIT_AS, (16 << 30, 16 << 30));"
        "import matrix_generation as b;"
        f"print('RESULT' + json.dumps(b.{call}))"
    )
    t0 = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=cap, env=env)
    except subprocess.TimeoutExpired:
        return {**base, "status": "timeout", "time": None, "wall": time.perf_counter() - t0}
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            rec = json.loads(line[6:])
            rec["wall"] = time.perf_counter() - t0
            return rec
    err = (out.stderr.strip().splitlines() or ["no output"])[-1]
    return {**base, "status": f"failed: {err[:200]}", "time": None,
            "wall": time.perf_counter() - t0}


def run_family(D: int, S: int, n: int, scs: int, tol: float, cap: float, first: int = 0,
               route_time: float = np.inf, save=None, members=None) -> list[dict]:
    """Members ``first .. n-1`` (or the listed ``members``) of one size: the route on all, SCS
    on those below ``scs`` (same run, interleaved instance by instance so that both see the same
    machine load). ``save`` is called with the records after every case (a long run killed
    midway keeps its results)."""
    records = []
    for i in (range(first, n) if members is None else members):
        methods = ["route", "SCS"] if i < scs else ["route"]
        for m in methods:
            base = {"method": m, "D": D, "S": S, "i": i, "spec": family_spec(i, S)}
            call = f"run_family_case({m!r}, {D}, {S}, {i}, {tol!r}, {route_time!r})"
            rec = _in_subprocess(call.replace("inf", "float('inf')"), cap, base)
            print(f"# D={D} S={S} i={i} {m}: {rec.get('status')} time={rec.get('time')} "
                  f"value={rec.get('value')} gap={rec.get('gap')} it={rec.get('iterations')} "
                  f"rank={rec.get('rank')} load={os.getloadavg()[0]:.1f}", flush=True)
            records.append(rec)
            if save is not None:
                save(records)
    return records


def family_summary(records: list[dict]) -> list[dict]:
    """Per size: median and worst SCS/route time ratio over the instances where both ran."""
    rows = []
    for D, S in sorted({(r["D"], r["S"]) for r in records}):
        rs = [r for r in records if r["D"] == D and r["S"] == S]
        route = {r["i"]: r for r in rs if r["method"] == "route"}
        scs = {r["i"]: r for r in rs if r["method"] == "SCS"}
        rt = [r["time"] for r in route.values() if r.get("time") is not None]
        row = {"D": D, "S": S, "instances": len(route),
               "route_certified": sum(1 for r in route.values() if r.get("status") == "optimal"),
               "route_median": float(np.median(rt)) if rt else None,
               "route_worst": max(rt) if rt else None,
               "first_call_overhead": float(np.median(
                   [r["first_call_overhead"] for r in route.values()
                    if r.get("first_call_overhead") is not None] or [np.nan])),
               "load": float(np.median([r.get("load_before", np.nan) for r in rs]))}
        cpu = [sr["cpu"] / route[i]["cpu"] for i, sr in scs.items()
               if sr.get("cpu") and route.get(i, {}).get("cpu")
               and route[i].get("status") == "optimal"]
        # CPU seconds: what the ratio would be on a quiet machine (wall times under load are not)
        row["cpu_ratio_median"] = float(np.median(cpu)) if cpu else None
        row["cpu_ratio_worst"] = min(cpu) if cpu else None
        ratios, lower, upper = [], [], []
        for i, sr in scs.items():
            ro = route.get(i)
            if not ro or ro.get("time") is None:
                continue
            if ro.get("status") != "optimal":
                # the route stopped uncertified (time limit): its ratio is at most this
                if sr.get("time") is not None:
                    upper.append(sr["time"] / ro["time"])
                continue
            if sr.get("time") is not None:
                ratios.append(sr["time"] / ro["time"])
            elif sr.get("status") == "timeout":
                lower.append(sr["wall"] / ro["time"])  # SCS did not finish: a lower bound
        row["scs_instances"] = len(scs)
        row["scs_median"] = float(np.median([r["time"] for r in scs.values()
                                             if r.get("time") is not None] or [np.nan]))
        allr = ratios + lower + upper
        row["ratio_median"] = float(np.median(allr)) if allr else None
        row["ratio_worst"] = min(allr) if allr else None
        row["worst_is_upper_bound"] = bool(upper) and min(upper) == row["ratio_worst"]
        row["ratios"] = ratios
        row["ratios_lower_bounds"] = lower
        row["ratios_upper_bounds_route_uncertified"] = upper
        vals = []
        for i, sr in scs.items():
            ro = route.get(i)
            if ro and ro.get("bound") is not None and sr.get("value") is not None:
                vals.append(abs(ro["value"] - sr["value"]) / max(1.0, abs(ro["value"])))
        row["max_value_diff_vs_scs"] = max(vals) if vals else None
        rows.append(row)
    return rows


def family_table(records: list[dict]) -> str:
    lines = ["| D | \\|S\\| | i | C | classes | noise | scales | triplets | means dim | "
             "route [s] | rounds | rank | gap | SCS [s] | SCS / route | route / SCS CPU [s] | "
             "SCS/route CPU | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {}
    for r in records:
        by.setdefault((r["D"], r["S"], r["i"]), {})[r["method"]] = r
    for (D, S, i), d in sorted(by.items()):
        ro, sc = d.get("route", {}), d.get("SCS")
        sp = ro.get("spec") or family_spec(i, S)
        rt = ro.get("time")
        st = sc.get("time") if sc else None
        scs_txt = "-" if sc is None else (f"{st:.1f}" if st is not None else
                                          f"> {sc['wall']:.0f} ({sc['status']})")
        ratio = f"{st / rt:.1f}x" if st is not None and rt else "-"
        if ratio != "-" and ro.get("status") != "optimal":
            ratio = f"< {ratio} (route not certified)"
        gap = f"{ro['gap']:.1e}" if ro.get("gap") is not None else "-"
        rc, scc = ro.get("cpu"), (sc or {}).get("cpu")
        cpu_txt = f"{rc:.1f} / {scc:.1f}" if rc and scc else (f"{rc:.1f} / -" if rc else "-")
        cpu_ratio = f"{scc / rc:.1f}x" if rc and scc and ro.get("status") == "optimal" else "-"
        loads = [x.get(k) for x in (ro, sc or {}) for k in ("load_before", "load_after")
                 if x.get(k) is not None]
        load_txt = f"{min(loads):.0f}-{max(loads):.0f}" if loads else "-"
        lines.append(
            f"| {D} | {S} | {i} | {sp['C']:g} | {sp['classes']} | {sp['noise']:g} | "
            f"{sp['scales']} | {sp['triplets']} | {sp['informative'] or 'all'} | "
            f"{f'{rt:.1f}' if rt is not None else ro.get('status', '-')} | "
            f"{ro.get('iterations', '-')} | {ro.get('rank', '-')} | {gap} | {scs_txt} | {ratio} | "
            f"{cpu_txt} | {cpu_ratio} | {load_txt} |")
    lines += ["", "| D | \\|S\\| | instances (certified) | route median / worst [s] | "
              "SCS median [s] (instances) | SCS/route median | SCS/route worst | "
              "SCS/route CPU median, worst | first-call overhead [s] | load (1 min) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in family_summary(records):
        f = lambda v, fmt: "-" if v is None or v != v else format(v, fmt)  # noqa: E731
        lines.append(
            f"| {r['D']} | {r['S']} | {r['instances']} ({r['route_certified']}) | "
            f"{f(r['route_median'], '.1f')} / {f(r['route_worst'], '.1f')} | "
            f"{f(r['scs_median'], '.1f')} ({r['scs_instances']}) | "
            f"{f(r['ratio_median'], '.1f')}x | "
            f"{'< ' if r['worst_is_upper_bound'] else ''}{f(r['ratio_worst'], '.1f')}x"
            f"{' (route not certified)' if r['worst_is_upper_bound'] else ''} | "
            f"{f(r.get('cpu_ratio_median'), '.1f')}x, {f(r.get('cpu_ratio_worst'), '.1f')}x | "
            f"{f(r['first_call_overhead'], '.2f')} | {f(r['load'], '.1f')} |")
    return "\n".join(lines)


def summarize(records: list[dict]) -> list[dict]:
    rows = []
    keys = sorted({(r["D"], r["S"]) for r in records})
    for D, S in keys:
        row: dict = {"D": D, "S": S}
        bound = None
        for m in ALL_METHODS:
            rs = [r for r in records if r["D"] == D and r["S"] == S and r["method"] == m]
            if not rs:
                continue
            ok = [r for r in rs if r.get("time") is not None]
            row[m] = {
                "median_time": statistics.median(r["time"] for r in ok) if ok else None,
                "runs": len(rs),
                "failed": [r["status"] for r in rs if r.get("time") is None],
                "value": ok[0]["value"] if ok else None,
                "status": ok[0]["status"] if ok else rs[0]["status"],
            }
            if m == "route" and ok:
                row[m]["gap"] = max(r["gap"] for r in ok)
                row[m]["iterations"] = ok[0]["iterations"]
                row[m]["rank"] = ok[0].get("rank")
                bound = ok[0]["bound"]
            if m == "auto" and ok:
                row[m]["route"] = ok[0].get("route")
        if bound is not None:
            for m in ("SCS", "CLARABEL"):
                if m in row and row[m]["value"] is not None:
                    row[m]["rel_to_bound"] = (bound - row[m]["value"]) / max(1.0, abs(bound))
        generic = [row[m]["median_time"] for m in ("SCS", "CLARABEL")
                   if m in row and row[m]["median_time"] is not None]
        if "route" in row and row["route"]["median_time"] and generic:
            row["speedup_vs_best_generic"] = min(generic) / row["route"]["median_time"]
        if "auto" in row and row["auto"]["median_time"] and generic:
            row["auto_over_best_generic"] = row["auto"]["median_time"] / min(generic)
        rows.append(row)
    return rows


def table(rows: list[dict], cap: float) -> str:
    def t(row, m):
        if m not in row:
            return "-"
        c = row[m]
        if c["median_time"] is None:
            return f"> {cap:.0f} (timeout)" if "timeout" in c["failed"] else "failed"
        extra = f" ({len(c['failed'])} timeout)" if c["failed"] else ""
        return f"{c['median_time']:.2f}{extra}"

    lines = [
        "| D | \\|S\\| | route [s] (gap, iters, rank) | auto [s] (picks) | SCS [s] | "
        "Clarabel [s] | speedup vs best generic | values (route / SCS / Clarabel) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ro = r.get("route", {})
        rinfo = (f" ({ro['gap']:.1e}, {ro['iterations']}, {ro['rank']})"
                 if ro.get("median_time") else "")
        au = r.get("auto", {})
        ainfo = f" ({au.get('route')})" if au.get("median_time") else ""
        vals = " / ".join(
            f"{r[m]['value']:.6f}" if m in r and r[m]["value"] is not None else "-"
            for m in ("route", "SCS", "CLARABEL")
        )
        sp = r.get("speedup_vs_best_generic")
        lines.append(
            f"| {r['D']} | {r['S']} | {t(r, 'route')}{rinfo} | {t(r, 'auto')}{ainfo} | "
            f"{t(r, 'SCS')} | {t(r, 'CLARABEL')} | {f'{sp:.2f}x' if sp else '-'} | {vals} |"
        )
    return "\n".join(lines)


_PA = dict(prune_after=30, max_columns=200)  # pruning after 30 idle rounds, aggregation past 200
REMEDIES = {
    "LP master, 1 column/round, no stabilization, pruning+aggregation": dict(
        master="lp", columns_per_round=1, smoothing=0.0, prune_after=0, max_columns=200),
    "LP, 5 columns/round, pruning+aggregation": dict(master="lp", smoothing=0.0, **_PA),
    "LP, 5 columns + Wentges 0.5, pruning+aggregation": dict(master="lp", smoothing=0.5, **_PA),
    "LP, 5 columns + Wentges 0.8, pruning+aggregation": dict(master="lp", smoothing=0.8, **_PA),
    "LP, 5 columns + Wentges 0.8, no pruning/aggregation": dict(
        master="lp", smoothing=0.8, prune_after=0, max_columns=10**6),
    "PSD block, max_rank 10, Wentges 0.5": dict(master="psd", max_rank=10, smoothing=0.5),
    "PSD block, max_rank 30, no stabilization": dict(master="psd", max_rank=30, smoothing=0.0),
    "PSD block, max_rank 30, Wentges 0.5 (default)": dict(master="psd", max_rank=30,
                                                          smoothing=0.5),
}


def remedies(D: int, S: int, seed: int, tol: float, time_limit: float) -> list[dict]:
    """Tailing-off remedies on one instance, the solver called directly (in this process)."""
    import scipy.sparse as sp

    from specopt.solvers.mg import solve_spectraplex_lp, triplet_operator

    P, Q, C = instance(D, S, seed)
    G = sp.hstack([-np.ones((S, 1)), sp.identity(S)], format="csr")
    c = np.r_[1.0, -C * np.ones(S)]
    zlb = np.r_[-np.inf, np.zeros(S)]
    out = []
    for name, kw in REMEDIES.items():
        res = solve_spectraplex_lp(triplet_operator(P, Q), None, G, c, np.zeros(S), None, zlb,
                                   None, tol=tol, max_iters=100000, time_limit=time_limit, **kw)
        out.append({"variant": name, "status": res.status, "gap": res.gap,
                    "iterations": res.iterations, "time": res.solve_time,
                    "value": res.objective})
        print(f"# {name}: {res.status} gap={res.gap:.2e} iters={res.iterations} "
              f"time={res.solve_time:.2f}", flush=True)
    return out


def remedies_table(rows: list[dict]) -> str:
    lines = ["| variant | status | rel. gap | rounds | time [s] |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['status']} | {r['gap']:.1e} | {r['iterations']} | "
                     f"{r['time']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--D", type=int, nargs="*", default=[24, 50, 100, 200, 500])
    ap.add_argument("--S", type=int, nargs="*", default=[550, 2000, 10000])
    ap.add_argument("--pairs", nargs="*", default=None,
                    help="D:S[:method,method] cases instead of the D x S grid")
    ap.add_argument("--methods", nargs="*", default=list(ALL_METHODS))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cap", type=float, default=600.0)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--remedies", default=None, metavar="D:S",
                    help="measure the tailing-off remedies on one instance and exit")
    ap.add_argument("--remedy-time", type=float, default=60.0)
    ap.add_argument("--family", nargs="*", default=None, metavar="D:S:N[:NSCS]",
                    help="families: N instances of size D x |S| (SCS on the first NSCS, default N)")
    ap.add_argument("--first", type=int, default=0, help="first family member to run")
    ap.add_argument("--members", default=None, metavar="I,J,...",
                    help="run only these family members (e.g. the high-rank ones: 4,5,10,11)")
    ap.add_argument("--route-time", type=float, default=float("inf"),
                    help="time limit of the route per instance (uncertified runs are recorded)")
    ap.add_argument("--quick", action="store_true",
                    help="small families (24:550:6 50:2000:6) instead of the grid")
    args = ap.parse_args(argv)
    if args.quick and args.family is None:
        args.family = ["24:550:6", "50:2000:6"]
    if args.family is not None:
        out = args.out.with_name(args.out.stem + "_family.json")
        old = json.loads(out.read_text()).get("records", []) if out.exists() else []
        done: list[dict] = []

        def save(new: list[dict]) -> str:
            keys = {(r["D"], r["S"], r["i"], r["method"]) for r in done + new}
            allrec = [r for r in old if (r["D"], r["S"], r["i"], r["method"]) not in keys]
            allrec += done + new
            md = family_table(allrec)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({"tol": args.tol, "cap": args.cap, "records": allrec,
                                       "summary": family_summary(allrec), "table": md},
                                      indent=1))
            return md

        for f in args.family:
            parts = [int(x) for x in f.split(":")]
            D, S, n = parts[:3]
            done += run_family(D, S, n, parts[3] if len(parts) > 3 else n, args.tol, args.cap,
                               args.first, args.route_time, save,
                               None if args.members is None
                               else [int(x) for x in args.members.split(",")])
        print(save([]))
        print(f"wrote {out}")
        return
    if args.remedies:
        D, S = map(int, args.remedies.split(":"))
        rows = remedies(D, S, args.seed, args.tol, args.remedy_time)
        md = remedies_table(rows)
        print(md)
        out = args.out.with_name(args.out.stem + f"_remedies_{D}_{S}.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"D": D, "S": S, "tol": args.tol, "rows": rows,
                                   "table": md}, indent=1))
        print(f"wrote {out}")
        return
    cases = []
    if args.pairs:
        for p in args.pairs:
            parts = p.split(":")
            ms = parts[2].split(",") if len(parts) > 2 else args.methods
            cases.append((int(parts[0]), int(parts[1]), ms))
    else:
        cases = [(D, S, args.methods) for D in args.D for S in args.S]
    records = []
    for D, S, ms in cases:
        for m in ms:
            for rep in range(args.reps):
                rec = run_subprocess(m, D, S, args.seed, args.tol, args.cap)
                print(f"# D={D} S={S} {m} rep {rep}: {rec.get('status')} "
                      f"time={rec.get('time')} value={rec.get('value')} gap={rec.get('gap')}",
                      flush=True)
                records.append(rec)
                if rec.get("time") is None:  # a timeout or failure repeats: do not re-run
                    break
    rows = summarize(records)
    md = table(rows, args.cap)
    print(md)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(args.out.read_text()) if args.out.exists() else {"records": []}
    new_keys = {(x["D"], x["S"], x["method"]) for x in records}
    keep = [r for r in old.get("records", []) if (r["D"], r["S"], r["method"]) not in new_keys]
    allrec = keep + records
    args.out.write_text(json.dumps({"tol": args.tol, "cap": args.cap, "reps": args.reps,
                                    "records": allrec, "rows": summarize(allrec),
                                    "table": table(summarize(allrec), args.cap)}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
