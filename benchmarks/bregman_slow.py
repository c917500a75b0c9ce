"""Hard-constraint ITML where auto picks bregman and the sweeps converge slowly (issue 23):
breast cancer, similar / dissimilar pairs with 70th / 30th percentile bounds. Compares the
sweeps to the cap (``slow_after=None``), the route as it is (rate test, hand-off to conic) and
Clarabel alone, on a family of seeds; prints a markdown table and writes JSON.

    python benchmarks/bregman_slow.py [--pairs 1150] [--seeds 0 1] [--cap 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import cvxpy as cp
import numpy as np
from sklearn.datasets import load_breast_cancer

import specopt


def instance(pairs: int, seed: int):
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    rng = np.random.default_rng(seed)
    same, diff = [], []
    while len(same) < pairs or len(diff) < pairs:
        i, j = rng.integers(0, len(y), 2)
        if i == j:
            continue
        (same if y[i] == y[j] else diff).append((i, j))
    S, D = np.array(same[:pairs]), np.array(diff[:pairs])
    VS, VD = X[S[:, 0]] - X[S[:, 1]], X[D[:, 0]] - X[D[:, 1]]
    dist = np.concatenate([(VS**2).sum(1), (VD**2).sum(1)])
    u, lo = np.percentile(dist, 70), np.percentile(dist, 30)
    d = X.shape[1]
    W = cp.Variable((d, d), PSD=True)
    prob = cp.Problem(cp.Minimize(specopt.logdet_div(W, np.eye(d))),
                      [specopt.row_quad_forms(VS, W) <= u, specopt.row_quad_forms(VD, W) >= lo])
    return prob


def run(prob, **kw):
    t = time.perf_counter()
    specopt.solve(prob, **kw)
    cert = specopt.certificate(prob)
    return {"seconds": time.perf_counter() - t, "status": prob.status, "value": prob.value,
            "backend": cert.backend, "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=1150)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--cap", type=int, default=100_000)
    args = ap.parse_args()
    rows = []
    for seed in args.seeds:
        prob = instance(args.pairs, seed)
        auto = specopt.explain(prob).auto_route
        warm = instance(20, seed)  # compile the sweep kernel outside the timings
        specopt.solve(warm, route="bregman", max_sweeps=10)
        row = {"seed": seed, "auto_route": auto,
               "sweeps_to_cap": run(prob, route="bregman", slow_after=None,
                                    max_sweeps=args.cap),
               "route_now": run(prob, route="bregman", max_sweeps=args.cap),
               "clarabel": run(prob, route="conic", solver="CLARABEL")}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("| seed | auto | sweeps to cap [s] (status) | route now [s] (backend, status) | "
          "Clarabel [s] | load |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        a, b, c = r["sweeps_to_cap"], r["route_now"], r["clarabel"]
        print(f"| {r['seed']} | {r['auto_route']} | {a['seconds']:.1f} ({a['status']}) | "
              f"{b['seconds']:.1f} ({b['backend']}, {b['status']}) | {c['seconds']:.1f} | "
              f"{a['load']:.1f}-{c['load']:.1f} |")
    out = Path(__file__).parent / "results" / "bregman_slow.json"
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
