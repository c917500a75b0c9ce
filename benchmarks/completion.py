"""Spectral matrix completion (iterated SDP) vs the nuclear-norm heuristic over instance FAMILIES.

Usage: ``python -m benchmarks.completion [--sizes 12 20 30] [--per-size 6] [--cap 120]``

``--timing`` (``--sizes 10 20 40 80 160 --per-size 4 --cap 60 --name completion_timing``): time vs
size of both learners with the low-rank engine, SCS and Clarabel (up to ``--scs-max-m`` /
``--clarabel-max-m``) on the same members, exact observations (the noisy members are drawn
without noise: the engine takes equality rows); one fresh process per member and solver, the
first-call cost (numba cache load / CVXPY set-up: a tiny fit timed twice) reported separately.
This measures the learners' size switch ``LOW_RANK_MIN_ORDER``.

For every size m (the matrix is m x n, n = m or 3m/4) ``--per-size`` members are drawn; they vary
(see :data:`DESIGN`, cycled with new seeds past its length):

- the rank (1-3, lowered when r (m + n - r) > 0.75 |observed|: no method can recover it);
- the observed fraction (0.4-0.6) and how entries are sampled: uniformly, or row-biased
  (row i observed with probability proportional to a log-uniform weight over a decade);
- the conditioning (singular values equal, or geometric down to 1/10);
- row scales (equal, or log-uniform over a decade);
- noise: exact observations (equality constraints), or Gaussian noise of 1 % of the entries'
  RMS fitted with the slackened form (``C`` given); errors are measured against the clean M;
- the shape (square or 4:3).

Per member ONE fresh interpreter (imports excluded) solves, on the same mask:
the nuclear-norm relaxation (one conic solve: the generic solvers) with Clarabel and with SCS,
and the spectral fit (iterated SDP started from its own nuclear-norm solve) with each backend.
The learners choose the backend by size (Clarabel if m + n <= 30, else SCS); the run checks that
this choice was the faster one on every member. A tiny fit solved twice first gives the
first-call (set-up) cost, reported separately; the timed fits are warm.

Reported per size: median and worst relative error ``||X_hat - M||_F / ||M||_F`` of both, exact
recoveries (error < 1e-3, noiseless members), and the time ratios (median and worst): spectral fit
/ nuclear-norm solve (the price of the better answer, with the default backend), the other
backend / the default one, for both. Prints markdown tables and writes
``benchmarks/results/completion.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import markdown_table, run_json_subprocess, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("CLARABEL", "SCS")

#: member i of a size takes DESIGN[i % len(DESIGN)] (with seed 7000 + 31 m + i)
DESIGN = (
    dict(rank=1, observed=0.5, cond=1.0, sampling="uniform", scales="unit", noise=0.0,
         shape="square"),
    dict(rank=2, observed=0.5, cond=10.0, sampling="row-biased", scales="unit", noise=0.0,
         shape="wide"),
    dict(rank=3, observed=0.6, cond=1.0, sampling="uniform", scales="loguniform", noise=0.0,
         shape="square"),
    dict(rank=1, observed=0.4, cond=1.0, sampling="row-biased", scales="loguniform",
         noise=0.01, shape="wide"),
    dict(rank=2, observed=0.4, cond=1.0, sampling="uniform", scales="unit", noise=0.0,
         shape="square"),
    dict(rank=3, observed=0.5, cond=10.0, sampling="uniform", scales="unit", noise=0.01,
         shape="wide"),
)
#: slack weight of the noisy members (``C`` of the learners)
NOISY_C = 5.0


def family_spec(i: int, m: int) -> dict:
    """Member ``i`` of the size-m family (module docstring), rank capped so that it is
    identifiable: r (m + n - r) <= 0.75 * observed * m * n."""
    spec = dict(DESIGN[i % len(DESIGN)], seed=7000 + 31 * m + i)
    n = m if spec["shape"] == "square" else max(2, (3 * m) // 4)
    r = spec["rank"]
    while r > 1 and r * (m + n - r) > 0.75 * spec["observed"] * m * n:
        r -= 1
    spec.update(m=m, n=n, rank=r)
    return spec


def family_instance(spec: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(clean M, observed matrix with NaN for missing entries, mask) of one member."""
    rng = np.random.default_rng(spec["seed"])
    m, n, r = spec["m"], spec["n"], spec["rank"]
    s = np.geomspace(1.0, 1.0 / spec["cond"], r) if r > 1 else np.ones(1)
    U = np.linalg.qr(rng.standard_normal((m, r)))[0]
    V = np.linalg.qr(rng.standard_normal((n, r)))[0]
    M = (U * s) @ V.T * np.sqrt(m * n / r)  # entries of order 1
    if spec["scales"] == "loguniform":
        M = M * np.exp(rng.uniform(np.log(0.3), np.log(3.0), m))[:, None]
    if spec["sampling"] == "uniform":
        p = np.full((m, 1), spec["observed"])
    else:
        w = np.exp(rng.uniform(0.0, np.log(10.0), m))
        p = np.clip(spec["observed"] * w / w.mean(), 0.05, 0.95)[:, None]
    while True:
        mask = rng.random((m, n)) < p
        if mask.any(axis=0).all() and mask.any(axis=1).all():
            break
    obs = M.copy()
    if spec["noise"]:
        obs = obs + spec["noise"] * np.sqrt(np.mean(M**2)) * rng.standard_normal((m, n))
    return M, np.where(mask, obs, np.nan), mask


