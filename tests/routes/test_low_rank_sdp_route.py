"""Route "low_rank_sdp": recognition of the spellings, agreement with Clarabel, duals."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import specopt
from specopt.reductions.base import RouteMismatch
from specopt.reductions.low_rank_sdp import PAYS_OFF_MIN_N, recognize_low_rank_sdp
from tests._helpers import checked_reference, reference_problem_issue


def _sde_problem(n: int, seed: int, spelling: str = "fancy"):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.5, 3 * np.pi, n))
    X = np.c_[t * np.cos(t), t * np.sin(t)]
    pairs = np.array([(i, i + 1) for i in range(n - 1)] + [(i, i + 2) for i in range(0, n - 2, 3)])
    I, J = pairs[:, 0], pairs[:, 1]
    d2 = np.sum((X[I] - X[J]) ** 2, axis=1)
    d2 = d2 / d2.mean()
    K = cp.Variable((n, n), symmetric=True)
    if spelling == "fancy":
        rows = K[I, I] + K[J, J] - 2 * K[I, J] == d2
        center = cp.sum(K) == 0
    else:
        rows = cp.hstack([K[i, i] + K[j, j] - K[i, j] - K[j, i] for i, j in pairs]) == d2
        center = K @ np.ones(n) == 0
    return K, cp.Problem(cp.Maximize(cp.trace(K)), [K >> 0, center, rows])


@pytest.mark.parametrize("spelling", ["fancy", "loop"])
def test_sde_spellings_recognized_and_agree(spelling):
    K, prob = _sde_problem(20, 0, spelling)
    data = recognize_low_rank_sdp(prob)
    assert data.centered and data.A.m == 25 and data.sense == "max"
    assert data.implied_trace_bound is not None
    specopt.solve(prob, route="low_rank_sdp", tol=1e-5)
    val = prob.value
    cert = specopt.certificate(prob)
    assert cert.route == "low_rank_sdp"
    # the two spellings are one problem: both certified, the same value
    _, other = _sde_problem(20, 0, "loop" if spelling == "fancy" else "fancy")
    specopt.solve(other, route="low_rank_sdp", tol=1e-5)
    assert val == pytest.approx(other.value, rel=1e-5)
    assert cert.max_violation <= 1e-3
    if cert.status == cp.OPTIMAL:
        assert cert.gap <= 1e-5
    # a reference is checked before it is used: no conic solver reaches 'optimal' on this SDE
    # (it has no interior point: Clarabel ends optimal_inaccurate, 287.2195 with violation 9.2e-5
    # on the loop spelling's form, SCS too), but a point that is feasible to 1e-6 still bounds the
    # maximum from below, so the certified upper bound must lie above its value
    _, ref = _sde_problem(20, 0, "fancy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref.solve(solver="CLARABEL")
    if reference_problem_issue(ref, require_optimal=False) is None and cert.bound is not None:
        assert cert.bound >= ref.value - 1e-6 * abs(ref.value)
    if reference_problem_issue(ref) is None:  # an optimal reference: the values agree
        assert val == pytest.approx(ref.value, rel=1e-5)


def test_maxcut_trace_objective_duals_match_clarabel():
    rng = np.random.default_rng(1)
    n = 25
    W = np.triu(rng.random((n, n)) < 0.3, 1).astype(float)
    W = W + W.T
    L = np.diag(W.sum(1)) - W
    K = cp.Variable((n, n), symmetric=True)
    cons = [K >> 0, cp.diag(K) == 1]
    prob = cp.Problem(cp.Maximize(cp.trace(L @ K) / 4 + 3.0), cons)
    specopt.solve(prob, route="low_rank_sdp", tol=1e-8)
    cert = specopt.certificate(prob)
    assert prob.status == cp.OPTIMAL
    y = np.array(cons[1].dual_value)
    ref = cp.Problem(cp.Maximize(cp.trace(L @ K) / 4 + 3.0), [K >> 0, cp.diag(K) == 1])
    checked_reference(ref, "CLARABEL")
    assert prob.value == pytest.approx(ref.value, rel=1e-6)
    assert cert.bound >= ref.value - 1e-6 and cert.gap <= 1e-6
    np.testing.assert_allclose(y, ref.constraints[1].dual_value, atol=1e-3)


def test_trace_bound_and_psd_attribute():
    rng = np.random.default_rng(2)
    n = 10
    G = rng.standard_normal((n, n))
    C = (G + G.T) / 2
    K = cp.Variable((n, n), PSD=True)
    prob = cp.Problem(cp.Minimize(cp.trace(C @ K)), [cp.trace(K) <= 2.0, K[0, 1] == 0.1])
    data = recognize_low_rank_sdp(prob)
    assert data.trace_bound == pytest.approx(2.0) and not data.centered
    specopt.solve(prob, route="low_rank_sdp", tol=1e-7)
    ref = cp.Problem(cp.Minimize(cp.trace(C @ K)), [cp.trace(K) <= 2.0, K[0, 1] == 0.1])
    v = prob.value
    cert = specopt.certificate(prob)
    checked_reference(ref, "CLARABEL")
    assert v == pytest.approx(ref.value, rel=1e-5, abs=1e-6)
    assert cert.bound <= ref.value + 1e-6


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda K, x: cp.Problem(cp.Maximize(cp.trace(K)), [K >> 0, cp.trace(K) <= 1, x >= 0]),
         "exactly one"),
        (lambda K, x: cp.Problem(cp.Maximize(cp.trace(K)), [K >> 0, K[0, 1] >= 1,
                                                            cp.trace(K) <= 3]),
         "not a trace bound"),
        (lambda K, x: cp.Problem(cp.Maximize(cp.trace(K)), [cp.trace(K) <= 1, K[0, 0] == 1]),
         "no PSD constraint"),
        (lambda K, x: cp.Problem(cp.Minimize(cp.sum_squares(K)), [K >> 0]),
         "not linear"),
    ],
)
def test_mismatch_reasons(make, reason):
    K = cp.Variable((4, 4), symmetric=True)
    x = cp.Variable()
    prob = make(K, x)
    with pytest.raises(RouteMismatch, match=reason):
        recognize_low_rank_sdp(prob)
    assert reason in specopt.explain(prob).verdict("low_rank_sdp").reason


def test_nonsymmetric_variable_refused():
    K = cp.Variable((4, 4))
    prob = cp.Problem(cp.Maximize(cp.trace(K)), [K >> 0, cp.trace(K) <= 1])
    with pytest.raises(RouteMismatch, match="symmetric"):
        recognize_low_rank_sdp(prob)


def test_auto_threshold():
    _, small = _sde_problem(PAYS_OFF_MIN_N - 1, 0)
    assert specopt.explain(small).auto_route == "conic"
    _, big = _sde_problem(PAYS_OFF_MIN_N, 0)
    assert specopt.explain(big).auto_route == "low_rank_sdp"


@pytest.mark.slow
def test_iterated_sdp_same_stationary_point_with_low_rank_inner():
    """MVE (user-written, iterated-SDP route): the same start and tolerance give the same
    stationary point with the conic (Clarabel) and the low-rank inner solver."""
    from specopt.atoms import mve_cost
    from specopt.learn.embedding import _affinity, _connectivity, make_spiral, sde_feasible_set

    X = make_spiral(24, turns=1.5)
    A = _affinity(X, "linear", None)
    C = _connectivity(A, "knn", 2, None)
    n = A.shape[0]
    J = np.eye(n) - 1.0 / n
    vals, Ks = {}, {}
    # the low-rank inner solver with its interior point (cold) and factored (warm) steps
    for inner, method in (("conic", None), ("low_rank", "ip"), ("low_rank", "bm")):
        K, cons = sde_feasible_set(A, C)
        prob = cp.Problem(cp.Minimize(mve_cost(K, 1)), cons)
        K.value = J @ A @ J
        kw = {} if method is None else {"inner_method": method}
        specopt.solve(prob, route="iterated_sdp", solver="CLARABEL", inner=inner, tol=1e-6,
                      **kw)
        cert = specopt.certificate(prob)
        assert cert.extra["converged"]
        assert cert.backend == ("CLARABEL" if method is None else "low_rank_sdp")
        vals[method], Ks[method] = prob.value, np.array(K.value)
    for method in ("ip", "bm"):
        assert vals[method] == pytest.approx(vals[None], rel=1e-5)
        rel = np.linalg.norm(Ks[method] - Ks[None]) / np.linalg.norm(Ks[None])
        assert rel <= 1e-3


def test_iterated_sdp_inner_option_validated():
    from specopt.atoms import mve_cost

    K = cp.Variable((5, 5), symmetric=True)
    prob = cp.Problem(cp.Minimize(mve_cost(K, 1)), [K >> 0, cp.trace(K) <= 1])
    with pytest.raises(ValueError, match="inner must be"):
        specopt.solve(prob, route="iterated_sdp", solver="CLARABEL", inner="fast")
    with pytest.raises(ValueError, match="method must be"):
        specopt.solve(prob, route="iterated_sdp", inner="low_rank", inner_method="fast")
    # a multi-variable or non-conforming subproblem with inner="low_rank" says why
    x = cp.Variable()
    prob2 = cp.Problem(cp.Minimize(mve_cost(K, 1) + cp.square(x)), [K >> 0, cp.trace(K) <= 1])
    with pytest.raises(RouteMismatch, match="exactly one"):
        specopt.solve(prob2, route="iterated_sdp", inner="low_rank")


def test_facial_reduction_option_on_a_slater_failing_model():
    """5-point cliques of 3-D points (Slater fails): the route on the clique face certifies a
    bound on the right side of SCS's optimum; the option is validated."""
    rng = np.random.default_rng(3)
    X, pairs = [], []
    for c in range(3):
        X.append(rng.standard_normal((5, 3)) + np.array([3.0 * c, 0, 0]))
        pairs += [(5 * c + a, 5 * c + b) for a in range(5) for b in range(a + 1, 5)]
        if c:
            pairs.append((5 * c - 1, 5 * c))
    X, pairs = np.vstack(X), np.array(pairs)
    n = len(X)
    I, J = pairs[:, 0], pairs[:, 1]
    d2 = np.sum((X[I] - X[J]) ** 2, axis=1)
    K = cp.Variable((n, n), symmetric=True)
    prob = cp.Problem(cp.Maximize(cp.trace(K)),
                      [K >> 0, cp.sum(K) == 0, K[I, I] + K[J, J] - 2 * K[I, J] == d2])
    specopt.solve(prob, route="low_rank_sdp", tol=1e-5, facial_reduction=True)
    cert = specopt.certificate(prob)
    assert cert.extra["face_dim"] == n - 1 - 3
    val, bound = cert.objective, cert.bound
    ref = cp.Problem(cp.Maximize(cp.trace(K)), prob.constraints)
    ref.solve(solver="SCS", eps_abs=1e-9, eps_rel=1e-9, max_iters=10**6)
    assert ref.status == cp.OPTIMAL
    assert bound >= ref.value * (1 - 1e-9)
    assert val == pytest.approx(ref.value, rel=1e-4)
    with pytest.raises(ValueError, match="facial_reduction"):
        specopt.solve(prob, route="low_rank_sdp", facial_reduction="yes")


