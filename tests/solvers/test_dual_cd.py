"""Dual coordinate descent for the relative-comparison QP: certificate, monotonicity, inputs."""

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specopt.solvers.dual_cd import dual_cd
from tests._helpers import checked_reference


def _instance(seed, n=60, m=5, dense_L=True, shift=0.3):
    rng = np.random.default_rng(seed)
    Z = rng.normal(shift, 1.0, (n, m))
    if dense_L:
        A = rng.normal(size=(m, m))
        L = (A.T @ A) * (A.T @ A) + 0.1 * np.eye(m)
    else:
        L = np.eye(m)
    return L, Z


def _clarabel(L, Z, C, nonneg):
    w = cp.Variable(Z.shape[1])
    obj = 0.5 * cp.quad_form(w, L) + C * cp.sum(cp.pos(1 - Z @ w))
    prob = cp.Problem(cp.Minimize(obj), [w >= 0] if nonneg else [])
    value = checked_reference(prob, "CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10,
                              tol_feas=1e-10)
    return value, w.value


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), nonneg=st.booleans(), C=st.sampled_from([0.05, 1.0, 5.0]))
def test_gap_nonnegative_reaches_tol_and_matches_clarabel(seed, nonneg, C):
    L, Z = _instance(seed)
    res = dual_cd(L, Z, C, nonneg=nonneg, tol=1e-10, max_passes=20_000)
    assert res.converged
    assert res.gap >= -1e-9 * max(1.0, res.primal)
    assert np.all(np.array(res.history["gap"]) >= -1e-9 * max(1.0, res.primal))
    assert res.rel_gap <= 1e-10
    val, w = _clarabel(L, Z, C, nonneg)
    assert abs(res.primal - val) <= 1e-6 * max(1.0, abs(val))
    assert np.max(np.abs(res.w - w)) <= 1e-4 * max(1.0, np.abs(w).max())
    if nonneg:
        assert res.w.min() >= 0 and res.t.min() >= 0
    else:
        assert np.all(res.t == 0)
    assert 0 <= res.lam.min() and res.lam.max() <= C
    np.testing.assert_allclose(res.xi, np.maximum(0, 1 - Z @ res.w))
    # reported values are consistent with the returned points
    P = 0.5 * res.w @ L @ res.w + C * res.xi.sum()
    assert abs(P - res.primal) <= 1e-9 * max(1.0, P)


@pytest.mark.parametrize("nonneg", [True, False])
@pytest.mark.parametrize("shrinking, polish", [(True, False), (False, False), (True, True)])
def test_dual_objective_monotone_over_passes(nonneg, shrinking, polish):
    L, Z = _instance(3, n=200, m=8)
    res = dual_cd(L, Z, 1.0, nonneg=nonneg, shrinking=shrinking, polish=polish, tol=1e-12,
                  max_passes=300, check_every=3, newton=False)  # the passes are under test
    d = np.array(res.history["dual"])
    assert d.size > (1 if polish else 5)
    assert np.all(np.diff(d) >= -1e-10 * np.abs(d[1:]).max())
    assert d[-1] > d[0]
    # weak duality at every check
    primal = np.array(res.history["primal"])
    assert np.all(primal >= d[np.array(res.history["pass"]) - 1] - 1e-9 * primal)


def test_seeded_permutations_are_reproducible():
    L, Z = _instance(5, n=100)
    a = dual_cd(L, Z, 1.0, seed=7, tol=1e-12, max_passes=7, polish=False)
    b = dual_cd(L, Z, 1.0, seed=7, tol=1e-12, max_passes=7, polish=False)
    np.testing.assert_array_equal(a.lam, b.lam)


def test_zero_rows_and_per_constraint_C():
    L, Z = _instance(9, n=40, m=4, dense_L=False)
    Z[:3] = 0.0
    C = np.linspace(0.5, 2.0, 40)
    res = dual_cd(L, Z, C, tol=1e-10, max_passes=20_000)
    assert res.converged
    np.testing.assert_allclose(res.lam[:3], C[:3])  # z_i = 0: xi_i = 1 always, lam_i = C_i
    w = cp.Variable(4)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C @ cp.pos(1 - Z @ w)), [w >= 0])
    ref = checked_reference(prob, "CLARABEL")
    assert abs(ref - res.primal) <= 1e-6 * ref


def test_time_and_pass_limits_report_not_converged():
    L, Z = _instance(1, n=300, m=8)
    res = dual_cd(L, Z, 50.0, tol=1e-14, max_passes=2, polish=False)
    assert not res.converged and res.iterations == 2
    assert res.gap >= 0 and res.primal >= res.dual


def test_ridge_makes_singular_L_solvable():
    L, Z = _instance(2, n=50, m=4, dense_L=False)
    L[3, 3] = 0.0
    with pytest.raises(ValueError, match="positive definite.*singular.*ridge"):
        dual_cd(L, Z, 1.0)
    res = dual_cd(L, Z, 1.0, ridge=1e-3, tol=1e-10, max_passes=20_000)
    assert res.converged
    val, _ = _clarabel(L + 1e-3 * np.eye(4), Z, 1.0, True)
    assert abs(res.primal - val) <= 1e-6 * val


