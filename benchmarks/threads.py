"""Busy machines: each route's small-problem case with the default threading, on the machine as
it is and with two CPU-bound processes beside it, against single-threaded BLAS.

Usage: python benchmarks/threads.py [--repeats 5] [--cases itml_wine maxcut40 ...]
       [--configs quiet-default loaded-default loaded-single loaded-unlimited] [--cap 120]

Cases (one warm-up call first, so numba compilation is not timed; then ``--repeats`` timed
calls, median and worst reported):

* ``itml_wine``: ``ITMLSupervised(random_state=0).fit`` on scikit-learn's wine (standardized);
* ``compare_itml``: the problem of ``specopt compare itml`` (bregman route);
* ``maxcut40``: the max-cut SDP of a random graph (n = 40, p = 0.3), ``route="low_rank_sdp"``;
* ``dual_cd``: ``specopt compare relcomp --size 500``'s problem, ``route="dual_cd"``;
* ``matrix_generation``: ``specopt compare metric``'s problem (wine, 178 points),
  ``route="matrix_generation"``;
* ``iterated``: ``specopt compare mve``'s problem (a ring of 20 points, iterated SDP);
* ``conic``: ``specopt compare spectral``'s problem (conic route, default backend).

Configurations, each case in its own subprocess:

* ``quiet-default``: the machine as it is (record its load), default threading: every
  ``*_NUM_THREADS`` variable unset, so OpenBLAS starts one thread per core and specopt's own
  limit (``specopt._threads``) is what is measured;
* ``loaded-default``: the same with two CPU-bound processes (``python -c "while True: pass"``,
  bounded in time, killed at the end) beside it;
* ``loaded-single``: loaded, ``OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=1``;
* ``loaded-unlimited``: loaded, default threading and specopt's limit switched off (its default
  thread count set to the core count): the behaviour before thread control.

Goal (issue 23): ``loaded-default`` within 2x of ``loaded-single`` on every case. Prints a
markdown table and writes benchmarks/results/threads.json.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
CASES = ("itml_wine", "compare_itml", "maxcut40", "dual_cd", "matrix_generation", "iterated",
         "conic")
CONFIGS = ("quiet-default", "loaded-default", "loaded-single", "loaded-unlimited")


# ----------------------------------------------------------------------------------------------
# The cases (run inside the worker subprocess)
# ----------------------------------------------------------------------------------------------
def _maxcut(n: int = 40, p: float = 0.3, seed: int = 0):
    import cvxpy as cp
    import numpy as np

    rng = np.random.default_rng(seed)
    A = np.triu((rng.random((n, n)) < p).astype(float), 1)
    A = A + A.T
    L = np.diag(A.sum(axis=1)) - A
    X = cp.Variable((n, n), symmetric=True)
    return cp.Problem(cp.Maximize(cp.trace(L @ X) / 4), [X >> 0, cp.diag(X) == 1])


def make_case(name: str):
    """A zero-argument callable that runs the case once; returns the status it reached."""
    import specopt
    from specopt.examples import build

    if name == "itml_wine":
        from sklearn.datasets import load_wine
        from sklearn.preprocessing import StandardScaler

        from specopt.learn import ITMLSupervised

        X, y = load_wine(return_X_y=True)
        X = StandardScaler().fit_transform(X)
        return lambda: "fitted" if ITMLSupervised(random_state=0).fit(X, y) else "?"

    route, prob = "auto", None
    if name == "compare_itml":
        prob = build("itml").problem
    elif name == "maxcut40":
        prob, route = _maxcut(), "low_rank_sdp"
    elif name == "dual_cd":
        prob, route = build("relcomp", 500).problem, "dual_cd"
    elif name == "matrix_generation":
        prob, route = build("metric").problem, "matrix_generation"
    elif name == "iterated":
        prob = build("mve").problem
    elif name == "conic":
        prob, route = build("spectral").problem, "conic"
    else:
        raise ValueError(f"unknown case {name!r}; choose from {', '.join(CASES)}")

    def run():
        specopt.solve(prob, route=route)
        cert = specopt.certificate(prob)
        return f"{cert.route}:{cert.status}"

    return run


def worker(case: str, repeats: int, unlimited: bool) -> None:
    if unlimited:
        import specopt._threads as threads

        threads.default_threads = lambda size=None: threads.cpu_count()
    run = make_case(case)
    t0 = time.perf_counter()
    status = run()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        status = run()
        times.append(time.perf_counter() - t0)
    from threadpoolctl import threadpool_info

    blas = max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"),
               default=None)
    print(json.dumps({"case": case, "first": first, "times": times, "status": status,
                      "blas_threads_outside": blas, "load": os.getloadavg()[0]}))


# ----------------------------------------------------------------------------------------------
# The driver
# ----------------------------------------------------------------------------------------------
def _busy(seconds: float) -> list[subprocess.Popen]:
    code = f"import time\nt = time.time()\nwhile time.time() - t < {seconds:.0f}: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]


def run_config(config: str, cases: list[str], repeats: int, cap: float) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if config.endswith("single"):
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    args = ["--repeats", str(repeats)] + (["--unlimited"] if config.endswith("unlimited") else [])
    busy = _busy(cap * len(cases) + 60) if config.startswith("loaded") else []
    rows = []
    try:
        if busy:
            time.sleep(2.0)
        for case in cases:
            load0 = os.getloadavg()[0]
            try:
                proc = subprocess.run(
                    [sys.executable, __file__, "--worker", case, *args], capture_output=True,
                    text=True, timeout=cap, env=env)
                lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
                out = json.loads(lines[-1]) if lines else {
                    "error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
            except subprocess.TimeoutExpired:
                out = {"error": f"timeout > {cap:.0f} s"}
            out.update(case=case, config=config, load_before=load0)
            if "times" in out:
                out["median"] = statistics.median(out["times"])
                out["worst"] = max(out["times"])
            rows.append(out)
            print(f"  {config:17s} {case:18s} median {out.get('median', float('nan')):.4f} s "
                  f"worst {out.get('worst', float('nan')):.4f} s  load {load0:.1f} "
                  f"{out.get('status', out.get('error'))}", flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    return rows


def table(rows: list[dict], cases: list[str], configs: list[str]) -> str:
    by = {(r["config"], r["case"]): r for r in rows}

    def cell(r):
        if r is None:
            return "-"
        if "median" not in r:
            return r.get("error", "failed")
        return f"{r['median']:.3f} / {r['worst']:.3f} (load {r['load_before']:.1f})"

    head = ["case", *configs]
    if {"loaded-default", "loaded-single"} <= set(configs):
        head.append("loaded default / single (median)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in cases:
        cells = [case] + [cell(by.get((c, case))) for c in configs]
        if {"loaded-default", "loaded-single"} <= set(configs):
            d, s = by.get(("loaded-default", case)), by.get(("loaded-single", case))
            ratio = d["median"] / s["median"] if d and s and "median" in d and "median" in s \
                else None
            cells.append("-" if ratio is None else f"{ratio:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--unlimited", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=CONFIGS)
    ap.add_argument("--cap", type=float, default=120.0, help="seconds per case subprocess")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.repeats, args.unlimited)
        return
    rows = []
    for config in args.configs:
        rows += run_config(config, args.cases, args.repeats, args.cap)
    print("\nmedian / worst wall time [s] of", args.repeats, "calls after a warm-up call; load "
          "= 1-minute load average before the case (2 cores)\n")
    print(table(rows, args.cases, args.configs))
    from benchmarks._common import write_json

    path = write_json("threads", rows, {"repeats": args.repeats, "cases": args.cases,
                                        "configs": args.configs})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
