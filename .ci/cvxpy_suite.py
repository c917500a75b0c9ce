#!/usr/bin/env python3
"""CI: CVXPY's own installed test suite passes the same with specopt imported as without.

Runs ``python -m pytest --pyargs cvxpy.tests`` twice from an empty directory (so specopt's
pytest configuration does not apply), once plain and once with ``-p specopt`` (pytest imports
specopt as a plugin before collecting, which registers its atoms, ``method="specopt"`` and the
DCP hint), and compares the outcome counts (passed, failed, skipped, errors, xfailed, ...).
Exits 1 on any difference. About 75 s per run on 2 cores.

Usage: python .ci/cvxpy_suite.py [extra pytest args, e.g. -n 2]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|warnings?|deselected)")


def run(with_specopt: bool, extra: list[str]) -> dict[str, int]:
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "cvxpy.tests", "-q",
           "-p", "no:cacheprovider", *extra]
    if with_specopt:
        cmd[5:5] = ["-p", "specopt"]
    env = dict(os.environ)
    # specopt importable whether installed or run from the checkout
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as empty:
        proc = subprocess.run(cmd, cwd=empty, env=env, capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-1:] or [""]
    counts = {("error" if k.startswith("error") else k): int(n)
              for n, k in COUNT.findall(tail[0]) if not k.startswith("warning")}
    print(f"{'with' if with_specopt else 'without'} specopt: {tail[0]}", flush=True)
    if proc.returncode not in (0, 1) or not counts:
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
        sys.exit(f"CVXPY's test suite did not run (exit code {proc.returncode})")
    return counts


def main() -> None:
    extra = sys.argv[1:] or ["-n", "2"]
    without = run(False, extra)
    with_ = run(True, extra)
    if with_ != without:
        sys.exit(f"importing specopt changes CVXPY's test outcomes: {without} -> {with_}")
    print("CVXPY's test suite: same outcomes with and without specopt")


if __name__ == "__main__":
    main()
