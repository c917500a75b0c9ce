"""Benchmark of route "dual_cd" (relative-comparison QP) against Clarabel / OSQP / SCS via CVXPY.

Problem: min 1/2 w^T L w + C sum_i max(0, 1 - z_i^T w) s.t. w >= 0 (C = 1), written in hinge form.

1. Table 2 protocol (Nguyen, Morell, De Baets) on bundled data in place of the KEEL sets: iris,
   wine, breast_cancer, digits (features standardized), n = 3N triplets (i, j, k) drawn from the
   labels (y_i = y_j != y_k), L = I and L = (A^T A) o (A^T A) with A ~ N(0, 1) (d x d).
2. Scale: random labelled Gaussian blobs (5 classes) in m dimensions, n triplets, L = I,
   n in {1e3, 1e4, 1e5, 1e6}, m in {10, 50}.

specopt times are medians of ``--repeats`` runs; "route" is ``specopt.solve`` on the CVXPY problem
(recognition + extraction + solve + unpack), "solver" is ``dual_cd`` on the arrays. Generic
solvers run once per case in a fresh interpreter with a time cap (wall time includes CVXPY's
compilation; ``solver_s`` is the solver's own time). Objectives are all evaluated with the same
formula on the returned w; ``rel_obj`` = (P_specopt - P_clarabel) / P_clarabel.

Usage: ``python benchmarks/dual_cd.py [--quick] [--parts 1 2] [--cap 300] [--generic-max-n 1e5]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import markdown_table, timed, write_json  # noqa: E402

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]

GENERIC_CODE = r"""
import json, time, numpy as np, cvxpy as cp
d = np.load({path!r})
Z, L, C = d["Z"], d["L"], float(d["C"])
w = cp.Variable(Z.shape[1])
obj = 0.5 * cp.quad_form(w, cp.psd_wrap(L)) + C * cp.sum(cp.pos(1 - Z @ w))
prob = cp.Problem(cp.Minimize(obj), [w >= 0])
t0 = time.perf_counter()
try:
    prob.solve(solver={solver!r}, **{opts!r})
    wv = w.value
    P = None if wv is None else float(0.5 * wv @ L @ wv + C * np.maximum(0, 1 - Z @ wv).sum())
    out = dict(status=prob.status, objective=P, wall=time.perf_counter() - t0,
               solver_s=prob.solver_stats.solve_time)
except Exception as exc:
    out = dict(status="error: " + str(exc)[:80], wall=time.perf_counter() - t0)