def default_backend(m: int, n: int) -> str:
    """What the completion learners pick when ``solver`` is not given."""
    from specopt.learn.completion import NuclearNormCompletion

    return NuclearNormCompletion()._solver(m + n)[0]


def run_member(m: int, i: int) -> dict:
    """Member ``i`` of size ``m``: every method once, in this (fresh) process."""
    import cvxpy as cp

    import specopt
    from specopt.learn.completion import (
        NuclearNormCompletion,
        SpectralMatrixCompletion,
        make_low_rank,
    )

    spec = family_spec(i, m)
    M, Xo, mask = family_instance(spec)
    C = NOISY_C if spec["noise"] else None
    out: dict = {"m": m, "i": i, "spec": spec, "observed_entries": int(mask.sum()),
                 "default_backend": default_backend(spec["m"], spec["n"]),
                 "load_before": os.getloadavg()[0]}
    # first-call cost: a tiny fit in this fresh process, then the same fit again
    Ms, masks = make_low_rank(6, 6, 1, 0.6, random_state=1)
    tiny = np.where(masks, Ms, np.nan)
    for b in BACKENDS:
        t0 = time.perf_counter()
        SpectralMatrixCompletion(rank=1, solver=b).fit(tiny)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        SpectralMatrixCompletion(rank=1, solver=b).fit(tiny)
        out[f"first_call_overhead_{b}"] = first - (time.perf_counter() - t0)
    for b in BACKENDS:
        t0 = time.perf_counter()
        nn = NuclearNormCompletion(C=C, solver=b).fit(Xo)
        out[f"nn_{b}_s"] = time.perf_counter() - t0
        out[f"nn_{b}_err"] = -nn.score(M)
    for b in BACKENDS:
        t0 = time.perf_counter()
        sp = SpectralMatrixCompletion(rank=spec["rank"], C=C, solver=b).fit(Xo)
        out[f"sp_{b}_s"] = time.perf_counter() - t0
        out[f"sp_{b}_err"] = -sp.score(M)
        out[f"sp_{b}_iters"] = sp.n_iter_
        out[f"sp_{b}_status"] = sp.certificate_.status
    # what route="auto" does with the two problems (conic for the convex relaxation,
    # iterated_sdp for the spectral cost: the only route for a non-convex spectral objective)
    from specopt.atoms import mve_cost

    Y, Z, X, K, cons, pen = nn._model(np.nan_to_num(Xo), mask)
    out["auto_route_nn"] = specopt.explain(
        cp.Problem(cp.Minimize(0.5 * cp.trace(K) + pen), cons)).auto_route
    cons.append(cp.trace(K) <= sp.trace_bound_)
    out["auto_route_spectral"] = specopt.explain(
        cp.Problem(cp.Minimize(mve_cost(K, spec["rank"]) + pen), cons)).auto_route
    out["load_after"] = os.getloadavg()[0]
    return out


def _ratio_stats(vals: list[float], worst=max) -> tuple[float | None, float | None]:
    return (float(np.median(vals)), float(worst(vals))) if vals else (None, None)


