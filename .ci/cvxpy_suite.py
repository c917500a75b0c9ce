#!/usr/bin/env python3
"""CI: CVXPY's own installed test suite passes the same with specopt imported as without.

Runs ``python -m pytest --pyargs cvxpy.tests`` twice from an empty directory (so specopt's
pytest configuration does not apply), once plain and once with ``-p specopt`` (pytest imports
specopt as a plugin before collecting, which registers its atoms, ``method="specopt"`` and the
DCP hint), and compares the outcome counts (passed, failed, skipped, errors, xfailed, ...) and
the failing tests. A test that failed in only one of the two runs is run again, alone, three
times each way: a difference that does not reproduce is a flaky test (CVXPY has timing-sensitive
ones that fail on a loaded machine, with or without specopt) and is reported as such; one that
reproduces fails the check. Exits 1 on any reproducible difference. About 75 s per run on 2
cores.

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


FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def _cmd(with_specopt: bool, args: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    if with_specopt:
        cmd[3:3] = ["-p", "specopt"]
    return cmd


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # specopt importable whether installed or run from the checkout
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def run(with_specopt: bool, extra: list[str], cwd: str) -> tuple[dict[str, int], set[str]]:
    cmd = _cmd(with_specopt, ["--pyargs", "cvxpy.tests", "-rfE", *extra])
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-1:] or [""]
    counts = {("error" if k.startswith("error") else k): int(n)
              for n, k in COUNT.findall(tail[0]) if not k.startswith("warning")}
    print(f"{'with' if with_specopt else 'without'} specopt: {tail[0]}", flush=True)
    if proc.returncode not in (0, 1) or not counts:
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
        sys.exit(f"CVXPY's test suite did not run (exit code {proc.returncode})")
    return counts, set(FAILED.findall(proc.stdout))


def fails_alone(test_id: str, with_specopt: bool, cwd: str) -> bool:
    proc = subprocess.run(_cmd(with_specopt, [test_id]), cwd=cwd, env=_env(),
                          capture_output=True, text=True)
    return proc.returncode != 0


def main() -> None:
    extra = sys.argv[1:] or ["-n", "2"]
    with tempfile.TemporaryDirectory() as empty:
        without, failed_without = run(False, extra, empty)
        with_, failed_with = run(True, extra, empty)
        if with_ == without and failed_with == failed_without:
            print("CVXPY's test suite: same outcomes with and without specopt")
            return
        differing = sorted(failed_with ^ failed_without)
        if not differing:  # counts differ without a differing failure: nothing to re-run
            sys.exit(f"importing specopt changes CVXPY's test outcomes: {without} -> {with_}")
        real = []
        for test_id in differing:
            outcome = {w: [fails_alone(test_id, w, empty) for _ in range(3)]
                       for w in (False, True)}
            side = test_id in failed_with  # the run in which it failed
            # a real difference: fails alone every time on that side, never on the other
            flaky = not (all(outcome[side]) and not any(outcome[not side]))
            print(f"re-run alone 3x {test_id}: fails without specopt {outcome[False]}, "
                  f"with {outcome[True]} -> {'flaky' if flaky else 'REPRODUCES'}", flush=True)
            if not flaky:
                real.append(test_id)
    if real:
        sys.exit(f"importing specopt changes CVXPY's test outcomes: {real}")
    print("CVXPY's test suite: same outcomes with and without specopt (the differing tests "
          "did not reproduce alone: flaky)")


if __name__ == "__main__":
    main()