def _disconnected_sde(n: int, sense: str = "max"):
    """Two paths with fixed edge lengths and no edge between them: maximizing the trace is
    unbounded (the two pieces drift apart), minimizing it is not."""
    half = n // 2
    pairs = np.array([(i, i + 1) for i in range(half - 1)]
                     + [(i, i + 1) for i in range(half, n - 1)])
    I, J = pairs[:, 0], pairs[:, 1]
    K = cp.Variable((n, n), symmetric=True)
    obj = cp.Maximize(cp.trace(K)) if sense == "max" else cp.Minimize(cp.trace(K))
    return K, cp.Problem(obj, [K >> 0, cp.sum(K) == 0,
                               K[I, I] + K[J, J] - 2 * K[I, J] == np.ones(len(pairs))])


@pytest.mark.parametrize("method", ["ip", "bm"])
def test_disconnected_sde_is_unbounded_and_model_untouched(method):
    K, prob = _disconnected_sde(12)
    specopt.solve(prob, route="low_rank_sdp", method=method, tol=1e-6)
    assert prob.status == cp.UNBOUNDED
    assert prob.value == np.inf
    assert K.value is None
    cert = specopt.certificate(prob)
    assert cert.status == cp.UNBOUNDED
    # Clarabel agrees (it reports the ray as inaccurate: no interior)
    _, ref = _disconnected_sde(12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref.solve(solver="CLARABEL")
    assert ref.status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE)


