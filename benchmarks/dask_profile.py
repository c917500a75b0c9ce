"""Where a Dask PSDBoost round spends its CPU: a capped fit under ``cProfile`` with Dask's
synchronous scheduler (block functions and the client's master in one process, so the profile
sees both), on the data set of ``benchmarks/dask_triplets.py`` (``--data`` directory, zarr).

    python benchmarks/dask_profile.py --data /tmp/dask_bench --S 1e6 --rounds 8
    python benchmarks/dask_profile.py ... --code /path/to/other/checkout   # A/B against it

Prints the top functions by own time and writes ``benchmarks/results/dask_profile.json``
(wall, CPU, load, the top entries). ``--code``: import ``specopt`` from that directory instead
(e.g. ``git archive <commit> specopt | tar x -C /tmp/old``) to compare two versions on the
same data back to back.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="directory of dask_triplets.py's data sets")
    ap.add_argument("--N", type=int, default=100_000)
    ap.add_argument("--D", type=int, default=100)
    ap.add_argument("--S", type=float, default=1e6)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--block", type=int, default=250_000)
    ap.add_argument("--code", default=str(ROOT), help="checkout whose specopt is profiled")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "dask_profile.json"))
    args = ap.parse_args()
    sys.path.insert(0, args.code)
    import dask
    import dask.array as da

    from specopt.learn import PSDBoostMetric

    path = Path(args.data) / f"seed0_N{args.N}_D{args.D}"
    X = da.from_zarr(str(path / "points.zarr"))
    T = da.from_zarr(str(path / "triplets.zarr"))[: int(args.S)].rechunk((args.block, 3))
    X, T = dask.persist(X, T, scheduler="sync")
    warnings.simplefilter("ignore")
    load0 = os.getloadavg()
    with dask.config.set(scheduler="sync"):
        pr = cProfile.Profile()
        t0, c0 = time.perf_counter(), time.process_time()
        pr.enable()
        PSDBoostMetric(C=1000, tol=1e-4, route_options={"max_iters": args.rounds}).fit(
            X, triplets=T)
        pr.disable()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    st = pstats.Stats(pr)
    st.sort_stats("tottime").print_stats(20)
    top = sorted(((v[2], v[3], f"{k[0].split('/')[-1]}:{k[2]}") for k, v in st.stats.items()),
                 reverse=True)[:20]
    rec = {"code": args.code, "S": int(args.S), "D": args.D, "N": args.N, "block": args.block,
           "rounds": args.rounds, "wall_s": wall, "cpu_s": cpu, "load_start": load0,
           "load": os.getloadavg(),
           "top_tottime": [{"fn": f, "tottime_s": t, "cumtime_s": c} for t, c, f in top]}
    print(json.dumps({k: v for k, v in rec.items() if k != "top_tottime"}))
    out = Path(args.out)
    old = json.loads(out.read_text())["records"] if out.exists() else []
    out.write_text(json.dumps({"records": old + [rec]}, indent=1))


if __name__ == "__main__":
    main()
