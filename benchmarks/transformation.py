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

* ``family`` (not in ``all``): the timing over instance FAMILIES: ``--per-size`` members per N
  (default 4; N = 50, 200, 1000), varying C (0.1, 1, 10), the input distortion, the margin
  (0.01-0.2), label noise (0 or 5 % flipped) and per-feature input scales (see
  :func:`family_spec`). Every (member, method) runs in its own capped subprocess; the solve of
  a small member first gives the first-call cost, reported separately. Reported per N: median
  and worst ratio of each method's time to the conic form's (same member, same run), and on
  how many members the conic form (what ``solver="auto"`` uses) was the fastest.
  Writes ``benchmarks/results/transformation_family.json``.

Usage: ``python benchmarks/transformation.py [--part all] [--runs 10] [--sizes 200 1000 5000
20000] [--timeout 120]``; ``python -m benchmarks.transformation --part family [--sizes 50 200
1000] [--per-size 4] [--timeout 60]``. Writes ``benchmarks/results/transformation.json``.
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
    """The single-instance timing table (one instance per N, ``--part timing``)."""
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


# ------------------------------------------------------------------------ timing families

#: what varies over a family (member i of a size takes entry i modulo the length, see
#: :func:`family_spec`)
FAMILY_AXES = {
    "C": (1.0, 0.1, 10.0),
    "distortion": ("Exponential", "Linear", "Square root"),
    "margin": (0.05, 0.01, 0.2),
    "label_noise": (0.0, 0.05),
    "scales": ("unit", "loguniform"),
}
FAMILY_METHODS = ("conic", "matrix_generation", "extragradient", "schur_sdp")
#: the thesis's (N+1) x (N+1) Schur SDP is only run up to this N (it takes minutes above)
SCHUR_MAX_N = 100