def test_disconnected_sde_minimized_is_solved_not_unbounded():
    K, prob = _disconnected_sde(12, "min")
    specopt.solve(prob, route="low_rank_sdp", tol=1e-6)
    assert prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
    _, ref = _disconnected_sde(12, "min")
    checked_reference(ref, "CLARABEL")
    assert prob.value == pytest.approx(ref.value, rel=1e-4, abs=1e-5)


def test_recession_ray_needs_rows_that_vanish_on_it():
    from specopt.solvers.sdp import SparseRows, SymOp, recession_ray

    n = 6
    pairs = np.array([[0, 1], [1, 2], [3, 4], [4, 5]])
    A = SparseRows.from_pairs(pairs, n)
    C = SymOp.identity(n)
    v = recession_ray(C, A, centered=True, sense="max")
    assert v is not None and abs(v.sum()) < 1e-12
    assert recession_ray(C, A, centered=True, sense="min") is None
    # a fixed diagonal entry on each component blocks the drift (K_00 = 1 bounds that piece)
    rows = SparseRows(np.r_[A.rows, 4, 5], np.r_[A.ii, 0, 3], np.r_[A.jj, 0, 3],
                      np.r_[A.vals, 1.0, 1.0], 6, n)
    assert recession_ray(C, rows, centered=False, sense="max") is None
    # connected: no ray
    A2 = SparseRows.from_pairs(np.r_[pairs, [[2, 3]]], n)
    assert recession_ray(C, A2, centered=True, sense="max") is None


