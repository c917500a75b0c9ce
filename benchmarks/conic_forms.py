"""Compile time and cone sizes of specopt's conic forms against hand-written CVXPY, over FAMILIES.

For every size n a family of instances (:func:`spectral_family`, :func:`quad_family`):

* ``linear_spectral(K, alpha)`` vs the breakpoint identity written by hand with
  ``lambda_sum_largest``, with every breakpoint (``hand``: the identity as printed) and with the
  zero ones skipped (``hand-skip-zeros``: the best a user can write). The alphas vary in how
  many breakpoints are nonzero and in the sense: MVE with d = n/10 and with d = n/2 (one nonzero
  breakpoint, concave), a 4-level alpha (three, convex), random levels with random
  multiplicities (2-6 levels, concave or convex), and all-distinct alpha (every breakpoint
  nonzero: the hand form is already optimal).
* ``row_quad_forms(V, X)`` vs ``sum(multiply(V @ X, V), axis=1)`` and vs a Python loop of
  ``v^T X v`` terms (n = 10 only: it is far slower). V varies in the row count (m = n, 4n, 8n),
  density (dense, or 10 % nonzeros), rank (full, or rank 2) and row scales (equal, or four
  decades).

Compile time = ``Problem.get_problem_data("SCS")`` on a freshly built problem, median of
``--repeats``, the forms of an instance called round-robin after a warm-up round
(``timed_interleaved``). Reported per (atom, n): the median and worst (smallest) compile-time
ratio hand form / specopt, and the worst ratio of the compiled problems' nonzeros.

End-to-end (``--solve-max-n``, default 30): on every instance of that size or smaller, the whole
solve of the specopt form by ``specopt.solve(prob)`` (route "auto": recognition of every route,
the conic route, the verification gate) against ``prob.solve(solver=...)`` directly with
Clarabel and SCS on the same problem, and the best hand form (the naive ones at n <= 10 only)
with Clarabel: the fixed costs of
``route="auto"`` against the generic solvers, same instance, same run. Clarabel runs with
``time_limit=--cap`` (default 20 s); a capped solve counts with its cap (a lower bound).

First-call cost (separately): in a fresh interpreter (imports excluded), the first compile of a
specopt form and of its hand-written equivalent minus a repeat.

Usage: ``python -m benchmarks.conic_forms [--sizes 10 30 60] [--repeats 3] [--solve-max-n 30]``.
Writes ``benchmarks/results/conic_forms.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import cvxpy as cp
import numpy as np

import specopt
from benchmarks._common import (
    markdown_table,
    run_json_subprocess,
    timed_interleaved,
    write_json,
)

SPECTRAL_FORMS = ("specopt", "hand-skip-zeros", "hand")


def cone_stats(prob: cp.Problem) -> dict:
    data, _, _ = prob.get_problem_data("SCS")
    psd = list(data["dims"].psd)
    return {"psd_blocks": len(psd), "psd_total": int(sum(psd)), "A_rows": data["A"].shape[0],
            "A_nnz": int(data["A"].nnz)}


def spectral_case(n: int, alpha: np.ndarray, how: str) -> cp.Problem:
    K = cp.Variable((n, n), symmetric=True)
    if how == "specopt":
        obj = specopt.linear_spectral(K, alpha)
    else:  # hand-written breakpoint identity: every breakpoint ("hand"), or nonzero ones only
        obj = alpha[-1] * cp.trace(K)
        for i in range(1, n):
            c = alpha[i - 1] - alpha[i]
            if c != 0 or how == "hand":
                obj = obj + c * cp.lambda_sum_largest(K, i)
    sense = cp.Minimize if np.all(np.diff(alpha) <= 0) else cp.Maximize
    return cp.Problem(sense(obj), [K >> 0, cp.trace(K) == 1])


def quad_case(n: int, V: np.ndarray, how: str) -> cp.Problem:
    X = cp.Variable((n, n), symmetric=True)
    if how == "specopt":
        q = specopt.row_quad_forms(V, X)
    elif how == "multiply":
        q = cp.sum(cp.multiply(V @ X, V), axis=1)
    else:
        q = cp.hstack([v @ X @ v for v in V])
    return cp.Problem(cp.Maximize(cp.min(q)), [X >> 0, cp.trace(X) == 1])


def spectral_family(n: int, seed: int) -> dict[str, np.ndarray]:
    """The alphas of size n (module docstring); monotone, so the objective is DCP."""
    rng = np.random.default_rng(seed)
    fam = {
        "mve d=n/10": np.concatenate([-np.ones(max(1, n // 10)), np.ones(n - max(1, n // 10))]),
        "mve d=n/2": np.concatenate([-np.ones(n // 2), np.ones(n - n // 2)]),
        "4-level": -np.repeat([3.0, 2.0, 1.0, 0.0], int(np.ceil(n / 4)))[:n],
    }
    k = int(rng.integers(2, 7))
    levels = np.sort(rng.normal(size=k))
    counts = rng.multinomial(n - k, np.ones(k) / k) + 1
    ties = np.repeat(levels, counts)
    fam[f"random {k} levels, concave"] = ties  # nondecreasing: concave
    fam["random distinct, convex"] = -np.sort(rng.normal(size=n))  # nonincreasing: convex
    return fam


def quad_family(n: int, seed: int) -> dict[str, np.ndarray]:
    """The V matrices of size n (module docstring)."""
    rng = np.random.default_rng(seed)
    sparse = rng.standard_normal((8 * n, n)) * (rng.random((8 * n, n)) < 0.1)
    sparse[np.arange(8 * n), rng.integers(0, n, 8 * n)] += 1.0  # no zero row
    low_rank = rng.standard_normal((4 * n, 2)) @ rng.standard_normal((2, n))
    return {
        "m=4n dense": rng.standard_normal((4 * n, n)),
        "m=n dense": rng.standard_normal((n, n)),
        "m=8n 10% dense": sparse,
        "m=4n rank 2, scaled rows": low_rank * np.exp(rng.uniform(-4.6, 4.6, 4 * n))[:, None],
    }


def _compile(prob: cp.Problem) -> cp.Problem:
    prob.get_problem_data("SCS")
    return prob


def _solve_times(build, hand_forms: list[str], repeats: int, cap: float) -> dict[str, float]:
    """Whole solves of one instance (fresh problem each call), interleaved after a warm-up
    round: specopt.solve (route auto) and CVXPY with Clarabel / SCS on the specopt form; hand
    forms with Clarabel. Clarabel runs with ``time_limit=cap``; a solve that reaches the cap
    (or fails) is recorded as ``-cap`` (a lower bound) and not repeated."""
    funcs = {
        "auto": lambda: specopt.solve(build("specopt")),
        "CLARABEL": lambda: build("specopt").solve(solver="CLARABEL", time_limit=cap),
        "SCS": lambda: build("specopt").solve(solver="SCS"),
    }
    for h in hand_forms:
        funcs[f"{h} CLARABEL"] = lambda h=h: build(h).solve(solver="CLARABEL", time_limit=cap)
    times: dict[str, list[float]] = {k: [] for k in funcs}
    capped: set[str] = set()
    for rep in range(repeats + 1):
        for key, func in funcs.items():
            if key in capped:
                continue
            t0 = time.perf_counter()
            try:
                func()
                dt = time.perf_counter() - t0
            except cp.error.SolverError:
                dt = cap
            if dt >= 0.95 * cap:
                capped.add(key)
                times[key] = [-cap]
            elif rep:
                times[key].append(dt)
    return {k: float(np.median(v)) for k, v in times.items()}


def run(sizes: list[int], repeats: int, solve_max_n: int, cap: float = 20.0,
        seed: int = 0) -> list[dict]:
    rows = []
    for n in sizes:
        cases = [("linear_spectral", label, SPECTRAL_FORMS,
                  lambda how, a=alpha, n=n: spectral_case(n, a, how))
                 for label, alpha in spectral_family(n, seed + n).items()]
        qforms = ("specopt", "multiply") + (("loop",) if n <= 10 else ())
        cases += [("row_quad_forms", label, qforms, lambda how, V=V, n=n: quad_case(n, V, how))
                  for label, V in quad_family(n, seed + n).items()]
        for atom, label, forms, build in cases:
            funcs = {how: (lambda h=how, b=build: _compile(b(h))) for how in forms}
            res = timed_interleaved(funcs, repeats)
            base = {"atom": atom, "case": label, "n": n, "load": os.getloadavg()[0]}
            auto = specopt.explain(res["specopt"][1]).auto_route
            for how, (t, prob) in res.items():
                rows.append({**base, "form": how, "compile_s": t, **cone_stats(prob),
                             **({"auto_route": auto} if how == "specopt" else {})})
            if n <= solve_max_n:
                # the naive hand forms only at n <= 10 (their solves take minutes above)
                hands = [h for h in forms if h in ("hand-skip-zeros", "multiply")
                         or (h != "specopt" and n <= 10)]
                st = _solve_times(build, hands, repeats, cap)
                rows.append({**base, "form": "end-to-end", **{f"{k}_s": v for k, v in st.items()}})
            print(f"# n={n} {atom} {label}: " + ", ".join(
                f"{h} {t:.3g}s" for h, (t, _) in res.items()), flush=True)
    add_ratios(rows)
    return rows


def add_ratios(rows: list[dict]) -> None:
    """ratio = compile time (and nonzeros) of this form / those of the specopt form."""
    for r in rows:
        if r["form"] == "end-to-end":
            continue
        ref = next(x for x in rows if x["atom"] == r["atom"] and x["case"] == r["case"]
                   and x["n"] == r["n"] and x["form"] == "specopt")
        r["ratio_vs_specopt"] = r["compile_s"] / ref["compile_s"]
        r["nnz_ratio_vs_specopt"] = r["A_nnz"] / ref["A_nnz"]


def summarize(rows: list[dict]) -> list[dict]:
    """Per (atom, n, hand form): median and worst compile ratio over the family's instances."""
    out = []
    keys = sorted({(r["atom"], r["n"], r["form"]) for r in rows
                   if r["form"] not in ("specopt", "end-to-end")})
    for atom, n, form in keys:
        rs = [r for r in rows if (r["atom"], r["n"], r["form"]) == (atom, n, form)]
        ratios = [r["ratio_vs_specopt"] for r in rs]
        worst = min(rs, key=lambda r: r["ratio_vs_specopt"])
        out.append({"atom": atom, "n": n, "form": form, "instances": len(rs),
                    "compile_ratio_median": float(np.median(ratios)),
                    "compile_ratio_worst": worst["ratio_vs_specopt"], "worst_case": worst["case"],
                    "nnz_ratio_median": float(np.median([r["nnz_ratio_vs_specopt"] for r in rs])),
                    "nnz_ratio_worst": min(r["nnz_ratio_vs_specopt"] for r in rs),
                    "specopt_compile_s_worst": max(
                        x["compile_s"] for x in rows if x["atom"] == atom and x["n"] == n
                        and x["form"] == "specopt")})
    return out


