"""The SDP engine (specopt.solvers.sdp) at scale: max-cut SDPs (SDPLIB maxG* and random sparse
graphs) and SDE/MVU on k-NN graphs, certified time vs n.

Usage: python benchmarks/sdp_engine.py [--maxg maxG11 maxG32 maxG51 maxG55 maxG60]
       [--sizes 1000 2000 5000 10000] [--kinds unit uniform signed] [--degrees 4 10]
       [--seeds 0] [--sde 500 1000 2000] [--sde-data swiss digits] [--tol 1e-6] [--cap 120]
       [--method auto]

Max-cut: ``max <L/4, K> s.t. K_ii = 1, K PSD`` called on the engine directly
(:func:`specopt.solvers.sdp.solve_sdp`, ``method="auto"``: the sphere method of
:mod:`specopt.solvers.sdp.bm_diag` for these rows). SDPLIB files are read from
``../shared/data/sdplib`` with a minimal single-block SDPA reader (the data is GPL and never
copied into the repository); random graphs have ``n * degree / 2`` edges drawn uniformly, weights
1 (``unit``), uniform in (0.5, 2) (``uniform``) or +-1 (``signed``). SDE: ``max tr K`` s.t.
centering and the k-NN distance rows (k = 6, lengths scaled to mean 1), the same instances as
benchmarks/low_rank_sdp.py. Each instance runs in its own subprocess (wall-clock cap ``--cap`` as
the engine's ``time_limit``, plus an allowance); the first solve of a small instance in that
process (numba compilation, cached on disk) is timed apart as ``compile_s``. Columns: time, status,
certified relative gap, relative primal residual, rank, objective (and the published optimum for
maxG; maxG51's corrected 4006.255), load average at the end of the run. Summary per family and
size: median and worst time. Writes benchmarks/results/sdp_engine.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
SDPLIB = ROOT.parents[1] / "shared" / "data" / "sdplib"
if not SDPLIB.exists():
    SDPLIB = Path("/work/shared/data/sdplib")
#: SDPLIB's published optima (README), maxG51 corrected (later solvers' tables; the issue)
PUBLISHED = {"maxG11": 629.1648, "maxG32": 1567.640, "maxG51": 4006.255, "maxG55": 9999.210,
             "maxG60": 15222.27}


def read_single_block_sdpa(path: Path):
    """``(F0, rows, c)`` of a single-block SDPA file: ``max <F0, Y> s.t. <F_i, Y> = c_i``.
    (Benchmark-only; the library's reader is :mod:`specopt.io`.)"""
    import scipy.sparse as sp

    from specopt.solvers.sdp import SparseRows

    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith(('"', "*"))]
    tok = re.sub(r"[{},()]", " ", " ".join(lines)).split()
    m, nblocks = int(tok[0]), int(tok[1])
    if nblocks != 1:
        raise ValueError(f"{path.name}: {nblocks} blocks")
    n = abs(int(float(tok[2])))
    c = np.array(tok[3:3 + m], dtype=float)
    E = np.array(tok[3 + m:], dtype=float).reshape(-1, 5)
    mat, i, j, v = E[:, 0].astype(int), E[:, 2].astype(int) - 1, E[:, 3].astype(int) - 1, E[:, 4]
    z = mat == 0
    off = z & (i != j)
    F0 = sp.coo_array((np.r_[v[z], v[off]], (np.r_[i[z], j[off]], np.r_[j[z], i[off]])),
                      shape=(n, n)).tocsr()
    nz = ~z
    rows = SparseRows(mat[nz] - 1, i[nz], j[nz], np.where(i[nz] == j[nz], v[nz], 2 * v[nz]), m, n)
    return F0, rows, c


