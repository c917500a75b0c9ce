"""The LMI form of dual-standard-form conic programs (specopt.conic_lmi): the same optimum,
primal and duals as Clarabel on the given form, infeasibility mapped to the right side, the
retry rule that never makes a Clarabel answer worse."""

from __future__ import annotations

from types import SimpleNamespace

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specopt import _cvxpy_compat as compat
from specopt.conic_lmi import lmi_form


def _sdp(seed: int, n: int, m: int, scale: float, with_lp: bool):
    """``max <C, Y> + f'y s.t. <A_i, Y> + g_i'y = b_i, Y PSD, y >= 0`` with ``b`` from a PSD
    point (feasible) and ``tr Y`` fixed by row 0 (bounded)."""
    rng = np.random.default_rng(seed)
    Y = cp.Variable((n, n), symmetric=True)
    y = cp.Variable(3, nonneg=True) if with_lp else None
    Y0 = rng.standard_normal((n, n))
    Y0 = Y0 @ Y0.T + np.eye(n)
    rows, b = [], []
    for i in range(m):
        Ai = np.eye(n) if i == 0 else rng.standard_normal((n, n)) * scale
        Ai = (Ai + Ai.T) / 2
        g = np.zeros(3) if i == 0 else rng.random(3)
        rows.append(cp.trace(Ai @ Y) + (0 if y is None else g @ y))
        b.append(float(np.trace(Ai @ Y0)) + (0 if y is None or i == 0 else 1.0))
    C = rng.standard_normal((n, n))
    obj = cp.trace((C + C.T) @ Y) + (0 if y is None else -np.ones(3) @ y)
    cons = [Y >> 0] + [r == bi for r, bi in zip(rows, b, strict=True)]
    return cp.Problem(cp.Maximize(obj), cons), Y, cons


def _clarabel(prob, lmi: bool):
    data, chain, inverse = prob.get_problem_data(cp.CLARABEL, solver_opts={})
    if lmi:
        raw = compat._clarabel_lmi(chain.solver, data, False, {})
        assert raw is not None, "a dual-standard-form program has an LMI form"
    else:
        raw = compat._clarabel_plain(chain.solver.solve_via_data(data, False, False, {}))
    prob.unpack_results(raw, chain, inverse)
    return raw


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(2, 6), m=st.integers(1, 8),
       scale=st.sampled_from([1e-3, 1.0, 1e3]), with_lp=st.booleans())
def test_lmi_form_gives_the_same_solution(seed, n, m, scale, with_lp):
    prob, Y, cons = _sdp(seed, n, m, scale, with_lp)
    _clarabel(prob, lmi=False)
    if prob.status != "optimal":
        return  # the given form itself did not settle (badly scaled draw): nothing to compare
    ref_value = prob.value
    ref_duals = [np.asarray(c.dual_value, dtype=float).copy() for c in cons]
    _clarabel(prob, lmi=True)
    assert prob.status == "optimal"
    tol = 1e-5 * (1 + abs(ref_value))
    assert prob.value == pytest.approx(ref_value, abs=tol)
    # the recovered primal is feasible on the user's rows and PSD
    b = np.array([float(c.args[1].value) for c in cons[1:]])
    assert max(float(np.max(np.abs(c.violation()))) for c in cons[1:]) <= 1e-5 * (1 + abs(b).max())
    assert np.linalg.eigvalsh(Y.value).min() >= -1e-6 * (1 + np.abs(Y.value).max())
    # duals (not unique when rows are dependent): the PSD dual is PSD and complementary, and the
    # rows' multipliers give the same dual objective b'lambda as the given form's
    Z = np.asarray(cons[0].dual_value, dtype=float)
    assert np.linalg.eigvalsh(Z).min() >= -1e-5 * (1 + np.abs(Z).max())
    assert abs(np.sum(Z * Y.value)) <= 1e-4 * (1 + abs(ref_value))
    lam = np.array([float(c.dual_value) for c in cons[1:]])
    ref_lam = np.array([float(d) for d in ref_duals[1:]])
    assert lam @ b == pytest.approx(ref_lam @ b, abs=1e-4 * (1 + abs(ref_value)))