def test_iterated_sdp_auto_inner_switch(monkeypatch):
    """inner="auto" (no solver given) runs the steps on the low-rank engine from ITERATED_MIN_N
    on, on the default conic backend below; the same stationary point either side."""
    import specopt.reductions.low_rank_sdp as lrr
    from specopt.atoms import mve_cost
    from specopt.learn.embedding import _affinity, _connectivity, make_spiral, sde_feasible_set

    assert lrr.ITERATED_MIN_N == 24  # measured (comment at the constant)
    X = make_spiral(14, turns=1.5)
    A = _affinity(X, "linear", None)
    C = _connectivity(A, "knn", 2, None)
    n = A.shape[0]
    J = np.eye(n) - 1.0 / n
    out = {}
    import specopt.reductions.iterated_sdp as itr

    monkeypatch.setattr(itr, "ITERATED_ENGINE_MIN_N", 0)  # the engine from ITERATED_MIN_N on
    for min_n in (n + 1, n):
        monkeypatch.setattr(lrr, "ITERATED_MIN_N", min_n)
        K, cons = sde_feasible_set(A, C)
        prob = cp.Problem(cp.Minimize(mve_cost(K, 1)), cons)
        K.value = J @ A @ J
        specopt.solve(prob, route="iterated_sdp", tol=1e-6)
        out[min_n] = (specopt.certificate(prob).backend, prob.value)
    assert out[n + 1][0] == "CLARABEL" and out[n][0] == "low_rank_sdp"
    assert out[n][1] == pytest.approx(out[n + 1][1], rel=1e-5)


def _nonsym_sde(n: int, symmetry):
    """The SDE of :func:`_sde_problem` on a square ``Variable((n, n))`` with ``symmetry(K)`` as
    its symmetry constraint (None: none)."""
    Ks, prob = _sde_problem(n, 0)
    K = cp.Variable((n, n))
    cons = [c for c in prob.constraints if not isinstance(c, cp.constraints.PSD)]
    cons = [K >> 0] + [type(c)(*[_swap(a, Ks, K) for a in c.args]) for c in cons]
    if symmetry is not None:
        sym = symmetry(K)
        cons.extend(sym if isinstance(sym, list) else [sym])
    return cp.Problem(cp.Maximize(cp.trace(np.diag(np.arange(n) + 1.0) @ K + 0.1 * np.triu(
        np.ones((n, n))) @ K)), cons)


def _swap(expr, old, new):
    if isinstance(expr, cp.Variable) and expr.id == old.id:
        return new
    return expr.copy([_swap(a, old, new) for a in expr.args]) if expr.args else expr


def _pairwise(K):  # one constraint per pair, as a loop writes it
    n = K.shape[0]
    return [K[i, j] == K[j, i] for i in range(n) for j in range(i)]


def _triangle(K):  # the strict upper triangle as one vector
    iu = np.triu_indices(K.shape[0], 1)
    return K[iu] == K.T[iu]


@pytest.mark.parametrize("symmetry", [lambda K: K == K.T, lambda K: K.T == K,
                                      lambda K: K - K.T == 0, lambda K: 2 * K == 2 * K.T,
                                      _pairwise, _triangle,
                                      lambda K: [K[:3] == K.T[:3], K[3:] == K.T[3:]]])
