"""The formulation matrix: many spellings of each model family reach their route.

For every spelling: ``explain`` names the expected route, the route's answer agrees with Clarabel
on the same problem (or, for the non-convex MVE / eigengap family, with the atom spelling solved
by the same route), and the automatic backend is the same for every spelling of one problem.
Parameter sweeps (change the value, re-solve) agree with fresh solves on every route.
"""

from __future__ import annotations

import dataclasses

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specopt
from specopt import (
    burg_div,
    eigengap,
    linear_spectral,
    logdet_div,
    mve_cost,
    row_quad_forms,
)
from specopt.reductions import conic_size
from tests._helpers import checked_reference, psdboost_triplet_factors, random_spd

CLARABEL_TIGHT = {"tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9}


def _clarabel(prob: cp.Problem) -> float:
    return checked_reference(prob, "CLARABEL", **CLARABEL_TIGHT)


def _check_route(make, route: str, reference: float | None, rtol: float, **opts) -> str:
    """explain names ``route``; the route's value matches ``reference`` (Clarabel on a fresh copy
    when None); returns the auto backend."""
    prob = make()
    verdict = specopt.explain(prob).verdict(route)
    assert verdict.matches, verdict.reason
    assert len(verdict.reason) < 300
    value = specopt.solve(prob, route=route, **opts)
    ref = _clarabel(make()) if reference is None else reference
    assert abs(value - ref) <= rtol * max(1.0, abs(ref)), (value, ref)
    return specopt.default_backend(make())


# --------------------------------------------------------------------------------------------
# PSDBoost triplets (matrix generation)
# --------------------------------------------------------------------------------------------
D, S, C_PSD = 6, 40, 0.7
P_T, Q_T = psdboost_triplet_factors(D, S, seed=3)
A_T = [np.outer(p, p) - np.outer(q, q) for p, q in zip(P_T, Q_T, strict=True)]


def _psd_x(kind="PSD"):
    return cp.Variable((D, D), PSD=True) if kind == "PSD" else cp.Variable((D, D), symmetric=True)


def _margins(X):
    return row_quad_forms(P_T, X) - row_quad_forms(Q_T, X)


def _psdboost_spellings():
    Cp = cp.Parameter(nonneg=True, value=C_PSD)

    def slack_rqf():
        X, rho, xi = _psd_x(), cp.Variable(), cp.Variable(S, nonneg=True)
        return cp.Problem(cp.Maximize(rho - C_PSD * cp.sum(xi)),
                          [cp.trace(X) == 1, _margins(X) >= rho - xi])

    def slack_trace_list():
        X, rho, xi = _psd_x(), cp.Variable(), cp.Variable(S)
        cons = [cp.trace(X) == 1, xi >= 0]
        cons += [cp.trace(A @ X) >= rho - xi[r] for r, A in enumerate(A_T)]
        return cp.Problem(cp.Maximize(rho - C_PSD * cp.sum(xi)), cons)

    def slack_vec_matrix():
        X, rho, xi = _psd_x("sym"), cp.Variable(), cp.Variable(S, nonneg=True)
        M = np.stack([A.ravel(order="F") for A in A_T])
        return cp.Problem(cp.Maximize(rho - cp.sum(xi) * C_PSD),
                          [X >> 0, 1 == cp.trace(X), M @ cp.vec(X, order="F") - rho + xi >= 0])

    def hinge_pos():
        X, rho = _psd_x(), cp.Variable()
        return cp.Problem(cp.Maximize(rho - C_PSD * cp.sum(cp.pos(rho - _margins(X)))),
                          [cp.trace(X) == 1])

    def hinge_maximum_min_form():
        X, rho = _psd_x(), cp.Variable()
        obj = -rho + cp.sum(cp.maximum(0, rho - _margins(X))) / (1 / C_PSD)
        return cp.Problem(cp.Minimize(obj), [cp.trace(X) == 1])

    def hinge_weighted_sum():
        X, rho = _psd_x(), cp.Variable()
        return cp.Problem(cp.Maximize(rho - cp.sum(C_PSD * cp.maximum(rho - _margins(X), 0))),
                          [cp.trace(X) == 1])

    def hinge_parameter():
        X, rho = _psd_x(), cp.Variable()
        return cp.Problem(cp.Maximize(rho - Cp * cp.sum(cp.pos(rho - _margins(X)))),
                          [cp.trace(X) == 1])

    def slack_parameter_trace_list():
        X, rho, xi = _psd_x(), cp.Variable(), cp.Variable(S, nonneg=True)
        cons = [cp.trace(X) == 1]
        cons += [cp.trace(X @ A) - rho + xi[r] >= 0 for r, A in enumerate(A_T)]
        return cp.Problem(cp.Maximize(rho - Cp * cp.sum(xi)), cons)

    def hinge_diag_congruence():
        X, rho = _psd_x(), cp.Variable()
        marg = cp.diag(P_T @ X @ P_T.T) - cp.diag(Q_T @ X @ Q_T.T)
        return cp.Problem(cp.Maximize(rho - C_PSD * cp.sum(cp.pos(rho - marg))),
                          [cp.trace(X) == 1])

    def slack_norm1_multiply_list():
        X, rho, xi = _psd_x(), cp.Variable(), cp.Variable(S, nonneg=True)
        cons = [cp.trace(X) == 1]
        cons += [cp.sum(cp.multiply(A, X)) >= rho - xi[r] for r, A in enumerate(A_T)]
        return cp.Problem(cp.Maximize(rho - C_PSD * cp.norm1(xi)), cons)

    def hinge_hstack_of_quadratics():
        X, rho = _psd_x(), cp.Variable()
        marg = cp.hstack([p @ X @ p - q @ X @ q for p, q in zip(P_T, Q_T, strict=True)])
        return cp.Problem(cp.Maximize(rho - C_PSD * cp.sum(cp.pos(rho - marg))),
                          [cp.trace(X) == 1])

    return [slack_rqf, slack_trace_list, slack_vec_matrix, hinge_pos, hinge_maximum_min_form,
            hinge_weighted_sum, hinge_parameter, slack_parameter_trace_list,
            hinge_diag_congruence, slack_norm1_multiply_list, hinge_hstack_of_quadratics]


def test_psdboost_spellings_reach_matrix_generation():
    spellings = _psdboost_spellings()
    ref = _clarabel(spellings[0]())
    backends = set()
    for make in spellings:
        sign = -1.0 if isinstance(make().objective, cp.Minimize) else 1.0
        backends.add(_check_route(make, "matrix_generation", sign * ref, 1e-6, tol=1e-8))
    assert len(backends) == 1, backends


# --------------------------------------------------------------------------------------------
# ITML pairs (Bregman projections)
# --------------------------------------------------------------------------------------------
d_I, m_I = 4, 10
_rng = np.random.default_rng(7)
V_I = _rng.standard_normal((m_I, d_I))
W0_I = random_spd(_rng, d_I, cond=5.0)
_dist = np.einsum("ri,ij,rj->r", V_I, W0_I, V_I)
SIM = np.arange(m_I) < m_I // 2
U_I = 0.5 * _dist  # similar pairs must shrink, dissimilar grow
L_I = 2.0 * _dist
B_I = np.where(SIM, U_I, L_I)
GAMMA = 0.8


def _itml_hard_spellings():
    S_inv = np.linalg.inv(W0_I)

    def cons(W):
        rq = row_quad_forms(V_I, W)
        return [rq[SIM] <= U_I[SIM], rq[~SIM] >= L_I[~SIM]]

    def atom():
        W = cp.Variable((d_I, d_I), PSD=True)
        return cp.Problem(cp.Minimize(logdet_div(W, W0_I)), cons(W))

    def handwritten_trace():
        W = cp.Variable((d_I, d_I), PSD=True)
        return cp.Problem(cp.Minimize(cp.trace(W @ S_inv) - cp.log_det(W)), cons(W))

    def handwritten_multiply_const():
        W = cp.Variable((d_I, d_I), symmetric=True)
        obj = cp.sum(cp.multiply(S_inv, W)) - cp.log_det(W) - d_I + 3.0
        return cp.Problem(cp.Minimize(obj), [*cons(W), W >> 0])

    def quad_form_list():
        W = cp.Variable((d_I, d_I), PSD=True)
        cs = [(cp.quad_form(v, W) <= U_I[r]) if SIM[r] else (L_I[r] <= cp.quad_form(v, W))
              for r, v in enumerate(V_I)]
        return cp.Problem(cp.Minimize(2.0 * logdet_div(W, W0_I) / 2.0), cs)

    def maximize_negative():
        W = cp.Variable((d_I, d_I), PSD=True)
        return cp.Problem(cp.Minimize(-(cp.log_det(W) - cp.trace(S_inv @ W))), cons(W))

    def split_trace():
        W = cp.Variable((d_I, d_I), PSD=True)
        half = 0.5 * S_inv
        return cp.Problem(cp.Minimize(cp.trace(half @ W) - cp.log_det(W) + cp.trace(W @ half)),
                          cons(W))

    def vector_quadratic_list():
        W = cp.Variable((d_I, d_I), symmetric=True)
        cs = [W >> 0] + [(v @ W @ v <= U_I[r]) if SIM[r] else (v @ W @ v >= L_I[r])
                         for r, v in enumerate(V_I)]
        return cp.Problem(cp.Minimize(logdet_div(W, W0_I)), cs)

    def signed_rows():
        W = cp.Variable((d_I, d_I), PSD=True)
        delta = np.where(SIM, 1.0, -1.0)
        return cp.Problem(cp.Minimize(logdet_div(W, W0_I)),
                          [cp.multiply(delta, row_quad_forms(V_I, W)) <= delta * B_I])

    def hstack_of_outer_products():
        W = cp.Variable((d_I, d_I), PSD=True)

        def dist(rows):
            return cp.hstack([cp.sum(cp.multiply(np.outer(v, v), W)) for v in rows])

        return cp.Problem(cp.Minimize(cp.trace(W @ S_inv) - cp.log_det(W)),
                          [dist(V_I[SIM]) <= U_I[SIM], dist(V_I[~SIM]) >= L_I[~SIM]])

    return [atom, handwritten_trace, handwritten_multiply_const, quad_form_list,
            maximize_negative, split_trace, vector_quadratic_list, signed_rows,
            hstack_of_outer_products]


def _itml_slack_spellings():
    gp = cp.Parameter(pos=True, value=GAMMA)

    def one_burg():
        W, xi = cp.Variable((d_I, d_I), PSD=True), cp.Variable(m_I)
        rq = row_quad_forms(V_I, W)
        return cp.Problem(cp.Minimize(logdet_div(W, W0_I) + GAMMA * burg_div(xi, B_I)),
                          [rq[SIM] <= xi[SIM], rq[~SIM] >= xi[~SIM]])

    def two_burg():
        W = cp.Variable((d_I, d_I), PSD=True)
        xs, xd = cp.Variable(int(SIM.sum())), cp.Variable(int((~SIM).sum()))
        rq = row_quad_forms(V_I, W)
        obj = logdet_div(W, W0_I) + GAMMA * burg_div(xs, B_I[SIM]) \
            + GAMMA * burg_div(xd, B_I[~SIM])
        return cp.Problem(cp.Minimize(obj), [rq[SIM] <= xs, rq[~SIM] >= xd, xs >= 0, xd >= 0])

    def handwritten_burg():
        W, xi = cp.Variable((d_I, d_I), PSD=True), cp.Variable(m_I)
        rq = row_quad_forms(V_I, W)
        burg = cp.sum(xi / B_I - cp.log(xi / B_I) - 1)
        return cp.Problem(cp.Minimize(logdet_div(W, W0_I) + GAMMA * burg),
                          [rq[SIM] <= xi[SIM], rq[~SIM] >= xi[~SIM]])

    def parameter_gamma():
        W, xi = cp.Variable((d_I, d_I), PSD=True), cp.Variable(m_I)
        rq = row_quad_forms(V_I, W)
        return cp.Problem(cp.Minimize(logdet_div(W, W0_I) + gp * burg_div(xi, B_I)),
                          [rq[SIM] <= xi[SIM], rq[~SIM] >= xi[~SIM]])

    def scaled_slack():
        # v^T W v <= 2 z  is  v^T W v <= xi with xi = 2 z: burg_div(z, B/2) = burg_div(xi, B)
        W, z = cp.Variable((d_I, d_I), PSD=True), cp.Variable(m_I)
        rq = row_quad_forms(V_I, W)
        return cp.Problem(cp.Minimize(logdet_div(W, W0_I) + GAMMA * burg_div(z, B_I / 2)),
                          [rq[SIM] <= 2 * z[SIM], rq[~SIM] >= 2 * z[~SIM]])

    def handwritten_both():
        W, xi = cp.Variable((d_I, d_I), PSD=True), cp.Variable(m_I)
        rq = row_quad_forms(V_I, W)
        obj = (cp.trace(np.linalg.inv(W0_I) @ W) - cp.log_det(W)
               + GAMMA * cp.sum(cp.multiply(1 / B_I, xi)) - GAMMA * cp.sum(cp.log(xi)))
        return cp.Problem(cp.Minimize(obj), [rq[SIM] <= xi[SIM], rq[~SIM] >= xi[~SIM]])

    return [one_burg, two_burg, handwritten_burg, parameter_gamma, scaled_slack,
            handwritten_both]


@pytest.mark.parametrize("family", ["hard", "slack"])
def test_itml_spellings_reach_bregman(family):
    spellings = _itml_hard_spellings() if family == "hard" else _itml_slack_spellings()
    backends = set()
    for make in spellings:
        backends.add(_check_route(make, "bregman", None, 2e-6, tol=1e-10))
    assert len(backends) == 1, backends


# --------------------------------------------------------------------------------------------
# MVE / eigengap (iterated SDP; non-convex: compared with the atom spelling)
# --------------------------------------------------------------------------------------------
N_M, DIM = 8, 2


def _sde_constraints(K, centering="sum"):
    rng = np.random.default_rng(11)
    X = rng.standard_normal((N_M, 3))
    A = X @ X.T
    edges = {(i, (i + 1) % N_M) for i in range(N_M)} | {(0, 4), (2, 6), (1, 5)}
    cons = [K >> 0, cp.sum(K) == 0 if centering == "sum" else K @ np.ones(N_M) == 0]
    for i, j in sorted(edges):
        cons.append(K[i, i] + K[j, j] - 2 * K[i, j] == A[i, i] + A[j, j] - 2 * A[i, j])
    return cons


def _mve_spellings():
    n, d = N_M, DIM
    alpha = np.concatenate([-np.ones(d), np.ones(n - d)])

    def sym():
        return cp.Variable((n, n), symmetric=True)

    def atom():
        K = sym()
        return cp.Problem(cp.Minimize(mve_cost(K, d)), _sde_constraints(K))

    def linear_spectral_alpha():
        K = sym()
        return cp.Problem(cp.Minimize(linear_spectral(K, alpha)), _sde_constraints(K))

    def issue_spelling():
        K = sym()
        obj = -cp.lambda_sum_largest(K, d) + cp.trace(K) - cp.lambda_sum_largest(K, d)
        return cp.Problem(cp.Minimize(obj), _sde_constraints(K))

    def trace_minus_twice():
        K = sym()
        return cp.Problem(cp.Minimize(cp.trace(K) - 2 * cp.lambda_sum_largest(K, d)),
                          _sde_constraints(K))

    def maximize_convex():
        K = sym()
        return cp.Problem(cp.Maximize(2 * cp.lambda_sum_largest(K, d) - cp.trace(K)),
                          _sde_constraints(K))

    def smallest_minus_largest():
        K = sym()
        obj = cp.lambda_sum_smallest(K, n - d) - cp.lambda_sum_largest(K, d)
        return cp.Problem(cp.Minimize(obj), _sde_constraints(K))

    def centering_rows():
        K = sym()
        return cp.Problem(cp.Minimize(mve_cost(K, d)), _sde_constraints(K, "rows"))

    def scaled():
        K = sym()
        return cp.Problem(cp.Minimize(cp.multiply(0.5, mve_cost(K, d)) / 0.5),
                          _sde_constraints(K))

    return [atom, linear_spectral_alpha, issue_spelling, trace_minus_twice, maximize_convex,
            smallest_minus_largest, centering_rows, scaled]


def _eigengap_spellings():
    n = 6
    rng = np.random.default_rng(5)
    K0 = random_spd(rng, n, cond=20.0)
    K0 /= np.trace(K0)
    Bs = [rng.standard_normal((n, n)) for _ in range(3)]
    Bs = [(B + B.T) / 2 for B in Bs]

    def cons(K):
        return [K >> 0, cp.trace(K) == 1] + [cp.sum(cp.multiply(B, K)) == np.sum(B * K0)
                                              for B in Bs]

    def sym():
        return cp.Variable((n, n), symmetric=True)

    def atom():
        K = sym()
        return cp.Problem(cp.Maximize(eigengap(K, 2)), cons(K))

    def issue_spelling():
        K = sym()
        obj = 2 * cp.lambda_sum_largest(K, 2) - cp.lambda_max(K) - cp.lambda_sum_largest(K, 3)
        return cp.Problem(cp.Maximize(obj), cons(K))

    def alpha_vector():
        K = sym()
        return cp.Problem(cp.Maximize(linear_spectral(K, [0, 1, -1, 0, 0, 0])), cons(K))

    def differences():
        K = sym()
        obj = (cp.lambda_sum_largest(K, 2) - cp.lambda_max(K)) \
            - (cp.lambda_sum_largest(K, 3) - cp.lambda_sum_largest(K, 2))
        return cp.Problem(cp.Maximize(obj), cons(K))

    def minimize_negative():
        K = sym()
        obj = cp.lambda_max(K) + cp.lambda_sum_largest(K, 3) - 2 * cp.lambda_sum_largest(K, 2)
        return cp.Problem(cp.Minimize(obj), cons(K))

    def with_smallest():
        K = sym()  # lambda_3 = -(lambda_sum_smallest(K, 4) - lambda_sum_smallest(K, 3))
        obj = cp.lambda_sum_largest(K, 2) - cp.lambda_max(K) \
            + cp.lambda_sum_smallest(K, 3) - cp.lambda_sum_smallest(K, 4)
        return cp.Problem(cp.Maximize(obj), cons(K))

    return [atom, issue_spelling, alpha_vector, differences, minimize_negative, with_smallest]


@pytest.mark.parametrize("family", ["mve", "eigengap"])
def test_spectral_spellings_reach_iterated_sdp(family):
    spellings = _mve_spellings() if family == "mve" else _eigengap_spellings()
    opts = {"solver": "CLARABEL", "init": "relaxation", "max_iters": 200, "tol": 1e-9,
            "tol_K": 1e-7}
    ref_prob = spellings[0]()
    ref = specopt.solve(ref_prob, route="iterated_sdp", **opts)
    ref_sense = 1 if isinstance(ref_prob.objective, cp.Minimize) else -1
    backends = set()
    for make in spellings:
        sign = ref_sense * (1 if isinstance(make().objective, cp.Minimize) else -1)
        backends.add(_check_route(make, "iterated_sdp", sign * ref, 1e-4, **opts))
        explanation = specopt.explain(make())
        assert explanation.auto_route == "iterated_sdp"
    assert len(backends) == 1, backends


def test_issue_mve_alpha_with_row_centering_solves():
    """The issue's case: linear_spectral(K, [-2, -1, 1, ...]) with K @ ones == 0."""
    K = cp.Variable((N_M, N_M), symmetric=True)
    alpha = np.concatenate([[-2.0, -1.0], np.ones(N_M - 2)])
    prob = cp.Problem(cp.Minimize(linear_spectral(K, alpha)), _sde_constraints(K, "rows"))
    assert specopt.explain(prob).auto_route == "iterated_sdp"
    value = specopt.solve(prob)
    K2 = cp.Variable((N_M, N_M), symmetric=True)
    prob2 = cp.Problem(cp.Minimize(linear_spectral(K2, alpha)), _sde_constraints(K2, "sum"))
    value2 = specopt.solve(prob2)
    assert abs(value - value2) <= 1e-4 * abs(value2)


def _fail_clarabel(monkeypatch, name: str = "CLARABEL"):
    """Every solve with backend ``name`` raises (inner solves go through
    compat.solve_in_place)."""
    from specopt import _cvxpy_compat as compat

    original = compat.solve_in_place

    def failing(problem, solver, *args, **kwargs):
        if solver == name:
            raise cp.error.SolverError(f"Solver '{name}' failed (injected)")
        return original(problem, solver, *args, **kwargs)

    monkeypatch.setattr(compat, "solve_in_place", failing)


def test_iterated_sdp_falls_back_when_inner_solve_fails(monkeypatch):
    """An inner solve that raises with the first backend is retried with another one."""
    make = _mve_spellings()[0]
    opts = {"init": "relaxation", "max_iters": 200, "tol": 1e-9, "tol_K": 1e-7}
    ref = specopt.solve(make(), route="iterated_sdp", solver="SCS", **opts)
    _fail_clarabel(monkeypatch)
    prob = make()
    value = specopt.solve(prob, route="iterated_sdp", solver="CLARABEL", **opts)
    cert = specopt.certificate(prob)
    assert cert.backend == "SCS"
    assert cert.extra["backend_fallbacks"][0]["from"] == "CLARABEL"
    assert abs(value - ref) <= 1e-3 * abs(ref)

    def all_fail(*args, **kwargs):
        raise cp.error.SolverError("injected")

    from specopt import _cvxpy_compat as compat

    monkeypatch.setattr(compat, "solve_in_place", all_fail)
    with pytest.raises(cp.error.SolverError, match="every backend"):
        specopt.solve(make(), route="iterated_sdp", solver="CLARABEL", **opts)


# --------------------------------------------------------------------------------------------
# Schultz-Joachims relative-comparison QP (dual coordinate descent)
# --------------------------------------------------------------------------------------------
M_Q, N_Q, C_Q = 5, 40, 0.3
_rq = np.random.default_rng(2)
Z_Q = _rq.standard_normal((N_Q, M_Q))


def _qp_spellings():
    Cp = cp.Parameter(nonneg=True, value=C_Q)

    def slack_quad_form():
        w, xi = cp.Variable(M_Q), cp.Variable(N_Q)
        return cp.Problem(cp.Minimize(0.5 * cp.quad_form(w, np.eye(M_Q)) + C_Q * cp.sum(xi)),
                          [Z_Q @ w >= 1 - xi, xi >= 0])

    def norm_squared_hinge():
        w = cp.Variable(M_Q)
        return cp.Problem(cp.Minimize(0.5 * cp.norm(w) ** 2 + C_Q * cp.sum(cp.pos(1 - Z_Q @ w))))

    def square_norm_maximum():
        w = cp.Variable(M_Q)
        obj = cp.square(cp.norm(w)) / 2 + C_Q * cp.sum(cp.maximum(0, 1 - Z_Q @ w))
        return cp.Problem(cp.Minimize(obj))

    def sum_square_mean_hinge():
        w = cp.Variable(M_Q)
        obj = 0.5 * cp.sum(cp.square(w)) + C_Q * N_Q * (cp.sum(cp.pos(1 - Z_Q @ w)) / N_Q)
        return cp.Problem(cp.Minimize(obj))

    def quad_over_lin_inner_weight():
        w = cp.Variable(M_Q)
        obj = cp.quad_over_lin(w, 2) + cp.sum(C_Q * cp.pos(1 - Z_Q @ w))
        return cp.Problem(cp.Minimize(obj))

    def parameter_c():
        w = cp.Variable(M_Q)
        obj = 0.5 * cp.sum_squares(w) + Cp * cp.sum(cp.maximum(1 - Z_Q @ w, 0))
        return cp.Problem(cp.Minimize(obj))

    def maximize_negated():
        w = cp.Variable(M_Q)
        obj = -(0.5 * cp.sum_squares(w) + C_Q * cp.sum(cp.pos(1 - Z_Q @ w)))
        return cp.Problem(cp.Maximize(obj))

    def weight_vector_norm2():
        w = cp.Variable(M_Q)
        obj = 0.5 * cp.norm(w, 2) ** 2 + (C_Q * np.ones(N_Q)) @ cp.pos(1 - Z_Q @ w)
        return cp.Problem(cp.Minimize(obj))

    def pos_times_const_parameter_slack():
        w, xi = cp.Variable(M_Q), cp.Variable(N_Q, nonneg=True)
        return cp.Problem(cp.Minimize(cp.sum_squares(w) / 2 + cp.sum(xi) * Cp),
                          [1 - xi <= Z_Q @ w])

    def self_product_norm1():
        w = cp.Variable(M_Q)
        return cp.Problem(cp.Minimize(0.5 * (w @ w) + C_Q * cp.norm1(cp.pos(1 - Z_Q @ w))))

    def vdot_mean_scalene():
        w = cp.Variable(M_Q)
        obj = cp.vdot(w, w) / 2 + C_Q * N_Q * cp.mean(cp.scalene(1 - Z_Q @ w, 1, 0))
        return cp.Problem(cp.Minimize(obj))

    def python_sum_of_scalar_hinges():
        w = cp.Variable(M_Q)
        obj = 0.5 * cp.pnorm(w, 2) ** 2 + C_Q * sum(cp.pos(1 - z @ w) for z in Z_Q)
        return cp.Problem(cp.Minimize(obj))

    def sparse_constants():
        import scipy.sparse as sp

        w = cp.Variable(M_Q)
        obj = 0.5 * cp.quad_form(w, sp.identity(M_Q, format="csr")) \
            + C_Q * cp.sum(cp.pos(1 - sp.csr_matrix(Z_Q) @ w))
        return cp.Problem(cp.Minimize(obj))

    def negated_minimum():
        w = cp.Variable(M_Q)
        obj = 0.5 * cp.sum_squares(w) - C_Q * cp.sum(cp.minimum(Z_Q @ w - 1, 0))
        return cp.Problem(cp.Minimize(obj))

    return [sparse_constants, negated_minimum,
            slack_quad_form, norm_squared_hinge, square_norm_maximum, sum_square_mean_hinge,
            quad_over_lin_inner_weight, parameter_c, maximize_negated, weight_vector_norm2,
            pos_times_const_parameter_slack, self_product_norm1, vdot_mean_scalene,
            python_sum_of_scalar_hinges]


def test_qp_spellings_reach_dual_cd():
    spellings = _qp_spellings()
    ref = _clarabel(spellings[0]())
    backends = set()
    for make in spellings:
        sign = -1.0 if isinstance(make().objective, cp.Maximize) else 1.0
        backends.add(_check_route(make, "dual_cd", sign * ref, 1e-6, tol=1e-10))
    assert len(backends) == 1, backends


# --------------------------------------------------------------------------------------------
# Parameter sweeps agree with fresh solves
# --------------------------------------------------------------------------------------------
def _sweep(build, route, values, rtol, **opts):
    p = cp.Parameter(nonneg=True, value=values[0])
    prob = build(p)
    for v in values:
        p.value = v
        swept = specopt.solve(prob, route=route, **opts)
        fresh = specopt.solve(build(v), route=route, **opts)
        assert abs(swept - fresh) <= rtol * max(1.0, abs(fresh)), (route, v, swept, fresh)


def test_parameter_sweep_matrix_generation():
    def build(C):
        X, rho = _psd_x(), cp.Variable()
        return cp.Problem(cp.Maximize(rho - C * cp.sum(cp.pos(rho - _margins(X)))),
                          [cp.trace(X) == 1])

    _sweep(build, "matrix_generation", [0.2, 1.5, 0.05], 1e-6, tol=1e-8)


def test_parameter_sweep_bregman():
    def build(g):
        W, xi = cp.Variable((d_I, d_I), PSD=True), cp.Variable(m_I)
        rq = row_quad_forms(V_I, W)
        return cp.Problem(cp.Minimize(logdet_div(W, W0_I) + g * burg_div(xi, B_I)),
                          [rq[SIM] <= xi[SIM], rq[~SIM] >= xi[~SIM]])

    _sweep(build, "bregman", [0.5, 3.0, 0.1], 1e-8, tol=1e-10)


def test_parameter_sweep_dual_cd():
    def build(C):
        w = cp.Variable(M_Q)
        return cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * cp.sum(cp.pos(1 - Z_Q @ w))))

    _sweep(build, "dual_cd", [0.3, 2.0, 0.01], 1e-8, tol=1e-10)


