"""SDPLIB 1.2 through ``method="specopt"`` (route auto), Clarabel and SCS.

Usage: python benchmarks/sdplib.py [--problems theta1 'mcp1*' ...] [--backends specopt clarabel
       scs] [--cap 60] [--clarabel-max-n 150] [--scs-max-n 1000] [--data DIR] [--out sdplib]

Each file of ``--data`` (default ``../shared/data/sdplib``, the GPL data is read there, never
copied) is read with :func:`specopt.read_sdpa` (SDPA's dual form ``max <F0, Y>``, whose optimum
is SDPLIB's published value, same sign; SDPA-primal-infeasible ``infp*`` is ``unbounded`` here,
``infd*`` ``infeasible``). Every (problem, backend) runs in its own subprocess with a wall-clock
cap ``--cap`` (a capped run reports ``timeout``). Backends: ``specopt`` (``prob.solve(method=
"specopt")``, route auto; status, certified gap and route from its certificate), ``clarabel``
(CVXPY defaults), ``scs`` (``eps = 1e-5``, i.e. ``eps_abs = eps_rel = 1e-5``) and, on request,
``lowrank`` (route ``low_rank_sdp`` forced: the measurements behind ``auto``'s threshold) and
``clarabel-lmi`` (Clarabel on the LMI form of ``specopt.conic_lmi``: the measurements behind
the conic route's retry). The
generic solvers are skipped above the PSD order they cannot hold: Clarabel factors a KKT system
whose PSD part is dense, ``(n(n+1)/2)^2`` entries for an ``n x n`` block (1.0 GB at n = 150, 7.9
GB at n = 250, on a shared 23 GB machine; mcp100 already takes ~50 s), so it is skipped above
``--clarabel-max-n`` (150); SCS does one eigendecomposition of each block per iteration (~0.5 s
at n = 1000 on one thread, thousands of iterations), skipped above ``--scs-max-n`` (1000).

Columns: problem, n (largest PSD block), m, backend, status, value, rel_err ``|value - published| /
max(1, |published|)`` (maxG51 = 4.006255e+03, qap10 = -1.093e+03 and qpG51 = 1.1818e+04, the
corrected values), ``published_contradicted`` (specopt's factor, its rows rescaled to satisfy
diagonal-only rows exactly, is a feasible point whose value lies beyond the published optimum:
benchmarks/_sdplib_exact.py; maxG55), ``correct`` (the expected status, and for ``optimal*`` the
value within the published precision: half a unit of its last printed digit, plus 1e-6 relative),
certified gap (specopt's certificate; ``-`` for the generic solvers, which give none), time (the
solve call, CVXPY's compile included; reading the file apart as ``read_s``). Summary: per backend
the counts run / certified (specopt: its gate passed) / correct, and specopt's time over the
fastest correct generic solver on the problems both got right (median / worst). The machine is
shared and noisy: the load average is recorded. Markdown printed, JSON in
``benchmarks/results/<out>.json``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks._common import markdown_table, run_json_subprocess, write_json  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "sdplib"
if not DATA.is_dir():
    DATA = Path("/work/shared/data/sdplib")
#: corrected published values (the issue; README note 14 for qap10)
#: qpG51: the table's 1.181000e+03 drops a digit; SDPT3 and specopt both give 1.1818e+04 (an
#: optimal point 10.007x the table value, certified gap 3e-6).
CORRECTED = {"maxG51": "4.006255e+03", "qap10": "-1.093e+03", "qpG51": "1.1818e+04"}
EXPECTED_INFEASIBLE = {"infp": "unbounded", "infd": "infeasible"}  # SDPA primal / dual
COLUMNS = ["problem", "n", "m", "backend", "status", "value", "rel_err", "correct", "gap",
           "route", "time", "cpu", "read_s"]


def published(data_dir: Path) -> dict[str, str]:
    """Published optimal values (strings, to keep their precision) from the README table."""
    out: dict[str, str] = {}
    for ln in (data_dir / "README.md").read_text().splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if len(cells) >= 4 and re.fullmatch(r"[\w-]+", cells[0]) and cells[1].isdigit():
            out[cells[0]] = cells[3]
    out.update(CORRECTED)
    return out


def tolerance(text: str) -> float:
    """Half a unit of the last printed digit of ``text`` (``4.49435e+01`` -> 5e-5)."""
    mant, _, exp = text.lower().partition("e")
    decimals = len(mant.partition(".")[2])
    return 0.5 * 10.0 ** (int(exp or 0) - decimals)


def expected_status(name: str) -> str:
    for prefix, status in EXPECTED_INFEASIBLE.items():
        if name.startswith(prefix):
            return status
    return "optimal"


def judge(name: str, status: str | None, value: float | None, pub: str | None,
          exact_value: float | None = None) -> dict:
    """rel_err and correct for one run; ``published_contradicted`` when an exactly feasible
    point (``_sdplib_exact``) lies beyond the published optimum (SDPA's dual form maximizes:
    then the optimum is at least that point's value, and the published value cannot be it)."""
    want = expected_status(name)
    if want != "optimal":
        return {"rel_err": None, "correct": status == want}
    if status not in ("optimal", "optimal_inaccurate") or value is None or pub is None:
        return {"rel_err": None, "correct": False}
    p = float(pub)
    err = abs(value - p)
    slack = tolerance(pub) + 1e-6 * max(1.0, abs(p))
    ok = err <= slack
    out = {"rel_err": err / max(1.0, abs(p)), "correct": bool(ok and status == "optimal")}
    if exact_value is not None and exact_value > p + slack:
        out["published_contradicted"] = True
    return out


def header(path: Path) -> tuple[int, int]:
    """(largest PSD block side, m) from the header lines, without reading the entries (diagonal
    blocks are nonnegative vectors: they do not count for the order)."""
    from specopt.io import _numbers

    with open(path) as fh:
        lines = []
        for ln in fh:
            if ln.strip() and ln.lstrip()[:1] not in ('"', "*"):
                lines.append(ln)
            if len(lines) == 3:
                break
    (m,) = _numbers(lines[0], 1, "m", path, 1, int)
    (nb,) = _numbers(lines[1], 1, "blocks", path, 2, int)
    sizes = _numbers(lines[2], nb, "sizes", path, 3, int)
    return max([s for s in sizes if s > 0], default=1), m


# --------------------------------------------------------------------------------------------
def child(path: str, backend: str) -> None:
    """One run (in its own process): print one JSON line."""
    import cvxpy as cp

    import specopt

    t0 = time.perf_counter()
    prob = specopt.read_sdpa(path)
    read_s = time.perf_counter() - t0
    out: dict = {"read_s": read_s}
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        if backend == "specopt":
            prob.solve(method="specopt")
        elif backend == "lowrank":  # the engine forced (single-block problems): thresholds
            prob.solve(method="specopt", route="low_rank_sdp")
        elif backend == "clarabel":
            prob.solve(solver=cp.CLARABEL)
        elif backend == "clarabel-lmi":  # Clarabel on the LMI form (specopt.conic_lmi)
            from specopt import _cvxpy_compat as compat

            data, chain, inverse = prob.get_problem_data(cp.CLARABEL, solver_opts={})
            raw = compat._clarabel_lmi(chain.solver, data, False, {})
            if raw is None:
                raise ValueError("not in dual standard form")
            prob.unpack_results(raw, chain, inverse)
        elif backend == "scs":
            prob.solve(solver=cp.SCS, eps=1e-5)
        else:
            raise ValueError(f"unknown backend {backend}")
    except cp.error.SolverError as exc:
        out.update(status="solver_error", error=str(exc)[:200])
    except ValueError as exc:  # the forced route does not apply (RouteMismatch)
        out.update(status="n/a", error=str(exc)[:200])
    out["time"] = time.perf_counter() - t0
    out["cpu"] = time.process_time() - c0  # (the machine is shared: wall time / CPU time)
    if "status" not in out:
        out["status"] = prob.status
        v = prob.value
        out["value"] = None if v is None or not abs(v) < float("inf") else float(v)
    if backend in ("specopt", "lowrank") and out["status"] != "n/a":
        cert = specopt.certificate(prob)
        out.update(route=cert.route, engine=cert.backend, gap=cert.gap,
                   gate=list(cert.gate_reasons)[:2])
        if out["status"] == "optimal":  # max-cut-type rows: an exactly feasible point's value
            from benchmarks._sdplib_exact import exactly_feasible_value

            out.update(exactly_feasible_value(prob, cert) or {})
    print(json.dumps(out, default=float))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", nargs="*", default=["*"],
                    help="names or shell patterns (default: all of SDPLIB)")
    ap.add_argument("--backends", nargs="*", default=["specopt", "clarabel", "scs"])
    ap.add_argument("--cap", type=float, default=60.0, help="wall-clock cap per run (s)")
    ap.add_argument("--clarabel-max-n", type=int, default=150)
    ap.add_argument("--scs-max-n", type=int, default=1000)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", default="sdplib")
    ap.add_argument("--report", action="store_true",
                    help="print the tables of benchmarks/results/<out>.json (no runs)")
    ap.add_argument("--child", nargs=2, metavar=("PATH", "BACKEND"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.report:
        report(args.out)
        return
    pub = published(args.data)
    files = sorted(args.data.glob("*.dat-s"), key=lambda p: (header(p)[0], p.stem))
    names = [p for p in files if any(fnmatch.fnmatch(p.stem, pat) for pat in args.problems)]
    limits = {"clarabel": args.clarabel_max_n, "clarabel-lmi": args.clarabel_max_n,
              "scs": args.scs_max_n}
    rows = []
    load0 = os.getloadavg()
    for path in names:
        n, m = header(path)
        for backend in args.backends:
            row = {"problem": path.stem, "n": n, "m": m, "backend": backend,
                   "published": pub.get(path.stem)}
            if n > limits.get(backend, n):
                row.update(status=f"skipped (n > {limits[backend]})", correct=False)
            else:
                res = run_json_subprocess([str(Path(__file__).resolve()), "--child", str(path),
                                           backend], timeout=args.cap + 30, root=ROOT)
                if "status" not in res:  # the subprocess failed or hit the cap
                    row.update(status="timeout" if "timeout" in res["error"] else "error",
                               time=res.get("time"), error=res["error"], correct=False)
                else:
                    row.update(res)
                    row.update(judge(path.stem, res["status"], res.get("value"),
                                     pub.get(path.stem), res.get("exact_value")))
                    if row["time"] > args.cap:
                        row.update(status=f"timeout ({res['status']})", correct=False)
            row["load"] = os.getloadavg()[0]
            rows.append(row)
            print(markdown_table([row], COLUMNS).splitlines()[-1], flush=True)
    summary = summarize(rows, args.backends)
    meta = {"cap_s": args.cap, "clarabel_max_n": args.clarabel_max_n,
            "scs_max_n": args.scs_max_n, "load_start": load0, "load_end": os.getloadavg(),
            "summary": summary, "problems": [p.stem for p in names]}
    out = write_json(args.out, rows, meta)
    print()
    print_tables(rows, summary, meta)
    print(f"JSON: {out}")


def print_tables(rows: list[dict], summary: dict, meta: dict) -> None:
    """The results table (``n/a`` rows left out), the counts and the time ratios."""
    print(markdown_table([r for r in rows if r["status"] != "n/a"], COLUMNS))
    print()
    print(markdown_table(summary["counts"], ["backend", "run", "certified", "correct",
                                             "published contradicted"]))
    r = summary["ratio"]
    print(f"\nspecopt time / fastest correct generic solver, on the {r['both']} problems both "
          f"got right: median {fmt(r['median'])}, worst {fmt(r['worst'])}; specopt alone correct "
          f"on {r['specopt_only']}, a generic solver alone on {r['generic_only']}. Load average "
          f"{meta['load_start'][0]:.1f} -> {meta['load_end'][0]:.1f}, cap {meta['cap_s']:g} s.")


def report(name: str) -> None:
    """Tables of a stored run (rows where the forced route did not apply marked ``n/a``)."""
    from benchmarks._common import RESULTS

    payload = json.loads((RESULTS / f"{name}.json").read_text())
    rows, meta = payload["rows"], payload["meta"]
    for r in rows:
        if r["status"] == "error" and "does not apply" in str(r.get("error", "")):
            r["status"] = "n/a"
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    print_tables(rows, summarize(rows, backends), meta)


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def summarize(rows: list[dict], backends: list[str]) -> dict:
    counts = []
    for b in backends:
        rs = [r for r in rows if r["backend"] == b and not r["status"].startswith("skipped")
              and r["status"] != "n/a"]
        cert = sum(1 for r in rs if r["status"] in ("optimal", "infeasible", "unbounded"))
        mine = b in ("specopt", "lowrank")
        counts.append({"backend": b, "run": len(rs), "certified": cert if mine else None,
                       "correct": sum(1 for r in rs if r.get("correct")),
                       "published contradicted": sum(1 for r in rs
                                                     if r.get("published_contradicted"))})
    ratios, only_s, only_g = [], 0, 0
    for prob in sorted({r["problem"] for r in rows}):
        mine = [r for r in rows if r["problem"] == prob]
        s = next((r for r in mine if r["backend"] == "specopt"), None)
        gen = [r for r in mine if r["backend"] in ("clarabel", "scs") and r.get("correct")]
        if s is None:
            continue
        if s.get("correct") and gen:
            ratios.append(s["time"] / min(r["time"] for r in gen))
        elif s.get("correct"):
            only_s += 1
        elif gen:
            only_g += 1
    return {"counts": counts,
            "ratio": {"both": len(ratios),
                      "median": statistics.median(ratios) if ratios else None,
                      "worst": max(ratios) if ratios else None,
                      "specopt_only": only_s, "generic_only": only_g}}


if __name__ == "__main__":
    main()
