"""The ``specopt`` command: ``info``, ``demo``, ``compare EXAMPLE``."""

from __future__ import annotations

import argparse
import platform
import sys

DEMO_BACKENDS = ("CLARABEL", "SCS", "MOSEK", "specopt")


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


def _conclusion(table) -> str:
    """One line: the best certified run, and how specopt's run compares with it."""
    spec = next((r for r in table.rows if r.backend == "specopt"), None)
    best = table.best
    if best is None:
        return "No backend produced a solution."
    if not best.certified:
        return (
            f"No certified optimum (non-convex or failed runs); best point from {best.backend}: "
            f"objective {best.objective:.6g} ({best.status})."
        )
    line = f"Best certified run: {best.backend} (objective {best.objective:.6g})"
    if spec is not None and spec.total_time is not None and spec.rel_diff is not None:
        generic = [r for r in table.rows if not r.backend.startswith("specopt")
                   and r.certified and r.total_time]
        fastest = min(generic, key=lambda r: r.total_time) if generic else None
        verdict = "agrees with it" if spec.rel_diff <= 1e-5 else "differs from it"
        line += (
            f"; specopt (route {spec.route}) {verdict} (rel. diff {spec.rel_diff:.1e}) in "
            f"{spec.total_time:.2f} s"
        )
        if fastest is not None:
            line += (
                f" vs {fastest.total_time:.2f} s for the fastest generic solver "
                f"({fastest.backend})"
            )
    return line + "."


def _run_compare(name: str, size: int | None, backends: tuple[str, ...]) -> int:
    import specopt
    from specopt.examples import build

    example = build(name, size)
    print(f"# {example.description}\n")
    table = specopt.compare(example.problem, backends=backends)
    print(table.to_markdown())
    print()
    print(_conclusion(table))
    return 0 if table.best is not None else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specopt", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, solvers, MOSEK licence, routes")
    demo = sub.add_parser("demo", help="solve a metric-learning SDP on real data, compare backends")
    demo.add_argument("--size", type=int, default=None, help="number of data points")
    cmp_ = sub.add_parser("compare", help="compare backends on a bundled example")
    from specopt.examples import EXAMPLES

    cmp_.add_argument("example", choices=sorted(EXAMPLES))
    cmp_.add_argument("--size", type=int, default=None, help="problem size (example-specific)")
    cmp_.add_argument(
        "--backends",
        default=",".join(DEMO_BACKENDS),
        help="comma-separated: CLARABEL, SCS, MOSEK, specopt, specopt:<route>",
    )
    args = parser.parse_args(argv)
    if args.command == "info":
        return _info()
    if args.command == "demo":
        import specopt

        routes = specopt.route_names()
        extra = ("specopt:matrix_generation",) if "matrix_generation" in routes else ()
        return _run_compare("metric", args.size, DEMO_BACKENDS + extra)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    return _run_compare(args.example, args.size, backends)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