def summarize_solves(rows: list[dict]) -> list[dict]:
    """Per (atom, n): median and worst ratio of each generic solve to specopt.solve (auto)."""
    out = []
    e2e = [r for r in rows if r["form"] == "end-to-end"]
    for atom, n in sorted({(r["atom"], r["n"]) for r in e2e}):
        rs = [r for r in e2e if (r["atom"], r["n"]) == (atom, n)]
        row = {"atom": atom, "n": n, "instances": len(rs),
               "auto_s_median": float(np.median([r["auto_s"] for r in rs]))}
        for key in sorted({k for r in rs for k in r if k.endswith("_s") and k != "auto_s"}):
            # a capped solve (-cap) enters with its cap: the ratio is at least that
            ratios = [abs(r[key]) / r["auto_s"] for r in rs if key in r]
            row[f"{key[:-2]} / auto median"] = float(np.median(ratios))
            row[f"{key[:-2]} / auto worst"] = min(ratios)
            row[f"{key[:-2]} capped"] = sum(r[key] < 0 for r in rs if key in r)
        out.append(row)
    return out


FIRST_CALL = r'''
import json, time, numpy as np
import cvxpy as cp, specopt
from benchmarks.conic_forms import spectral_case, quad_case
out = {}
alpha = np.concatenate([-np.ones(2), np.ones(18)])
V = np.random.default_rng(0).standard_normal((80, 20))
items = [("linear_spectral specopt", lambda: spectral_case(20, alpha, "specopt")),
                   ("linear_spectral hand-skip-zeros",
                    lambda: spectral_case(20, alpha, "hand-skip-zeros")),
                   ("row_quad_forms specopt", lambda: quad_case(20, V, "specopt")),
                   ("row_quad_forms multiply", lambda: quad_case(20, V, "multiply"))]
for key, build in (items if ORDER == "specopt first" else items[::-1]):
    t0 = time.perf_counter(); build().get_problem_data("SCS"); first = time.perf_counter() - t0
    t0 = time.perf_counter(); build().get_problem_data("SCS"); rep = time.perf_counter() - t0
    out[key] = {"first_s": first, "repeat_s": rep}
print(json.dumps(out))
'''