def summarize(records: list[dict]) -> list[dict]:
    rows = []
    for m in sorted({r["m"] for r in records}):
        ok = [r for r in records if r["m"] == m and "error" not in r]
        row: dict = {"m": m, "members": f"{len(ok)}/{sum(r['m'] == m for r in records)}"}
        if not ok:
            rows.append(row)
            continue
        # (record, default backend, other backend) per member
        T = [(r, r["default_backend"], "SCS" if r["default_backend"] == "CLARABEL" else
              "CLARABEL") for r in ok]
        nn_err = [r[f"nn_{b}_err"] for r, b, _ in T]
        sp_err = [r[f"sp_{b}_err"] for r, b, _ in T]
        clean = [(r, b) for r, b, _ in T if not r["spec"]["noise"]]
        row.update(
            default_backend="/".join(sorted({b for _, b, _ in T})),
            nn_err_median=float(np.median(nn_err)), nn_err_worst=max(nn_err),
            sp_err_median=float(np.median(sp_err)), sp_err_worst=max(sp_err),
            exact_nn=f"{sum(r[f'nn_{b}_err'] < 1e-3 for r, b in clean)}/{len(clean)}",
            exact_sp=f"{sum(r[f'sp_{b}_err'] < 1e-3 for r, b in clean)}/{len(clean)}",
            sp_better=f"{sum(s < n_ - 1e-6 for s, n_ in zip(sp_err, nn_err, strict=True))}"
                      f"/{len(ok)}",
            nn_s_median=float(np.median([r[f"nn_{b}_s"] for r, b, _ in T])),
            sp_s_median=float(np.median([r[f"sp_{b}_s"] for r, b, _ in T])),
            sp_s_worst=max(r[f"sp_{b}_s"] for r, b, _ in T),
        )
        row["sp_over_nn_median"], row["sp_over_nn_worst"] = _ratio_stats(
            [r[f"sp_{b}_s"] / r[f"nn_{b}_s"] for r, b, _ in T])
        # other backend / default backend: > 1 means the default was the faster one; the
        # worst case for the default choice is the smallest ratio
        row["nn_other_over_default_median"], row["nn_other_over_default_worst"] = _ratio_stats(
            [r[f"nn_{b2}_s"] / r[f"nn_{b}_s"] for r, b, b2 in T], min)
        row["sp_other_over_default_median"], row["sp_other_over_default_worst"] = _ratio_stats(
            [r[f"sp_{b2}_s"] / r[f"sp_{b}_s"] for r, b, b2 in T], min)
        row["default_fastest_sp"] = (
            f"{sum(r[f'sp_{b}_s'] <= r[f'sp_{b2}_s'] for r, b, b2 in T)}/{len(ok)}")
        row["sp_other_err_worst"] = max(r[f"sp_{b2}_err"] for r, _, b2 in T)
        row["first_call_overhead_s"] = float(np.median(
            [r[f"first_call_overhead_{b}"] for r, b, _ in T]))
        row["auto_routes"] = ",".join(sorted({f"{r['auto_route_nn']}/{r['auto_route_spectral']}"
                                              for r in ok}))
        row["load"] = float(np.median([r["load_before"] for r in ok]))
        rows.append(row)
    return rows