def test_parameter_sweep_iterated_sdp():
    def build(t):
        K = cp.Variable((N_M, N_M), symmetric=True)
        return cp.Problem(cp.Minimize(mve_cost(K, DIM) + t * cp.trace(K)), _sde_constraints(K))

    _sweep(build, "iterated_sdp", [0.0, 0.5], 1e-5, solver="CLARABEL", init="relaxation",
           tol=1e-9, tol_K=1e-7, max_iters=200)


def test_parameter_sweep_conic():
    def build(C):
        w = cp.Variable(M_Q)
        return cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * cp.sum(cp.pos(1 - Z_Q @ w))))

    _sweep(build, "conic", [0.3, 2.0], 1e-6, solver="CLARABEL")


def test_backend_does_not_depend_on_spelling_near_the_threshold():
    """The issue's case: PSDBoost with row_quad_forms went to SCS, as a list of traces to
    Clarabel. Here d = 21 + 320 > 300 for every spelling (rows, traces, hinges, vec matrix)."""
    n, s = 6, 320
    P, Q = psdboost_triplet_factors(n, s, seed=4)
    As = [np.outer(p, p) - np.outer(q, q) for p, q in zip(P, Q, strict=True)]

    def rows(X, rho, xi):
        return [row_quad_forms(P, X) - row_quad_forms(Q, X) >= rho - xi]

    def traces(X, rho, xi):
        return [cp.trace(A @ X) >= rho - xi[r] for r, A in enumerate(As)]

    def vec_matrix(X, rho, xi):
        M = np.stack([A.ravel(order="F") for A in As])
        return [M @ cp.vec(X, order="F") >= rho - xi]

    backends = []
    for spell in (rows, traces, vec_matrix):
        X, rho, xi = cp.Variable((n, n), PSD=True), cp.Variable(), cp.Variable(s, nonneg=True)
        prob = cp.Problem(cp.Maximize(rho - cp.sum(xi)), [cp.trace(X) == 1, *spell(X, rho, xi)])
        backends.append(specopt.default_backend(prob))
    X, rho = cp.Variable((n, n), symmetric=True), cp.Variable()
    marg = row_quad_forms(P, X) - row_quad_forms(Q, X)
    hinge = cp.Problem(cp.Maximize(rho - cp.sum(cp.pos(rho - marg))), [X >> 0, cp.trace(X) == 1])
    backends.append(specopt.default_backend(hinge))
    expected = "MOSEK" if specopt.mosek_licensed() else "SCS"
    assert backends == [expected] * 4


