"""Verbose progress of the iterative routes (one printer, specopt._progress) and quiet solves."""

from __future__ import annotations

import re

import cvxpy as cp
import numpy as np
import pytest

import specopt
from specopt._progress import Progress
from specopt.examples import build


def _sde(n: int = 30, seed: int = 0) -> cp.Problem:
    """A small SDE (maximum variance unfolding) of a spiral, plus a constant."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.5, 3 * np.pi, n))
    X = np.c_[t * np.cos(t), t * np.sin(t)]
    pairs = np.array([(i, i + 1) for i in range(n - 1)] + [(i, i + 2) for i in range(0, n - 2, 3)])
    I, J = pairs[:, 0], pairs[:, 1]
    d2 = np.sum((X[I] - X[J]) ** 2, axis=1)
    K = cp.Variable((n, n), symmetric=True)
    return cp.Problem(cp.Maximize(cp.trace(K) + 3.0),
                      [K >> 0, cp.sum(K) == 0, K[I, I] + K[J, J] - 2 * K[I, J] == d2 / d2.mean()])


def _shifted(name: str, size: int, flip: bool) -> cp.Problem:
    """A bundled example with a constant added to its objective (and the sense flipped): the
    solvers work without the constant / in minimization form, the user sees both."""
    p = build(name, size).problem
    e = p.objective.expr
    if not flip:
        return cp.Problem(type(p.objective)(e + 4.0), p.constraints)
    if isinstance(p.objective, cp.Minimize):
        return cp.Problem(cp.Maximize(-e - 4.0), p.constraints)
    return cp.Problem(cp.Minimize(-e + 4.0), p.constraints)


#: (case id, problem builder, route, unit, solve options): one per iterative route
ROUTE_CASES = [
    ("bregman", lambda: _shifted("itml", 120, flip=False), "bregman", "iter",
     {"method": "cyclic"}),
    ("bregman-newton", lambda: build("itml", 120).problem, "bregman", "iter", {}),
    ("dual_cd", lambda: _shifted("relcomp", 1200, flip=True), "dual_cd", "iter", {}),
    ("matrix_generation", lambda: _shifted("metric", 60, flip=True), "matrix_generation",
     "round", {}),
    ("iterated_sdp", lambda: _shifted("mve", 10, flip=True), "iterated_sdp", "MM step",
     {"solver": "CLARABEL"}),
    ("low_rank_sdp", _sde, "low_rank_sdp", "iter", {}),
]
CASE_IDS = [c[0] for c in ROUTE_CASES]
ROUTE_CASES = [c[1:] for c in ROUTE_CASES]


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


@pytest.mark.parametrize(("make", "route", "unit", "opts"), ROUTE_CASES, ids=CASE_IDS)
def test_verbose_solve_prints_header_rounds_and_certificate(capfd, make, route, unit, opts):
    pytest.importorskip("sklearn")
    prob = make()
    specopt.solve(prob, route=route, verbose=True, **opts)
    out = capfd.readouterr().out
    cert = specopt.certificate(prob)
    assert out.startswith("=" * 79) and "specopt".center(79) in out
    assert re.search(rf"^\(specopt\) .*: route {route}: ", out, re.M)
    assert "[sparse_ip]" not in out and "[low_rank_sdp]" not in out  # no raw engine lines
    rows = _rows(out, unit)
    assert rows, out
    its = [int(r[0]) for r in rows if r[0] != "result"]
    assert its == sorted(its) and len(set(its)) == len(its) and len(its) >= 1
    assert all(r[0] != "result" for r in rows[:-1])  # at most one result line, the last
    # the last printed line is the returned point, in the user's objective and sign (constants
    # and the sense included): its objective is the certificate's
    assert float(rows[-1][1]) == pytest.approx(cert.objective, rel=1e-5, abs=1e-8)
    if cert.bound is not None and rows[-1][2] != "-":
        assert float(rows[-1][2]) == pytest.approx(cert.bound, rel=1e-5, abs=1e-8)
    assert "Summary" in out and f"route: {route}" in out
    assert "Running HiGHS" not in out


@pytest.mark.parametrize(("make", "route", "unit", "opts"), ROUTE_CASES[:1], ids=CASE_IDS[:1])
def test_quiet_solve_prints_nothing(capfd, make, route, unit, opts):
    pytest.importorskip("sklearn")
    prob = make()
    specopt.solve(prob, route=route, **opts)
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

    def last_row_is_the_summary(out, unit):
        rows = _rows(out, unit)
        summary = float(re.search(r"^\s*objective: (\S+)$", out, re.M).group(1))
        assert float(rows[-1][1]) == pytest.approx(summary, rel=1e-5)
        return rows

    X, y = load_iris(return_X_y=True)
    ITMLSupervised(random_state=0, verbose=True).fit(X, y)
    out = capfd.readouterr().out
    assert "route bregman" in out and "Summary" in out
    # the dual Newton method prints one line per step, not one line for all of them
    steps = int(re.search(r"^\s*iterations: (\d+)$", out, re.M).group(1))
    assert len(last_row_is_the_summary(out, "iter")) == steps > 1
    RelativeComparisonMetric(random_state=0, verbose=True).fit_supervised(X, y)
    out = capfd.readouterr().out
    assert "route dual_cd" in out and "Summary" in out
    rows = last_row_is_the_summary(out, "iter")
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))  # no "pass 0" line
    ITMLSupervised(random_state=0).fit(X, y)
    assert capfd.readouterr().out == ""


def test_solver_histories_have_time_stamps():
    from specopt.solvers.dual_cd import dual_cd

    rng = np.random.default_rng(0)
    Z = rng.normal(0.3, 1.0, (300, 5))
    seen = []
    res = dual_cd(np.eye(5), Z, 1.0, callback=lambda it, **kw: seen.append((it, kw)))
    t = res.history["time"]
    assert len(t) == len(res.history["pass"]) and np.all(np.diff(t) >= 0)
    # one progress call per Newton candidate and per check, numbered on, the last is the result
    its = [it for it, _ in seen]
    assert len(seen) >= len(t) and its == sorted(set(its))
    assert seen[-1][1]["gap"] == pytest.approx(res.rel_gap)


PLOT_CASES = [*ROUTE_CASES, (lambda: build("spectral").problem, "conic", None,
                               {"solver": "CLARABEL"})]


@pytest.mark.parametrize(("make", "route", "unit", "opts"), PLOT_CASES,
                         ids=[*CASE_IDS, "conic"])
def test_certificate_plot_on_every_route(tmp_path, make, route, unit, opts):
    """History in the user's objective; the plot shows it: objective inside the value axis,
    gap on a log axis, no offset tick labels, legend outside the data, the route named once."""
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    pytest.importorskip("sklearn")
    prob = make()
    specopt.solve(prob, route=route, **opts)
    cert = specopt.certificate(prob)
    h = cert.history
    trace = next((h[k] for k in ("objective", "primal") if len(h.get(k, ()))), None)
    if trace is not None and route == "iterated_sdp":
        # MM: the returned iterate is the last one, or the one before it when the last step's
        # majorizer decrease certified it (the trace then ends one step further)
        ends = [pytest.approx(v, rel=1e-5, abs=1e-8) for v in trace[-2:]]
        assert any(cert.objective == e for e in ends)
    elif trace is not None:  # the trace ends at the returned point, in the user's objective
        assert trace[-1] == pytest.approx(cert.objective, rel=1e-5, abs=1e-8)
    else:  # one-shot solves draw their point
        assert route in ("conic", "low_rank_sdp")
    ax = cert.plot()
    fig = ax.figure
    target = tmp_path / f"{route}.png"
    fig.savefig(target)  # draws: tick labels and extents are final
    assert target.stat().st_size > 1000
    lo, hi = ax.get_ylim()
    assert lo <= cert.objective <= hi and ax.lines
    gap_ax = fig.axes[1]
    assert gap_ax.get_xlabel() == "time since start [s]"
    if cert.gap is not None or route == "iterated_sdp":
        assert gap_ax.get_yscale() == "log" and gap_ax.lines
    for a in fig.axes:
        assert a.yaxis.get_offset_text().get_text() == ""
        assert a.xaxis.get_offset_text().get_text() == ""
    legend = ax.get_legend().get_window_extent()
    assert legend.y0 >= ax.get_window_extent().y1 - 1  # above the data area
    title = fig._suptitle.get_text()
    assert title.count(route) == 1 and cert.status in title


def test_compare_table_plot_shows_every_row_on_a_linear_axis(tmp_path):
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    pytest.importorskip("sklearn")
    ex = build("itml", 60)
    table = specopt.compare(ex.problem, backends=("CLARABEL", "NOPE", "specopt",
                                                  "specopt:dual_cd"), name=ex.description)
    ax = table.plot()
    target = tmp_path / "table.png"
    ax.figure.savefig(target)
    assert target.stat().st_size > 1000
    assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0.0  # bars start at zero
    ran = [r for r in table.rows if r.total_time is not None]
    assert len(ax.patches) == len(ran) == 2
    # every row is a labelled row; the ones that did not run say why
    assert len(ax.get_yticks()) == len(table.rows) == 4
    texts = [t.get_text() for t in ax.texts]
    assert any("unavailable" in t for t in texts) and any("not applicable" in t for t in texts)
    assert not any("not applicable: not applicable" in t for t in texts)
    for r in ran:  # each bar carries its value and status
        assert any(r.status in t and f"{r.total_time * 1e3:.3g} ms" in t for t in texts)
    assert ex.description[:40] in ax.get_title()
    # the labels sit inside the axes, below the title
    renderer = ax.figure.canvas.get_renderer()
    title_box = ax.title.get_window_extent(renderer)
    assert all(t.get_window_extent(renderer).y1 <= title_box.y0 for t in ax.texts)


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
    # the last round's printed gap; the final face / KKT polish only lowers it
    assert est.gap_ <= float(rows[-1][3]) * 1.01 + 1e-12
