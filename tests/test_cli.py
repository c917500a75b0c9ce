"""The specopt command and the README quick start."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "specopt.cli", *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
    )


def test_info_lists_backends_and_mosek_licence():
    out = run_cli("info")
    assert out.returncode == 0, out.stderr
    assert "CLARABEL" in out.stdout and "SCS" in out.stdout and "MOSEK" in out.stdout
    assert "routes: " in out.stdout and "conic" in out.stdout


def test_demo_solves_and_concludes():
    pytest.importorskip("sklearn")
    out = run_cli("demo", "--size", "60")
    assert out.returncode == 0, out.stderr
    assert "| backend | route | status" in out.stdout
    table = [ln for ln in out.stdout.splitlines() if ln.startswith("| ")]
    assert any(ln.startswith("| specopt |") and "optimal" in ln for ln in table)
    assert "Best certified run:" in out.stdout and "specopt (route" in out.stdout


def test_compare_example_with_chosen_backends():
    pytest.importorskip("sklearn")
    out = run_cli("compare", "itml", "--size", "30", "--backends", "CLARABEL,specopt")
    assert out.returncode == 0, out.stderr
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("| ") and "---" not in ln]
    assert len(rows) == 3


def test_compare_non_convex_example_reports_local_solution():
    out = run_cli("compare", "mve", "--size", "10", "--backends", "SCS,specopt")
    assert out.returncode == 0, out.stderr
    assert "stationary_point" in out.stdout and "local solution" in out.stdout
    assert "No certified optimum" in out.stdout


def test_unknown_example_is_rejected():
    out = run_cli("compare", "nope")
    assert out.returncode != 0 and "invalid choice" in out.stderr


def test_readme_quick_start_is_two_commands_matching_ci():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start.*?```(?:bash|sh)?\n(.*?)```", readme, re.S)
    assert block, "README has a Quick start code block"
    commands = [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(commands) == 2
    assert "specopt demo" in commands[0]
    assert "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1].strip() in ci


def test_readme_python_snippets_run():
    pytest.importorskip("matplotlib").use("Agg")
    readme = (ROOT / "README.md").read_text()
    namespace: dict = {}
    for block in re.findall(r"```python\n(.*?)```", readme, re.S):
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    import specopt

    assert namespace["prob"].status == "optimal"
    assert specopt.certificate(namespace["itml"]).max_violation < 1e-5
    assert namespace["table"].best is not None