def test_spectral_backend_does_not_depend_on_spelling():
    K = cp.Variable((30, 30), symmetric=True)
    spellings = [mve_cost(K, 3), cp.trace(K) - 2 * cp.lambda_sum_largest(K, 3),
                 -cp.lambda_sum_largest(K, 3) + cp.trace(K) - cp.lambda_sum_largest(K, 3),
                 cp.lambda_sum_smallest(K, 27) - cp.lambda_sum_largest(K, 3)]
    sides = {tuple(conic_size.psd_block_sides(
        cp.Problem(cp.Minimize(e), [K >> 0, cp.trace(K) == 1]))) for e in spellings}
    assert sides == {(30, 30, 30)}


def test_conic_route_takes_problems_that_are_dcp_once_normalized():
    """Spectral atoms whose combination on one matrix is convex (2 lsl - lsl = lsl), and x @ x:
    not DCP as written, DCP once normalized; values and duals agree with the DCP spelling."""
    rng = np.random.default_rng(9)
    B = rng.standard_normal((5, 5))
    B = B + B.T

    def make(spelling):
        K = cp.Variable((5, 5), symmetric=True)
        lsl = (2 * cp.lambda_sum_largest(K, 2) - cp.lambda_sum_largest(K, 2)
               if spelling == "combined" else cp.lambda_sum_largest(K, 2))
        return cp.Problem(cp.Minimize(lsl + cp.sum(cp.multiply(B, K))),
                          [cp.trace(K) == 1, K >> 0])

    prob = make("combined")
    assert not prob.is_dcp()
    explanation = specopt.explain(prob)
    assert explanation.auto_route == "conic", str(explanation)
    value = specopt.solve(prob, solver="CLARABEL")
    ref = make("atom")
    ref_value = checked_reference(ref, "CLARABEL")
    assert abs(value - ref_value) <= 1e-6 * max(1.0, abs(ref_value))
    assert abs(prob.constraints[0].dual_value - ref.constraints[0].dual_value) <= 1e-5

    w = cp.Variable(M_Q)
    qp = cp.Problem(cp.Minimize(0.5 * (w @ w) + C_Q * cp.sum(cp.pos(1 - Z_Q @ w))))
    assert specopt.explain(qp).verdict("conic").matches
    value = specopt.solve(qp, route="conic", solver="CLARABEL")
    w2 = cp.Variable(M_Q)
    ref_value = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w2)
                                       + C_Q * cp.sum(cp.pos(1 - Z_Q @ w2)))).solve(
        solver="CLARABEL")
    assert abs(value - ref_value) <= 1e-6 * max(1.0, abs(ref_value))


def test_psdboost_unit_margin_hinge_spellings():
    """The issue's ``sum(pos(1 - margins))`` (no rho): hinge spellings and the slack form."""
    def hinge():
        X = _psd_x()
        return cp.Problem(cp.Minimize(cp.sum(cp.pos(1 - _margins(X)))), [cp.trace(X) == 1])

    def hinge_mean_maximize():
        X = _psd_x()
        return cp.Problem(cp.Maximize(-cp.sum(cp.maximum(0, 1 - _margins(X))) / S),
                          [cp.trace(X) == 1])

    def slack_trace_list():
        X, xi = _psd_x(), cp.Variable(S, nonneg=True)
        cons = [cp.trace(X) == 1]
        cons += [cp.trace(A @ X) >= 1 - xi[r] for r, A in enumerate(A_T)]
        return cp.Problem(cp.Minimize(cp.sum(xi)), cons)

    ref = _clarabel(hinge())
    backends = {
        _check_route(hinge, "matrix_generation", ref, 1e-6, tol=1e-8),
        _check_route(hinge_mean_maximize, "matrix_generation", -ref / S, 1e-6, tol=1e-8),
        _check_route(slack_trace_list, "matrix_generation", ref, 1e-6, tol=1e-8),
    }
    assert len(backends) == 1, backends


# --------------------------------------------------------------------------------------------
# Low-rank SDP (SDE / MVU: one PSD matrix, sparse distance rows, centering)
# --------------------------------------------------------------------------------------------
N_L = 12
_rng_l = np.random.default_rng(21)
_X_L = _rng_l.standard_normal((N_L, 2))
_E_L = np.array(sorted({(i, (i + 1) % N_L) for i in range(N_L)}
                       | {(i, (i + 3) % N_L) for i in range(0, N_L, 2)}))
_I_L, _J_L = _E_L[:, 0], _E_L[:, 1]
_D2_L = np.sum((_X_L[_I_L] - _X_L[_J_L]) ** 2, axis=1)


