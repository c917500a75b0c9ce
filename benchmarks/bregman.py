"""ITML by Bregman projections (route "bregman") against metric-learn and the conic route.

1. metric-learn 0.7.0's ``ITML`` (pure-Python sweeps) on iris, wine, breast_cancer, digits
   (standardized on the training part of a 70/30 split, random_state=0), SAME constraints (drawn
   by ``specopt.learn.itml.draw_pairs``, 20 * n_classes^2 similar and as many dissimilar pairs, as
   metric-learn's default) and SAME bounds (5th/95th percentiles of squared distances), gamma = 1.
   metric-learn 0.7.0 does not import-check with scikit-learn >= 1.8 (``force_all_finite`` was
   renamed ``ensure_all_finite``); the wheel is unpacked into a temporary directory and that
   keyword is renamed at its five call sites (input validation only; the ITML loop is untouched).
   Each metric-learn run is a subprocess with a time cap, once with its defaults (tol 1e-3 on the
   change of lambda, max_iter 1000) and once with tol 1e-9 ("tight"). The reference W is
   specopt's at tol 1e-10 (certified duality gap and violation).
2. Kernel form (``itml_kernel``) against the conic route (Clarabel, SCS; subprocesses with a
   time cap) on the same kernel problem at n = 50, and the bregman route on the CVXPY model.
3. ``KernelITML`` with n = 2000 training points (generated data), and 1-NN / 3-NN accuracies next
   to Euclidean on the same split; also the route's ``pays_off`` measurement (route vs Clarabel
   on small ITML problems).

Usage: ``python benchmarks/bregman.py [--quick] [--ml-timeout 300] [--parts 1 2 3 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks._common import markdown_table, write_json

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def run_py(code: str, timeout: float) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON line. Returns it or a timeout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    try:
        out = subprocess.run(
            [PY, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "wall": time.perf_counter() - t0}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        return {"status": "error", "error": out.stderr[-2000:]}
    return json.loads(lines[-1])


def metric_learn_path() -> str | None:
    """Unpack metric-learn 0.7.0 into a temp dir with the scikit-learn >= 1.8 keyword shim."""
    tmp = Path(tempfile.mkdtemp(prefix="mlearn"))
    r = subprocess.run(
        [PY, "-m", "pip", "download", "metric-learn==0.7.0", "--no-deps", "-d", str(tmp)],
        capture_output=True,
        text=True,
    )
    wheels = list(tmp.glob("metric_learn-0.7.0*.whl"))
    if r.returncode != 0 or not wheels:
        return None
    import zipfile

    zipfile.ZipFile(wheels[0]).extractall(tmp / "pkg")
    util = tmp / "pkg" / "metric_learn" / "_util.py"
    src = util.read_text()
    # call sites only (keyword arguments passed to sklearn's check_array / check_X_y)
    src = src.replace(
        "copy=copy, force_all_finite=force_all_finite,",
        "copy=copy, ensure_all_finite=force_all_finite,",
    )
    src = re.sub(
        r"(\n\s+(?:copy=False, )?)force_all_finite=False,", r"\1ensure_all_finite=False,", src
    )
    util.write_text(src)
    return str(tmp / "pkg")


def load(name: str):
    from sklearn import datasets
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    sc = StandardScaler().fit(Xtr)
    return sc.transform(Xtr), sc.transform(Xte), ytr, yte


def knn_acc(Ztr, ytr, Zte, yte, k):
    from sklearn.neighbors import KNeighborsClassifier

    return float(KNeighborsClassifier(n_neighbors=k).fit(Ztr, ytr).score(Zte, yte))


def rel_max(A, B):
    return float(np.abs(A - B).max() / np.abs(B).max())


ML_CODE = """
import json, sys, time, numpy as np
sys.path.insert(0, {path!r})
from metric_learn import ITML
d = np.load({data!r})
pairs, y, bounds = d["pairs"], d["y"], d["bounds"]
est = ITML(gamma=1.0, tol={tol}, max_iter={max_iter})
t0 = time.perf_counter(); est.fit(pairs, y, bounds=bounds); t = time.perf_counter() - t0
np.save({out!r}, est.get_mahalanobis_matrix())
print(json.dumps({{"status": "ok", "time": t, "n_iter": int(est.n_iter_)}}))
"""


# --------------------------------------------------------------------------------------------
# part 1: metric-learn
# --------------------------------------------------------------------------------------------
def part_metric_learn(datasets, timeout, quick, ref_cap=240.0):
    from specopt.learn.itml import draw_pairs
    from specopt.solvers.bregman import itml_linear

    mlpath = metric_learn_path()
    rows, knn_rows = [], []
    for name in datasets:
        Xtr, Xte, ytr, yte = load(name)
        c = np.unique(ytr).size
        P, sides = draw_pairs(ytr, 20 * c * c, random_state=0)
        pairs = np.stack([Xtr[P[:, 0]], Xtr[P[:, 1]]], axis=1)
        V = pairs[:, 0] - pairs[:, 1]
        # default bounds of specopt's ITML: percentiles of squared distances of distinct points
        pts = np.unique(pairs.reshape(-1, Xtr.shape[1]), axis=0)
        g = np.sum(pts * pts, axis=1)
        sq = np.maximum(g[:, None] + g[None] - 2 * pts @ pts.T, 0)[np.triu_indices(len(pts), 1)]
        bounds = np.percentile(sq[sq > 0], (5, 95))
        b = np.where(sides > 0, bounds[0], bounds[1])
        big = len(sides) * Xtr.shape[1] ** 2 > 1e6
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            itml_linear(V[:3], b[:3], sides[:3], None, 1.0, tol=1e-8)  # warm (numba cache load)
            times = []
            for _ in range(1 if (quick or big) else 3):
                t0 = time.perf_counter()
                res = itml_linear(V, b, sides, None, 1.0, tol=1e-8)
                times.append(time.perf_counter() - t0)
            # reference: certified to 1e-10 or as far as ref_cap seconds allow
            ref = itml_linear(V, b, sides, None, 1.0, tol=1e-10, time_limit=ref_cap)
        Wref = ref.W
        t_spec = float(np.median(times))
        row = {
            "dataset": name,
            "d": Xtr.shape[1],
            "m": len(sides),
            "specopt_s": t_spec,
            "specopt_sweeps": res.iterations,
            "specopt_status": res.status,
            "specopt_gap": res.gap,
            "specopt_viol": res.max_violation,
            "specopt_W_err": rel_max(res.W, Wref),
            "specopt_ms_per_sweep": 1e3 * t_spec / res.iterations,
            "ref_status": ref.status,
            "ref_gap": ref.gap,
        }
        if mlpath is not None:
            with tempfile.TemporaryDirectory() as td:
                data = os.path.join(td, "d.npz")
                np.savez(data, pairs=pairs, y=sides, bounds=bounds)
                for tag, tol, max_iter in (("ml", 1e-3, 1000), ("ml_tight", 1e-9, 10**6)):
                    out = os.path.join(td, f"{tag}.npy")
                    code = ML_CODE.format(
                        path=mlpath, data=data, tol=tol, max_iter=max_iter, out=out
                    )
                    r = run_py(code, timeout)
                    row[f"{tag}_status"] = r["status"]
                    if r["status"] == "ok":
                        row[f"{tag}_s"] = r["time"]
                        row[f"{tag}_sweeps"] = r["n_iter"] + 1
                        row[f"{tag}_W_err"] = rel_max(np.load(out), Wref)
                        row[f"{tag}_converged"] = r["n_iter"] + 1 < max_iter
                        row[f"{tag}_ratio"] = r["time"] / t_spec
                        row[f"{tag}_ms_per_sweep"] = 1e3 * r["time"] / (r["n_iter"] + 1)
                    else:
                        row[f"{tag}_s"] = f">{timeout:.0f}" if r["status"] == "timeout" else None
        if "ml_ms_per_sweep" in row:
            # same algorithm and sweep count (checked where both converge): metric-learn's time
            # to the certified solution, estimated from its measured time per sweep
            row["ml_est_s"] = row["ml_ms_per_sweep"] * res.iterations / 1e3
            row["ml_est_ratio"] = row["ml_est_s"] / t_spec
        rows.append(row)
        ev, U = np.linalg.eigh(Wref)
        L = (U * np.sqrt(np.maximum(ev, 0))).T
        knn_rows.append(
            {
                "dataset": name,
                "euclid_1nn": knn_acc(Xtr, ytr, Xte, yte, 1),
                "itml_1nn": knn_acc(Xtr @ L.T, ytr, Xte @ L.T, yte, 1),
                "euclid_3nn": knn_acc(Xtr, ytr, Xte, yte, 3),
                "itml_3nn": knn_acc(Xtr @ L.T, ytr, Xte @ L.T, yte, 3),
            }
        )
        print(rows[-1], flush=True)
    return rows, knn_rows, mlpath is not None


# --------------------------------------------------------------------------------------------
# part 2: kernel form vs conic at n = 50
# --------------------------------------------------------------------------------------------
CONIC_CODE = """
import json, time, numpy as np, cvxpy as cp, specopt
d = np.load({data!r})
K0, E, b, s = d["K0"], d["E"], d["b"], d["s"]
n = K0.shape[0]
K = cp.Variable((n, n), PSD=True); xi = cp.Variable(len(b))
S, D = np.flatnonzero(s > 0), np.flatnonzero(s < 0)
prob = cp.Problem(cp.Minimize(specopt.logdet_div(K, K0) + specopt.burg_div(xi, b)),
    [specopt.row_quad_forms(E[S], K) <= xi[S], specopt.row_quad_forms(E[D], K) >= xi[D]])