def test_infeasibility_is_reported_on_the_right_side():
    """``tr Y = -1`` with Y PSD is infeasible; dropping the trace row from a max of ``tr Y``
    makes it unbounded. The LMI form swaps the sides back."""
    Y = cp.Variable((3, 3), symmetric=True)
    infeasible = cp.Problem(cp.Maximize(Y[0, 1]), [Y >> 0, cp.trace(Y) == -1])
    _clarabel(infeasible, lmi=True)
    assert infeasible.status == "infeasible"
    unbounded = cp.Problem(cp.Maximize(cp.trace(Y)), [Y >> 0, Y[0, 1] == 0])
    _clarabel(unbounded, lmi=True)
    assert unbounded.status == "unbounded"


def test_programs_not_in_dual_standard_form_have_no_lmi_form():
    X = cp.Variable((3, 3), symmetric=True)
    x = cp.Variable(2)
    cases = [
        cp.Problem(cp.Minimize(cp.sum_squares(x)), [x >= 1]),  # quadratic objective
        cp.Problem(cp.Minimize(cp.trace(X)), [X - np.eye(3) >> 0]),  # shifted: no equality rows
        cp.Problem(cp.Minimize(x[0]), [x >= 0, x[0] + x[1] >= 1, cp.sum(x) == 1]),  # x twice
    ]
    for prob in cases:
        data, _, _ = prob.get_problem_data(cp.CLARABEL)
        assert lmi_form(data["A"], data["b"], data["c"], int(data["dims"].zero),
                        data.get("P")) is None


def test_retry_keeps_the_first_answer_unless_the_lmi_answer_is_settled_and_as_feasible():
    data = {compat._cps.A: np.array([[1.0, 1.0]]), compat._cps.B: np.array([1.0]),
            compat.ConicSolver.DIMS: SimpleNamespace(zero=1)}
    first = SimpleNamespace(status="AlmostSolved", x=np.array([0.5, 0.5 + 1e-5]))
    good = SimpleNamespace(status="Solved", x=np.array([0.25, 0.75]))
    off = SimpleNamespace(status="Solved", x=np.array([0.25, 0.80]))
    stuck = SimpleNamespace(status="MaxIterations", x=np.array([0.25, 0.75]))
    proof = SimpleNamespace(status="PrimalInfeasible", x=None)
    assert compat._prefer_lmi(first, good, data) is good
    assert compat._prefer_lmi(first, off, data) is first  # misses the rows more than first
    assert compat._prefer_lmi(first, stuck, data) is first
    assert compat._prefer_lmi(first, None, data) is first
    assert compat._prefer_lmi(first, proof, data) is proof


def test_dual_standard_form_is_recognized_in_its_spellings_and_nothing_else():
    from specopt.reductions.conic_size import dual_form_blocks

    def dual_standard_form(prob):
        return dual_form_blocks(prob) > 0

    X = cp.Variable((3, 3), symmetric=True)
    P = cp.Variable((3, 3), PSD=True)
    y = cp.Variable(2)
    ynn = cp.Variable(2, nonneg=True)
    rows = [X[0, 0] + y[0] == 1, cp.trace(X) + cp.sum(y) == 2]
    assert dual_standard_form(cp.Problem(cp.Maximize(X[0, 1]), [X >> 0, y >= 0, *rows]))
    assert dual_standard_form(cp.Problem(cp.Maximize(cp.trace(P) - cp.sum(ynn)),
                                         [P[0, 0] + ynn[0] == 1, cp.sum(ynn) == 1]))
    assert dual_standard_form(cp.Problem(cp.Maximize(X[0, 1]), [X >> 0, 0 <= y, *rows]))
    not_dual = [
        [X >> 0, y >= 1, *rows],  # a shifted bound
        [X >> 0, *rows],  # y free
        [X >> 0, y >= 0, y[0] + y[1] <= 1, *rows],  # a coupling inequality
        [X - np.eye(3) >> 0, y >= 0, *rows],  # a shifted LMI
    ]
    for cons in not_dual:
        assert not dual_standard_form(cp.Problem(cp.Maximize(X[0, 1]), cons))
    assert not dual_standard_form(cp.Problem(cp.Maximize(X[0, 1] - cp.sum_squares(y)),
                                             [X >> 0, y >= 0, *rows]))


