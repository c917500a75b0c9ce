"""Large-margin transformation learning: accuracy (thesis synthetic, digits) and solver timing.

Parts (``--part``):

* ``synthetic``: the thesis's experiment (Howard 2009, Sec. 8.2): 600 points in [0,1]^2 off a
  random line (margin 0.05), inputs distorted by identity / normalized log / square (targets
  "Linear", "Exponential", "Square root"), 200/200/200 train/validation/test, 10 runs; C picked
  on the validation set from ``C_GRID``. Test error (%) of Linear SVM, mixture of kernels (MKL),
  greedy mixture, matrix mixture, MW-TLA, next to the thesis's averages 2.58/1.13/0.43/0.25/0.18.
* ``digits``: scikit-learn digits, classes {3,5,8,9}, the 6 pairwise tasks, 80/10/10 splits, and
  the multitask matrix mixture (one M shared by the six tasks).
* ``timing``: time to a certified relative gap 1e-4 against N (J = 10 ramps, D = 10, C = 1,
  with a bias unless ``--no-bias``) for the conic compact form (LMI of size J + D, Clarabel),
  matrix generation (QCQP master, Clarabel) and extragradient, plus the thesis's generic
  (N+1) x (N+1) Schur SDP (Clarabel, N <= 200 only). Every case runs in its own subprocess
  with a time cap.

Usage: ``python benchmarks/transformation.py [--part all] [--runs 10] [--sizes 200 1000 5000
20000] [--timeout 120]``. Writes ``benchmarks/results/transformation.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks._common import markdown_table, write_json

C_GRID = (0.1, 1.0, 10.0, 100.0)
THESIS_SYNTH = {"linear": 2.58, "mkl": 1.13, "greedy": 0.43, "matrix": 0.25, "mwtla": 0.18}
METHODS = ("linear", "mkl", "greedy", "matrix", "mwtla")

warnings.filterwarnings("ignore", category=UserWarning)


# ----------------------------------------------------------------------------------- data


def synth_points(n: int, rng: np.random.Generator, D: int = 2, margin: float = 0.05):
    """n points uniform in [0,1]^D at distance >= margin from a random line through the centre."""
    w = rng.normal(size=D)
    w /= np.linalg.norm(w)
    out = np.empty((0, D))
    while out.shape[0] < n:
        X = rng.uniform(size=(4 * n, D))
        out = np.vstack([out, X[np.abs((X - 0.5) @ w) >= margin]])
    X = out[:n]
    return X, np.where((X - 0.5) @ w > 0, 1, -1)


DISTORT = {
    "Linear": lambda X: X,
    "Exponential": lambda X: np.log(X + 0.01) - np.log(0.01),  # inverse of the target exp
    "Square root": lambda X: X**2,  # inverse of the target sqrt
}


# ----------------------------------------------------------------------------- methods


def _fit_predict(method: str, C: float, Xtr, ytr, Xev_list, n_ramps: int = 10):
    from sklearn.svm import SVC

    from specopt.learn.transformation import RampFeatures, TransformationSVM
    from specopt.solvers.transformation import make_tasks, mwtla

    if method == "linear":
        est = SVC(kernel="linear", C=C).fit(Xtr, ytr)
        return [est.predict(X) for X in Xev_list]
    if method == "mwtla":
        rf = RampFeatures(n_ramps).fit(Xtr)
        Ftr = rf.transform_tensor(Xtr)
        ys = np.where(ytr == np.unique(ytr)[1], 1.0, -1.0)
        M, _ = mwtla(make_tasks(Ftr, ys, C))
        u = np.linalg.eigh(M)[1][:, -1]
        u = u if u.sum() >= 0 else -u

        def feats(X):
            return np.einsum("njd,j->nd", rf.transform_tensor(X), u)

        est = SVC(kernel="linear", C=C).fit(feats(Xtr), ytr)
        return [est.predict(feats(X)) for X in Xev_list]
    model = {"mkl": "kernels", "greedy": "mixture", "matrix": "matrix"}[method]
    est = TransformationSVM(n_ramps=n_ramps, model=model, C=C).fit(Xtr, ytr)
    return [est.predict(X) for X in Xev_list]


def _select_and_test(method, Xtr, ytr, Xva, yva, Xte, yte, grid=C_GRID):
    best = None
    for C in grid:
        pva, pte = _fit_predict(method, C, Xtr, ytr, [Xva, Xte])
        err_va, err_te = np.mean(pva != yva), np.mean(pte != yte)
        if best is None or err_va < best[0]:
            best = (err_va, err_te, C)
    return 100.0 * best[1], best[2]


def run_synthetic(runs: int) -> list[dict]:
    rows = []
    for target, distort in DISTORT.items():
        errs = {m: [] for m in METHODS}
        for r in range(runs):
            rng = np.random.default_rng(100 + r)
            X, y = synth_points(600, rng)
            X = distort(X)
            tr, va, te = slice(0, 200), slice(200, 400), slice(400, 600)
            for m in METHODS:
                e, _ = _select_and_test(m, X[tr], y[tr], X[va], y[va], X[te], y[te])
                errs[m].append(e)
        rows.append({"target": target, **{m: float(np.mean(v)) for m, v in errs.items()}})
        print(f"  synthetic {target}: " + ", ".join(f"{m} {np.mean(v):.2f}"
                                                     for m, v in errs.items()), flush=True)
    rows.append({"target": "Avg.", **{m: float(np.mean([r[m] for r in rows])) for m in METHODS}})
    rows.append({"target": "thesis Avg.", **THESIS_SYNTH})
    return rows


def run_digits(runs: int) -> tuple[list[dict], list[dict]]:
    from sklearn.datasets import load_digits

    from specopt.learn.transformation import MultitaskTransformationSVM

    X, y = load_digits(return_X_y=True)
    classes = (3, 5, 8, 9)
    pairs = [(a, b) for i, a in enumerate(classes) for b in classes[i + 1:]]
    single = {p: {m: [] for m in METHODS} for p in pairs}
    multi = {p: [] for p in pairs}
    for r in range(runs):
        rng = np.random.default_rng(200 + r)
        splits = {}
        for p in pairs:
            idx = rng.permutation(np.nonzero(np.isin(y, p))[0])
            n = idx.size
            tr, va, te = idx[: int(0.8 * n)], idx[int(0.8 * n): int(0.9 * n)], idx[int(0.9 * n):]
            splits[p] = (tr, va, te)
            for m in METHODS:
                e, _ = _select_and_test(m, X[tr], y[tr], X[va], y[va], X[te], y[te],
                                        grid=(1.0, 10.0))
                single[p][m].append(e)
        # multitask: one shared M for the six tasks, C by validation on the summed error
        best = None
        for C in (1.0, 10.0):
            mt = MultitaskTransformationSVM(n_ramps=10, C=C, solver="conic", bias=True).fit(
                [X[s[0]] for s in splits.values()], [y[s[0]] for s in splits.values()])
            va_err = np.mean([np.mean(mt.predict(X[s[1]], task=k) != y[s[1]])
                              for k, s in enumerate(splits.values())])
            te_err = [100 * np.mean(mt.predict(X[s[2]], task=k) != y[s[2]])
                      for k, s in enumerate(splits.values())]
            if best is None or va_err < best[0]:
                best = (va_err, te_err)
        for k, p in enumerate(pairs):
            multi[p].append(best[1][k])
        print(f"  digits run {r}: done", flush=True)
    rows = [{"task": f"{a} vs {b}", **{m: float(np.mean(single[(a, b)][m])) for m in METHODS},
             "multitask": float(np.mean(multi[(a, b)]))} for a, b in pairs]
    rows.append({"task": "Avg.", **{m: float(np.mean([r[m] for r in rows]))
                                    for m in (*METHODS, "multitask")}})
    return rows, []


# ------------------------------------------------------------------------------ timing


def _timing_instance(N: int, D: int = 10, J: int = 10, seed: int = 0):
    from specopt.learn.transformation import RampFeatures
    from specopt.solvers.transformation import make_tasks

    rng = np.random.default_rng(seed)
    X, y = synth_points(N, rng, D=D)
    X = DISTORT["Exponential"](X)
    F = RampFeatures(J).fit(X).transform_tensor(X)
    return make_tasks(F, y.astype(float), 1.0)


def _schur_sdp(tasks, bias, solver="CLARABEL"):
    """The thesis's generic SDP: min t over M (spectraplex), nu, delta >= 0 (and b free with a
    bias) with [[Y K(M) Y, 1 + nu - delta + b y], [., t - 2 C 1^T delta]] >> 0 (size N + 1)."""
    import cvxpy as cp

    t0 = time.perf_counter()
    task = tasks[0]
    N, J = task.n, task.J
    Yphi = [task.y[:, None] * task.F[:, j, :] for j in range(J)]
    M = cp.Variable((J, J), PSD=True)
    K = sum(M[i, j] * (Yphi[i] @ Yphi[j].T) for i in range(J) for j in range(J))
    K = (K + K.T) / 2
    nu, delta, t = cp.Variable(N, nonneg=True), cp.Variable(N, nonneg=True), cp.Variable()
    b = cp.Variable() if bias else 0.0
    v = cp.reshape(1 + nu - delta + b * task.y, (N, 1), order="F")
    S = cp.bmat([[K, v], [v.T, cp.reshape(t - 2 * task.C * cp.sum(delta), (1, 1), order="F")]])
    prob = cp.Problem(cp.Minimize(t), [S >> 0, cp.trace(M) <= 1])
    prob.solve(solver=solver)
    return {"value": float(prob.value), "time": time.perf_counter() - t0, "gap": None,
            "status": prob.status}


def one_timing_case(method: str, N: int, bias: bool, tol: float = 1e-4) -> dict:
    from specopt.learn._transformation_cvx import qcqp_master, solve_conic
    from specopt.solvers.extragradient import extragradient
    from specopt.solvers.transformation import matrix_generation

    tasks = _timing_instance(N)
    t0 = time.perf_counter()
    if method == "conic":
        r = solve_conic(tasks, bias=bias)
        its = 1
    elif method == "matrix_generation":
        r = matrix_generation(tasks, qcqp_master(), bias=bias, tol=tol, max_iter=500)
        its = r.iterations
    elif method == "extragradient":
        r = extragradient(tasks, bias=bias, tol=tol, max_iter=10**7)
        its = r.iterations
    elif method == "schur_sdp":
        return _schur_sdp(tasks, bias)
    else:
        raise ValueError(method)
    return {"value": r.upper, "gap": r.gap, "time": time.perf_counter() - t0, "iterations": its}


def run_timing(sizes, timeout: float, bias: bool) -> list[dict]:
    rows = []
    here = Path(__file__).resolve()
    for N in sizes:
        row = {"N": N}
        for method in ("conic", "matrix_generation", "extragradient", "schur_sdp"):
            if method == "schur_sdp" and N > 200:
                row[method] = None
                continue
            cmd = [sys.executable, "-m", "benchmarks.transformation", "--case", method, str(N),
                   "--bias" if bias else "--no-bias"]
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                     cwd=here.parent.parent)
                res = json.loads(out.stdout.strip().splitlines()[-1])
                row[method] = res["time"]
                row[f"{method}_gap"] = res["gap"]
                row[f"{method}_value"] = res["value"]
                row[f"{method}_iters"] = res.get("iterations")
            except subprocess.TimeoutExpired:
                row[method] = f">{timeout:g}"
            except Exception as exc:  # report, never hide
                row[method] = f"error: {exc}"
        print("  timing", row, flush=True)
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="all", choices=["all", "synthetic", "digits", "timing"])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--digit-runs", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 1000, 5000, 20000])
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--case", nargs=2, metavar=("METHOD", "N"))
    ap.add_argument("--bias", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(one_timing_case(args.case[0], int(args.case[1]), args.bias)))
        return
    out = {}
    if args.part in ("all", "synthetic"):
        out["synthetic"] = run_synthetic(args.runs)
        print("\n### Synthetic (test error %, mean of", args.runs, "runs)\n")
        print(markdown_table(out["synthetic"], ["target", *METHODS]))
    if args.part in ("all", "digits"):
        out["digits"], _ = run_digits(args.digit_runs)
        print(f"\n### Digits {{3,5,8,9}} pairs (test error %, mean of {args.digit_runs} runs)\n")
        print(markdown_table(out["digits"], ["task", *METHODS, "multitask"]))
    if args.part in ("all", "timing"):
        key = "timing" if args.bias else "timing_no_bias"
        out[key] = run_timing(args.sizes, args.timeout, args.bias)
        print(f"\n### Time (s) to a certified relative gap 1e-4 (J = 10, D = 10, "
              f"bias={args.bias})\n")
        cols = ["N", "conic", "conic_gap", "matrix_generation", "matrix_generation_gap",
                "matrix_generation_iters", "extragradient", "extragradient_gap",
                "extragradient_iters", "schur_sdp"]
        print(markdown_table(out[key], cols))
    prev = {}
    path = Path(__file__).resolve().parent / "results" / "transformation.json"
    if path.exists():
        prev = json.loads(path.read_text()).get("meta", {}).get("parts", {})
    prev.update(out)
    write_json("transformation", [], meta={"parts": prev, "runs": args.runs,
                                           "note": "timings on a shared, loaded 2-core machine"})


if __name__ == "__main__":
    main()
