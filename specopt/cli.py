"""The specopt command: versions and solvers (info), the demo (demo), and a comparison of
backends on a bundled example (compare EXAMPLE)."""

from __future__ import annotations

import argparse
import platform
import sys
import time

DEMO_BACKENDS = ("CLARABEL", "SCS", "MOSEK", "specopt")
DEMO_EXAMPLE = "relcomp"


def _info() -> int:
    import cvxpy as cp
    import numpy as np
    import scipy

    import specopt
    from specopt.backends import GENERIC_BACKENDS, backend_status

    print(f"specopt {specopt.__version__}  (python {platform.python_version()})")
    print(f"cvxpy {cp.__version__}, numpy {np.__version__}, scipy {scipy.__version__}")
    for mod in ("clarabel", "scs", "highspy", "numba", "sklearn", "matplotlib", "mosek"):
        try:
            m = __import__(mod)
            print(f"  {mod:<10} {getattr(m, '__version__', 'installed')}")
        except ImportError:
            print(f"  {mod:<10} not installed")
    print("conic backends:")
    for name in GENERIC_BACKENDS:
        ok, why = backend_status(name)
        print(f"  {name:<9} {'usable' if ok else 'unusable'}: {why}")
    print("routes:", ", ".join(specopt.route_names()))
    return 0


def _times(spec, other) -> str:
    """``"N.Nx faster/slower than <other> (t s total)"``, from the two rows' total [s]."""
    ratio = other.total_time / max(spec.total_time, 1e-9)
    word = f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"
    return f"{word} than {other.backend} ({other.total_time:.2f} s total)"


def _conclusion(table, explanation=None) -> str:
    """The verdict, computed from the table's own columns (status, objective, rel. diff, gap,
    total [s]) and nothing else; with ``explanation`` (``specopt.explain``) why auto chose its
    route, checked against the rows (a speed claim the rows contradict is said to be so)."""
    spec = next((r for r in table.rows if r.backend == "specopt"), None)
    best = table.best
    if best is None:
        return "No backend produced a solution."
    if not best.certified:
        return (
            f"No certified optimum (non-convex or failed runs); best point from {best.backend}: "
            f"objective {best.objective:.6g} ({best.status})."
        )
    lines = [f"Best certified run: {best.backend} (objective {best.objective:.6g}"
             + (f", gap {best.gap:.1e})." if best.gap is not None else ").")]
    if spec is None or spec.total_time is None or spec.rel_diff is None:
        return lines[0]
    generic = [r for r in table.rows if not r.backend.startswith("specopt")
               and r.certified and r.total_time is not None]
    fastest = min(generic, key=lambda r: r.total_time) if generic else None
    agrees = spec.rel_diff <= 1e-5
    certified = "certified" if spec.certified else f"not certified ({spec.status})"
    line = (f"specopt (auto -> route {spec.route}, {certified}) "
            f"{'agrees with it' if agrees else 'differs from it'} "
            f"(rel. diff {spec.rel_diff:.1e}) in {spec.total_time:.2f} s total")
    conic = spec.route is not None and spec.route.startswith("conic")
    if conic:  # auto ran a generic solver itself: say which, and compare with that row
        used = spec.certificate.backend if spec.certificate is not None else None
        same = next((r for r in table.rows if used and r.backend.upper() == used.upper()
                     and r.total_time is not None), None)
        line += f"; auto used the generic conic route on {used or 'a conic solver'}"
        if same is not None:
            extra = ("the extra time is specopt's analysis and checks"
                     if spec.total_time > same.total_time else
                     "the times differ by run-to-run variation, not by method")
            line += (f", the same solver as the {same.backend} row ({same.total_time:.2f} s "
                     f"total): {extra}")
        elif fastest is not None:
            line += f": {_times(spec, fastest)}"
    elif fastest is not None:
        line += f": {_times(spec, fastest)}"
    lines.append(line + ".")
    auto = None if explanation is None else explanation.auto_route
    if auto is not None and auto == (spec.route.split("/")[0] if spec.route else None):
        v = explanation.verdict(auto)
        why = f"Why auto chose {v.route}: {v.reason}"
        claim = v.pays_off_reason if v.route != "conic" else ""
        slower = (fastest is not None and not conic
                  and fastest.total_time < spec.total_time)
        if claim and claim != v.reason and slower:
            why += (f"; its size rule expected it to pay off ({claim}), which this run does "
                    f"not bear out ({_times(spec, fastest)})")
        elif claim and claim != v.reason:
            why += f"; {claim}"
        lines.append(why + ".")
    elif auto is not None:
        lines.append(f"auto chose {auto}, but the answer came from route {spec.route} "
                     "(the verification gate retried).")
    return "\n".join(lines)


