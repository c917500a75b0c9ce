"""Benchmark of route "dual_cd" (relative-comparison QP) against Clarabel over instance FAMILIES.

Problem: min 1/2 w^T L w + C sum_i max(0, 1 - z_i^T w) s.t. w >= 0 (hinge form, CVXPY model),
z = (A^T x_i - A^T x_k)^2 - (A^T x_i - A^T x_j)^2 for triplets (i, j, k) (A = I: features used
directly). Each instance of a family draws (from its seed):

- C in {0.01, 0.1, 1, 10};
- L: identity, the paper's general ``(A^T A) o (A^T A)`` (A ~ N(0,1)), or ill-conditioned
  ``Q diag(logspace(-2, 2)) Q^T``;
- class structure: 2, 5 or 10 Gaussian classes with separation in [0.5, 2];
- feature scales: 1 or per-feature scales logspace(-1, 1) (shuffled);
- triplet sampling: random (label-based) or nearest-neighbour (j the nearest same-class point,
  k the nearest other-class point among 30 random candidates);
- label noise: 0 or 10% of labels flipped.

Per instance ONE fresh interpreter (imports excluded from every timing) measures, in this order:
``specopt.solve(prob, route="dual_cd")`` (the first specialized solve in the process: "fresh"),
a repeat on a new Problem ("repeat"), then ``prob.solve(solver="CLARABEL")`` (the first conic solve
in the process, CVXPY compilation included). Ratios are Clarabel / route from the same process;
objectives are compared with the same formula. Reported per size: median and worst ratio.

First-call (compile) cost, separately: in a fresh interpreter with an EMPTY numba cache
directory, the solver with ``newton=False`` (forces the compiled coordinate-descent kernels):
first call (compile) vs second call, and the route on the same data (which, on the Newton path,
never loads numba).

Usage: ``python benchmarks/dual_cd.py [--quick] [--sizes 300x10 20000x20 ...] [--per-size 6]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import markdown_table, write_json  # noqa: E402

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]

GEN = r'''
import numpy as np

def family_instance(n, m, seed):
    """One member of the family (module docstring); returns Z, L, C, description."""
    rng = np.random.default_rng(seed)
    C = float(rng.choice([0.01, 0.1, 1.0, 10.0]))
    kind_L = ["identity", "general", "illcond"][seed % 3]
    if kind_L == "identity":
        L = np.eye(m)
    elif kind_L == "general":
        A = rng.normal(size=(m, m))
        L = (A.T @ A) * (A.T @ A)
    else:
        Q = np.linalg.qr(rng.normal(size=(m, m)))[0]
        L = (Q * np.logspace(-2, 2, m)) @ Q.T
        L = 0.5 * (L + L.T)
    k = int(rng.choice([2, 5, 10]))
    sep = float(rng.uniform(0.5, 2.0))
    N = max(60, int(4 * np.sqrt(n)))
    y = rng.integers(0, k, N)
    X = sep * rng.normal(size=(k, m))[y] + rng.normal(size=(N, m))
    scaled = bool(rng.integers(0, 2))
    if scaled:
        X = X * rng.permutation(np.logspace(-1, 1, m))
    noisy = bool(rng.integers(0, 2))
    if noisy:
        flip = rng.random(N) < 0.1
        y = np.where(flip, rng.integers(0, k, N), y)
    nn = bool(rng.integers(0, 2))
    cls = [np.flatnonzero(y == c) for c in range(k)]
    i = rng.integers(0, N, n)
    i = i[np.array([cls[y[a]].size >= 2 and cls[y[a]].size < N for a in i])]
    i = np.resize(i, n)
    j = np.empty(n, dtype=np.int64)
    kk = np.empty(n, dtype=np.int64)
    for t, a in enumerate(i):
        same = cls[y[a]][cls[y[a]] != a]
        other = np.flatnonzero(y != y[a])
        if nn:
            cs = rng.choice(same, min(30, same.size), replace=False)
            co = rng.choice(other, min(30, other.size), replace=False)
            j[t] = cs[np.argmin(((X[cs] - X[a]) ** 2).sum(1))]
            kk[t] = co[np.argmin(((X[co] - X[a]) ** 2).sum(1))]
        else:
            j[t] = same[rng.integers(0, same.size)]
            kk[t] = other[rng.integers(0, other.size)]
    Z = (X[i] - X[kk]) ** 2 - (X[i] - X[j]) ** 2
    desc = dict(C=C, L=kind_L, classes=k, sep=round(sep, 2), scaled=scaled, noise=noisy,
                triplets="nn" if nn else "random")
    return np.ascontiguousarray(Z), L, C, desc
'''

RUN = GEN + r'''
import json, sys, time
import cvxpy as cp
import specopt

Z, L, C, desc = family_instance({n}, {m}, {seed})

def problem():
    w = cp.Variable(Z.shape[1])
    obj = 0.5 * cp.quad_form(w, cp.psd_wrap(L)) + C * cp.sum(cp.pos(1 - Z @ w))
    return cp.Problem(cp.Minimize(obj), [w >= 0]), w

def P(wv):
    return float(0.5 * wv @ L @ wv + C * np.maximum(0, 1 - Z @ wv).sum())

out = dict(desc)
prob, w = problem()
t0 = time.perf_counter(); specopt.solve(prob, route="dual_cd", tol=1e-8)
out["route_fresh_s"] = time.perf_counter() - t0
cert = specopt.certificate(prob)
out["P_route"] = P(w.value)
out["route_status"] = prob.status
out["method"] = cert.extra.get("method")
out["numba_loaded"] = "numba" in sys.modules
prob, w = problem()
t0 = time.perf_counter(); specopt.solve(prob, route="dual_cd", tol=1e-8)
out["route_repeat_s"] = time.perf_counter() - t0
print(json.dumps(out), flush=True)  # partial line: kept if Clarabel hits the time cap
if {clarabel}:
    prob, w = problem()
    t0 = time.perf_counter()
    try:
        prob.solve(solver="CLARABEL")
        out["clarabel_s"] = time.perf_counter() - t0
        out["P_clarabel"] = P(w.value)
        out["clarabel_status"] = prob.status
    except Exception as exc:
        out["clarabel_status"] = "error: " + str(exc)[:80]
print(json.dumps(out))
'''

COMPILE = GEN + r'''
import json, sys, time
Z, L, C, desc = family_instance({n}, {m}, {seed})
t0 = time.perf_counter()
from specopt.solvers.dual_cd import dual_cd
t_imp = time.perf_counter() - t0
out = dict(import_s=t_imp, numba_after_import="numba" in sys.modules)
for key in ("cd_first_s", "cd_repeat_s"):
    t0 = time.perf_counter()
    dual_cd(L, Z, C, newton=False)
    out[key] = time.perf_counter() - t0
print(json.dumps(out))
'''


def run(code: str, cap: float, env_extra: dict | None = None) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=str(ROOT), **(env_extra or {}))
    try:
        r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=cap, env=env)
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or b""
        partial = (raw.decode() if isinstance(raw, bytes) else raw).strip().splitlines()
        out = json.loads(partial[-1]) if partial else {}
        return dict(out, status="timeout", clarabel_status=f"timeout (> {cap:.0f} s)")
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"status": "crash: " + r.stderr.strip()[-300:]}


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", nargs="*", default=None, help="n x m, e.g. 20000x20")
    ap.add_argument("--per-size", type=int, default=6)
    ap.add_argument("--cap", type=float, default=600.0)
    ap.add_argument("--name", default="dual_cd")
    args = ap.parse_args()
    sizes = args.sizes or (["300x10", "20000x20"] if args.quick else
                           ["100x5", "300x10", "1000x10", "20000x20", "100000x50"])
    rows, summary = [], []
    for size in sizes:
        n, m = (int(v) for v in size.split("x"))
        k = args.per_size if n < 100_000 else max(1, args.per_size // 2)
        ratios_f, ratios_r, fresh, worst_obj = [], [], [], 0.0
        for seed in range(k):
            r = run(RUN.format(n=n, m=m, seed=seed, clarabel=True), args.cap)
            r.update(n=n, m=m, seed=seed, load=load())
            if r.get("status") == "timeout" and "route_fresh_s" in r:
                r["ratio_fresh"] = f">{args.cap / r['route_fresh_s']:.0f}"  # lower bound
            if "clarabel_s" in r and "route_fresh_s" in r:
                r["ratio_fresh"] = r["clarabel_s"] / r["route_fresh_s"]
                r["ratio_repeat"] = r["clarabel_s"] / r["route_repeat_s"]
                r["rel_obj"] = (r["P_route"] - r["P_clarabel"]) / max(1.0, abs(r["P_clarabel"]))
                ratios_f.append(r["ratio_fresh"])
                ratios_r.append(r["ratio_repeat"])
                fresh.append(r["route_fresh_s"])
                worst_obj = max(worst_obj, r["rel_obj"])
            rows.append(r)
            print(json.dumps(r), flush=True)
        if ratios_f:
            summary.append(dict(
                n=n, m=m, instances=len(ratios_f),
                median_ratio_fresh=statistics.median(ratios_f), worst_ratio_fresh=min(ratios_f),
                median_ratio_repeat=statistics.median(ratios_r), worst_ratio_repeat=min(ratios_r),
                median_route_fresh_s=statistics.median(fresh), worst_route_fresh_s=max(fresh),
                max_rel_obj_vs_clarabel=worst_obj, load=load()))
    # first-ever (compile) cost of the coordinate-descent kernels
    with tempfile.TemporaryDirectory() as cache:
        comp = run(COMPILE.format(n=20000, m=20, seed=1), args.cap, {"NUMBA_CACHE_DIR": cache})
        comp2 = run(COMPILE.format(n=20000, m=20, seed=1), args.cap, {"NUMBA_CACHE_DIR": cache})
    first = dict(case="20000x20, newton=False, empty numba cache", **comp)
    cached = dict(case="20000x20, newton=False, numba cache filled", **comp2)
    print("\n## dual_cd vs Clarabel over families (same process, same instance)\n")
    print(markdown_table(summary, ["n", "m", "instances", "median_ratio_fresh",
                                   "worst_ratio_fresh", "median_ratio_repeat",
                                   "worst_ratio_repeat", "median_route_fresh_s",
                                   "worst_route_fresh_s", "max_rel_obj_vs_clarabel", "load"]))
    print("\n## per instance\n")
    print(markdown_table(rows, ["n", "m", "seed", "C", "L", "classes", "scaled", "noise",
                                "triplets", "route_fresh_s", "route_repeat_s", "clarabel_s",
                                "ratio_fresh", "rel_obj", "numba_loaded", "load"]))
    print("\n## first call of the compiled CD kernels (fresh interpreter)\n")
    print(markdown_table([first, cached], ["case", "import_s", "numba_after_import",
                                           "cd_first_s", "cd_repeat_s"]))
    meta = {"note": "2-core machine shared with other jobs; load average per row",
            "tol": 1e-8, "threads": 1}
    write_json(args.name, [dict(part="summary", **s) for s in summary]
               + [dict(part="instance", **r) for r in rows]
               + [dict(part="first_call", **first), dict(part="first_call", **cached)], meta)


if __name__ == "__main__":
    main()