t0 = time.perf_counter()
specopt.solve(prob, route={route!r}, solver={solver!r})
t = time.perf_counter() - t0
np.save({out!r}, K.value)
print(json.dumps({{"status": prob.status, "time": t, "value": prob.value}}))
"""


def part_kernel_vs_conic(timeout, n=50):
    from specopt.learn.itml import draw_pairs
    from specopt.solvers.bregman import itml_kernel

    rng = np.random.default_rng(0)
    Z = rng.standard_normal((n, 5))
    y = (Z[:, 0] + 0.5 * Z[:, 1] > 0).astype(int) + (Z[:, 2] > 0.8)
    D2 = np.sum((Z[:, None] - Z[None]) ** 2, axis=-1)
    K0 = np.exp(-0.1 * D2)
    P, sides = draw_pairs(y, 2 * n, random_state=0)
    u, l = np.percentile(2 - 2 * K0[np.triu_indices(n, 1)], (5, 95))
    b = np.where(sides > 0, u, l)
    E = np.zeros((len(P), n))
    E[np.arange(len(P)), P[:, 0]] = 1
    E[np.arange(len(P)), P[:, 1]] = -1
    itml_kernel(K0, P, b, sides, 1.0, tol=1e-8)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        res = itml_kernel(K0, P, b, sides, 1.0, tol=1e-8)
        times.append(time.perf_counter() - t0)
    t_k = float(np.median(times))
    obj = res.primal
    rows = [
        {
            "method": "itml_kernel (specopt)",
            "time_s": t_k,
            "status": res.status,
            "objective": obj,
            "K_err": 0.0,
            "ratio": 1.0,
        }
    ]
    with tempfile.TemporaryDirectory() as td:
        data = os.path.join(td, "k.npz")
        np.savez(data, K0=K0, E=E, b=b, s=sides)
        for route, solver in (("bregman", None), ("conic", "CLARABEL"), ("conic", "SCS")):
            out = os.path.join(td, "K.npy")
            r = run_py(CONIC_CODE.format(data=data, route=route, solver=solver, out=out), timeout)
            row = {
                "method": f"route={route}" + (f" ({solver})" if solver else ""),
                "status": r["status"],
            }
            if "time" in r:
                row.update(
                    time_s=r["time"],
                    objective=r["value"],
                    ratio=r["time"] / t_k,
                    K_err=rel_max(np.load(out), res.K),
                )
            else:
                row["time_s"] = f">{timeout:.0f}" if r["status"] == "timeout" else None
            rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------
# part 3: Kernel ITML at n = 2000
# --------------------------------------------------------------------------------------------
def part_kernel_itml(n_train=2000, classes=(2, 5)):
    from sklearn.datasets import make_classification
    from sklearn.metrics.pairwise import rbf_kernel
    from sklearn.model_selection import train_test_split
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.preprocessing import StandardScaler

    from specopt.learn.itml import KernelITML

    rows = []
    for c in classes:
        X, y = make_classification(
            n_samples=int(n_train / 0.7) + 1,
            n_features=20,
            n_informative=8,
            n_classes=c,
            n_clusters_per_class=2,
            random_state=0,
        )
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
        sc = StandardScaler().fit(Xtr)
        Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
        width = 1.0 / Xtr.shape[1]
        est = KernelITML(kernel="rbf", kernel_params={"gamma": width}, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            est.fit(Xtr, ytr)
            t = time.perf_counter() - t0
        res = est.result_
        Dtr = est.pairwise_distances(Xtr)
        Dte = est.pairwise_distances(Xte, Xtr)
        Ktr = rbf_kernel(Xtr, gamma=width)
        Kte = rbf_kernel(Xte, Xtr, gamma=width)
        B_tr = np.sqrt(np.maximum(2 - 2 * Ktr, 0))
        B_te = np.sqrt(np.maximum(2 - 2 * Kte, 0))
        row = {
            "classes": c,
            "n_train": len(ytr),
            "constraints": len(est.sides_),
            "support": len(est.X_support_),
            "fit_s": t,
            "sweeps": res.iterations,
            "status": res.status,
            "gap": res.gap,
            "viol": res.max_violation,
        }
        for k in (1, 3):
            row[f"euclid_{k}nn"] = knn_acc(Xtr, ytr, Xte, yte, k)
            for tag, Dt, De in (("rbf", B_tr, B_te), ("kitml", Dtr, Dte)):
                knn = KNeighborsClassifier(n_neighbors=k, metric="precomputed").fit(Dt, ytr)
                row[f"{tag}_{k}nn"] = float(knn.score(De, yte))
        rows.append(row)
        print(row, flush=True)
    return rows


# --------------------------------------------------------------------------------------------
# part 4: route vs Clarabel on small ITML problems (the pays_off measurement)
# --------------------------------------------------------------------------------------------
ROUTE_CODE = """
import json, time, numpy as np, cvxpy as cp, specopt
rng = np.random.default_rng({seed})
d, m = {d}, {m}
X = rng.standard_normal((d, 3 * m))
V = X[:, :m] - X[:, m:2 * m]
V = V.T
s = np.where(np.arange(m) % 2 == 0, 1.0, -1.0)
dist = np.sum(V ** 2, axis=1)
b = np.where(s > 0, np.percentile(dist, 5), np.percentile(dist, 95))
W = cp.Variable((d, d), PSD=True); xi = cp.Variable(m)
S, D = np.flatnonzero(s > 0), np.flatnonzero(s < 0)
prob = cp.Problem(cp.Minimize(specopt.logdet_div(W, np.eye(d)) + specopt.burg_div(xi, b)),
    [specopt.row_quad_forms(V[S], W) <= xi[S], specopt.row_quad_forms(V[D], W) >= xi[D]])