def _print_footnotes(table) -> None:
    from specopt.compare import footnotes

    notes = footnotes(table)
    if notes:
        print()
        for k, note in enumerate(notes, 1):
            print(f"[{k}] {note}")


def _warm_up(name: str, size: int, backends: tuple[str, ...], route: str | None) -> float:
    """Solve a small copy of the example (``size``) once with every backend (and with ``route``,
    the one auto picks for the full size, which auto may not pick for the small copy); returns
    the seconds spent."""
    import specopt
    from specopt.examples import build

    t0 = time.perf_counter()
    extra = (f"specopt:{route}",) if route and route != "conic" else ()
    specopt.compare(build(name, size).problem, backends=backends + extra)
    return time.perf_counter() - t0


def _run_compare(name: str, size: int | None, backends: tuple[str, ...],
                 plot: str | None = None, warm_up: bool = True) -> int:
    import specopt
    from specopt.examples import WARM_UP_SIZES, build

    t_start = time.perf_counter()
    example = build(name, size)
    explanation = specopt.explain(example.problem)
    small = WARM_UP_SIZES[name] if size is None else min(size, WARM_UP_SIZES[name])
    if warm_up:
        first = _warm_up(name, small, backends, explanation.auto_route)
    print(f"# {example.description}\n")
    table = specopt.compare(example.problem, backends=backends, name=example.description)
    print(table.to_markdown())
    _print_footnotes(table)
    print()
    print(_conclusion(table, explanation))
    if warm_up:
        print(f"(Before the table, every backend solved a small copy (--size {small}) once, "
              f"{first:.2f} s, so one-off costs such as loading numba kernels and CVXPY's "
              f"first canonicalization are in no row; whole run "
              f"{time.perf_counter() - t_start:.1f} s.)")
    if plot:
        ax = table.plot()
        ax.figure.savefig(plot, dpi=120, bbox_inches="tight")
        print(f"plot written to {plot}")
    return 0 if table.best is not None else 1


def _parser() -> argparse.ArgumentParser:
    from specopt.examples import EXAMPLE_HELP, EXAMPLES

    examples = "\n".join(f"  {name:<9} {EXAMPLE_HELP.get(name, '')}" for name in EXAMPLES)
    parser = argparse.ArgumentParser(
        prog="specopt",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples (for compare):\n" + examples,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{info,demo,compare}")
    sub.add_parser("info", help="versions, conic solvers, MOSEK licence status, routes")
    demo = sub.add_parser(
        "demo",
        help="metric learning on digits: specopt's route against Clarabel/SCS/MOSEK",
        description="Metric learning from relative comparisons on scikit-learn's digits "
                    "(64 features, seeded triplets), solved by every available conic solver and "
                    "by method='specopt' (auto picks dual coordinate descent); prints the table, "
                    "footnotes for non-optimal statuses, and the conclusion.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    demo.add_argument("--size", type=int, default=5000, help="number of triplets")
    demo.add_argument("--plot", metavar="FILE.png", default=None,
                      help="also save a bar chart of the times (needs matplotlib)")
    cmp_ = sub.add_parser(
        "compare",
        help="compare backends on a bundled example",
        description="Solve a bundled example with each backend and print what each achieved.",
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmp_.add_argument("example", choices=list(EXAMPLES), help="which example (see below)")
    cmp_.add_argument("--size", type=int, default=None,
                      help="problem size; what it counts and its default depend on the example "
                           "(see below)")
    cmp_.add_argument(
        "--backends",
        default=",".join(DEMO_BACKENDS),
        help="comma-separated: CLARABEL, SCS, MOSEK, specopt (auto) or specopt:<route> "
             f"(default: {','.join(DEMO_BACKENDS)})",
    )
    cmp_.add_argument("--plot", metavar="FILE.png", default=None,
                      help="also save a bar chart of the times (needs matplotlib)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "info":
        return _info()
    if args.command == "demo":
        return _run_compare(DEMO_EXAMPLE, args.size, DEMO_BACKENDS, args.plot)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    return _run_compare(args.example, args.size, backends, args.plot)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
