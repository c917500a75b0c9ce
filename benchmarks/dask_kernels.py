"""The two per-block kernels of a Dask PSDBoost round on one block of index triples, this
checkout against an older ``dask_rows.py`` (A/B, same data, same process): the cut matrix
(``_trip_gram``, the Laplacian form) over all rows and over 10% of them, and the activities
(``_trip_quad``) at rank 30 in double and single precision. CPU seconds (best of 3), the
largest difference of the cut matrices, the load average.

    git show <commit>:specopt/solvers/mg/dask_rows.py > /tmp/old/old_rows.py
    python benchmarks/dask_kernels.py --data DIR --old /tmp/old/old_rows.py

(data: a directory of ``benchmarks/dask_triplets.py`` with ``points.zarr`` / ``triplets.zarr``).
Writes ``benchmarks/results/dask_kernels.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _load_old(path: str):
    src = Path(path).read_text().replace("from ._lazy_rows", "from specopt.solvers.mg._lazy_rows")
    src = src.replace("from ._operators", "from specopt.solvers.mg._operators")
    tmp = Path(path).with_name("_old_dask_rows_patched.py")
    tmp.write_text(src)
    spec = importlib.util.spec_from_file_location("old_rows", tmp)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _best(fn, reps: int = 3) -> tuple[float, object]:
    ts, out = [], None
    for _ in range(reps):
        c0 = time.process_time()
        out = fn()
        ts.append(time.process_time() - c0)
    return min(ts), out


def main() -> None:
    import zarr

    from specopt.solvers.mg import dask_rows as new

    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--old", required=True, help="an older specopt/solvers/mg/dask_rows.py")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "dask_kernels.json"))
    args = ap.parse_args()
    old = _load_old(args.old)
    X = zarr.open_array(f"{args.data}/points.zarr")[:]
    T = zarr.open_array(f"{args.data}/triplets.zarr")[: args.rows]
    rng = np.random.default_rng(0)
    rec: dict = {"rows": int(T.shape[0]), "D": int(X.shape[1]), "N": int(X.shape[0]),
                 "load_start": os.getloadavg()}
    for name, idx in (("cut, all rows", np.arange(T.shape[0])),
                      ("cut, 10% of rows", np.sort(rng.choice(T.shape[0], T.shape[0] // 10,
                                                              replace=False)))):
        got = {}
        for tag, mod in (("before", old), ("after", new)):
            b = [mod._TripBlock(T, X, 0, 2), mod._TripBlock(T, X, 0, 1)]
            got[tag] = _best(lambda mod=mod, b=b, idx=idx: mod._trip_gram(b, idx, [1.0, -1.0]))
        rec[name] = {"before_cpu_s": got["before"][0], "after_cpu_s": got["after"][0],
                     "max_abs_diff": float(np.abs(got["before"][1] - got["after"][1]).max()),
                     "max_abs": float(np.abs(got["before"][1]).max())}
    U = np.linalg.qr(rng.normal(size=(X.shape[1], 30)))[0]
    b = [new._TripBlock(T, X, 0, 2), new._TripBlock(T, X, 0, 1)]
    acts = {}
    for dt in (np.float64, np.float32):
        def run(dt=dt):
            new._LAST_PRODUCT.clear()
            return new._trip_quad(U, (1.0, -1.0), b, dt)
        t, a = _best(run)
        acts[np.dtype(dt).name] = a
        rec[f"activities rank 30, {np.dtype(dt).name} [cpu s]"] = t
    rec["activities float32 max relative error"] = float(
        np.abs(acts["float32"] - acts["float64"]).max() / np.abs(acts["float64"]).max())
    rec["load"] = os.getloadavg()
    print(json.dumps(rec, indent=1))
    out = Path(args.out)
    old_recs = json.loads(out.read_text())["records"] if out.exists() else []
    out.write_text(json.dumps({"records": old_recs + [rec]}, indent=1))


if __name__ == "__main__":
    main()
