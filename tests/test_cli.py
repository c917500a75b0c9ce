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
    out = run_cli("demo", "--size", "1500")
    assert out.returncode == 0, out.stderr
    assert "| backend | route | status" in out.stdout and "| total [s] |" in out.stdout
    assert "Running HiGHS" not in out.stdout + out.stderr
    table = [ln for ln in out.stdout.splitlines() if ln.startswith("| ")]
    spec = next(ln for ln in table if ln.startswith("| specopt |"))
    assert "| dual_cd | optimal |" in spec
    assert "Best certified run:" in out.stdout
    assert "specopt (auto -> route dual_cd, certified) agrees with it" in out.stdout
    assert "Why auto chose dual_cd:" in out.stdout
    # the conclusion's seconds are the table's total [s] column
    m = re.search(r"agrees with it \(rel. diff [^)]*\) in ([0-9.]+) s total", out.stdout)
    cells = [c.strip() for c in spec.strip("|").split("|")]
    assert m and abs(float(m.group(1)) - float(cells[9])) <= 0.006
    # every non-optimal row is explained in a footnote line
    for ln in table[2:]:
        status = ln.strip("|").split("|")[2].strip()
        if status != "optimal":
            assert re.search(r"^\[\d+\] " + re.escape(ln.split("|")[1].strip()), out.stdout,
                             re.M)


def test_compare_example_with_chosen_backends():
    pytest.importorskip("sklearn")
    out = run_cli("compare", "itml", "--size", "30", "--backends", "CLARABEL,specopt")
    assert out.returncode == 0, out.stderr
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("| ") and "---" not in ln]
    assert len(rows) == 3


def test_compare_itml_uses_the_bregman_route():
    pytest.importorskip("sklearn")
    out = run_cli("compare", "itml", "--backends", "CLARABEL,specopt:bregman,specopt")
    assert out.returncode == 0, out.stderr
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("| specopt")]
    assert len(rows) == 2 and all("| bregman | optimal |" in r for r in rows)
    assert "agrees with it" in out.stdout


def test_compare_non_convex_example_reports_local_solution():
    out = run_cli("compare", "mve", "--size", "10", "--backends", "SCS,specopt")
    assert out.returncode == 0, out.stderr
    assert "stationary_point" in out.stdout and "local solution" in out.stdout
    assert "No certified optimum" in out.stdout
    scs = next(ln for ln in out.stdout.splitlines() if ln.startswith("| SCS |"))
    assert "not applicable: non-convex (use method='specopt')" in scs
    assert "RouteMismatch" not in out.stdout


def test_compare_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "cmp.png"
    out = run_cli("compare", "itml", "--size", "30", "--backends", "CLARABEL,specopt",
                  "--plot", str(target))
    assert out.returncode == 0, out.stderr
    assert target.exists() and target.stat().st_size > 1000
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_help_is_plain_text_and_describes_every_example():
    from specopt.examples import EXAMPLES

    top = run_cli("--help")
    cmp_ = run_cli("compare", "--help")
    demo = run_cli("demo", "--help")
    for out in (top, cmp_, demo):
        assert out.returncode == 0, out.stderr
        assert "``" not in out.stdout and ":class:" not in out.stdout
    for name in EXAMPLES:
        line = next(ln for ln in cmp_.stdout.splitlines() if ln.strip().startswith(name + " "))
        assert "default" in line or "default" in cmp_.stdout.split(line, 1)[1].split("\n")[0]
    assert "(default: 5000)" in demo.stdout


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


def test_readme_python_snippets_run(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib").use("Agg")
    monkeypatch.chdir(tmp_path)  # the snippets save pictures in the working directory
    readme = (ROOT / "README.md").read_text()
    namespace: dict = {}
    for block in re.findall(r"```python\n(.*?)```", readme, re.S):
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    import specopt

    assert namespace["prob"].status == "optimal"
    assert specopt.certificate(namespace["itml"]).max_violation < 1e-5
    assert namespace["table"].best is not None
    assert (tmp_path / "compare.png").stat().st_size > 1000