def _low_rank_spellings():
    n, ones = N_L, np.ones(N_L)

    def fancy():
        K = cp.Variable((n, n), symmetric=True)
        return cp.Problem(cp.Maximize(cp.trace(K)),
                          [K >> 0, cp.sum(K) == 0,
                           K[_I_L, _I_L] + K[_J_L, _J_L] - 2 * K[_I_L, _J_L] == _D2_L])

    def loop_row_centering():
        K = cp.Variable((n, n), symmetric=True)
        cons = [K >> 0, K @ ones == 0]
        cons += [K[i, i] + K[j, j] - K[i, j] - K[j, i] == d
                 for (i, j), d in zip(_E_L, _D2_L, strict=True)]
        return cp.Problem(cp.Maximize(cp.trace(K)), cons)

    def psd_attribute_identity_trace():
        K = cp.Variable((n, n), PSD=True)
        return cp.Problem(cp.Maximize(cp.trace(np.eye(n) @ K)),
                          [0 == cp.sum(K),
                           K[_I_L, _I_L] + K[_J_L, _J_L] - 2 * K[_I_L, _J_L] == _D2_L])

    def minimize_negative_column_centering():
        K = cp.Variable((n, n), symmetric=True)
        dist = cp.hstack([K[i, i] + K[j, j] - 2 * K[i, j] for i, j in _E_L])
        return cp.Problem(cp.Minimize(-cp.trace(K)), [ones @ K == 0, _D2_L == dist, K >> 0])

    def multiply_objective_rows_as_vec():
        K = cp.Variable((n, n), symmetric=True)
        M = np.zeros((len(_E_L), n * n))  # distance rows as one sparse-in-K matrix product
        for r, (i, j) in enumerate(_E_L):
            M[r, i + n * i] += 1
            M[r, j + n * j] += 1
            M[r, i + n * j] -= 2
        return cp.Problem(cp.Maximize(cp.sum(cp.multiply(np.eye(n), K)) + 1.0),
                          [K >> 0, cp.sum(K, axis=0) @ ones == 0,
                           M @ cp.vec(K, order="F") == _D2_L])

    def trace_bounded_half_scaled():
        K = cp.Variable((n, n), symmetric=True)
        return cp.Problem(cp.Maximize(0.5 * cp.trace(K)),
                          [K >> 0, K @ (2 * ones) == 0, cp.trace(K) <= 1e3,
                           (K[_I_L, _I_L] + K[_J_L, _J_L] - 2 * K[_I_L, _J_L]) / 2 == _D2_L / 2])

    return [fancy, loop_row_centering, psd_attribute_identity_trace,
            minimize_negative_column_centering, multiply_objective_rows_as_vec,
            trace_bounded_half_scaled]


def test_low_rank_sdp_spellings_reach_the_route():
    """Every spelling of one SDE model: explain matches low_rank_sdp with the same rows and
    centering, the route agrees with Clarabel (these SDE instances fail Slater: Clarabel is
    accurate to ~1e-5 relative), the auto backend is the same."""
    from specopt.reductions.low_rank_sdp import recognize_low_rank_sdp

    ref = _clarabel(_low_rank_spellings()[0]())
    # objective of each spelling in terms of tr K* (same feasible set)
    refs = [ref, ref, ref, -ref, ref + 1.0, 0.5 * ref]
    backends = set()
    for make, r in zip(_low_rank_spellings(), refs, strict=True):
        data = recognize_low_rank_sdp(make())
        assert data.centered and data.A.m == len(_E_L), make.__name__
        assert data.implied_trace_bound is not None, make.__name__
        backends.add(_check_route(make, "low_rank_sdp", r, 1e-4, tol=1e-6))
    assert len(backends) == 1, backends


def test_low_rank_sdp_maxcut_diagonal_spellings_and_duals():
    rng = np.random.default_rng(5)
    n = 10
    W = np.triu(rng.random((n, n)) < 0.4, 1).astype(float)
    L = np.diag((W + W.T).sum(1)) - (W + W.T)

    def diag_atom():
        K = cp.Variable((n, n), symmetric=True)
        return cp.Problem(cp.Maximize(cp.trace(L @ K) / 4), [K >> 0, cp.diag(K) == 1])

    def diag_loop():
        K = cp.Variable((n, n), PSD=True)
        return cp.Problem(cp.Maximize(0.25 * cp.sum(cp.multiply(L, K))),
                          [K[i, i] == 1 for i in range(n)])

    ref_prob = diag_atom()
    ref = _clarabel(ref_prob)
    for make in (diag_atom, diag_loop):
        _check_route(make, "low_rank_sdp", ref, 1e-5, tol=1e-7)
    prob = diag_atom()
    specopt.solve(prob, route="low_rank_sdp", tol=1e-7)
    assert np.allclose(prob.constraints[1].dual_value, ref_prob.constraints[1].dual_value,
                       atol=1e-3)


def test_low_rank_sdp_explain_reason_is_short():
    K = cp.Variable((N_L, N_L), symmetric=True)
    big = np.arange(N_L * N_L, dtype=float).reshape(N_L, N_L)
    prob = cp.Problem(cp.Maximize(cp.trace(big @ K)),
                      [K >> 0, K[0, 1] >= cp.sum(cp.multiply(big, K)), cp.trace(K) <= 1])
    reason = specopt.explain(prob).verdict("low_rank_sdp").reason
    assert not specopt.explain(prob).verdict("low_rank_sdp").matches
    assert "trace bound" in reason and len(reason) < 200 and "\n" not in reason, reason


def test_parameter_sweep_low_rank_sdp():
    def build_rows(s):
        K = cp.Variable((N_L, N_L), symmetric=True)
        return cp.Problem(cp.Maximize(cp.trace(K)),
                          [K >> 0, cp.sum(K) == 0,
                           K[_I_L, _I_L] + K[_J_L, _J_L] - 2 * K[_I_L, _J_L] == s * _D2_L])

    _sweep(build_rows, "low_rank_sdp", [1.0, 0.3, 2.5], 1e-5, tol=1e-7)

    rng = np.random.default_rng(6)
    n = 10
    W = np.triu(rng.random((n, n)) < 0.4, 1).astype(float)
    L = np.diag((W + W.T).sum(1)) - (W + W.T)

    def build_obj(p):
        K = cp.Variable((n, n), symmetric=True)
        return cp.Problem(cp.Minimize(cp.trace(L @ K) + p * (K[0, 1] + K[1, 0])),
                          [K >> 0, cp.diag(K) == 1])

    _sweep(build_obj, "low_rank_sdp", [0.5, 3.0, 0.0], 1e-5, tol=1e-7)
    # and the swept value is Clarabel's
    p = cp.Parameter(nonneg=True, value=3.0)
    value = specopt.solve(build_obj(p), route="low_rank_sdp", tol=1e-7)
    assert abs(value - _clarabel(build_obj(3.0))) <= 1e-5 * max(1.0, abs(value))


@pytest.mark.parametrize("spelling", ["sum", "sum_left", "row", "col", "row_scaled", "left_zero"])
def test_centering_map_read_from_the_tree_equals_cvxpy_extraction(spelling):
    from specopt.reductions.analysis import affine_maps
    from specopt.reductions.analysis.constraints import _centering_map

    n, ones = 7, np.ones(7)
    K = cp.Variable((n, n), symmetric=True)
    con = {"sum": cp.sum(K) == 0, "sum_left": 0 == cp.sum(K), "row": K @ ones == 0,
           "col": ones @ K == 0, "row_scaled": K @ (-3 * ones) == 0,
           "left_zero": 0 == ones @ K}[spelling]
    tree = _centering_map(con)
    ref = affine_maps([con.expr])[0]
    assert tree is not None and tree.size == ref.size
    assert abs(tree.coef(K) - ref.coef(K)).max() == 0 and not np.any(tree.offset - ref.offset)
    assert _centering_map(K @ np.arange(n) == 0) is None and _centering_map(cp.sum(K) == 1) is None


# --------------------------------------------------------------------------------------------
# User-written MVE / eigengap / linear_spectral models (issue 21): kNN distance rows, centering
# spelled two ways, non-shrink rows, normNuc as the trace, maximize forms; default options
# --------------------------------------------------------------------------------------------
N_U = 10


def _knn_rows(K, seed=2, k=3):
    """Squared-distance rows of a kNN graph of a noisy 3-D helix (plus the chain, connected),
    as many points as K has rows."""
    n = K.shape[0]
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 3 * np.pi, n))
    X = np.c_[np.cos(t), np.sin(t), 0.3 * t] + 0.05 * rng.standard_normal((n, 3))
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    edges = {(i, i + 1) for i in range(n - 1)}
    for i in range(n):
        for j in np.argsort(D[i])[1:k + 1]:
            edges.add((min(i, j), max(i, j)))
    rows = [K[i, i] + K[j, j] - 2 * K[i, j] == D[i, j] for i, j in sorted(edges)]
    return rows, D, edges


def _user_mve_models():
    d = 2

    def sym():
        return cp.Variable((N_U, N_U), symmetric=True)

    def atom_sum():
        K = sym()
        return cp.Problem(cp.Minimize(mve_cost(K, d)), [K >> 0, cp.sum(K) == 0, *_knn_rows(K)[0]])

    def rows_maximize():
        K = sym()
        return cp.Problem(cp.Maximize(2 * cp.lambda_sum_largest(K, d) - cp.trace(K)),
                          [K >> 0, K @ np.ones(N_U) == 0, *_knn_rows(K)[0]])

    def nuclear_norm():
        K = sym()
        return cp.Problem(cp.Minimize(cp.normNuc(K) - 2 * cp.lambda_sum_largest(K, d)),
                          [K >> 0, cp.sum(K) == 0, *_knn_rows(K)[0]])

    def psd_attribute():
        K = cp.Variable((N_U, N_U), PSD=True)
        return cp.Problem(cp.Minimize(linear_spectral(K, np.r_[-np.ones(d), np.ones(N_U - d)])),
                          [cp.sum(K, axis=0) == 0, *_knn_rows(K)[0]])

    def symmetric_by_constraint():
        K = cp.Variable((N_U, N_U))  # symmetric by a constraint, not by the attribute
        return cp.Problem(cp.Minimize(mve_cost(K, d)),
                          [K == K.T, K >> 0, cp.sum(K) == 0, *_knn_rows(K)[0]])

    return [atom_sum, rows_maximize, nuclear_norm, psd_attribute, symmetric_by_constraint]


def _nonshrink_problem(n: int) -> cp.Problem:
    """``min mve_cost(K, 2)`` on the kNN rows, every third non-edge held at least its length."""
    K = cp.Variable((n, n), symmetric=True)
    rows, D, edges = _knn_rows(K)
    extra = [K[i, i] + K[j, j] - 2 * K[i, j] >= D[i, j]
             for i in range(n) for j in range(i + 2, n, 3) if (i, j) not in edges]
    return cp.Problem(cp.Minimize(mve_cost(K, 2)), [K >> 0, cp.sum(K) == 0, *rows, *extra])


def _other_user_models():
    def issue_alpha():
        K = cp.Variable((N_U, N_U), symmetric=True)
        alpha = np.r_[-2.0, -1.0, np.ones(N_U - 2)]
        return cp.Problem(cp.Minimize(linear_spectral(K, alpha)),
                          [K >> 0, K @ np.ones(N_U) == 0, *_knn_rows(K)[0]])

    def nonshrink():
        return _nonshrink_problem(N_U)

    def eigengap_knn():
        K = cp.Variable((N_U, N_U), symmetric=True)
        return cp.Problem(cp.Maximize(eigengap(K, 2)), [K >> 0, cp.sum(K) == 0, *_knn_rows(K)[0]])

    return [issue_alpha, nonshrink, eigengap_knn]


def test_user_written_mve_spellings_certify_with_defaults():
    """Five spellings of one MVE: each stationary_point with default options, the same value,
    the same backend (normNuc(K) of a PSD K is the trace in the subproblem; a square variable
    made symmetric by ``K == K.T``, whose answer is symmetric to the solver's tolerance)."""
    values, backends = [], set()
    for make in _user_mve_models():
        prob = make()
        val = specopt.solve(prob)
        cert = specopt.certificate(prob)
        assert cert.status == specopt.STATIONARY, (make.__name__, cert.gate_reasons)
        assert cert.extra["stop_reason"] == "stationary"
        sense = 1 if isinstance(prob.objective, cp.Minimize) else -1
        values.append(sense * val)
        backends.add(cert.backend)
    assert max(values) - min(values) <= 1e-4 * max(1.0, abs(min(values))), values
    assert len(backends) == 1, backends


