"""SDE / MVU written as a CVXPY model: the low-rank route vs SCS vs Clarabel, time vs N.

Usage: python benchmarks/low_rank_sdp.py [--sizes 50 100 300] [--data swiss scurve spokes digits]
       [--seeds 0 1] [--scs-cap 120] [--lr-cap 600] [--clarabel-max-n 60] [--timeout 600]
       [--mve 100 400 [--mve-family digits:0 swiss:0] [--mve-cap 600] [--mve-conic-max-n 100]
       [--mve-only]]

Model (the issue's): ``maximize trace(K)`` s.t. ``K >> 0``, ``cp.sum(K) == 0``,
``K[I, I] + K[J, J] - 2 K[I, J] == d2`` on the k-NN edges (k = 6; squared lengths scaled to mean
1; a disconnected k-NN graph, which makes the SDE unbounded, gets the shortest edges joining its
components; digits above 1797 points uses all 1797). Data families: sklearn swiss roll and
S-curve (3-D), hubs and spokes (10-D), a random subset of sklearn digits (64-D); seeds vary the
sample. Each (backend, instance) runs in its own
subprocess with a wall-clock timeout. Backends: ``low_rank_sdp`` route at ``tol=1e-4`` (first
call pays numba compilation: reported separately as ``compile_s``), SCS at ``eps = 1e-5`` with
``time_limit_secs = --scs-cap`` (a capped run is reported as ``> cap``), Clarabel up to
``--clarabel-max-n``. ``--mve N ...`` adds whole MVE fits (the learner's defaults: tol 1e-4,
max_iter 50, affinity start) with the low-rank engine (``low_rank_mm``, method auto: a cold
interior point per MM step up to ``MM_IP_MAX_N``, the warm-started factored method above) over
``--mve-family`` (default two digits subsets and a swiss roll; k the smallest k >= 5 / 6 giving a
connected k-NN graph), capped by ``--mve-cap`` (the fit's ``time_limit``: a capped fit reports its
MM steps and status ``optimal_inaccurate``), and with the conic iterated SDP (SCS, eps 1e-5) up to
``--mve-conic-max-n``; ``--mve-only`` skips the SDE table (use ``--out`` to keep the SDE JSON).
Prints markdown tables (median and worst over the family per N) and writes
benchmarks/results/low_rank_sdp.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import run_json_subprocess  # noqa: E402

ROOT = Path(__file__).resolve().parent


def instance(name: str, n: int, seed: int, k: int = 6):
    """Points of a data set and its symmetrized k-NN edges with squared lengths (mean 1)."""
    import scipy.sparse as sp
    from sklearn.neighbors import kneighbors_graph

    if name == "swiss":
        from sklearn.datasets import make_swiss_roll

        X, _ = make_swiss_roll(n, random_state=seed)
    elif name == "scurve":
        from sklearn.datasets import make_s_curve

        X, _ = make_s_curve(n, random_state=seed)
    elif name == "spokes":
        from specopt.learn.embedding import make_hubs_and_spokes

        X, _ = make_hubs_and_spokes(n_spokes=5, points_per_spoke=(n - 1) // 5, noise=0.2,
                                    random_state=seed)
    elif name == "digits":
        from sklearn.datasets import load_digits

        D, _ = load_digits(return_X_y=True)
        # all 1797 digits when n exceeds them (the seed then only permutes the points)
        X = D[np.random.default_rng(seed).choice(len(D), min(n, len(D)), replace=False)]
    else:
        raise ValueError(name)
    G = kneighbors_graph(X, k)
    G = ((G + G.T) > 0).astype(float).tolil()
    # a disconnected graph makes the SDE unbounded (components drift apart): join components by
    # their shortest connecting edge until connected (digits at N >= 1000 needs it)
    from scipy.sparse.csgraph import connected_components

    ncomp, lab = connected_components(G, directed=False)
    while ncomp > 1:
        a_, b_ = np.flatnonzero(lab == 0), np.flatnonzero(lab != 0)
        D = np.sum((X[a_][:, None, :] - X[b_][None, :, :]) ** 2, axis=2)
        i, j = np.unravel_index(np.argmin(D), D.shape)
        G[a_[i], b_[j]] = G[b_[j], a_[i]] = 1.0
        ncomp, lab = connected_components(G, directed=False)
    E = np.array(sp.triu(G, 1).nonzero()).T
    d2 = np.sum((X[E[:, 0]] - X[E[:, 1]]) ** 2, axis=1)
    return X.shape[0], E, d2 / d2.mean()


def sde_model(n, E, d2):
    import cvxpy as cp

    K = cp.Variable((n, n), symmetric=True)
    I, J = E[:, 0], E[:, 1]
    return K, cp.Problem(cp.Maximize(cp.trace(K)),
                         [K >> 0, cp.sum(K) == 0, K[I, I] + K[J, J] - 2 * K[I, J] == d2])


def run_one(backend: str, name: str, n: int, seed: int, cap: float) -> dict:

    import specopt

    if backend in ("mve", "mve_conic"):
        return run_mve(backend, name, n, seed, cap)
    n, E, d2 = instance(name, n, seed)
    out: dict = {"N": n, "edges": len(E)}
    if backend == "low_rank":
        # first call on a tiny instance: numba compilation (cached on disk after the first run)
        t0 = time.perf_counter()
        _, small = sde_model(*instance("spokes", 11, 0, k=3))
        specopt.solve(small, route="low_rank_sdp", tol=1e-3)
        out["compile_s"] = time.perf_counter() - t0
        K, prob = sde_model(n, E, d2)
        t0 = time.perf_counter()
        specopt.solve(prob, route="low_rank_sdp", tol=1e-4, time_limit=cap)
        out["time"] = time.perf_counter() - t0
        cert = specopt.certificate(prob)
        out.update(objective=cert.objective, bound=cert.bound, gap=cert.gap,
                   status=cert.status, violation=cert.max_violation, rank=cert.extra["rank"],
                   route=specopt.explain(prob).auto_route)
        return out
    K, prob = sde_model(n, E, d2)
    kw = {}
    if backend == "SCS":
        kw = {"eps_abs": 1e-5, "eps_rel": 1e-5, "max_iters": 10**7, "time_limit_secs": cap}
    t0 = time.perf_counter()
    prob.solve(solver=backend, **kw)
    out["time"] = time.perf_counter() - t0
    out["status"] = prob.status
    out["objective"] = None if prob.value is None else float(prob.value)
    if backend == "SCS" and out["time"] >= 0.95 * cap:
        out["capped"] = True
    return out


def mve_data(name: str, n: int, seed: int):
    """Points for the MVE fits and the smallest k >= 5 (digits) / 6 (swiss roll, spokes) whose k-NN
    graph is connected (the learner refuses a disconnected graph: the embedding is unbounded)."""
    from specopt.learn.embedding import MinimumVolumeEmbedding

    if name == "digits":
        from sklearn.datasets import load_digits

        D, _ = load_digits(return_X_y=True)
        X = D[np.random.default_rng(seed).choice(len(D), min(n, len(D)), replace=False)]
        k0 = 5
    elif name == "swiss":
        from sklearn.datasets import make_swiss_roll

        X, _ = make_swiss_roll(n, noise=0.05, random_state=seed)
        k0 = 6
    elif name == "spokes":
        from specopt.learn.embedding import make_hubs_and_spokes

        X, _ = make_hubs_and_spokes(n_spokes=5, points_per_spoke=(n - 1) // 5, noise=0.2,
                                    random_state=seed)
        k0 = 6
    else:
        raise ValueError(name)
    for k in range(k0, k0 + 8):
        try:
            MinimumVolumeEmbedding(n_neighbors=k)._prepare(X)
            return X, k
        except ValueError:
            continue
    raise ValueError(f"{name}:{n}:{seed}: no connected k-NN graph for k < {k0 + 8}")


def run_mve(backend: str, name: str, n: int, seed: int, cap: float) -> dict:
    """One whole MVE fit (learner defaults: tol 1e-4, max_iter 50, affinity start): ``mve`` the
    low-rank engine (``low_rank_mm``, method auto), ``mve_conic`` the conic iterated SDP (SCS at
    the learner's eps 1e-5). ``cap``: the low-rank fit's ``time_limit`` (its MM stops there,
    status optimal_inaccurate, steps done reported)."""
    from specopt.learn.embedding import MinimumVolumeEmbedding

    X, k = mve_data(name, n, seed)
    kw: dict = {"n_components": 2, "n_neighbors": k}
    if backend == "mve":
        kw.update(solver="LOW_RANK", solver_options={"time_limit": cap})
    else:
        kw.update(solver="SCS")
    t0 = time.perf_counter()
    est = MinimumVolumeEmbedding(**kw).fit(X)
    elapsed = time.perf_counter() - t0
    cert = est.certificate_
    out = {"N": int(X.shape[0]), "k": k, "edges": int(np.triu(est.connectivity_, 1).sum()),
           "time": elapsed, "energy": est.energy_, "objective": est.objective_,
           "n_iter": est.n_iter_, "status": cert.status, "converged": bool(est.converged_),
           "stop_reason": cert.extra.get("stop_reason"),
           "step_time_median": elapsed / max(1, est.n_iter_)}
    if backend == "mve":
        steps = cert.extra["inner_summary"]
        out["step_times"] = [st[4] for st in steps]
        out["step_time_median"] = float(np.median(out["step_times"]))
        out["inner_methods"] = sorted(set(cert.extra["inner_methods"]))
        out["inner_solves_accurate"] = cert.extra["inner_solves_accurate"]
    return out


def run_capped(backend: str, name: str, n: int, seed: int, cap: float, timeout: float) -> dict:
    out = run_json_subprocess([__file__, "--one", backend, name, str(n), str(seed), str(cap)],
                              timeout, ROOT.parent)
    if out.get("error", "").startswith("timeout"):
        out["capped"] = True
    return out


def _fmt(t: float | None, capped: bool = False) -> str:
    if t is None:
        return "-"
    return f"> {t:.0f}" if capped else f"{t:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", type=int, nargs="*", default=[50, 100, 300])
    ap.add_argument("--data", nargs="*", default=["swiss", "scurve", "spokes", "digits"])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--scs-cap", type=float, default=120.0)
    ap.add_argument("--clarabel-max-n", type=int, default=60)
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="extra subprocess allowance over the caps (model build, compile)")
    ap.add_argument("--lr-cap", type=float, default=600.0,
                    help="time_limit of the low-rank engine (then optimal_inaccurate)")
    ap.add_argument("--mve", type=int, nargs="*", default=[])
    ap.add_argument("--mve-family", nargs="*", default=["digits:0", "digits:1", "swiss:0"],
                    metavar="DATA:SEED")
    ap.add_argument("--mve-cap", type=float, default=600.0,
                    help="time_limit of a low-rank MVE fit (SCS fits: subprocess timeout)")
    ap.add_argument("--mve-conic-max-n", type=int, default=0,
                    help="also fit with the conic iterated SDP (SCS) up to this N")
    ap.add_argument("--mve-only", action="store_true", help="skip the SDE table")
    ap.add_argument("--out", default=str(ROOT / "results" / "low_rank_sdp.json"))
    args = ap.parse_args()
    if args.one:
        b, name, n, seed, cap = args.one
        print(json.dumps(run_one(b, name, int(n), int(seed), float(cap)), default=float))
        return
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    results: dict = {"sde": {}, "mve": {}, "scs_cap": args.scs_cap, "load_start": load0}
    sizes = [] if args.mve_only else args.sizes
    if sizes:
        print("| data | seed | N | edges | low-rank s | status | gap | rank | auto route | SCS s "
              "| SCS status | Clarabel s | obj low-rank | obj SCS | obj Clarabel |")
        print("|" + "---|" * 15)
    for n in sizes:
        for name in args.data:
            for seed in args.seeds:
                row = {"low_rank": run_capped("low_rank", name, n, seed, args.lr_cap,
                                              args.lr_cap + args.timeout)}
                row["SCS"] = run_capped("SCS", name, n, seed, args.scs_cap, args.scs_cap + 120)
                if n <= args.clarabel_max_n:
                    row["CLARABEL"] = run_capped("CLARABEL", name, n, seed, 0, args.timeout)
                # the low-rank engine's time limit is part of the family's worst case
                results["sde"][f"{name}:{n}:{seed}"] = row
                lr, sc, cl = row["low_rank"], row["SCS"], row.get("CLARABEL", {})
                gap = lr.get("gap")
                print(f"| {name} | {seed} | {lr.get('N', n)} | {lr.get('edges', '-')} | "
                      f"{_fmt(lr.get('time'))} | {lr.get('status', lr.get('error'))} | "
                      f"{'-' if gap is None else f'{gap:.1e}'} | {lr.get('rank', '-')} | "
                      f"{lr.get('route', '-')} | {_fmt(sc.get('time'), sc.get('capped', False))}"
                      f" | {sc.get('status', sc.get('error'))} | {_fmt(cl.get('time'))} | "
                      f"{lr.get('objective', float('nan')):.6g} | "
                      f"{(sc.get('objective') or float('nan')):.6g} | "
                      f"{(cl.get('objective') or float('nan')):.6g} |", flush=True)
                out_path.write_text(json.dumps(results, indent=1, default=float))
    if sizes:
        print("\n| N | instances | low-rank median s | low-rank worst s | SCS median s | SCS "
              "worst s | ratio SCS/low-rank median | worst (smallest) ratio | Clarabel median s |")
        print("|" + "---|" * 9)
    for n in sizes:
        rows = [v for k, v in results["sde"].items() if k.split(":")[1] == str(n)]
        lt = [r["low_rank"]["time"] for r in rows if "time" in r["low_rank"]]
        st = [r["SCS"]["time"] for r in rows if "time" in r["SCS"]]
        ct = [r["CLARABEL"]["time"] for r in rows if "CLARABEL" in r and "time" in r["CLARABEL"]]
        ratios = [r["SCS"]["time"] / r["low_rank"]["time"] for r in rows
                  if "time" in r["SCS"] and "time" in r["low_rank"]]
        capped = any(r["SCS"].get("capped") for r in rows)
        med = statistics.median
        print(f"| {n} | {len(rows)} | {_fmt(med(lt) if lt else None)} | "
              f"{_fmt(max(lt) if lt else None)} | {_fmt(med(st) if st else None)} | "
              f"{_fmt(max(st) if st else None, capped)} | "
              f"{'>= ' if capped else ''}{med(ratios):.2f} | {min(ratios):.2f} | "
              f"{_fmt(med(ct) if ct else None)} |" if ratios else f"| {n} | {len(rows)} | - |")
    if args.mve:
        run_mve_table(args, results, out_path)
    results["load_end"] = os.getloadavg()
    out_path.write_text(json.dumps(results, indent=1, default=float))
    print(f"\nload average start {load0}, end {results['load_end']}; wrote {out_path}")


def run_mve_table(args, results: dict, out_path: Path) -> None:
    """Whole MVE fits per N over a family (``--mve-family``), the low-rank engine and (up to
    ``--mve-conic-max-n``) the conic iterated SDP on the same instances; median and worst."""
    print("\n| N | data | seed | k | edges | method | fit s | s / MM step (median) | MM steps "
          "| energy % | final cost | status | stop | inner |")
    print("|" + "---|" * 14)
    med = statistics.median
    for n in args.mve:
        for case in args.mve_family:
            name, seed = case.split(":")
            methods = ["mve"] + (["mve_conic"] if n <= args.mve_conic_max_n else [])
            for m in methods:
                cap = args.mve_cap
                r = run_capped(m, name, n, int(seed), cap, cap + args.timeout)
                results["mve"][f"{m}:{name}:{n}:{seed}"] = r
                cost = r.get("objective")
                print(f"| {r.get('N', n)} | {name} | {seed} | {r.get('k', '-')} | "
                      f"{r.get('edges', '-')} | {'low-rank' if m == 'mve' else 'conic (SCS)'} | "
                      f"{_fmt(r.get('time'), r.get('capped', False))} | "
                      f"{_fmt(r.get('step_time_median'))} | {r.get('n_iter', '-')} | "
                      f"{100 * r.get('energy', float('nan')):.2f} | "
                      f"{'-' if cost is None else f'{cost:.2f}'} | "
                      f"{r.get('status', r.get('error'))} | {r.get('stop_reason', '-')} | "
                      f"{','.join(r.get('inner_methods', [])) or '-'} |", flush=True)
                out_path.write_text(json.dumps(results, indent=1, default=float))
    print("\n| N | method | instances | fit s median | fit s worst | stationary | "
          "s / MM step median |")
    print("|---|---|---|---|---|---|---|")
    for n in args.mve:
        for m in ("mve", "mve_conic"):
            rows = [v for k_, v in results["mve"].items()
                    if k_.startswith(m + ":") and k_.split(":")[2] == str(n)]
            if not rows:
                continue
            # a killed subprocess (error "timeout ...") has no fit time: reported as > cap
            ts = [r["time"] for r in rows if "time" in r and "error" not in r]
            killed = any("time" not in r or "error" in r for r in rows)
            worst = f"> {args.mve_cap + args.timeout:.0f} (killed)" if killed else (
                _fmt(max(ts)) if ts else "-")
            ok = sum(r.get("status") == "stationary_point" for r in rows)
            st = [r["step_time_median"] for r in rows if "step_time_median" in r]
            print(f"| {n} | {'low-rank' if m == 'mve' else 'conic (SCS)'} | {len(rows)} | "
                  f"{_fmt(med(ts) if ts else None)} | {worst} | {ok}/{len(rows)} | "
                  f"{_fmt(med(st) if st else None)} |")


if __name__ == "__main__":
    main()