@pytest.mark.parametrize(
    "L, Z, C, match",
    [
        (np.diag([1.0, -1.0]), np.ones((3, 2)), 1.0, "positive definite.*indefinite"),
        (np.array([[1.0, 1.0], [1.0, 1.0]]), np.ones((3, 2)), 1.0, "positive definite"),
        (np.array([[1.0, 0.5], [0.0, 1.0]]), np.ones((3, 2)), 1.0, "symmetric"),
        (np.eye(3), np.ones((3, 2)), 1.0, r"L must have shape \(2, 2\)"),
        (np.eye(2), np.ones(3), 1.0, "2-D"),
        (np.eye(2), np.ones((3, 2)), 0.0, "C must be > 0"),
        (np.eye(2), np.ones((3, 2)), -1.0, "C must be > 0"),
        (np.eye(2), np.ones((3, 2)), np.ones(2), r"shape \(3,\)"),
        (np.eye(2), np.ones((3, 2)), np.nan, "C must be finite"),
        (np.eye(2), np.array([[1.0, np.nan]] * 3), 1.0, "Z contains NaN"),
        (np.array([[np.nan, 0], [0, 1.0]]), np.ones((3, 2)), 1.0, "L contains NaN"),
    ],
)
def test_bad_inputs(L, Z, C, match):
    with pytest.raises(ValueError, match=match):
        dual_cd(L, Z, C)


# --------------------------------------------------------------------------------------------
# Newton-first path (numpy only) and its hand-over to coordinate descent
# --------------------------------------------------------------------------------------------
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), nonneg=st.booleans(), C=st.sampled_from([0.01, 1.0, 20.0]),
       scale=st.sampled_from([1e-2, 1.0, 1e2]), dup=st.booleans())
def test_newton_path_matches_cd_and_clarabel(seed, nonneg, C, scale, dup):
    """Newton-first and plain CD reach the same certified optimum as Clarabel, also on badly
    scaled rows and with duplicated rows (a degenerate partition)."""
    L, Z = _instance(seed, n=150, m=6)
    Z = Z * scale
    if dup:
        Z[75:] = Z[:75]
    a = dual_cd(L, Z, C, nonneg=nonneg, tol=1e-10, newton=True)
    b = dual_cd(L, Z, C, nonneg=nonneg, tol=1e-10, newton=False)
    assert a.converged and b.converged and a.method in ("newton", "newton+cd")
    val, w = _clarabel(L, Z, C, nonneg)
    for r in (a, b):
        assert r.gap >= -1e-9 * max(1.0, r.primal) and r.rel_gap <= 1e-10
        assert abs(r.primal - val) <= 1e-6 * max(1.0, abs(val))
        assert 0 <= r.lam.min() and r.lam.max() <= C
        # reported values are those of the returned points, over all rows
        P = 0.5 * r.w @ L @ r.w + C * np.maximum(0, 1 - Z @ r.w).sum()
        assert abs(P - r.primal) <= 1e-9 * max(1.0, P)
        u = Z.T @ r.lam + r.t
        D = r.lam.sum() - 0.5 * u @ np.linalg.solve(L, u)
        assert abs(D - r.dual) <= 1e-8 * max(1.0, abs(D))
        if nonneg:
            assert r.w.min() >= 0 and r.t.min() >= 0
    assert abs(a.primal - b.primal) <= 1e-9 * max(1.0, b.primal)


def test_newton_hand_over_to_passes(monkeypatch):
    """When the Newton path does not certify (here: cut to its first smoothing level), CD
    continues from its best dual point: same optimum; capped, it reports not converged with an
    honest gap."""
    from specopt.solvers.dual_cd import _newton as mod

    first = mod._newton_first
    monkeypatch.setattr(mod, "_newton_first",
                        lambda *a, **k: first(*a, **{**k, "mu_min": 0.05}))
    L, Z = _instance(11, n=300, m=8)
    ref = dual_cd(L, Z, 1.0, tol=1e-12, newton=False, max_passes=50_000)
    res = dual_cd(L, Z, 1.0, tol=1e-12, max_passes=50_000, newton=True)
    assert res.converged and res.method == "newton+cd"
    assert res.history["pass"][0] == 0 and res.history["gap"][0] > 1e-12 * res.primal
    assert abs(res.primal - ref.primal) <= 1e-10 * ref.primal
    capped = dual_cd(L, Z, 1.0, tol=1e-12, max_passes=1, newton=True, polish=True)
    assert not capped.converged and capped.iterations == 1
    assert capped.gap >= 0 and capped.dual <= ref.primal + 1e-9 * ref.primal <= capped.primal


def test_newton_path_needs_no_numba():
    """The fixed cost: a solve on the Newton path never imports numba (checked in a fresh
    interpreter, where nothing else has imported it)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from specopt.solvers.dual_cd import dual_cd\n"
        "rng = np.random.default_rng(0); Z = rng.normal(0.3, 1, (400, 6))\n"
        "r = dual_cd(np.eye(6), Z, 1.0, tol=1e-8)\n"
        "print(r.converged, r.method, 'numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.split() == ["True", "newton", "False"]