@pytest.mark.parametrize("index", range(3))
def test_other_user_written_models_certify_with_defaults(index):
    """The issue's alpha (-2, -1, 1, ...) with row centering, extra non-shrink rows and a
    kNN eigengap: stationary_point with default options; the value is not improved by one more
    linearized step (checked independently in test_iterated_sdp_route)."""
    make = _other_user_models()[index]
    prob = make()
    specopt.solve(prob)
    cert = specopt.certificate(prob)
    assert cert.status == specopt.STATIONARY, cert.gate_reasons
    assert cert.extra["stationarity"][0]


def test_user_mve_agrees_across_inner_methods():
    """Same start, same tolerance: the conic inner path and the SDP engine reach the same
    stationary value."""
    vals = {}
    for inner in ("conic", "low_rank"):
        prob = _user_mve_models()[0]()
        vals[inner] = specopt.solve(prob, inner=inner, init="relaxation")
        assert specopt.certificate(prob).status == specopt.STATIONARY, inner
    assert vals["conic"] == pytest.approx(vals["low_rank"], rel=1e-3), vals


def _psdboost_spelling(spelling: str):
    rng = np.random.default_rng(5)
    m, D = 40, 4
    P, Q = rng.standard_normal((m, D)), rng.standard_normal((m, D))
    X = cp.Variable((D, D), PSD=spelling == "symmetry") if spelling == "symmetry" else \
        cp.Variable((D, D), symmetric=True)
    rho, xi = cp.Variable(), cp.Variable(m)
    margins = specopt.row_quad_forms(P, X) - specopt.row_quad_forms(Q, X)
    extra = {"psd": X >> 0, "lambda_min": cp.lambda_min(X) >= 0, "symmetry": X == X.T}
    cons = [cp.trace(X) == 1, margins >= rho - xi, xi >= 0, extra[spelling]]
    return cp.Problem(cp.Maximize(rho - 0.1 * cp.sum(xi)), cons), X


def test_lambda_min_and_symmetry_spellings_reach_matrix_generation_and_agree():
    """PSDBoost with ``X >> 0``, ``lambda_min(X) >= 0``, or a PSD variable with a redundant
    ``X == X.T``: the same route (matrix generation when named; the same auto choice) and the
    same optimum as Clarabel."""
    ref, _ = _psdboost_spelling("psd")
    ref.solve(solver="CLARABEL")
    auto = specopt.explain(_psdboost_spelling("psd")[0]).auto_route
    for spelling in ("psd", "lambda_min", "symmetry"):
        prob, X = _psdboost_spelling(spelling)
        assert specopt.explain(prob).auto_route == auto
        specopt.solve(prob, route="matrix_generation", tol=1e-8)
        assert prob.status == cp.OPTIMAL
        assert specopt.certificate(prob).route == "matrix_generation"
        assert prob.value == pytest.approx(ref.value, rel=1e-6, abs=1e-6)
        assert np.linalg.eigvalsh(X.value).min() >= -1e-8


def test_redundant_symmetry_row_in_itml_and_maxcut():
    """``W == W.T`` on a PSD ITML variable (bregman said "not a distance inequality") and on a
    symmetric max-cut variable (low_rank_sdp solved n^2 zero rows): dropped, same answer as
    Clarabel on the route the spelling without it takes."""
    rng = np.random.default_rng(2)
    d, n, m = 4, 14, 12
    Xd = rng.standard_normal((d, n))
    pairs = rng.choice(n, (m, 2), replace=True)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    V = (Xd[:, pairs[:, 0]] - Xd[:, pairs[:, 1]]).T
    B = rng.standard_normal((d, d))
    p = np.einsum("ij,jk,ik->i", V, B @ B.T + 0.5 * np.eye(d), V)
    S, Dd = np.arange(0, len(p), 2), np.arange(1, len(p), 2)
    W = cp.Variable((d, d), PSD=True)
    cons = [specopt.row_quad_forms(V[S], W) <= 1.2 * p[S],
            specopt.row_quad_forms(V[Dd], W) >= p[Dd] / 1.2]
    itml = cp.Problem(cp.Minimize(specopt.logdet_div(W, np.eye(d))), cons)
    specopt.solve(itml, route="bregman", tol=1e-10)
    val = itml.value
    itml_sym = cp.Problem(itml.objective, [*cons, W == W.T])
    specopt.solve(itml_sym, route="bregman", tol=1e-10)
    assert itml_sym.status == cp.OPTIMAL and itml_sym.value == pytest.approx(val, rel=1e-7)
    itml_sym.solve(solver="CLARABEL")
    assert itml_sym.value == pytest.approx(val, rel=1e-5, abs=1e-6)
    k = 12
    A = np.abs(rng.standard_normal((k, k)))
    L = np.diag((A + A.T).sum(1)) - (A + A.T)
    Xm = cp.Variable((k, k), symmetric=True)
    maxcut = cp.Problem(cp.Maximize(cp.trace(L @ Xm)), [Xm >> 0, cp.diag(Xm) == 1, Xm == Xm.T])
    ex = specopt.explain(maxcut)
    assert ex.auto_route == specopt.explain(
        cp.Problem(maxcut.objective, maxcut.constraints[:2])).auto_route
    specopt.solve(maxcut, route="low_rank_sdp")
    val = maxcut.value
    maxcut.solve(solver="CLARABEL")
    assert val == pytest.approx(maxcut.value, rel=1e-5)


def test_clarabel_failure_hands_the_steps_to_the_engine(monkeypatch):
    """Without solver=, a Clarabel failure on an engine-shaped subproblem moves the MM steps to
    the SDP engine (not to SCS); the stationary value is the same."""
    make = _user_mve_models()[0]
    ref = specopt.solve(make())
    _fail_clarabel(monkeypatch)
    prob = make()
    value = specopt.solve(prob)
    cert = specopt.certificate(prob)
    assert cert.backend == "low_rank_sdp" and cert.status == specopt.STATIONARY
    assert cert.extra["backend_fallbacks"][0]["to"] == "low_rank_sdp"
    assert value == pytest.approx(ref, rel=1e-3)


def _spiral_knn_model(kind: str, n: int, k: int = 4):
    """A user-written model on the kNN graph (plus the chain) of a 2-turn planar spiral, whose
    distance rows leave the feasible set without an interior (Clarabel's NumericalError)."""
    from specopt.learn.embedding import make_spiral

    X = make_spiral(n, turns=2.0)
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    edges = {(i, i + 1) for i in range(n - 1)}
    for i in range(n):
        for j in np.argsort(D[i])[1:k + 1]:
            edges.add((min(i, int(j)), max(i, int(j))))
    K = cp.Variable((n, n), symmetric=True)
    cons = [K >> 0, cp.sum(K) == 0, *[K[i, i] + K[j, j] - 2 * K[i, j] == D[i, j]
                                      for i, j in sorted(edges)]]
    if kind == "eigengap":
        return cp.Problem(cp.Maximize(eigengap(K, 2)), cons)
    return cp.Problem(cp.Minimize(mve_cost(K, 2)), cons)


def test_eigengap_on_spiral_retries_clarabel_and_certifies():
    """The issue's eigengap on a 15-point spiral: Clarabel fails at its default regularization
    (the SCS fallback ran > 120 s); the retry with a larger static regularization certifies it,
    and a run where that regularization is given from the start reaches the same value."""
    prob = _spiral_knn_model("eigengap", 15)
    value = specopt.solve(prob)
    cert = specopt.certificate(prob)
    assert cert.status == specopt.STATIONARY, cert.gate_reasons
    assert cert.backend == "CLARABEL"
    assert cert.extra["backend_retry_options"].get("static_regularization_constant", 0) > 1e-8
    ref = _spiral_knn_model("eigengap", 15)
    ref_value = specopt.solve(ref, static_regularization_constant=1e-7)
    assert specopt.certificate(ref).status == specopt.STATIONARY
    assert value == pytest.approx(ref_value, rel=1e-5)


def _hybrid_from(monkeypatch, n: int) -> None:
    """The hybrid steps from ``n`` on (small, fast instances)."""
    import specopt.reductions.iterated_sdp as itr
    import specopt.reductions.low_rank_sdp as lrr

    monkeypatch.setattr(itr, "ITERATED_ENGINE_MIN_N", n)
    monkeypatch.setattr(lrr, "ITERATED_MIN_N", n)


N_H = 16


def test_hybrid_steps_certify_and_agree_with_conic_steps(monkeypatch):
    """Hybrid steps (no solver=, from N = 24; here from N_H): loose engine steps, then
    certified ones; the claim rests on certified steps only, and the stationary value is the
    conic (Clarabel every step) one."""
    _hybrid_from(monkeypatch, N_H)
    vals = {}
    for inner in ("auto", "conic"):
        prob = _spiral_knn_model("mve", N_H)
        vals[inner] = specopt.solve(prob, inner=inner, init="relaxation")
        cert = specopt.certificate(prob)
        assert cert.status == specopt.STATIONARY, (inner, cert.gate_reasons)
        ex = cert.extra
        assert ex["subproblem_status"] == cp.OPTIMAL
        if inner == "auto":
            phases = ex["hybrid_phases"]
            assert phases[0] == 0 and phases == sorted(phases), phases
            # loose steps never count as certified
            statuses = ex["subproblem_statuses"][:len(phases)]  # engine steps come first
            assert all(st != cp.OPTIMAL for st, ph in zip(statuses, phases, strict=True)
                       if ph == 0)
        else:
            assert ex["hybrid_phases"] is None and cert.backend == "CLARABEL"
    assert vals["auto"] == pytest.approx(vals["conic"], rel=1e-3), vals


def test_a_square_variable_made_symmetric_by_a_constraint_takes_the_engine_steps(monkeypatch):
    """``Variable((n, n))`` with ``K == K.T``: the engine's steps, as for a declared symmetric
    ``K`` (an S-curve N = 45 took 207 s on conic steps before, 11 s now), and the same
    stationary value; the answer meets ``K == K.T`` exactly."""
    _hybrid_from(monkeypatch, N_H)
    vals = {}
    for sym in (True, False):
        K = cp.Variable((N_H, N_H), symmetric=sym)
        cons = [K >> 0, cp.sum(K) == 0, *_knn_rows(K)[0]] + ([] if sym else [K == K.T])
        prob = cp.Problem(cp.Minimize(mve_cost(K, 2)), cons)
        vals[sym] = specopt.solve(prob)
        cert = specopt.certificate(prob)
        assert cert.status == specopt.STATIONARY, (sym, cert.gate_reasons)
        assert cert.extra["hybrid_phases"], (sym, cert.extra)
        if not sym:
            assert np.abs(K.value - K.value.T).max() <= 1e-9 * np.abs(K.value).max()
    assert vals[True] == pytest.approx(vals[False], rel=1e-3), vals


def _round11_spellings():
    """One MVE (``min mve_cost(K, 2)``, kNN distance rows, centred) in spellings that reached
    the engine's steps only after round 11 (or crashed the gate): ``name -> (K, problem)``."""
    import scipy.sparse as sp

    n = N_H

    def problem(K, rows, centering=None, objective=None):
        return K, cp.Problem(objective or cp.Minimize(mve_cost(K, 2)),
                             [K >> 0, cp.sum(K) == 0 if centering is None else centering,
                              *rows])

    def pairwise():
        K = cp.Variable((n, n))
        return problem(K, _knn_rows(K)[0] + [K[i, j] == K[j, i] for i in range(n)
                                             for j in range(i)])

    def masked():
        K = cp.Variable((n, n), symmetric=True)
        _, D, edges = _knn_rows(K)
        M = np.zeros((n, n))
        M[tuple(np.array(sorted(edges)).T)] = 1.0
        dk = cp.reshape(cp.diag(K), (n, 1), order="F")
        G = dk @ np.ones((1, n)) + np.ones((n, 1)) @ dk.T - 2 * K
        return problem(K, [cp.multiply(M, G) == M * D])

    def laplacian():
        K = cp.Variable((n, n), symmetric=True)
        _, D, edges = _knn_rows(K)
        rows = [cp.trace(sp.csr_array(([1.0, 1.0, -1.0, -1.0], ([i, j, i, j], [i, j, j, i])),
                                      shape=(n, n)) @ K) == D[i, j] for i, j in sorted(edges)]
        return problem(K, rows)

    def largest_minus_smallest():
        K = cp.Variable((n, n), symmetric=True)
        return problem(K, _knn_rows(K)[0], centering=K @ np.ones(n) == 0,
                       objective=cp.Maximize(cp.lambda_sum_largest(K, 2)
                                             - cp.lambda_sum_smallest(K, n - 2)))

    return {"pairwise_symmetry": pairwise, "masked_matrix_rows": masked,
            "sparse_laplacian_rows": laplacian, "largest_minus_smallest": largest_minus_smallest}