def test_backend_rule_sends_large_dual_form_programs_to_clarabel_and_others_to_scs():
    """Blocks 30 and 10 with 80 dense rows: a largest dense KKT block of 545 > 300, so only
    the dual-form rule can pick Clarabel; the same program with a shifted LMI goes to SCS, and
    so does a single-block dual-form program of that size."""
    from specopt.backends import available_backends, mosek_licensed
    from specopt.reductions.conic_size import (
        CLARABEL_MAX_DENSE_DIM,
        default_backend,
        largest_kkt_block,
    )

    if mosek_licensed() or not {"CLARABEL", "SCS"} <= set(available_backends()):
        pytest.skip("the rule only applies without a MOSEK licence, with Clarabel and SCS")
    rng = np.random.default_rng(0)
    A, B = cp.Variable((30, 30), symmetric=True), cp.Variable((10, 10), symmetric=True)
    rows = [cp.trace(rng.standard_normal((30, 30)) @ A) + cp.trace(rng.standard_normal(
        (10, 10)) @ B) == float(i) for i in range(80)]
    dual_form = cp.Problem(cp.Maximize(cp.trace(A)), [A >> 0, B >> 0, *rows])
    shifted = cp.Problem(cp.Maximize(cp.trace(A)), [A >> 0, B - np.eye(10) >> 0, *rows])
    assert largest_kkt_block(dual_form) > CLARABEL_MAX_DENSE_DIM
    assert default_backend(dual_form) == "CLARABEL"
    assert default_backend(shifted) == "SCS"
    G = rng.standard_normal((30, 30))
    single = cp.Problem(cp.Maximize(cp.trace(A)), [A >> 0, cp.trace(G @ A) == 1.0])
    assert largest_kkt_block(single) > CLARABEL_MAX_DENSE_DIM
    assert default_backend(single) == "SCS"


def test_solve_retries_an_unsettled_clarabel_answer_on_the_lmi_form(monkeypatch):
    """Wiring, end to end: with every first answer treated as unsettled, ``specopt.solve``
    takes the LMI form's answer and certifies the same optimum."""
    import specopt

    prob, Y, cons = _sdp(7, 4, 5, 1.0, True)
    specopt.solve(prob, route="conic", solver="CLARABEL")
    ref = prob.value
    calls = []
    real = compat._clarabel_lmi
    monkeypatch.setattr(compat, "CLARABEL_SETTLED", ("never",))
    monkeypatch.setattr(compat, "_clarabel_lmi",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(compat, "_prefer_lmi", lambda first, lmi, data: lmi)
    specopt.solve(prob, route="conic", solver="CLARABEL")
    assert calls, "the LMI form was not tried"
    assert prob.status == "optimal"
    assert prob.value == pytest.approx(ref, abs=1e-6 * (1 + abs(ref)))


def test_lmi_form_goes_first_only_when_it_is_much_smaller_and_is_kept_only_when_sound():
    import scipy.sparse as sp

    calls: list[str] = []

    def run(name, status, x):
        return lambda: calls.append(name) or SimpleNamespace(status=status, x=np.array(x))

    def data(n_x):  # one equality row x_0 + ... = 1
        return {compat._cps.A: sp.csr_array(np.ones((1, n_x))), compat._cps.B: np.ones(1),
                compat.ConicSolver.DIMS: SimpleNamespace(zero=1)}

    wide, narrow, small = data(400), data(2), data(8)
    good, bad = [1.0] + [0.0] * 399, [2.0] + [0.0] * 399
    # much smaller LMI form (400 variables, 1 row): tried first, kept when Solved and sound
    assert compat._clarabel_best(run("given", "Solved", good), run("lmi", "Solved", good),
                                 wide).x[0] == 1.0 and calls == ["lmi"]
    calls.clear()  # Solved but missing the rows: the given form decides
    out = compat._clarabel_best(run("given", "Solved", good), run("lmi", "Solved", bad), wide)
    assert calls == ["lmi", "given"] and out.x[0] == 1.0
    calls.clear()  # a small program: the given form first (its primal meets the rows exactly)
    compat._clarabel_best(run("given", "Solved", [1.0] + [0.0] * 7),
                          run("lmi", "Solved", [1.0] + [0.0] * 7), small)
    assert calls == ["given"]
    calls.clear()  # not much smaller: the given form first, the LMI form only if unsettled
    compat._clarabel_best(run("given", "Solved", [1.0, 0.0]), run("lmi", "Solved", [1.0, 0.0]),
                          narrow)
    assert calls == ["given"]
    calls.clear()
    out = compat._clarabel_best(run("given", "AlmostSolved", [1.0, 1e-3]),
                                run("lmi", "Solved", [1.0, 0.0]), narrow)
    assert calls == ["given", "lmi"] and out.status == "Solved"