def random_maxcut(n: int, degree: float, kind: str, seed: int):
    """``L / 4`` of a random graph with ``n degree / 2`` edges (no loops; repeats merged)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m = int(n * degree / 2)
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = i != j
    w = {"unit": np.ones(m), "uniform": rng.uniform(0.5, 2.0, m),
         "signed": rng.choice([-1.0, 1.0], m)}[kind]
    W = sp.coo_array((w[keep], (i[keep], j[keep])), shape=(n, n)).tocsr()
    W = W + W.T
    L = sp.diags_array(np.asarray(W.sum(axis=1)).ravel()) - W
    return sp.csr_array(L) / 4.0, int(keep.sum())


def _compile_warmup() -> float:
    """Solve a tiny max-cut (numba kernels: compile or cache load); its time."""
    from specopt.solvers.sdp import SparseRows, solve_sdp

    t0 = time.perf_counter()
    C, _ = random_maxcut(150, 4, "signed", 0)
    solve_sdp(C, SparseRows.from_entries(np.arange(150), np.arange(150), 150), np.ones(150),
              sense="max", tol=1e-6)
    return time.perf_counter() - t0


def run_one(spec: str, tol: float, cap: float, method: str) -> dict:
    """One instance: ``maxG11`` or ``rand:n:degree:kind:seed`` or ``sde:data:n:seed``."""
    from specopt.solvers.sdp import SparseRows, solve_sdp

    out: dict = {"instance": spec, "compile_s": _compile_warmup()}
    kw: dict = {}
    if spec.startswith("rand:"):
        _, n, deg, kind, seed = spec.split(":")
        C, edges = random_maxcut(int(n), float(deg), kind, int(seed))
        n = int(n)
        A, b, sense = SparseRows.from_entries(np.arange(n), np.arange(n), n), np.ones(n), "max"
        out.update(family=f"random max-cut deg {deg}", n=n, edges=edges)
    elif spec.startswith("sde:"):
        from benchmarks.low_rank_sdp import instance
        from specopt.solvers.sdp import graph_trace_bound

        _, data, n, seed = spec.split(":")
        n, E, d2 = instance(data, int(n), int(seed))
        import scipy.sparse as sp

        A, b, sense = SparseRows.from_pairs(E, n), d2, "max"
        C = sp.identity(n, format="csr")
        kw = {"centered": True, "implied_trace_bound": graph_trace_bound(n, E, d2)}
        out.update(family=f"SDE {data}", n=n, edges=len(E))
    else:
        C, A, b = read_single_block_sdpa(SDPLIB / f"{spec}.dat-s")
        sense = "max"
        out.update(family="SDPLIB maxG", n=A.n, edges=(C.nnz - A.n) // 2,
                   published=PUBLISHED.get(spec))
    out["load_start"] = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    res = solve_sdp(C, A, b, sense=sense, tol=tol, time_limit=cap, method=method, **kw)
    out["time"] = time.perf_counter() - t0
    out["cpu"] = time.process_time() - c0
    out.update(status=res.status, objective=res.objective, bound=res.bound, gap=res.gap,
               residual=res.primal_residual, rank=res.rank, load=os.getloadavg()[0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--maxg", nargs="*", default=["maxG11", "maxG32", "maxG51", "maxG55",
                                                  "maxG60"])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 2000, 5000, 10000])
    ap.add_argument("--kinds", nargs="*", default=["unit", "uniform", "signed"])
    ap.add_argument("--degrees", type=float, nargs="*", default=[4.0, 10.0])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--sde", type=int, nargs="*", default=[])
    ap.add_argument("--sde-data", nargs="*", default=["swiss", "digits"])
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--cap", type=float, default=120.0)
    ap.add_argument("--method", default="auto")
    ap.add_argument("--out", default="sdp_engine")
    args = ap.parse_args()
    if args.one:
        spec, tol, cap, method = args.one
        print(json.dumps(run_one(spec, float(tol), float(cap), method), default=float))
        return
    specs = list(args.maxg)
    specs += [f"rand:{n}:{d:g}:{k}:{s}" for n in args.sizes for d in args.degrees
              for k in args.kinds for s in args.seeds]
    specs += [f"sde:{data}:{n}:{s}" for n in args.sde for data in args.sde_data
              for s in args.seeds]
    load0 = os.getloadavg()
    rows = []
    cols = ["instance", "n", "edges", "time", "cpu", "status", "gap", "residual", "rank",
            "objective", "published", "compile_s", "load"]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols), flush=True)
    for spec in specs:
        r = run_json_subprocess([__file__, "--one", spec, str(args.tol), str(args.cap),
                                 args.method], args.cap + 300, ROOT.parent)
        r.setdefault("instance", spec)
        rows.append(r)
        print(markdown_table([r], cols).splitlines()[-1], flush=True)
    print("\n| family | n | instances | certified | median s | worst s | median CPU s "
          "| worst CPU s | worst gap |")
    print("|---|---|---|---|---|---|---|---|---|")
    groups: dict = {}
    for r in rows:
        if "time" in r:
            groups.setdefault((r["family"], r["n"]), []).append(r)
    summary = []
    for (fam, n), g in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        t = [r["time"] for r in g]
        cpu = [r.get("cpu", r["time"]) for r in g]
        s = {"family": fam, "n": n, "instances": len(g),
             "certified": sum(r["status"] == "optimal" for r in g),
             "median_s": statistics.median(t), "worst_s": max(t),
             "median_cpu_s": statistics.median(cpu), "worst_cpu_s": max(cpu),
             "worst_gap": max(r["gap"] for r in g)}
        summary.append(s)
        print(f"| {fam} | {n} | {len(g)} | {s['certified']} | {s['median_s']:.2f} | "
              f"{s['worst_s']:.2f} | {s['median_cpu_s']:.2f} | {s['worst_cpu_s']:.2f} | "
              f"{s['worst_gap']:.1e} |")
    path = write_json(args.out, rows, {"tol": args.tol, "cap": args.cap, "method": args.method,
                                       "load_start": load0, "load_end": os.getloadavg(),
                                       "summary": summary})
    print(f"\nload average start {load0}, end {os.getloadavg()}; wrote {path}")


if __name__ == "__main__":
    main()