@pytest.mark.parametrize("name", list(_round11_spellings()))
def test_round11_spellings_take_the_engine_steps(monkeypatch, name):
    """Each spelling: stationary on the engine's steps (no conic fallback), at the atom
    spelling's value."""
    import specopt.reductions._low_rank_steps as lrs

    _hybrid_from(monkeypatch, N_H)
    K = cp.Variable((N_H, N_H), symmetric=True)
    ref = specopt.solve(cp.Problem(cp.Minimize(mve_cost(K, 2)),
                                   [K >> 0, cp.sum(K) == 0, *_knn_rows(K)[0]]))
    rows_seen = []
    original = lrs.solve_low_rank_sdp

    def spy(C, A, b, *args, **kwargs):
        rows_seen.append(A.m)
        return original(C, A, b, *args, **kwargs)

    monkeypatch.setattr(lrs, "solve_low_rank_sdp", spy)
    K, prob = _round11_spellings()[name]()
    value = specopt.solve(prob)
    cert = specopt.certificate(prob)
    assert cert.status == specopt.STATIONARY, cert.gate_reasons
    assert cert.backend == "low_rank_sdp" and not cert.extra["backend_fallbacks"], cert.extra
    sign = -1.0 if isinstance(prob.objective, cp.Maximize) else 1.0
    assert sign * value == pytest.approx(ref, rel=1e-3)
    assert rows_seen  # the steps were the engine's


def _inequality_models():
    """``min mve_cost(K, 2)`` with inequality rows: the kNN distances held at most their
    length with a trace bound (``nonexpand``), or fixed with non-edges at least theirs
    (``nonshrink``)."""
    n = N_H

    def nonexpand():
        K = cp.Variable((n, n), symmetric=True)
        _, D, edges = _knn_rows(K)
        le = [K[i, i] + K[j, j] - 2 * K[i, j] <= D[i, j] for i, j in sorted(edges)]
        return cp.Problem(cp.Minimize(mve_cost(K, 2)), [
            K >> 0, cp.sum(K) == 0, cp.trace(K) <= float(np.sum(D)) / (2 * n), *le])

    return {"nonexpand": nonexpand, "nonshrink": lambda: _nonshrink_problem(n)}


@pytest.mark.parametrize("name", ["nonexpand", "nonshrink"])
def test_inequality_rows_take_the_engine_steps(monkeypatch, name):
    """Distance rows as inequalities: the engine's steps (its interior point with slacks; at
    most a finish on Clarabel when the engine's point meets its rows too loosely), stationary
    at the value of every step on Clarabel; the rows hold."""
    _hybrid_from(monkeypatch, N_H)
    make = _inequality_models()[name]
    ref = make()
    ref_value = specopt.solve(ref, inner="conic", tol=1e-5)
    assert specopt.certificate(ref).status == specopt.STATIONARY
    prob = make()
    value = specopt.solve(prob)
    cert = specopt.certificate(prob)
    assert cert.status == specopt.STATIONARY, cert.gate_reasons
    ex = cert.extra
    assert len(ex["hybrid_phases"]) >= 2, ex  # the engine took the steps
    assert all(f["reason"].startswith("finish") for f in ex["backend_fallbacks"]), ex
    assert value == pytest.approx(ref_value, rel=1e-3)
    assert cert.relative_violation <= 1e-5


@pytest.mark.parametrize("kind", ["negative_bound", "stretched_edge"])
def test_infeasible_inequality_rows_are_a_status(monkeypatch, kind):
    """Inequality rows no PSD ``K`` meets (a squared distance at most -0.5; a fixed edge at
    least 1.5 times its length): ``infeasible``, no values written, and no numpy warnings from
    the interior point's slacks running off."""
    import warnings

    _hybrid_from(monkeypatch, N_H)
    n = N_H
    K = cp.Variable((n, n), symmetric=True)
    rows, D, edges = _knn_rows(K)
    i, j = sorted(edges)[3]
    dist = K[i, i] + K[j, j] - 2 * K[i, j]
    if kind == "negative_bound":
        le = [K[a, a] + K[b, b] - 2 * K[a, b] <= D[a, b] for a, b in sorted(edges)]
        cons = [K >> 0, cp.sum(K) == 0, cp.trace(K) <= float(np.sum(D)) / (2 * n), *le,
                dist <= -0.5]
    else:
        cons = [K >> 0, cp.sum(K) == 0, *rows, dist >= 1.5 * D[i, j] + 0.1]
    prob = cp.Problem(cp.Minimize(mve_cost(K, 2)), cons)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        specopt.solve(prob)
    assert prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE)
    assert K.value is None


@pytest.mark.slow
def test_hybrid_steps_hand_over_to_clarabel_when_the_engine_does_not_certify(monkeypatch):
    """Certified engine steps that do not certify (injected): the steps go to Clarabel, which
    certifies; same stationary value as the engine-certified run."""
    from specopt.reductions import _iterated_steps as its

    _hybrid_from(monkeypatch, N_H)
    ref = specopt.solve(_spiral_knn_model("mve", N_H), init="relaxation")
    original = its.HybridRefiner.engine_step

    def failing(self, point):
        if self.phase == 1:  # not certified, and no proven bound to keep it on
            point["status"] = cp.OPTIMAL_INACCURATE
            point["low_rank"] = dataclasses.replace(point["low_rank"], bound=None)
        original(self, point)

    monkeypatch.setattr(its.HybridRefiner, "engine_step", failing)
    prob = _spiral_knn_model("mve", N_H)
    value = specopt.solve(prob, init="relaxation")
    cert = specopt.certificate(prob)
    assert cert.status == specopt.STATIONARY, cert.gate_reasons
    assert cert.backend == "CLARABEL"
    assert cert.extra["backend_fallbacks"][-1]["from"] == "low_rank_sdp"
    assert value == pytest.approx(ref, rel=1e-3)


def test_hybrid_stalled_steps_certify_on_their_bound_and_agree_with_clarabel(monkeypatch):
    """Certified-phase engine steps that stall short of inner_tol (injected: marked not
    certified) but bound their majorizer within half the stationarity tolerance stay on the
    engine; their gap enters the measure (the claim is the bound's), and the stationary value
    is Clarabel's."""
    from specopt.reductions import _iterated_steps as its

    _hybrid_from(monkeypatch, N_H)
    ref = _spiral_knn_model("mve", N_H)
    ref_value = specopt.solve(ref, inner="conic", init="relaxation")
    assert specopt.certificate(ref).backend == "CLARABEL"
    original = its.HybridRefiner.engine_step

    def stalled(self, point):
        if self.phase == 1:
            point["status"] = cp.OPTIMAL_INACCURATE
        original(self, point)

    monkeypatch.setattr(its.HybridRefiner, "engine_step", stalled)
    prob = _spiral_knn_model("mve", N_H)
    value = specopt.solve(prob, init="relaxation")
    cert = specopt.certificate(prob)
    ex = cert.extra
    assert cert.status == specopt.STATIONARY, cert.gate_reasons
    assert cert.backend == "low_rank_sdp" and ex["hybrid_bounded_steps"] >= 2
    assert not ex["backend_fallbacks"]
    passed, measured, tol = ex["stationarity"]
    assert passed and measured <= tol
    assert value == pytest.approx(ref_value, rel=1e-3)


def test_hybrid_steps_finish_on_clarabel_when_the_engine_rows_are_loose(monkeypatch):
    """An engine point the run would return whose rows miss HYBRID_FINISH_ROW_TOL (here 0: every
    engine point) is not returned: the run finishes on Clarabel (the returned point and the
    step certifying it both conic), and its value is the all-Clarabel run's to the
    stationarity tolerance."""
    from specopt.reductions import _iterated_steps as its

    _hybrid_from(monkeypatch, N_H)
    ref = _spiral_knn_model("mve", N_H)
    ref_value = specopt.solve(ref, inner="conic", init="relaxation")
    monkeypatch.setattr(its, "HYBRID_FINISH_ROW_TOL", 0.0)
    prob = _spiral_knn_model("mve", N_H)
    value = specopt.solve(prob, init="relaxation")
    cert = specopt.certificate(prob)
    ex = cert.extra
    assert cert.status == specopt.STATIONARY, cert.gate_reasons
    assert cert.backend == "CLARABEL"
    assert [f["reason"].split(":")[0] for f in ex["backend_fallbacks"]] == ["finish"]
    # the engine steps, then at least two conic ones
    assert ex["subproblem_solves"] >= len(ex["hybrid_phases"]) + 2
    assert abs(value - ref_value) <= 1e-4 * (1 + abs(ref_value))


def test_row_residual_is_the_worst_relative_row():
    from specopt.reductions._iterated_steps import row_residual
    from specopt.solvers.sdp import SparseRows

    A = SparseRows.from_pairs(np.array([[0, 1], [1, 2]]), 3)
    eng = type("E", (), {"d0": type("D", (), {"A": A, "b": np.array([1.0, 4.0])})()})()
    Y = np.array([[0.0], [1.0], [3.0]])  # squared distances 1 and 4: exact
    assert row_residual(eng, Y @ Y.T) == pytest.approx(0.0, abs=1e-15)
    Y[2, 0] = 3.1  # 4.41 against 4: 0.41 / 5
    assert row_residual(eng, Y @ Y.T) == pytest.approx(0.41 / 5.0)


def test_bounded_step_measure_counts_the_gap():
    """The MM loop subtracts a step's proven gap from its majorizer value: the same steps
    with a gap of 10 x the stationarity tolerance do not certify."""
    from specopt.solvers.iterated_sdp import iterated_sdp

    beta = np.array([-1.0, 0.0, 0.0])

    def step(B, gap):  # min tr(B K) over K = diag(k), k >= 0, sum k = 1: K = e_1 (tight)
        K = np.diag([1.0, 0.0, 0.0])
        return {"K": K, "objective": float(np.sum(B * K)), "gap_abs": gap}

    for gap, expect in ((0.0, True), (2e-3, False)):
        res = iterated_sdp(lambda B, g=gap: step(B, g),
                           lambda p: -np.linalg.eigvalsh(p["K"])[-1],
                           np.diag([1.0, 0.5, 0.2]), beta, get_K=lambda p: p["K"],
                           max_iters=4, stationarity_tol=1e-4)
        assert res.converged is expect, (gap, res.history["stationarity"])


@pytest.mark.parametrize("sense", ["min", "max"])
def test_bounded_step_keeps_the_signed_gap(sense):
    """A stalled certified-phase step is kept on its proven bound: its gap enters the measure
    with its sign (minimization form), so a value on the wrong side of the bound (rows met to
    ``tight_tol`` on a set without an interior) raises the certified minimum to the bound, and
    a gap above the stationarity tolerance, or rows above ``tight_tol``, are not kept."""
    from types import SimpleNamespace

    from specopt.reductions import _iterated_steps as its

    sign = 1.0 if sense == "min" else -1.0
    engine = SimpleNamespace(d0=SimpleNamespace(sense=sense))
    runner = SimpleNamespace(engine=engine, conic_backend="CLARABEL")
    ref = its.HybridRefiner(runner, 1e-4, 1e-5)
    ref.stat_tol = 1e-4

    def point(value, bound, res=1e-6):
        return {"objective": sign * value,
                "low_rank": SimpleNamespace(objective=value, bound=bound, gap=1e-3,
                                            primal_residual=res)}

    below = point(-100.02 * sign, -100.0 * sign)  # 2e-4 past the bound, rows at 1e-6
    assert ref._bounded(below) and below["gap_abs"] == pytest.approx(-0.02)
    within = point(-99.995 * sign, -100.0 * sign)  # 5e-5 above it
    assert ref._bounded(within) and within["gap_abs"] == pytest.approx(0.005)
    assert not ref._bounded(point(-99.98 * sign, -100.0 * sign))  # 2e-4 above: too far
    ref.bounded_run = 0
    assert not ref._bounded(point(-100.02 * sign, -100.0 * sign, res=1e-4))  # loose rows