out = {{}}
specopt.solve(prob, route="bregman")
for route, solver in (("bregman", None), ("conic", "CLARABEL")):
    t0 = time.perf_counter(); specopt.solve(prob, route=route, solver=solver)
    out[route] = time.perf_counter() - t0; out[route + "_value"] = prob.value
print(json.dumps(out))
"""


def part_pays_off(timeout, sizes):
    rows = []
    for d, m in sizes:
        r = run_py(ROUTE_CODE.format(seed=0, d=d, m=m), timeout)
        row = {"d": d, "m": m}
        if "bregman" in r:
            row.update(
                bregman_s=r["bregman"],
                clarabel_s=r["conic"],
                ratio=r["conic"] / r["bregman"],
                obj_diff=abs(r["bregman_value"] - r["conic_value"]) / max(1, abs(r["conic_value"])),
            )
        else:
            row["status"] = r.get("status")
        rows.append(row)
        print(row, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="iris/wine only, short caps")
    ap.add_argument("--ml-timeout", type=float, default=300.0)
    ap.add_argument("--conic-timeout", type=float, default=600.0)
    ap.add_argument("--parts", type=int, nargs="*", default=[1, 2, 3, 4])
    ap.add_argument("--datasets", nargs="*", default=None)
    ap.add_argument("--name", default="bregman", help="JSON name in benchmarks/results")
    args = ap.parse_args()
    datasets = ["iris", "wine"] if args.quick else ["iris", "wine", "breast_cancer", "digits"]
    datasets = args.datasets or datasets
    meta = {
        "note": "timings on a shared 2-core machine (several agents running)",
        "threads": "OMP/OPENBLAS/MKL/NUMBA threads = 1",
    }
    results: dict = {}
    out_md = []
    if 1 in args.parts:
        rows, knn_rows, have_ml = part_metric_learn(datasets, args.ml_timeout, args.quick)
        meta["metric_learn"] = "0.7.0 (keyword shim)" if have_ml else "not available"
        results["metric_learn"], results["knn"] = rows, knn_rows
        cols = [
            "dataset",
            "d",
            "m",
            "specopt_s",
            "specopt_sweeps",
            "specopt_status",
            "specopt_gap",
            "specopt_W_err",
            "ml_s",
            "ml_sweeps",
            "ml_converged",
            "ml_W_err",
            "ml_ratio",
            "ml_tight_s",
            "ml_tight_sweeps",
            "ml_tight_W_err",
            "ml_tight_ratio",
            "ml_est_s",
            "ml_est_ratio",
        ]
        out_md += ["### ITML: specopt vs metric-learn 0.7.0", markdown_table(rows, cols)]
        out_md += [
            "### k-NN test accuracy (ITML metric vs Euclidean)",
            markdown_table(
                knn_rows, ["dataset", "euclid_1nn", "itml_1nn", "euclid_3nn", "itml_3nn"]
            ),
        ]
    if 2 in args.parts:
        rows = part_kernel_vs_conic(args.conic_timeout)
        results["kernel_vs_conic"] = rows
        out_md += [
            "### Kernel form vs conic route, n = 50",
            markdown_table(rows, ["method", "time_s", "ratio", "status", "objective", "K_err"]),
        ]
    if 3 in args.parts:
        rows = part_kernel_itml(classes=(2,) if args.quick else (2, 5))
        results["kernel_itml_2000"] = rows
        out_md += [
            "### KernelITML, n = 2000 training points",
            markdown_table(
                rows,
                [
                    "classes",
                    "n_train",
                    "constraints",
                    "support",
                    "fit_s",
                    "sweeps",
                    "status",
                    "gap",
                    "euclid_1nn",
                    "rbf_1nn",
                    "kitml_1nn",
                    "euclid_3nn",
                    "rbf_3nn",
                    "kitml_3nn",
                ],
            ),
        ]
    if 4 in args.parts:
        sizes = [(5, 20), (10, 100)] if args.quick else [(5, 20), (10, 100), (20, 200), (30, 400)]
        rows = part_pays_off(args.conic_timeout, sizes)
        results["pays_off"] = rows
        out_md += [
            "### Route bregman vs conic (Clarabel), gamma = 1",
            markdown_table(rows, ["d", "m", "bregman_s", "clarabel_s", "ratio", "obj_diff"]),
        ]
    text = "\n\n".join(out_md)
    print(text)
    flat = [dict(part=k, **r) for k, v in results.items() for r in v]
    write_json(args.name, flat, meta)


if __name__ == "__main__":
    main()