def member_table(records: list[dict]) -> str:
    lines = ["| m x n | i | rank | observed | sampling | cond | scales | noise | NN err | "
             "spectral err | NN Clarabel / SCS [s] | spectral Clarabel / SCS [s] (iters) | "
             "default |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        sp = r.get("spec") or family_spec(r["i"], r["m"])
        head = (f"| {sp['m']}x{sp['n']} | {r['i']} | {sp['rank']} | {sp['observed']:.0%} | "
                f"{sp['sampling']} | {sp['cond']:g} | {sp['scales']} | {sp['noise']:g} |")
        if "error" in r:
            lines.append(head + f" {r['error']} | | | | |")
            continue
        b = r["default_backend"]
        lines.append(
            head + f" {r[f'nn_{b}_err']:.1e} | {r[f'sp_{b}_err']:.1e} | "
            f"{r['nn_CLARABEL_s']:.2f} / {r['nn_SCS_s']:.2f} | "
            f"{r['sp_CLARABEL_s']:.2f} / {r['sp_SCS_s']:.2f} "
            f"({r['sp_CLARABEL_iters']} / {r['sp_SCS_iters']}) | {b} |")
    return "\n".join(lines)


SUMMARY_COLS = ["m", "members", "default_backend", "nn_err_median", "nn_err_worst",
                "sp_err_median", "sp_err_worst", "exact_nn", "exact_sp", "sp_better",
                "nn_s_median", "sp_s_median", "sp_s_worst", "sp_over_nn_median",
                "sp_over_nn_worst", "nn_other_over_default_median", "nn_other_over_default_worst",
                "sp_other_over_default_median", "sp_other_over_default_worst",
                "default_fastest_sp", "first_call_overhead_s", "auto_routes", "load"]


# --------------------------------------------------------------------------------------------
# --timing: time vs size, low-rank engine vs SCS vs Clarabel (the learners' size switch)
# --------------------------------------------------------------------------------------------
#: exact observations only (the engine takes equality rows): the family's noisy members are
#: drawn without noise here
TIMING_METHODS = ("LOW_RANK", "SCS", "CLARABEL")


def timing_member(m: int, i: int, method: str) -> None:
    """Member ``i`` of size ``m`` with one solver, in this (fresh) process: a tiny fit twice
    (first-call cost), then the nuclear norm and the spectral fit; one JSON line after each."""
    from specopt.learn.completion import (
        NuclearNormCompletion,
        SpectralMatrixCompletion,
        make_low_rank,
    )

    spec = dict(family_spec(i, m), noise=0.0)
    M, Xo, mask = family_instance(spec)
    out: dict = {"m": m, "i": i, "method": method, "spec": spec,
                 "observed_entries": int(mask.sum()), "load_before": os.getloadavg()[0]}
    Ms, masks = make_low_rank(6, 6, 1, 0.6, random_state=1)
    tiny = np.where(masks, Ms, np.nan)
    t0 = time.perf_counter()
    SpectralMatrixCompletion(rank=1, solver=method).fit(tiny)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    SpectralMatrixCompletion(rank=1, solver=method).fit(tiny)
    out["first_call_overhead_s"] = first - (time.perf_counter() - t0)
    t0 = time.perf_counter()
    nn = NuclearNormCompletion(solver=method).fit(Xo)
    out.update(nn_s=time.perf_counter() - t0, nn_err=-nn.score(M), nn_status=nn.certificate_.status,
               nn_obj=0.5 * float(np.trace(nn.kernel_)))
    print(json.dumps(out, default=float), flush=True)
    t0 = time.perf_counter()
    sp = SpectralMatrixCompletion(rank=spec["rank"], solver=method).fit(Xo)
    out.update(sp_s=time.perf_counter() - t0, sp_err=-sp.score(M), sp_status=sp.certificate_.status,
               sp_obj=float(sp.certificate_.objective), sp_iters=sp.n_iter_,
               sp_tau=sp.trace_bound_, load_after=os.getloadavg()[0])
    print(json.dumps(out, default=float), flush=True)


def _run_partial(args: list[str], cap: float) -> dict:
    """Like ``run_json_subprocess`` but keeps the last JSON line printed before a timeout."""
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        proc = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              timeout=cap, env=env)
        text, err = proc.stdout, None if proc.returncode == 0 else (
            proc.stderr.strip().splitlines() or ["failed"])[-1][:200]
    except subprocess.TimeoutExpired as exc:
        text = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = f"timeout > {cap:.0f} s"
    lines = [ln for ln in text.splitlines() if ln.startswith("{")]
    out = json.loads(lines[-1]) if lines else {}
    if err:
        out["error"] = err
    return out


def timing_summary(records: list[dict], cap: float) -> list[dict]:
    """Per size and method: median / worst time (a capped run counts as the cap: '>'), and the
    conic / low-rank time ratios on the same members (median and worst = smallest)."""
    rows = []
    for m in sorted({r["m"] for r in records}):
        at = [r for r in records if r["m"] == m]
        lr = {r["i"]: r for r in at if r["method"] == "LOW_RANK"}
        for method in TIMING_METHODS:
            rs = [r for r in at if r["method"] == method]
            if not rs:
                continue
            row: dict = {"m": m, "m+n": rs[0]["spec"]["m"] + rs[0]["spec"]["n"] if "spec" in rs[0]
                         else None, "method": method, "members": len(rs)}
            for key in ("nn", "sp"):
                ts = [r.get(f"{key}_s", cap) for r in rs]
                capped = sum(f"{key}_s" not in r for r in rs)
                row[f"{key}_s_median"] = float(np.median(ts))
                row[f"{key}_s_worst"] = float(max(ts)) if not capped else f"> {cap:.0f}"
                row[f"{key}_certified"] = (
                    f"{sum(r.get(f'{key}_status') in ('optimal', 'stationary_point') for r in rs)}"
                    f"/{len(rs)}")
                errs = [r[f"{key}_err"] for r in rs if f"{key}_err" in r]
                row[f"{key}_err_median"] = float(np.median(errs)) if errs else None
                row[f"{key}_err_worst"] = max(errs) if errs else None
                if method != "LOW_RANK":
                    ratios = [r.get(f"{key}_s", cap) / lr[r["i"]][f"{key}_s"] for r in rs
                              if r["i"] in lr and f"{key}_s" in lr[r["i"]]]
                    row[f"{key}_over_lr_median"], row[f"{key}_over_lr_worst"] = _ratio_stats(
                        ratios, min)
                    # objective agreement with the engine (relative), where both finished
                    diffs = [abs(r[f"{key}_obj"] - lr[r["i"]][f"{key}_obj"]) /
                             (1 + abs(r[f"{key}_obj"])) for r in rs
                             if f"{key}_obj" in r and r["i"] in lr and f"{key}_obj" in lr[r["i"]]]
                    row[f"{key}_obj_reldiff_worst"] = max(diffs) if diffs else None
            row["first_call_s"] = float(np.median([r["first_call_overhead_s"] for r in rs
                                                   if "first_call_overhead_s" in r] or [np.nan]))
            row["load"] = float(np.median([r["load_before"] for r in rs if "load_before" in r]
                                          or [np.nan]))
            rows.append(row)
    return rows