def first_call(order: str) -> dict:
    """First compile in a fresh interpreter minus a repeat; ``order`` says which form ran first
    (the first form in a process also pays CVXPY's own lazy set-up)."""
    root = Path(__file__).resolve().parents[1]
    return run_json_subprocess(["-c", f"ORDER = {order!r}\n" + FIRST_CALL], 300, root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 60])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--solve-max-n", type=int, default=30)
    parser.add_argument("--cap", type=float, default=20.0,
                        help="Clarabel time limit in the end-to-end solves [s]")
    args = parser.parse_args()
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    rows = run(args.sizes, args.repeats, args.solve_max_n, args.cap)
    summary = summarize(rows)
    solves = summarize_solves(rows)
    firsts = {o: first_call(o) for o in ("specopt first", "hand first")}
    cols = ["atom", "case", "n", "form", "compile_s", "ratio_vs_specopt", "psd_blocks",
            "psd_total", "A_rows", "A_nnz", "auto_route"]
    print(markdown_table([r for r in rows if r["form"] != "end-to-end"], cols))
    print("\n## compile time, hand form / specopt: median and worst over the family\n")
    print(markdown_table(summary, ["atom", "n", "form", "instances", "compile_ratio_median",
                                   "compile_ratio_worst", "worst_case", "nnz_ratio_median",
                                   "nnz_ratio_worst", "specopt_compile_s_worst"]))
    if solves:
        print("\n## whole solve, generic solver / specopt.solve (auto), same instance\n")
        print(markdown_table(solves, list(dict.fromkeys(k for s in solves for k in s))))
    print("\n## first compile in a fresh interpreter (imports excluded) [s]\n")
    fc = [{"order": o, "form": k, **v} for o, d in firsts.items() for k, v in d.items()
          if isinstance(v, dict)]
    print(markdown_table(fc, ["order", "form", "first_s", "repeat_s"]))
    meta = {"sizes": args.sizes, "repeats": args.repeats, "solve_max_n": args.solve_max_n,
            "cap_s": args.cap,
            "summary": summary, "solves": solves, "first_call": fc, "load_start": load0,
            "load_end": os.getloadavg(), "wall_s": time.perf_counter() - t0,
            "note": "2-core machine shared with other sessions; OMP_NUM_THREADS=1"}
    print("\nwrote", write_json("conic_forms", rows, meta))
    print(json.dumps({"wall_s": meta["wall_s"]}))


if __name__ == "__main__":
    main()