def family_spec(i: int, N: int) -> dict:
    """Member ``i`` of the size-N family: C, input distortion, margin around the separating
    line (0.01: nearly touching classes), label noise (5 % flipped: not separable, many bounded
    alphas) and per-feature input scales (``loguniform``: two decades, which moves the global
    ramp knots) vary; D = 10 inputs, J = 10 ramps."""
    ax = FAMILY_AXES
    return {"seed": 5000 + 17 * N + i, "C": ax["C"][i % 3],
            "distortion": ax["distortion"][(i + i // 3) % 3],
            "margin": ax["margin"][(i // 2) % 3], "label_noise": ax["label_noise"][(i // 3) % 2],
            "scales": ax["scales"][(i // 2) % 2]}


def family_tasks(N: int, spec: dict, D: int = 10, J: int = 10):
    """The SaddleTask of one family member (see :func:`family_spec`)."""
    from specopt.learn.transformation import RampFeatures
    from specopt.solvers.transformation import make_tasks

    rng = np.random.default_rng(spec["seed"])
    X, y = synth_points(N, rng, D=D, margin=spec["margin"])
    flip = rng.random(N) < spec["label_noise"]
    y = np.where(flip, -y, y)
    X = DISTORT[spec["distortion"]](X)
    if spec["scales"] == "loguniform":
        X = X * np.exp(rng.uniform(np.log(0.1), np.log(10.0), D))
    F = RampFeatures(J).fit(X).transform_tensor(X)
    return make_tasks(F, y.astype(float), spec["C"])


def _solve_method(method: str, tasks, bias: bool, tol: float, time_limit: float) -> dict:
    from specopt.learn._transformation_cvx import face_polish, qcqp_master, solve_conic
    from specopt.solvers.extragradient import extragradient
    from specopt.solvers.transformation import matrix_generation

    t0 = time.perf_counter()
    if method == "conic":
        r = solve_conic(tasks, bias=bias)
        return {"value": r.upper, "gap": r.gap, "time": time.perf_counter() - t0,
                "iterations": 1, "status": r.status}
    if method == "matrix_generation":
        r = matrix_generation(tasks, qcqp_master(), bias=bias, tol=tol, max_iter=500,
                              time_limit=time_limit, polish=face_polish())
    elif method == "extragradient":
        r = extragradient(tasks, bias=bias, tol=tol, max_iter=10**7, time_limit=time_limit)
    elif method == "schur_sdp":
        out = _schur_sdp(tasks, bias)
        return {**out, "time": time.perf_counter() - t0}
    else:
        raise ValueError(method)
    return {"value": r.upper, "gap": r.gap, "time": time.perf_counter() - t0,
            "iterations": r.iterations, "status": "optimal" if r.gap <= tol else "not certified"}


def one_family_case(method: str, N: int, i: int, bias: bool, tol: float = 1e-4,
                    time_limit: float = 600.0) -> dict:
    """Family member ``i`` of size N solved by ``method`` in this (fresh) process.

    A small member (N = 40) is solved first, twice: first minus repeat is the first-call cost
    (CVXPY/solver set-up, compilation), reported separately; the timed solve is then warm."""
    import os

    small = family_tasks(40, family_spec(0, 40))
    t0 = time.perf_counter()
    _solve_method(method, small, bias, tol, time_limit)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    _solve_method(method, small, bias, tol, time_limit)
    rec = {"method": method, "N": N, "i": i, "spec": family_spec(i, N), "bias": bias,
           "first_call_overhead": first - (time.perf_counter() - t0),
           "load_before": os.getloadavg()[0]}
    rec.update(_solve_method(method, family_tasks(N, rec["spec"]), bias, tol, time_limit))
    rec["load_after"] = os.getloadavg()[0]
    return rec


def run_family(sizes, per_size: int, methods, cap: float, bias: bool, save=None) -> list[dict]:
    """Every member of every size by every method, each in its own capped subprocess, members
    interleaved (all methods on member i before member i+1: same machine load)."""
    from benchmarks._common import run_json_subprocess

    root = Path(__file__).resolve().parents[1]
    records: list[dict] = []
    for N in sizes:
        for i in range(per_size):
            for method in methods:
                if method == "schur_sdp" and N > SCHUR_MAX_N:
                    continue
                args = ["-m", "benchmarks.transformation", "--family-case", method, str(N),
                        str(i), "--bias" if bias else "--no-bias", "--time-limit",
                        str(0.9 * cap)]
                rec = run_json_subprocess(args, cap, root)
                if "error" in rec:
                    rec = {"method": method, "N": N, "i": i, "spec": family_spec(i, N),
                           "status": rec["error"], "time": None, "wall": rec.get("time")}
                print(f"  N={N} i={i} {method}: {rec.get('status')} time={rec.get('time')} "
                      f"gap={rec.get('gap')} it={rec.get('iterations')}", flush=True)
                records.append(rec)
                if save is not None:
                    save(records)
    return records


def family_summary(records: list[dict]) -> list[dict]:
    """Per N: median and worst ratio of every method's time to the conic form's (same member,
    same run), and whether the conic form (``solver="auto"``) was the fastest on every member.

    Ratios > 1 mean the conic form is faster. A method that hit the cap or stopped uncertified
    contributes a lower bound (its ratio is at least this)."""
    rows = []
    for N in sorted({r["N"] for r in records}):
        rs = [r for r in records if r["N"] == N]
        by = {}
        for r in rs:
            by.setdefault(r["i"], {})[r["method"]] = r
        conic = [d["conic"]["time"] for d in by.values()
                 if d.get("conic", {}).get("time") is not None]
        row = {"N": N, "instances": len(by),
               "conic_median_s": float(np.median(conic)) if conic else None,
               "conic_worst_s": max(conic) if conic else None,
               "first_call_overhead_conic_s": float(np.median(
                   [d["conic"]["first_call_overhead"] for d in by.values()
                    if d.get("conic", {}).get("first_call_overhead") is not None] or [np.nan])),
               "load": float(np.nanmedian([r.get("load_before", np.nan) for r in rs]))}
        auto_fastest = 0
        for m in FAMILY_METHODS[1:]:
            ratios, lower = [], []
            for d in by.values():
                c, o = d.get("conic", {}), d.get(m)
                if o is None or c.get("time") is None:
                    continue
                if o.get("time") is None:
                    lower.append((o.get("wall") or np.nan) / c["time"])
                elif o.get("status") in ("optimal", "optimal_inaccurate"):
                    ratios.append(o["time"] / c["time"])
                else:
                    lower.append(o["time"] / c["time"])
            allr = ratios + lower
            row[f"{m}_over_conic_median"] = float(np.median(allr)) if allr else None
            # worst for the claim "conic is faster": the smallest ratio
            row[f"{m}_over_conic_worst"] = min(allr) if allr else None
            row[f"{m}_lower_bounds"] = len(lower)
        for d in by.values():
            c = d.get("conic", {}).get("time")
            others = [o["time"] for k, o in d.items() if k != "conic"
                      and o.get("time") is not None and o.get("status") in
                      ("optimal", "optimal_inaccurate")]
            if c is not None and all(c <= t for t in others):
                auto_fastest += 1
        row["auto_conic_fastest"] = f"{auto_fastest}/{len(by)}"
        gaps = [d["conic"]["gap"] for d in by.values() if d.get("conic", {}).get("gap")]
        row["conic_worst_gap"] = max(gaps) if gaps else None
        rows.append(row)
    return rows


def family_table(records: list[dict]) -> str:
    by = {}
    for r in records:
        by.setdefault((r["N"], r["i"]), {})[r["method"]] = r
    lines = ["| N | i | C | distortion | margin | label noise | scales | conic [s] (gap) | "
             "matrix gen. [s] (masters) | extragradient [s] (iters) | Schur SDP [s] |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def cell(r, it=True):
        if r is None:
            return "-"
        if r.get("time") is None:
            return f"> {r.get('wall') or 0:.0f} ({r.get('status')})"
        txt = f"{r['time']:.2f}"
        if it and r.get("iterations") not in (None, 1):
            txt += f" ({r['iterations']})"
        if r.get("status") == "not certified":
            txt += f", gap {r['gap']:.1e}"
        return txt

    for (N, i), d in sorted(by.items()):
        sp = family_spec(i, N)
        c = d.get("conic")
        ctxt = cell(c, False) + (f" ({c['gap']:.0e})" if c and c.get("gap") is not None else "")
        lines.append(f"| {N} | {i} | {sp['C']:g} | {sp['distortion']} | {sp['margin']:g} | "
                     f"{sp['label_noise']:g} | {sp['scales']} | {ctxt} | "
                     f"{cell(d.get('matrix_generation'))} | {cell(d.get('extragradient'))} | "
                     f"{cell(d.get('schur_sdp'), False)} |")
    cols = ["N", "instances", "conic_median_s", "conic_worst_s",
            "matrix_generation_over_conic_median", "matrix_generation_over_conic_worst",
            "extragradient_over_conic_median", "extragradient_over_conic_worst",
            "schur_sdp_over_conic_median", "schur_sdp_over_conic_worst", "auto_conic_fastest",
            "conic_worst_gap", "first_call_overhead_conic_s", "load"]
    return "\n".join(lines) + "\n\n" + markdown_table(family_summary(records), cols)


def run_decision(sizes, per_size: int, tol: float = 1e-4) -> list[dict]:
    """Issue 22: matrix generation's decision values against the conic form's on the family
    (training points, bias): ``max |f - f_conic| / max(1, max |f_conic|)`` with and without
    the face + KKT polish, the certified gaps and CPU seconds (this process, in turn)."""
    import os

    from specopt.learn._transformation_cvx import face_polish, qcqp_master, solve_conic
    from specopt.solvers.transformation import b_matrix, kernel_margins, matrix_generation

    def dec(task, r):
        return kernel_margins(task, r.M, b_matrix(task, r.alphas[0])) + r.biases[0]

    out = []
    for N in sizes:
        for i in range(per_size):
            tasks = family_tasks(N, family_spec(i, N))
            t = tasks[0]
            rec: dict = {"N": N, "i": i, "spec": family_spec(i, N), "load": os.getloadavg()[0]}
            c0 = time.process_time()
            raw = solve_conic(tasks, bias=True, polish=False)
            rec["conic_raw_cpu"] = time.process_time() - c0
            c0 = time.process_time()
            rc = solve_conic(tasks, bias=True)
            rec.update(conic_cpu=time.process_time() - c0, conic_gap=rc.gap,
                       conic_raw_gap=raw.gap)
            fc = dec(t, rc)
            sc = max(1.0, float(np.max(np.abs(fc))))
            rec["conic_raw_df"] = float(np.max(np.abs(dec(t, raw) - fc)) / sc)
            for key, pol in (("mg", None), ("mg_polish", face_polish())):
                c0 = time.process_time()
                r = matrix_generation(tasks, qcqp_master(), bias=True, tol=tol, max_iter=500,
                                      time_limit=120.0, polish=pol)
                rec.update({f"{key}_cpu": time.process_time() - c0, f"{key}_gap": r.gap,
                            f"{key}_rounds": r.iterations,
                            f"{key}_df": float(np.max(np.abs(dec(t, r) - fc)) / sc)})
            print(f"  N={N} i={i}: conic gap {rec['conic_gap']:.1e} (raw {raw.gap:.1e}, "
                  f"df {rec['conic_raw_df']:.1e}); mg gap {rec['mg_gap']:.1e} df "
                  f"{rec['mg_df']:.1e}; polished gap {rec['mg_polish_gap']:.1e} df "
                  f"{rec['mg_polish_df']:.1e} ({rec['mg_cpu']:.1f} / "
                  f"{rec['mg_polish_cpu']:.1f} s CPU)", flush=True)
            out.append(rec)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="all",
                    choices=["all", "synthetic", "digits", "timing", "family", "decision"])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--digit-runs", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=None,
                    help="N values (timing: 200 1000 5000 20000; family: 50 200 1000)")
    ap.add_argument("--per-size", type=int, default=4, help="family members per N")
    ap.add_argument("--methods", nargs="+", default=list(FAMILY_METHODS))
    ap.add_argument("--timeout", type=float, default=None,
                    help="cap per case in seconds (timing: 120, family: 60)")
    ap.add_argument("--case", nargs=2, metavar=("METHOD", "N"))
    ap.add_argument("--family-case", nargs=3, metavar=("METHOD", "N", "I"))
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--bias", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--name", default=None, help="family JSON name (default "
                    "transformation_family[_no_bias])")
    args = ap.parse_args()
    if args.case:
        print(json.dumps(one_timing_case(args.case[0], int(args.case[1]), args.bias)))
        return
    if args.family_case:
        m, N, i = args.family_case
        print(json.dumps(one_family_case(m, int(N), int(i), args.bias,
                                         time_limit=args.time_limit), default=float))
        return
    if args.part == "decision":
        import os

        recs = run_decision(args.sizes or [50, 200, 1000], args.per_size)
        write_json("transformation_decision", [], {"records": recs, "tol": 1e-4,
                                                   "load_end": os.getloadavg()})
        return
    if args.part == "family":
        import os

        sizes = args.sizes or [50, 200, 1000]
        cap = args.timeout or 60.0
        meta = {"sizes": sizes, "per_size": args.per_size, "methods": args.methods,
                "cap_s": cap, "bias": args.bias, "tol": 1e-4, "axes": FAMILY_AXES,
                "load_start": os.getloadavg(),
                "note": "2-core machine shared with other sessions; OMP_NUM_THREADS=1"}
        name = args.name or "transformation_family" + ("" if args.bias else "_no_bias")

        def save(records):
            write_json(name, family_summary(records),
                       {**meta, "records": records, "load_end": os.getloadavg()})

        records = run_family(sizes, args.per_size, args.methods, cap, args.bias, save)
        print(f"\n### Time to a certified relative gap 1e-4 over families (bias={args.bias}; "
              "ratios: method time / conic time, same member, same run)\n")
        print(family_table(records))
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
        out[key] = run_timing(args.sizes or [200, 1000, 5000, 20000], args.timeout or 120.0,
                              args.bias)
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
