"""Spectral matrix completion (iterated SDP) vs the nuclear-norm heuristic on the same masks.

Usage: python benchmarks/completion.py [--quick] [--trials T] [--timeout SECONDS]

Random Gaussian rank-r matrices (m x n), a fraction of entries observed uniformly at random (every
row and column keeps one); both methods get the same mask. Reported: median and mean relative
reconstruction error ||X_hat - M||_F / ||M||_F, exact-recovery rate (error < 1e-3), median time.
The spectral fit includes its nuclear-norm start. Each trial runs in its own subprocess with a
time cap. Prints a markdown table and writes benchmarks/results/completion.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent


def run_one(m: int, rank: int, observed: float, seed: int) -> dict:
    import specopt  # noqa: F401
    from specopt.learn.completion import (
        NuclearNormCompletion,
        SpectralMatrixCompletion,
        make_low_rank,
    )

    M, mask = make_low_rank(m, m, rank, observed, random_state=seed)
    Xo = np.where(mask, M, np.nan)
    t0 = time.perf_counter()
    nn = NuclearNormCompletion().fit(Xo)
    t_nn = time.perf_counter() - t0
    t0 = time.perf_counter()
    sp = SpectralMatrixCompletion(rank=rank).fit(Xo)
    t_sp = time.perf_counter() - t0
    return {"nn_err": -nn.score(M), "sp_err": -sp.score(M), "nn_time": t_nn, "sp_time": t_sp,
            "sp_iters": sp.n_iter_, "sp_backend": sp.certificate_.backend}


def run_capped(args: tuple, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--one", *map(str, args)]
    env = dict(os.environ, PYTHONPATH=str(ROOT.parent) + os.pathsep + os.environ.get(
        "PYTHONPATH", ""))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout > {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    if args.one:
        m, rank, observed, seed = args.one
        print(json.dumps(run_one(int(m), int(rank), float(observed), int(seed))))
        return
    cases = [(10, 1, 0.5), (10, 2, 0.6)] if args.quick else [
        (20, 1, 0.4), (20, 1, 0.5), (20, 2, 0.5), (20, 2, 0.6), (30, 2, 0.5)]
    trials = 2 if args.quick else args.trials
    results = {"cases": {}, "machine": f"{os.cpu_count()} cores, shared (loaded)"}
    out = ROOT / "results" / "completion.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    print("| m x n | rank | observed | trials | NN err median / mean | spectral err median / mean "
          "| exact NN / spectral | spectral better | NN s | spectral s | iters |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for m, rank, obs in cases:
        rows = [run_capped((m, rank, obs, 1000 * rank + s), args.timeout) for s in range(trials)]
        ok = [r for r in rows if "error" not in r]
        results["cases"][f"{m}x{m}:r{rank}:{obs}"] = rows
        out.write_text(json.dumps(results, indent=1))
        if not ok:
            print(f"| {m}x{m} | {rank} | {obs} | 0/{trials} | all failed: {rows[0]['error']} |")
            continue
        nn = np.array([r["nn_err"] for r in ok])
        sp = np.array([r["sp_err"] for r in ok])
        print(f"| {m}x{m} | {rank} | {obs:.0%} | {len(ok)}/{trials} | "
              f"{np.median(nn):.2e} / {nn.mean():.2e} | {np.median(sp):.2e} / {sp.mean():.2e} | "
              f"{np.mean(nn < 1e-3):.0%} / {np.mean(sp < 1e-3):.0%} | "
              f"{np.mean(sp < nn - 1e-6):.0%} | "
              f"{np.median([r['nn_time'] for r in ok]):.2f} | "
              f"{np.median([r['sp_time'] for r in ok]):.2f} | "
              f"{np.median([r['sp_iters'] for r in ok]):.0f} |", flush=True)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