def test_a_square_variable_made_symmetric_by_a_constraint_reads_as_symmetric(symmetry):
    """With ``symmetry_constraint`` (the iterated route's steps) ``K == K.T`` in any spelling
    (one constraint, one per pair, a triangle, blocks of rows) makes a square variable the
    engine's symmetric ``K``: the same rows as the declared one, the objective's non-symmetric
    ``C`` symmetrized, the symmetry constraints not rows. Without it (the low-rank route) the
    variable must be declared."""
    n = 8
    prob = _nonsym_sde(n, symmetry)
    with pytest.raises(RouteMismatch, match="symmetric=True or PSD=True"):
        recognize_low_rank_sdp(prob)
    data = recognize_low_rank_sdp(prob, symmetry_constraint=True)
    ref = recognize_low_rank_sdp(_sde_problem(n, 0)[1])
    assert data.A.m == ref.A.m and data.centered and np.allclose(data.b, ref.b)
    C = data.C.to_dense()
    raw = np.diag(np.arange(n) + 1.0) + 0.1 * np.triu(np.ones((n, n)))
    np.testing.assert_allclose(C, 0.5 * (raw + raw.T))
    sym = symmetry(cp.Variable((n, n)))
    n_sym = len(sym) if isinstance(sym, list) else 1
    taken = {id(con) for con, _ in data.rows}
    assert not any(id(c) in taken for c in prob.constraints[-n_sym:])


@pytest.mark.parametrize("partial", [
    lambda K: K[0, 1] == K[1, 0],  # one pair only
    lambda K: _pairwise(K)[:-1],  # every pair but one
    lambda K: [K[i, j] == K[j, i] + 1 for i in range(6) for j in range(i)],  # offsets
    lambda K: K == K,  # no rows at all
    lambda K: K + K.T == 0,  # antisymmetric, not symmetric
    lambda K: K == K.T + 1,  # an offset
])
def test_constraints_that_do_not_say_symmetric_are_not_taken(partial):
    prob = _nonsym_sde(6, partial)
    with pytest.raises(RouteMismatch):
        recognize_low_rank_sdp(prob, symmetry_constraint=True)


def test_inequality_rows_are_read_only_when_asked():
    """``inequalities=True`` (the iterated route's steps): ``<=`` rows as they are and ``>=``
    rows negated, as rows ``A_r(K) <= b_r`` flagged in ``ineq``; a trace bound stays a trace
    bound (a lower one is a row); the implied trace bound comes from the equality rows only
    (a chord of the chain held at most, not exactly, its length would give a wrong bound).
    Without the flag (the low-rank route) an inequality that is not a trace bound is a
    mismatch."""
    n = 8
    K, prob = _sde_problem(n, 0)
    D = np.arange(1, n) * 0.5
    le = [K[0, 0] + K[i, i] - 2 * K[0, i] <= D[i - 1] for i in range(2, n)]
    ge = [K[1, 1] + K[i, i] - 2 * K[1, i] >= 0.1 * i for i in range(3, n)]
    prob = cp.Problem(prob.objective, [*prob.constraints, *le, *ge, cp.trace(K) <= 50.0,
                                       cp.trace(K) >= 2.0])
    with pytest.raises(RouteMismatch, match="trace bound"):
        recognize_low_rank_sdp(prob)
    ref = recognize_low_rank_sdp(_sde_problem(n, 0)[1])
    data = recognize_low_rank_sdp(prob, inequalities=True)
    m0 = ref.A.m
    assert data.A.m == m0 + len(le) + len(ge) + 1 and data.trace_bound == 50.0
    assert not data.ineq[:m0].any() and data.ineq[m0:].all()
    assert data.implied_trace_bound == pytest.approx(ref.implied_trace_bound)
    Kv = np.random.default_rng(1).standard_normal((n, n))
    Kv = Kv @ Kv.T
    Ak = np.bincount(data.A.rows, weights=data.A.vals * Kv[data.A.ii, data.A.jj],
                     minlength=data.A.m)
    want_le = [Kv[0, 0] + Kv[i, i] - 2 * Kv[0, i] - D[i - 1] for i in range(2, n)]
    want_ge = [0.1 * i - (Kv[1, 1] + Kv[i, i] - 2 * Kv[1, i]) for i in range(3, n)]
    want_tr = 2.0 - np.trace(Kv)  # the trace's lower bound is a row, its upper one the bound
    np.testing.assert_allclose(Ak[m0:] - data.b[m0:], np.r_[want_le, want_ge, want_tr],
                               atol=1e-10)
