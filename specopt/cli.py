"""The specopt command: versions and solvers (info), the demo (demo), and a comparison of
backends on a bundled example (compare EXAMPLE)."""

from __future__ import annotations

import argparse
import platform
import sys
import time

DEMO_BACKENDS = ("CLARABEL", "SCS", "MOSEK", "specopt")
DEMO_EXAMPLE = "relcomp"
#: size of the small copy of the example solved once before the table, so that one-off costs
#: (numba kernels loaded or compiled, CVXPY's first canonicalization) do not land in one row
WARM_UP_SIZE = 200


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


def _conclusion(table, explanation=None) -> str:
    """The verdict, computed from the table's own columns (status, objective, rel. diff, gap,
    total [s]); with ``explanation`` (``specopt.explain``) the reason auto chose its route."""
    spec = next((r for r in table.rows if r.backend == "specopt"), None)
    best = table.best
    if best is None:
        return "No backend produced a solution."
    if not best.certified:
        return (
            f"No certified optimum (non-convex or failed runs); best point from {best.backend}: "
            f"objective {best.objective:.6g} ({best.status})."
        )
    lines = [f"Best certified run: {best.backend} (objective {best.objective:.6g}, "
             f"gap {best.gap:.1e})." if best.gap is not None else
             f"Best certified run: {best.backend} (objective {best.objective:.6g})."]
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
    if fastest is not None:
        ratio = fastest.total_time / max(spec.total_time, 1e-9)
        if spec.route is not None and spec.route.startswith("conic"):
            line += (f"; it used the generic route itself, so the comparison with "
                     f"{fastest.backend} ({fastest.total_time:.2f} s) measures the same method")
        elif ratio >= 1:
            line += (f": {ratio:.1f}x faster than the fastest generic solver "
                     f"({fastest.backend}, {fastest.total_time:.2f} s total)")
        else:
            line += (f": {1 / ratio:.1f}x slower than the fastest generic solver "
                     f"({fastest.backend}, {fastest.total_time:.2f} s total)")
    lines.append(line + ".")
    if explanation is not None and explanation.auto_route is not None:
        v = explanation.verdict(explanation.auto_route)
        why = v.pays_off_reason if v.route != "conic" else v.reason
        lines.append(f"Why auto chose {v.route}: {v.reason}" +
                     (f"; {why}" if why and why != v.reason else "") + ".")
    return "\n".join(lines)


def _print_footnotes(table) -> None:
    from specopt.compare import footnotes

    notes = footnotes(table)
    if notes:
        print()
        for k, note in enumerate(notes, 1):
            print(f"[{k}] {note}")


def _warm_up(name: str, backends: tuple[str, ...], route: str | None) -> float:
    """Solve a small copy of the example once with every backend (and with ``route``, the one
    auto picks for the full size, which auto may not pick for the small copy); returns the
    seconds spent."""
    import specopt
    from specopt.examples import build

    t0 = time.perf_counter()
    extra = (f"specopt:{route}",) if route and route != "conic" else ()
    specopt.compare(build(name, WARM_UP_SIZE).problem, backends=backends + extra)
    return time.perf_counter() - t0


def _run_compare(name: str, size: int | None, backends: tuple[str, ...],
                 plot: str | None = None, warm_up: bool = False) -> int:
    import specopt
    from specopt.examples import build

    t_start = time.perf_counter()
    example = build(name, size)
    explanation = specopt.explain(example.problem)
    if warm_up:
        first = _warm_up(name, backends, explanation.auto_route)
    print(f"# {example.description}\n")
    table = specopt.compare(example.problem, backends=backends)
    print(table.to_markdown())
    _print_footnotes(table)
    print()
    print(_conclusion(table, explanation))
    if warm_up:
        print(f"(Before the table, every backend solved a {WARM_UP_SIZE}-triplet copy once, "
              f"{first:.2f} s, so one-off costs such as loading numba kernels are in no row; "
              f"whole run {time.perf_counter() - t_start:.1f} s.)")
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
        return _run_compare(DEMO_EXAMPLE, args.size, DEMO_BACKENDS, args.plot, warm_up=True)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    return _run_compare(args.example, args.size, backends, args.plot)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
