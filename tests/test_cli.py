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


# ---- conclusions computed from the rows they summarize (in-process, small sizes) ----------

def _claims_hold(text: str, table) -> None:
    """Every "N.Nx faster/slower than B (t s total)" and "in t s total" in ``text`` is what the
    table's total [s] column says."""
    spec = next(r for r in table.rows if r.backend == "specopt")
    for ratio, word, other, secs in re.findall(
            r"([0-9.]+)x (faster|slower) than (\S+) \(([0-9.]+) s total\)", text):
        ratio = float(ratio)
        row = table.row(other)
        assert abs(row.total_time - float(secs)) <= 0.006
        true = row.total_time / spec.total_time
        assert (word == "faster") == (true >= 1), (text, true)
        assert ratio == pytest.approx(true if true >= 1 else 1 / true, abs=0.051)
    m = re.search(r"in ([0-9.]+) s total", text)
    if m:
        assert abs(float(m.group(1)) - spec.total_time) <= 0.006


@pytest.mark.parametrize(("name", "size"), [("relcomp", 300), ("metric", 20), ("itml", 30),
                                            ("spectral", 6), ("mve", 8)])
def test_each_example_conclusion_matches_its_rows(name, size):
    pytest.importorskip("sklearn")
    import specopt
    from specopt.cli import _conclusion
    from specopt.compare import footnotes
    from specopt.examples import build

    ex = build(name, size)
    table = specopt.compare(ex.problem, backends=("CLARABEL", "SCS", "specopt"),
                            name=ex.description)
    text = _conclusion(table, specopt.explain(ex.problem))
    spec = table.row("specopt")
    assert "not applicable: not applicable" not in "\n".join(footnotes(table))
    _claims_hold(text, table)
    if table.best is None or not table.best.certified:
        assert text.startswith("No ")
        return
    assert f"Best certified run: {table.best.backend} " in text
    assert f"route {spec.route}," in text
    agrees = spec.rel_diff <= 1e-5
    assert ("agrees with it" in text) == agrees and ("differs from it" in text) != agrees
    if spec.route == "conic":  # the same solver as a row: no speed-up claimed over it
        used = spec.certificate.backend
        assert f"on {used}" in text and "x faster" not in text
        assert f"the same solver as the {used} row" in text
    if "Why auto chose" in text:
        assert f"Why auto chose {spec.route}:" in text


def _row(backend, route, total, status="optimal", objective=1.0, cert_backend=None):
    from specopt.certificate import Certificate
    from specopt.compare import CompareRow

    cert = Certificate(route=route, backend=cert_backend or backend, status=status,
                       objective=objective, bound=objective, gap=0.0)
    return CompareRow(backend, route, status, objective=objective, rel_diff=0.0, gap=0.0,
                      max_violation=0.0, total_time=total, certificate=cert)


class _Explanation:
    """An explain() stand-in: auto picks ``route`` with these reasons."""

    def __init__(self, route, reason, pays_off_reason):
        from specopt.solve import RouteVerdict

        self.auto_route = route
        self._v = RouteVerdict(route, True, reason, True, True, pays_off_reason)

    def verdict(self, route):
        assert route == self.auto_route
        return self._v


def test_conclusion_does_not_repeat_a_speed_claim_the_rows_contradict():
    from specopt.cli import _conclusion
    from specopt.compare import CompareTable

    rows = [_row("CLARABEL", "conic/CLARABEL", 0.015), _row("specopt", "bregman", 0.975)]
    table = CompareTable(rows, rows[0])
    why = _Explanation("bregman", "ITML problem", "measured 2.1x-218x faster than Clarabel")
    text = _conclusion(table, why)
    _claims_hold(text, table)
    assert "65.0x slower than CLARABEL" in text
    assert "does not bear out" in text  # the size rule's claim is reported as contradicted
    faster = [_row("CLARABEL", "conic/CLARABEL", 0.975), _row("specopt", "bregman", 0.015)]
    text = _conclusion(CompareTable(faster, faster[1]), why)
    assert "65.0x faster than CLARABEL" in text and "does not bear out" not in text
    assert "measured 2.1x-218x faster" in text


def test_conclusion_when_auto_used_a_conic_solver():
    from specopt.cli import _conclusion
    from specopt.compare import CompareTable

    rows = [_row("CLARABEL", "conic/CLARABEL", 0.20), _row("SCS", "conic/SCS", 0.10),
            _row("specopt", "conic", 0.22, cert_backend="CLARABEL")]
    text = _conclusion(CompareTable(rows, rows[0]),
                       _Explanation("conic", "the problem is DCP", ""))
    assert "on CLARABEL, the same solver as the CLARABEL row (0.20 s total)" in text
    assert "SCS" not in text  # no comparison with a different solver as if it were the same
    assert "Why auto chose conic: the problem is DCP." in text


def test_every_compare_example_warms_up():
    pytest.importorskip("sklearn")
    out = run_cli("compare", "spectral", "--size", "5", "--backends", "CLARABEL,specopt")
    assert out.returncode == 0, out.stderr
    assert "Before the table, every backend solved a small copy (--size 5) once" in out.stdout
