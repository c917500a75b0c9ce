"""Verbose progress of the iterative routes (one printer, specopt._progress) and quiet solves."""

from __future__ import annotations

import re

import numpy as np
import pytest

import specopt
from specopt._progress import Progress
from specopt.examples import build

ROUTE_CASES = [
    ("itml", 120, "bregman", "sweep"),
    ("relcomp", 1200, "dual_cd", "pass"),
    ("metric", 60, "matrix_generation", "round"),
    ("mve", 10, "iterated_sdp", "MM step"),
]


def _rows(text: str, unit: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split()[:1] == unit.split()[:1]
                 and "objective" in ln)
    out = []
    for ln in lines[start + 1:]:
        if ln.startswith("-"):
            break
        out.append(ln.split())
    return out


@pytest.mark.parametrize(("name", "size", "route", "unit"), ROUTE_CASES)
def test_verbose_solve_prints_header_rounds_and_certificate(capfd, name, size, route, unit):
    pytest.importorskip("sklearn")
    ex = build(name, size)
    ex.problem.solve(method="specopt", route=route, solver="CLARABEL" if route ==
                     "iterated_sdp" else None, verbose=True)
    out = capfd.readouterr().out
    cert = specopt.certificate(ex.problem)
    assert out.startswith("=" * 79) and "specopt".center(79) in out
    assert re.search(rf"^\(specopt\) .*: route {route}: ", out, re.M)
    rows = _rows(out, unit)
    assert rows, out
    its = [int(r[0]) for r in rows]
    assert its == sorted(its) and len(set(its)) == len(its)
    # the last printed line is the final iterate: its objective is the certificate's
    assert float(rows[-1][1]) == pytest.approx(cert.objective, rel=1e-5, abs=1e-8)
    assert "Summary" in out and f"route: {route}" in out
    assert "Running HiGHS" not in out


@pytest.mark.parametrize(("name", "size", "route", "unit"), ROUTE_CASES)
def test_quiet_solve_prints_nothing(capfd, name, size, route, unit):
    pytest.importorskip("sklearn")
    ex = build(name, size)
    ex.problem.solve(method="specopt", route=route, solver="CLARABEL" if route ==
                     "iterated_sdp" else None)
    captured = capfd.readouterr()
    assert captured.out == "" and "HiGHS" not in captured.err


def test_progress_prints_every_kth_call_and_the_last(capsys):
    p = Progress("demo", "what", unit="round", every=3)
    for it in range(1, 9):
        p(it, objective=float(it), bound=float(it) + 1, gap=1.0 / it, violation=0.0)
    p.finish()
    out = capsys.readouterr().out
    printed = [int(r[0]) for r in _rows(out, "round")]
    assert printed == [1, 4, 7, 8]  # calls 0, 3, 6, and the last one at finish


def test_learners_pass_verbose_on(capfd):
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_iris

    from specopt.learn import ITMLSupervised, RelativeComparisonMetric

    X, y = load_iris(return_X_y=True)
    ITMLSupervised(random_state=0, verbose=True).fit(X, y)
    out = capfd.readouterr().out
    assert "route bregman" in out and "Summary" in out
    RelativeComparisonMetric(random_state=0, verbose=True).fit_supervised(X, y)
    out = capfd.readouterr().out
    assert "route dual_cd" in out and "Summary" in out
    ITMLSupervised(random_state=0).fit(X, y)
    assert capfd.readouterr().out == ""


def test_solver_histories_have_time_stamps():
    from specopt.solvers.dual_cd import dual_cd

    rng = np.random.default_rng(0)
    Z = rng.normal(0.3, 1.0, (300, 5))
    seen = []
    res = dual_cd(np.eye(5), Z, 1.0, callback=lambda it, **kw: seen.append((it, kw)))
    t = res.history["time"]
    assert len(t) == len(res.history["pass"]) == len(seen) and np.all(np.diff(t) >= 0)
    assert seen[-1][1]["gap"] == pytest.approx(res.rel_gap)


@pytest.mark.parametrize(("name", "size", "route", "unit"), ROUTE_CASES)
def test_certificate_plot_writes_a_file(tmp_path, name, size, route, unit):
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    pytest.importorskip("sklearn")
    ex = build(name, size)
    ex.problem.solve(method="specopt", route=route, solver="CLARABEL" if route ==
                     "iterated_sdp" else None)
    cert = specopt.certificate(ex.problem)
    assert len(cert.history["time"]) >= 1
    ax = cert.plot()
    assert ax.get_xlabel() == "time [s]" and ax.lines
    target = tmp_path / f"{route}.png"
    ax.figure.savefig(target)
    assert target.stat().st_size > 1000


def test_compare_table_plot_saves(tmp_path):
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    pytest.importorskip("sklearn")
    table = specopt.compare(build("itml", 60).problem, backends=("CLARABEL", "specopt"))
    ax = table.plot()
    target = tmp_path / "table.png"
    ax.figure.savefig(target)
    assert target.stat().st_size > 1000 and len(ax.patches) == 2


def test_transformation_svm_verbose_prints_rounds(capfd):
    from specopt.learn import TransformationSVM

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(80, 3))
    y = np.where(np.log(X[:, 0] + 0.05) + X[:, 1] > 0.0, 1, -1)
    est = TransformationSVM(n_ramps=5, solver="matrix_generation", verbose=True).fit(X, y)
    out = capfd.readouterr().out
    assert "route transformation matrix generation" in out and "Summary" in out
    rows = _rows(out, "round")
    assert len(rows) >= 1 and int(rows[-1][0]) == est.n_iter_
    assert float(rows[-1][3]) == pytest.approx(est.gap_, rel=0.01, abs=1e-12)
