"""The conic backend rule (``specopt.reductions.conic_size.default_backend``) against
measurements: Clarabel and SCS on SDPLIB's small multi-block problems and on the project's
own families.

Usage: python benchmarks/conic_backend.py [--sdplib-json PATH (default: benchmarks/results/
       conic_backend_sdplib.json)]
       [--families] [--cap 60]

SDPLIB part: the Clarabel / SCS runs of ``benchmarks/sdplib.py`` (run it first, e.g.
``python benchmarks/sdplib.py --problems 'control*' 'truss*' arch0 arch2 'hinf*' qap5 qap6 qap7
qap8 gpp100 theta1 theta2 mcp100 --backends clarabel scs --cap 40 --clarabel-max-n 200
--out conic_backend_sdplib``), joined with the rule's inputs per problem (PSD block sides, dense
rows, the largest KKT block ``max n(n+1)/2 + dense rows`` and the old one-block estimate
``sum n(n+1)/2 + dense rows``) and the backend each rule picks. ``better`` is the backend that
was correct (published precision, status optimal) and, if both were, the faster one.

Families part (``--families``): lambda_sum_largest of three matrices (two PSD blocks of side n
per term) and PSDBoost (``row_quad_forms``, D x D block and |S| = 20 D dense rows), Clarabel and
SCS (eps 1e-5) in capped subprocesses, median of 3 solves after an untimed first one, relative
difference to Clarabel's value.

Prints markdown tables, writes benchmarks/results/conic_backend.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks._common import markdown_table, run_json_subprocess, write_json  # noqa: E402
from benchmarks.sdplib import DATA  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def features(problem) -> dict:
    from specopt.reductions import conic_size as backends

    sides = backends.psd_block_sides(problem)
    return {"blocks": len(sides), "max_side": max(sides, default=0),
            "dense_rows": backends.dense_rows(problem),
            "largest_block": backends.largest_kkt_block(problem),
            "one_block": backends.dense_kkt_dimension(problem)}


def rule_old(f: dict) -> str:
    return "CLARABEL" if f["one_block"] <= 300 else "SCS"


def rule_new(f: dict) -> str:
    from specopt.reductions.conic_size import CLARABEL_MAX_DENSE_DIM

    return "CLARABEL" if f["largest_block"] <= CLARABEL_MAX_DENSE_DIM else "SCS"


def sdplib_rows(path: Path) -> list[dict]:
    import specopt

    runs = json.loads(path.read_text())["rows"]
    by: dict[str, dict[str, dict]] = {}
    for r in runs:
        by.setdefault(r["problem"], {})[r["backend"]] = r
    rows = []
    for name, res in by.items():
        f = features(specopt.read_sdpa(DATA / f"{name}.dat-s"))
        c, s = res.get("clarabel", {}), res.get("scs", {})

        def cell(r):
            if not r:
                return "-"
            t = r.get("time")
            err = r.get("rel_err")
            return (f"{r.get('status')} {'' if t is None else f'{t:.3g} s'}"
                    f"{'' if err is None else f' err {err:.1e}'}")

        ok_c, ok_s = bool(c.get("correct")), bool(s.get("correct"))
        if ok_c and ok_s:
            better = "CLARABEL" if c["time"] <= s["time"] else "SCS"
        else:
            better = "CLARABEL" if ok_c else "SCS" if ok_s else "neither"
        rows.append({"problem": name, **f, "clarabel": cell(c), "scs": cell(s),
                     "better": better, "old rule": rule_old(f), "new rule": rule_new(f),
                     "load": c.get("load")})
    return rows


# ---------------------------------------------------------------------------------------------
def family_problem(kind: str, size: int, seed: int = 0):
    import cvxpy as cp
    import numpy as np

    import specopt

    rng = np.random.default_rng(seed)
    if kind == "lsl":  # three lambda_sum_largest terms of one n x n matrix each
        Xs = [cp.Variable((size, size), symmetric=True) for _ in range(3)]
        Cs = [rng.standard_normal((size, size)) for _ in range(3)]
        obj = sum(cp.lambda_sum_largest(X + (C + C.T) / 2, 3) for X, C in zip(Xs, Cs,
                                                                                 strict=True))
        return cp.Problem(cp.Minimize(obj), [cp.trace(X) == 1 for X in Xs] +
                          [cp.norm(X, "fro") <= 1 for X in Xs])
    if kind == "psdboost":  # D x D metric, |S| = 20 D triplet rows
        from tests._helpers import psdboost_triplet_factors

        D = size
        P, Q = psdboost_triplet_factors(D, 20 * D, seed)
        X = cp.Variable((D, D), PSD=True)
        rho, xi = cp.Variable(), cp.Variable(P.shape[0], nonneg=True)
        rows = specopt.row_quad_forms(P, X) - specopt.row_quad_forms(Q, X)
        return cp.Problem(cp.Maximize(rho - 0.1 * cp.sum(xi)),
                          [cp.trace(X) == 1, rows >= rho - xi])
    raise ValueError(kind)


def family_child(kind: str, size: int, backend: str) -> None:
    import time

    import specopt  # noqa: F401  (registers the atoms)

    opts = {"eps": 1e-5} if backend == "SCS" else {}
    times = []
    for _ in range(4):  # the first solve (imports, first compile) is not timed
        prob = family_problem(kind, size)
        t0 = time.perf_counter()
        prob.solve(solver=backend, **opts)
        times.append(time.perf_counter() - t0)
    print(json.dumps({"status": prob.status, "value": prob.value,
                      "time": statistics.median(times[1:]), "worst": max(times[1:])}))


FAMILIES = [("lsl", 10), ("lsl", 20), ("lsl", 30), ("psdboost", 10), ("psdboost", 16),
            ("psdboost", 24)]


def family_rows(cap: float) -> list[dict]:
    rows = []
    for kind, size in FAMILIES:
        f = features(family_problem(kind, size))
        res = {}
        for backend in ("CLARABEL", "SCS"):
            res[backend] = run_json_subprocess(
                [str(Path(__file__).resolve()), "--family-child", kind, str(size), backend],
                timeout=cap, root=ROOT)
        c, s = res["CLARABEL"], res["SCS"]
        diff = (abs(s["value"] - c["value"]) / max(1.0, abs(c["value"]))
                if "value" in c and "value" in s else None)
        rows.append({"problem": f"{kind} {size}", **f,
                     "clarabel": f"{c.get('status', c.get('error'))} {c.get('time', 0):.3g} s",
                     "scs": f"{s.get('status', s.get('error'))} {s.get('time', 0):.3g} s",
                     "scs vs clarabel": diff, "old rule": rule_old(f), "new rule": rule_new(f),
                     "load": os.getloadavg()[0]})
        print(markdown_table([rows[-1]], list(rows[-1])).splitlines()[-1], flush=True)
    return rows


COLUMNS = ["problem", "blocks", "max_side", "dense_rows", "largest_block", "one_block",
           "clarabel", "scs", "better", "old rule", "new rule", "load"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdplib-json", type=Path, default=RESULTS / "conic_backend_sdplib.json")
    ap.add_argument("--families", action="store_true")
    ap.add_argument("--cap", type=float, default=60.0)
    ap.add_argument("--family-child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.family_child:
        kind, size, backend = args.family_child
        family_child(kind, int(size), backend)
        return
    out: dict = {}
    if args.sdplib_json.exists():
        rows = sorted(sdplib_rows(args.sdplib_json), key=lambda r: (r["largest_block"],
                                                                      r["problem"]))
        print(markdown_table(rows, COLUMNS))
        right = {k: sum(1 for r in rows if r["better"] in (r[k], "neither"))
                 for k in ("old rule", "new rule")}
        print(f"\nrule picks the better backend (or neither was correct): old {right['old rule']}"
              f"/{len(rows)}, new {right['new rule']}/{len(rows)}")
        out["sdplib"] = rows
    if args.families:
        fam = family_rows(args.cap)
        print(markdown_table(fam, [c for c in COLUMNS if c != "better"][:7] +
                             ["scs vs clarabel", "old rule", "new rule", "load"]))
        out["families"] = fam
    path = write_json("conic_backend", out.get("sdplib", []) + out.get("families", []),
                      {"sdplib_json": str(args.sdplib_json), "families": args.families})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