print(json.dumps(out))
"""

GENERIC_OPTS = {
    "CLARABEL": {},
    "OSQP": {"max_iter": 1_000_000, "eps_abs": 1e-7, "eps_rel": 1e-7},
    "SCS": {"eps": 1e-7, "max_iters": 1_000_000},
}


def run_generic(Z, L, C, solver, cap):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.npz")
        np.savez(path, Z=Z, L=L, C=C)
        code = GENERIC_CODE.format(path=path, solver=solver, opts=GENERIC_OPTS[solver])
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", PYTHONPATH=str(ROOT))
        t0 = time.perf_counter()
        try:
            r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=cap,
                               env=env)
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "wall": time.perf_counter() - t0}
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"status": "crash: " + r.stderr.strip()[-120:], "wall": None}


def primal(Z, L, C, w):
    return float(0.5 * w @ L @ w + C * np.maximum(0, 1 - Z @ w).sum())


def hinge_problem(Z, L, C):
    import cvxpy as cp

    w = cp.Variable(Z.shape[1])
    obj = 0.5 * cp.quad_form(w, cp.psd_wrap(L)) + C * cp.sum(cp.pos(1 - Z @ w))
    return cp.Problem(cp.Minimize(obj), [w >= 0]), w


def run_specopt(Z, L, C, repeats, route=True):
    import specopt
    from specopt.solvers.dual_cd import dual_cd

    row = {}
    t_solver, res = timed(lambda: dual_cd(L, Z, C, nonneg=True, tol=1e-8), repeats)
    row.update(solver_s=t_solver, passes=res.iterations, rel_gap=res.rel_gap,
               converged=res.converged, P_specopt=primal(Z, L, C, res.w))
    if route:
        def go():
            prob, w = hinge_problem(Z, L, C)
            specopt.solve(prob, route="dual_cd", tol=1e-8)
            return prob, w

        t_route, (prob, w) = timed(go, repeats)
        row.update(route_s=t_route, route_status=prob.status)
    return row


FIRST_ORDER_CAP = 120.0  # OSQP / SCS (the reference: no convergence in 120 s at 1e5)


def add_generic(row, Z, L, C, solvers, cap):
    for s in solvers:
        cap_s = min(cap, FIRST_ORDER_CAP) if s in ("OSQP", "SCS") else cap
        r = run_generic(Z, L, C, s, cap_s)
        key = s.lower()
        row[f"{key}_s"] = r.get("wall") if r["status"] != "timeout" else f">{cap_s:.0f}"
        row[f"{key}_status"] = r["status"]
        P = r.get("objective")
        row[f"P_{key}"] = P
        if P is not None:
            row[f"rel_obj_{key}"] = (row["P_specopt"] - P) / abs(P)
    if isinstance(row.get("clarabel_s"), float):
        row["speedup_vs_clarabel"] = row["clarabel_s"] / row.get("route_s", row["solver_s"])
    return row


# --------------------------------------------------------------------------------------------
def table2(repeats, cap, quick):
    from sklearn import datasets

    from specopt.learn.relative_comparison import draw_triplets

    rows = []
    names = ["iris", "wine"] if quick else ["iris", "wine", "breast_cancer", "digits"]
    for name in names:
        X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
        sd = X.std(0)
        X = (X - X.mean(0)) / np.where(sd > 0, sd, 1.0)
        T = draw_triplets(y, 3 * len(y), random_state=0)
        Z = (X[T[:, 0]] - X[T[:, 2]]) ** 2 - (X[T[:, 0]] - X[T[:, 1]]) ** 2
        d = X.shape[1]
        A = np.random.default_rng(0).normal(size=(d, d))
        for Lname, L in (("I", np.eye(d)), ("(AtA)o(AtA)", (A.T @ A) * (A.T @ A))):
            row = dict(data=name, N=len(y), m=d, n=len(Z), L=Lname)
            row.update(run_specopt(Z, L, 1.0, repeats))
            add_generic(row, Z, L, 1.0, ["CLARABEL", "OSQP"], cap)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items()}, default=str), flush=True)
    return rows


def blobs_instance(n, m, seed=0):
    """n triplet differences z from 5 labelled Gaussian blobs in R^m (labels give the order)."""
    rng = np.random.default_rng(seed)
    N = max(50, int(4 * np.sqrt(n)))
    y = rng.integers(0, 5, N)
    X = rng.normal(size=(5, m))[y] + 1.5 * rng.normal(size=(N, m))
    from specopt.learn.relative_comparison import draw_triplets

    T = draw_triplets(y, n, random_state=seed)
    return (X[T[:, 0]] - X[T[:, 2]]) ** 2 - (X[T[:, 0]] - X[T[:, 1]]) ** 2


def scale(repeats, cap, quick, generic_max_n):
    rows = []
    ns = [1000, 10_000] if quick else [1000, 10_000, 100_000, 1_000_000]
    for m in (10, 50):
        for n in ns:
            Z = blobs_instance(n, m)
            L = np.eye(m)
            row = dict(n=n, m=m)
            row.update(run_specopt(Z, L, 1.0, 1 if n >= 1_000_000 else repeats,
                                   route=n < 1_000_000))
            solvers = []
            if n <= generic_max_n:
                solvers = ["CLARABEL"] + (["OSQP", "SCS"] if n <= 10_000 else [])
            add_generic(row, Z, L, 1.0, solvers, cap)
            rows.append(row)
            print(json.dumps(row, default=str), flush=True)
            del Z
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--parts", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cap", type=float, default=300.0)
    ap.add_argument("--generic-max-n", type=float, default=1e5)
    args = ap.parse_args()
    out = {}
    if 1 in args.parts:
        rows = table2(args.repeats, args.cap, args.quick)
        out["table2"] = rows
        print("\n## Table 2 protocol (C = 1, w >= 0, n = 3N triplets)\n")
        print(markdown_table(rows, ["data", "m", "n", "L", "P_specopt", "rel_obj_clarabel",
                                    "rel_obj_osqp", "passes", "solver_s", "route_s",
                                    "clarabel_s", "osqp_s", "speedup_vs_clarabel"]))
    if 2 in args.parts:
        rows = scale(args.repeats, args.cap, args.quick, args.generic_max_n)
        out["scale"] = rows
        print("\n## Scale (blobs, L = I, C = 1, w >= 0)\n")
        print(markdown_table(rows, ["n", "m", "P_specopt", "rel_obj_clarabel", "passes",
                                    "rel_gap", "solver_s", "route_s", "clarabel_s", "osqp_s",
                                    "scs_s", "speedup_vs_clarabel"]))
    meta = {"cap_s": args.cap, "repeats": args.repeats, "quick": args.quick,
            "note": "2-core machine shared with other jobs; timings taken under load"}
    write_json("dual_cd", [dict(part=p, **r) for p, rows in out.items() for r in rows], meta)


if __name__ == "__main__":
    main()