def test_hybrid_steps_capped_are_not_claimed(monkeypatch):
    """A run capped before two certified steps is not stationary_point."""
    _hybrid_from(monkeypatch, N_H)
    prob = _spiral_knn_model("mve", N_H)
    specopt.solve(prob, max_iters=2)
    cert = specopt.certificate(prob)
    assert cert.status != specopt.STATIONARY
    assert cert.extra["stop_reason"] == "max_iters"


def _rigid_ring(n: int = 24):
    """``min mve_cost(K, 1)`` on a ring with first and second neighbours: rigid, the only
    feasible K is the planar circle, whose two top eigenvalues are tied."""
    t = 2 * np.pi * np.arange(n) / n
    X = np.c_[np.cos(t), np.sin(t)]
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    K = cp.Variable((n, n), symmetric=True)
    rows = [K[i, i] + K[j, j] - 2 * K[i, j] == D[i, j] for i in range(n)
            for j in ((i + 1) % n, (i + 2) % n)]
    return cp.Problem(cp.Minimize(mve_cost(K, 1)), [K >> 0, cp.sum(K) == 0, *rows])


def test_hybrid_steps_at_tied_eigenvalues():
    """Tied top eigenvalues (rigid ring, N = 24: hybrid steps by default): the tie check's
    solves are certified (an engine solve that does not certify is re-solved on Clarabel, not
    passed through), and the value is the conic path's (0: lambda_1 = lambda_2)."""
    vals = {}
    for inner in ("auto", "conic"):
        prob = _rigid_ring()
        vals[inner] = specopt.solve(prob, inner=inner, init="relaxation")
        cert = specopt.certificate(prob)
        assert cert.status == specopt.STATIONARY, (inner, cert.gate_reasons)
        assert cert.extra["stationarity_detail"]["tied_dims"] == [2]
    assert vals["auto"] == pytest.approx(vals["conic"], abs=1e-4)
    assert vals["auto"] == pytest.approx(0.0, abs=1e-4)


@pytest.mark.slow
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["mve", "issue_alpha"]))
def test_hybrid_steps_agree_with_clarabel_on_random_helices(seed, kind):
    """Random noisy helices (N = 16, hybrid steps forced from 16): both inner paths end
    stationary_point at the same value from the same start."""
    import specopt.reductions.iterated_sdp as itr
    import specopt.reductions.low_rank_sdp as lrr

    n = 16

    def make():
        K = cp.Variable((n, n), symmetric=True)
        rows = _knn_rows(K, seed=seed)[0]
        if kind == "mve":
            return cp.Problem(cp.Minimize(mve_cost(K, 2)), [K >> 0, cp.sum(K) == 0, *rows])
        alpha = np.r_[-2.0, -1.0, np.ones(n - 2)]
        return cp.Problem(cp.Minimize(linear_spectral(K, alpha)),
                          [K >> 0, K @ np.ones(n) == 0, *rows])

    saved = (itr.ITERATED_ENGINE_MIN_N, lrr.ITERATED_MIN_N)
    itr.ITERATED_ENGINE_MIN_N = lrr.ITERATED_MIN_N = n
    try:
        vals = {}
        for inner in ("auto", "conic"):
            prob = make()
            vals[inner] = specopt.solve(prob, inner=inner, init="relaxation")
            assert specopt.certificate(prob).status == specopt.STATIONARY, inner
    finally:
        itr.ITERATED_ENGINE_MIN_N, lrr.ITERATED_MIN_N = saved
    assert vals["auto"] == pytest.approx(vals["conic"], rel=1e-3), vals


def test_scs_options_do_not_follow_a_fallback_to_clarabel(monkeypatch):
    """solver="SCS" with SCS options, every SCS solve failing: the steps fall back to Clarabel,
    which gets its own settings (SCS's eps_abs made the next Clarabel step raise TypeError)."""
    _fail_clarabel(monkeypatch, "SCS")
    prob = _user_mve_models()[0]()
    value = specopt.solve(prob, solver="SCS", eps_abs=1e-4, eps_rel=1e-4)
    cert = specopt.certificate(prob)
    assert cert.backend == "CLARABEL" and cert.extra["backend_fallbacks"][0]["to"] == "CLARABEL"
    assert cert.extra["subproblem_solves"] >= 2  # steps after the fallback ran on Clarabel
    assert np.isfinite(value) and cert.status in (specopt.STATIONARY, cp.OPTIMAL_INACCURATE)


def test_conic_only_steps_on_scs_agree_with_clarabel(monkeypatch):
    """Steps that stay conic every step (non-shrink inequality rows: not the engine's form) with
    one PSD block go to SCS above a dense KKT size (here lowered to reach the small instance):
    stationary, the same value as Clarabel every step (to the stationarity tolerance); with
    backend options the rule keeps Clarabel; several PSD blocks (eigengap's epigraphs of the
    sums of largest eigenvalues) go to SCS at any size (see the next test)."""
    import specopt.reductions._iterated_steps as steps

    monkeypatch.setattr(steps, "ITERATED_SCS_SINGLE_BLOCK_MIN_DIM", 10)
    # the SCS steps themselves (the measured try of Clarabel, which here finds Clarabel's
    # steps 4x faster and keeps them, is tested below)
    monkeypatch.setattr(steps, "SCS_PROBE_RATIO", float("inf"))
    monkeypatch.setattr(steps, "SCS_STEP_BUDGET_RATIO", float("inf"))
    certs = _nonshrink_default_and_clarabel()
    assert certs[None].backend == "SCS" and certs["CLARABEL"].backend == "CLARABEL"
    assert certs[None].extra["scs_iterations"], certs[None].extra
    K = cp.Variable((N_U, N_U), symmetric=True)
    one_block = cp.Problem(cp.Minimize(cp.trace(K)), [K >> 0, *_knn_rows(K)[0]])
    assert steps.conic_steps_on_scs(one_block, "CLARABEL", {})
    assert not steps.conic_steps_on_scs(one_block, "CLARABEL", {"tol_feas": 1e-7})
    assert not steps.conic_steps_on_scs(one_block, "MOSEK", {})
    two_blocks = cp.Problem(cp.Minimize(cp.lambda_max(K)), [K >> 0, *_knn_rows(K)[0]])
    assert steps.conic_steps_on_scs(two_blocks, "CLARABEL", {})
    assert not steps.conic_steps_on_scs(two_blocks, "CLARABEL", {"tol_feas": 1e-7})


def test_backend_probe_tries_clarabel_once_and_keeps_the_faster(monkeypatch):
    """Single-block SCS steps: Clarabel gets one step when SCS's last two took over
    SCS_PROBE_RATIO times Clarabel's predicted step; it keeps the steps when it took under
    1 / SCS_PROBE_RATIO of SCS's, else SCS takes them back for good (no second try)."""
    import specopt.reductions._iterated_steps as steps

    monkeypatch.setattr(steps, "clarabel_step_seconds", lambda step: 1.0)

    class Runner:
        def __init__(self):
            self.state = steps.BackendState("SCS")
            self.conic_backend, self.solver_opts = "SCS", {"eps_abs": 1e-6}

    def feed(times):
        runner, probe = Runner(), steps.BackendProbe({"tol_feas": 1e-7})
        seen = []
        for t in times:
            probe.after_step(runner, None, t)
            seen.append(runner.state.backend)
        return runner, probe, seen

    runner, probe, seen = feed([0.5, 2.0, 1.2, 3.0, 1.0])
    # 0.5 / 2.0: not both slow; 2.0 / 1.2: min 1.2 <= 1.5; 1.2 / 3.0: no; then 3.0 / 1.0: no
    assert seen == ["SCS"] * 5 and probe.clarabel_seconds is None
    runner, probe, seen = feed([2.0, 3.0, 1.0, 9.0])
    assert seen == ["SCS", "CLARABEL", "CLARABEL", "CLARABEL"]  # kept: 1.0 * 1.5 < 2.5
    assert runner.conic_backend == "CLARABEL" and runner.solver_opts == {"tol_feas": 1e-7}
    assert runner.state.fallbacks[-1]["reason"].startswith("measured: Clarabel step 1")
    assert probe.record()["clarabel_seconds"] == 1.0
    runner, probe, seen = feed([2.0, 3.0, 2.0, 5.0, 5.0])
    assert seen == ["SCS", "CLARABEL", "SCS", "SCS", "SCS"]  # 2.0 * 1.5 >= 2.5: back, for good
    assert runner.conic_backend == "SCS" and not runner.state.fallbacks


def test_backend_probe_on_a_run_keeps_the_claim(monkeypatch):
    """The probe inside a run (Clarabel's prediction made tiny so that it fires on the small
    instance): stationary at Clarabel's value whichever backend kept the steps, and recorded."""
    import specopt.reductions._iterated_steps as steps

    monkeypatch.setattr(steps, "ITERATED_SCS_SINGLE_BLOCK_MIN_DIM", 10)
    monkeypatch.setattr(steps, "CLARABEL_STEP_SECONDS_MIN", 0.0)
    monkeypatch.setattr(steps, "CLARABEL_STEP_SECONDS_1035", 1e-12)
    certs = _nonshrink_default_and_clarabel()
    assert certs[None].extra["backend_probe"]["clarabel_seconds"] is not None, certs[None].extra
    assert certs["CLARABEL"].extra["backend_probe"] is None


def test_scs_step_budget_cuts_to_clarabel(monkeypatch):
    """An SCS step that reaches its budget is solved on Clarabel (the probe, while undecided)
    and SCS takes the next step again; the second cut moves every later step to Clarabel, with
    the reason recorded."""
    import specopt.reductions._iterated_steps as steps

    monkeypatch.setattr(steps, "clarabel_step_seconds", lambda step: 1.0)

    class Runner:
        def __init__(self):
            self.state = steps.BackendState("SCS")
            self.conic_backend, self.solver_opts = "SCS", {"eps_abs": 1e-6}

    runner, probe = Runner(), steps.BackendProbe({"tol_feas": 1e-7})
    assert probe.budget(None) == pytest.approx(steps.SCS_STEP_BUDGET_RATIO)
    probe.cut(runner, 3.0)
    assert runner.state.backend == "CLARABEL" and not probe.settled
    probe.after_step(runner, None, 2.5)  # the probe: 2.5 * 1.5 >= 3.0, back to SCS
    assert runner.state.backend == "SCS" and probe.done and runner.conic_backend == "SCS"
    probe.cut(runner, 3.0)
    assert runner.state.backend == "CLARABEL" and probe.settled
    assert runner.conic_backend == "CLARABEL" and runner.solver_opts == {"tol_feas": 1e-7}
    assert "budget" in runner.state.fallbacks[-1]["reason"]
    assert probe.budget(None) is None and probe.record()["scs_budget_cuts"] == 2
    probe.after_step(runner, None, 9.0)
    assert runner.state.backend == "CLARABEL"


def test_scs_step_budget_on_a_run_keeps_the_claim(monkeypatch):
    """Every SCS step cut at once (a budget of ~0 s; the probe's measured comparison off, so
    that Clarabel's first step does not keep the steps by itself): the run moves to Clarabel
    after two cuts and is stationary at Clarabel's value."""
    import specopt.reductions._iterated_steps as steps

    monkeypatch.setattr(steps, "ITERATED_SCS_SINGLE_BLOCK_MIN_DIM", 10)
    monkeypatch.setattr(steps, "SCS_STEP_BUDGET_RATIO", 1e-9)
    monkeypatch.setattr(steps, "SCS_PROBE_RATIO", float("inf"))
    certs = _nonshrink_default_and_clarabel()
    probe = certs[None].extra["backend_probe"]
    assert probe["scs_budget_cuts"] == 2 and certs[None].backend == "CLARABEL", probe
    assert any("budget" in f["reason"] for f in certs[None].extra["backend_fallbacks"])