TIMING_COLS = ["m", "m+n", "method", "members", "nn_s_median", "nn_s_worst", "nn_certified",
               "nn_over_lr_median", "nn_over_lr_worst", "nn_obj_reldiff_worst", "sp_s_median",
               "sp_s_worst", "sp_certified", "sp_over_lr_median", "sp_over_lr_worst",
               "sp_obj_reldiff_worst", "sp_err_median", "sp_err_worst", "first_call_s", "load"]


def timing_main(args: argparse.Namespace) -> None:
    meta = {"sizes": args.sizes, "per_size": args.per_size, "cap_s": args.cap,
            "design": DESIGN, "noise": "forced 0 (exact observations)",
            "conic_max_m": {"SCS": args.scs_max_m, "CLARABEL": args.clarabel_max_m},
            "load_start": os.getloadavg(),
            "note": "2-core machine shared with other sessions; OMP/OPENBLAS_NUM_THREADS=1"}
    records: list[dict] = []
    limits = {"LOW_RANK": 10**9, "SCS": args.scs_max_m, "CLARABEL": args.clarabel_max_m}
    for m in args.sizes:
        for i in range(args.per_size):
            for method in TIMING_METHODS:
                if m > limits[method]:
                    continue
                r = _run_partial([str(Path(__file__).resolve()), "--timing-member", str(m),
                                  str(i), method], args.cap)
                r.update(m=m, i=i, method=method)
                r.setdefault("spec", dict(family_spec(i, m), noise=0.0))
                records.append(r)
                print("#", json.dumps({k: v for k, v in r.items() if k != "spec"}), flush=True)
                write_json(args.name, timing_summary(records, args.cap),
                           {**meta, "records": records, "load_end": os.getloadavg()})
    print("\n## time vs size: low-rank engine vs SCS vs Clarabel (same members, same run)\n")
    print(markdown_table(timing_summary(records, args.cap), TIMING_COLS))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--member", nargs=2, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--timing-member", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--timing", action="store_true",
                    help="time vs size: low-rank engine vs SCS vs Clarabel (exact observations)")
    ap.add_argument("--scs-max-m", type=int, default=80)
    ap.add_argument("--clarabel-max-m", type=int, default=30)
    ap.add_argument("--sizes", type=int, nargs="+", default=[12, 20, 30])
    ap.add_argument("--per-size", type=int, default=6)
    ap.add_argument("--cap", type=float, default=120.0, help="seconds per member")
    ap.add_argument("--name", default="completion")
    args = ap.parse_args()
    if args.timing_member:
        m, i, method = args.timing_member
        timing_member(int(m), int(i), method)
        return
    if args.timing:
        timing_main(args)
        return
    if args.member:
        print(json.dumps(run_member(*args.member), default=float))
        return
    meta = {"sizes": args.sizes, "per_size": args.per_size, "cap_s": args.cap,
            "design": DESIGN, "noisy_C": NOISY_C, "load_start": os.getloadavg(),
            "note": "2-core machine shared with other sessions; OMP_NUM_THREADS=1"}
    records: list[dict] = []
    for m in args.sizes:
        for i in range(args.per_size):
            r = run_json_subprocess([str(Path(__file__).resolve()), "--member", str(m), str(i)],
                                    args.cap, ROOT)
            if "error" in r:
                r = {"m": m, "i": i, "spec": family_spec(i, m), "error": r["error"]}
            records.append(r)
            print("#", json.dumps({k: v for k, v in r.items() if k != "spec"}), flush=True)
            write_json(args.name, summarize(records),
                       {**meta, "records": records, "load_end": os.getloadavg()})
    print("\n## per member\n")
    print(member_table(records))
    print("\n## per size: median and worst over the family (same members, same run)\n")
    print(markdown_table(summarize(records), SUMMARY_COLS))


if __name__ == "__main__":
    main()
