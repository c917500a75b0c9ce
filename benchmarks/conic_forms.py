"""Compile time and cone sizes of specopt's conic forms against hand-written CVXPY equivalents.

* ``linear_spectral(K, alpha)`` vs the breakpoint identity written by hand with
  ``lambda_sum_largest``, with every breakpoint (``hand``: the identity as printed) and with the
  zero ones skipped (``hand-skip-zeros``: the best a user can write), for an MVE alpha (one nonzero
  breakpoint) and a 4-level alpha (three nonzero breakpoints).
* ``row_quad_forms(V, X)`` (m = 4n rows) vs ``sum(multiply(V @ X, V), axis=1)`` and vs a Python
  loop of ``v^T X v`` terms (n = 10 only: it is far slower).

Compile time = ``Problem.get_problem_data("SCS")`` on a freshly built problem, median of 5, the
forms called round-robin after a warm-up round (see ``timed_interleaved``).
Usage: ``python benchmarks/conic_forms.py [--sizes 10 50 100]``.
"""

from __future__ import annotations

import argparse

import cvxpy as cp
import numpy as np

import specopt
from benchmarks._common import markdown_table, timed_interleaved, write_json


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


def run(sizes: list[int]) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        d = max(1, n // 10)
        alphas = {
            "mve": np.concatenate([-np.ones(d), np.ones(n - d)]),
            "4-level": -np.repeat([3.0, 2.0, 1.0, 0.0], int(np.ceil(n / 4)))[:n],
        }
        for label, alpha in alphas.items():
            forms = {how: (lambda a=alpha, h=how, n=n: _compile(spectral_case(n, a, h)))
                     for how in ("specopt", "hand-skip-zeros", "hand")}
            for how, (t, prob) in timed_interleaved(forms).items():
                rows.append({"atom": "linear_spectral", "case": label, "n": n, "form": how,
                             "compile_s": t, **cone_stats(prob)})
        V = rng.standard_normal((4 * n, n))
        names = ["specopt", "multiply"] + (["loop"] if n <= 10 else [])
        forms = {how: (lambda h=how, n=n, V=V: _compile(quad_case(n, V, h))) for how in names}
        for how, (t, prob) in timed_interleaved(forms).items():
            rows.append({"atom": "row_quad_forms", "case": f"m={4 * n}", "n": n, "form": how,
                         "compile_s": t, **cone_stats(prob)})
    return rows


def _compile(prob: cp.Problem) -> cp.Problem:
    prob.get_problem_data("SCS")
    return prob


def add_ratios(rows: list[dict]) -> None:
    """ratio = compile time of this form / compile time of the specopt form, same case."""
    for r in rows:
        ref = next(x for x in rows if x["atom"] == r["atom"] and x["case"] == r["case"]
                   and x["n"] == r["n"] and x["form"] == "specopt")
        r["ratio_vs_specopt"] = r["compile_s"] / ref["compile_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 100])
    args = parser.parse_args()
    rows = run(args.sizes)
    add_ratios(rows)
    cols = ["atom", "case", "n", "form", "compile_s", "ratio_vs_specopt", "psd_blocks",
            "psd_total", "A_rows", "A_nnz"]
    print(markdown_table(rows, cols))
    print("\nwrote", write_json("conic_forms", rows, {"sizes": args.sizes}))


if __name__ == "__main__":
    main()