def _nonshrink_default_and_clarabel() -> dict:
    """The non-shrink user model with default options and with ``solver="CLARABEL"``: both
    stationary at the same value; their certificates."""
    make_nonshrink = _other_user_models()[1]
    vals, certs = {}, {}
    for solver in (None, "CLARABEL"):
        prob = make_nonshrink()
        vals[solver] = specopt.solve(prob, solver=solver)
        certs[solver] = cert = specopt.certificate(prob)
        assert cert.status == specopt.STATIONARY, (solver, cert.gate_reasons)
    assert vals[None] == pytest.approx(vals["CLARABEL"], rel=1e-3), vals
    return certs


@pytest.mark.parametrize("cap", [None, 3])
def test_several_block_steps_start_on_scs_and_move_to_clarabel(monkeypatch, cap):
    """Conic-only steps with several PSD blocks (``max eigengap``: lambda_max and the two blocks
    of lambda_sum_largest(K, 3) besides K) start on SCS, capped at MULTI_BLOCK_SCS_MAX_ITERS;
    the first step SCS leaves inaccurate (forced here with a 3-iteration cap; this 10-point
    kNN set has no interior, and SCS leaves it inaccurate at the default cap too) is re-solved
    on Clarabel, which takes every later step, and the switch is recorded. Either way the run
    is stationary at Clarabel's value (every step on Clarabel)."""
    import specopt.reductions._iterated_steps as steps

    make_gap = _other_user_models()[2]
    if cap is not None:
        monkeypatch.setattr(steps, "MULTI_BLOCK_SCS_MAX_ITERS", cap)
        import specopt.reductions.iterated_sdp as itr

        monkeypatch.setattr(itr, "MULTI_BLOCK_SCS_MAX_ITERS", cap)
    prob = make_gap()
    val = specopt.solve(prob)
    cert = specopt.certificate(prob)
    assert cert.status == specopt.STATIONARY, cert.gate_reasons
    moves = [f for f in cert.extra.get("backend_fallbacks") or []
             if f.get("reason") == "inaccurate step (several PSD blocks)"]
    # one move at most, and only to Clarabel, which then ends the run
    assert moves in ([], [{"from": "SCS", "to": "CLARABEL",
                           "reason": "inaccurate step (several PSD blocks)"}]), moves
    assert cert.backend == ("CLARABEL" if moves else "SCS")
    if cap is not None:
        assert moves
    ref = make_gap()
    ref_val = specopt.solve(ref, solver="CLARABEL")
    assert specopt.certificate(ref).status == specopt.STATIONARY
    assert val == pytest.approx(ref_val, rel=1e-3), (val, ref_val)


def test_conic_only_steps_compiled_once_up_to_the_conic_dpp_size(monkeypatch):
    """Steps that are conic every step use the DPP subproblem (compiled once, SCS
    warm-started) up to ``CONIC_DPP_MAX_N``, above ``DPP_MAX_N`` (both lowered here): the same
    stationary value as compiling every step; hybrid runs keep the per-step compile."""
    import specopt.reductions._iterated_steps as steps
    import specopt.reductions.iterated_sdp as itr

    monkeypatch.setattr(steps, "ITERATED_SCS_SINGLE_BLOCK_MIN_DIM", 10)
    monkeypatch.setattr(itr, "DPP_MAX_N", 5)
    vals = {}
    for conic_max in (5, N_U):
        monkeypatch.setattr(itr, "CONIC_DPP_MAX_N", conic_max)
        prob = _other_user_models()[1]()  # non-shrink rows: conic every step
        vals[conic_max] = specopt.solve(prob)
        cert = specopt.certificate(prob)
        assert cert.status == specopt.STATIONARY, cert.gate_reasons
        assert cert.extra["dpp"] is (conic_max == N_U)
    assert vals[5] == pytest.approx(vals[N_U], rel=1e-4), vals
    _hybrid_from(monkeypatch, N_U)
    prob = _user_mve_models()[0]()
    specopt.solve(prob)
    ex = specopt.certificate(prob).extra
    assert ex["hybrid_phases"] and ex["dpp"] is False


@pytest.mark.slow
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10_000), share=st.sampled_from([2, 3]), infeasible=st.booleans())
def test_nonshrink_scs_steps_agree_with_clarabel_on_random_helices(seed, share, infeasible):
    """Random helices with non-shrink rows on a random share of the non-edges (conic every
    step, on SCS by the single-block rule, lowered here): the same stationary value as Clarabel
    every step; a row that asks an edge to stretch beyond its fixed length makes the set
    infeasible, and both backends say so instead of returning a point. (Slow: an SCS step
    still inaccurate after its polish is re-solved on Clarabel, seed 7: 5 s CPU.)"""
    import specopt.reductions._iterated_steps as steps

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(steps, "ITERATED_SCS_SINGLE_BLOCK_MIN_DIM", 10)
        mp.setattr(steps, "SCS_PROBE_RATIO", float("inf"))  # SCS's steps, not the probe's
        mp.setattr(steps, "SCS_STEP_BUDGET_RATIO", float("inf"))
        out = _nonshrink_both_backends(seed, share, infeasible)
    if not infeasible:
        assert out[None] == pytest.approx(out["CLARABEL"], rel=2e-3), out


def _nonshrink_both_backends(seed: int, share: int, infeasible: bool) -> dict:
    rng = np.random.default_rng(seed)
    out: dict = {}
    for solver in (None, "CLARABEL"):
        K = cp.Variable((N_U, N_U), symmetric=True)
        rows, D, edges = _knn_rows(K, seed=seed)
        extra = [K[i, i] + K[j, j] - 2 * K[i, j] >= D[i, j] for i in range(N_U)
                 for j in range(i + 2, N_U) if (i, j) not in edges and (i + j + seed) % share == 0]
        if infeasible:
            i = int(rng.integers(N_U - 1)) if solver is None else out["i"]
            out["i"] = i
            extra.append(K[i, i] + K[i + 1, i + 1] - 2 * K[i, i + 1] >= 1.5 * D[i, i + 1] + 0.1)
        prob = cp.Problem(cp.Minimize(mve_cost(K, 2)), [K >> 0, cp.sum(K) == 0, *rows, *extra])
        specopt.solve(prob, solver=solver)
        cert = specopt.certificate(prob)
        if infeasible:
            assert prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE), (solver, prob.status)
            assert K.value is None
        else:
            assert cert.status == specopt.STATIONARY, (solver, cert.gate_reasons)
            assert cert.backend == (solver or "SCS")
            out[solver] = prob.value
    return out


@pytest.mark.parametrize("seed", [7, 11])
def test_nonshrink_infeasible_rows_on_scs_steps_are_a_status(monkeypatch, seed):
    """Non-shrink rows that contradict a fixed edge length, on the SCS steps of the
    single-block rule: infeasible (no point), as on Clarabel."""
    import specopt.reductions._iterated_steps as steps

    monkeypatch.setattr(steps, "ITERATED_SCS_SINGLE_BLOCK_MIN_DIM", 10)
    # SCS's steps, not the probe's
    monkeypatch.setattr(steps, "SCS_PROBE_RATIO", float("inf"))
    monkeypatch.setattr(steps, "SCS_STEP_BUDGET_RATIO", float("inf"))
    out = _nonshrink_both_backends(seed, 2, True)
    assert set(out) == {"i"}


def _scurve_mve(n: int) -> cp.Problem:
    """``min mve_cost(K, 2)`` on the kNN set (k = 4, plus the chain) of an S-curve sample, whose
    feasible set has no interior (the engine's interior point stalls on it)."""
    from sklearn.datasets import make_s_curve

    X = make_s_curve(n, noise=0.05, random_state=0)[0]
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    edges = {(i, i + 1) for i in range(n - 1)} | {
        (min(i, int(j)), max(i, int(j))) for i in range(n) for j in np.argsort(D[i])[1:5]}
    K = cp.Variable((n, n), symmetric=True)
    return cp.Problem(cp.Minimize(mve_cost(K, 2)), [
        K >> 0, cp.sum(K) == 0,
        *[K[i, i] + K[j, j] - 2 * K[i, j] == D[i, j] for i, j in sorted(edges)]])


def test_hybrid_interior_point_steps_have_no_factored_continuation(monkeypatch):
    """The hybrid steps take the engine's interior point as it ends (``max_iters=0``: no
    factored continuation, in the certified phase too), and the run is stationary: the
    majorizer at its point, ``tr K - 2 <B, K>`` (``B`` the top-2 eigenprojector there), minimized
    by Clarabel over the same set (LMI form), lies at most the claim's tolerance 1e-4 (1 + |F|)
    below ``F`` (20-point S-curve, no interior; from the affinity start the hybrid and the
    all-Clarabel runs may end at different stationary points)."""
    import specopt._cvxpy_compat as compat
    import specopt.reductions._low_rank_steps as lrs
    from tests._helpers import recorded_kwarg, reference_problem_issue

    _hybrid_from(monkeypatch, 20)
    prob = _scurve_mve(20)
    with recorded_kwarg(lrs, "solve_low_rank_sdp", "max_iters") as caps, \
            recorded_kwarg(lrs, "solve_low_rank_sdp", "method") as methods:
        val = specopt.solve(prob)
    cert = specopt.certificate(prob)
    assert cert.status == specopt.STATIONARY, cert.gate_reasons
    assert cert.extra["hybrid_phases"] and 1 in cert.extra["hybrid_phases"], cert.extra
    assert set(methods) == {"ip"} and set(caps) == {0}, (methods, caps)
    K_star = prob.variables()[0].value
    B = np.linalg.eigh(K_star)[1][:, -2:]
    K = prob.variables()[0]
    step = cp.Problem(cp.Minimize(cp.trace(K) - 2 * cp.sum(cp.multiply(B @ B.T, K))),
                      prob.constraints)
    # the reference: Clarabel's LMI form, then stronger regularizations (on this set without an
    # interior its given form can fail, and which one settles varies with rounding), the first
    # whose point is checked
    issues = []
    for opts in ({}, {"static_regularization_constant": 1e-7},
                 {"static_regularization_constant": 1e-6}):
        try:
            compat.solve_in_place(step, "CLARABEL", lmi_first=True, **opts)
            issue = reference_problem_issue(step)
        except cp.error.SolverError as exc:
            issue = str(exc)
        if issue is None:
            break
        issues.append(issue)
    else:
        pytest.skip(f"no Clarabel reference trusted: {issues}")
    assert val - step.value <= 1e-4 * (1.0 + abs(val)), (val, step.value)


def test_conic_steps_after_an_engine_stall_solve_the_lmi_form_first(monkeypatch):
    """When the hybrid steps leave the engine because its interior point stalled (a kNN set
    without an interior: the 20-point S-curve), every later Clarabel solve asks for the LMI form
    first (``lmi_first``), none before, at the polish tolerances (1e-6: at Clarabel's 1e-8
    both forms end "AlmostSolved" there); the run is stationary."""
    import specopt._cvxpy_compat as compat
    from tests._helpers import recorded_kwarg

    _hybrid_from(monkeypatch, 20)
    prob = _scurve_mve(20)
    with recorded_kwarg(compat, "solve_in_place", "lmi_first") as seen, \
            recorded_kwarg(compat, "solve_in_place", "tol_feas") as tols:
        specopt.solve(prob)
    cert = specopt.certificate(prob)
    assert cert.status == specopt.STATIONARY, cert.gate_reasons
    moves = [f for f in cert.extra["backend_fallbacks"] if f["from"] == "low_rank_sdp"]
    assert moves and moves[0]["to"] == "CLARABEL", cert.extra["backend_fallbacks"]
    assert seen and seen[-1] is True, seen
    first = seen.index(True)
    assert all(v is True for v in seen[first:]) and not any(seen[:first]), seen
    # ... at Clarabel's polish tolerances from the first of them
    assert all(t is not None and t >= 1e-6 for t in tols[first:]), tols
