"""CVXPY formulations for transformation learning (conic compact form, QCQP master, NC-TLA).

These are the conic pieces that :mod:`specopt.solvers.transformation` (no CVXPY) takes as
callbacks or that the learners call directly. Every solve names its solver explicitly.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from ..solvers.extragradient import project_box, project_spectraplex
from ..solvers.transformation import (
    SaddleResult,
    SaddleTask,
    gram,
    kkt_polish,
    lower_bound,
    relative_gap,
    upper_bound,
)

__all__ = ["ConicResult", "solve_conic", "qcqp_master", "face_polish", "nc_tla", "DEFAULT_SOLVER"]

DEFAULT_SOLVER = "CLARABEL"


def _b_expr(task: SaddleTask, a: cp.Variable) -> cp.Expression:
    """``B(a)^T`` (J x D) as an affine CVXPY expression of alpha."""
    A = (task.F2 * task.y[:, None]).T  # (J*D, N)
    return cp.reshape(A @ a, (task.J, task.D), order="C")


#: Tight settings: the certificate is recomputed from the returned point, so accuracy pays off.
#: At Clarabel's defaults 6 of 80 random instances certified only to 1.1e-5..2.3e-5 (vs <= 1e-5
#: with these); asked for 1e-10 Clarabel often ends "AlmostSolved" (CVXPY: optimal_inaccurate),
#: which is fine here because the certificate is recomputed, so that internal warning is silenced.
_SETTINGS = {
    "CLARABEL": {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10},
    "SCS": {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000},
}


def _dual_box(tasks: Sequence[SaddleTask], alphas: list[cp.Variable],
              bias: bool) -> list[cp.Constraint]:
    """The SVM duals' constraints: ``0 <= a_t <= C_t``, and ``y_t^T a_t = 0`` with a bias."""
    cons: list[cp.Constraint] = []
    for t, a in zip(tasks, alphas, strict=True):
        cons += [a >= 0, a <= t.C]
        if bias:
            cons.append(t.y @ a == 0)
    return cons


def _dual_values(tasks: Sequence[SaddleTask], alphas: list[cp.Variable],
                 bias: bool) -> list[np.ndarray]:
    """The solved duals clipped to their box, and with a bias projected so that ``y^T a = 0``
    holds exactly (the lower bound is valid only then)."""
    al = [np.clip(np.asarray(a.value).ravel(), 0.0, t.C)
          for a, t in zip(alphas, tasks, strict=True)]
    if bias:
        al = [project_box(a, t.C, t.y) for a, t in zip(al, tasks, strict=True)]
    return al


def _solve(prob: cp.Problem, solver: str) -> None:
    """Solve with tight settings; if the solver fails there, retry with its defaults (the
    certificate is recomputed from the returned point, so a looser solve stays honest)."""
    try:
        with warnings.catch_warnings():
            # an inaccurate internal master is not the user's problem: the gap is recomputed
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prob.solve(solver=solver, **_SETTINGS.get(solver, {}))
    except cp.error.SolverError:
        prob.solve(solver=solver)
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        prob.solve(solver=solver)
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise cp.error.SolverError(f"{solver} returned status {prob.status}")


@dataclass
class ConicResult(SaddleResult):
    """Result of :func:`solve_conic`: M (dual of the LMI), alphas, biases, certificate
    (:class:`~specopt.solvers.transformation.SaddleResult`; one solve, CVXPY's status)."""


def solve_conic(
    tasks: Sequence[SaddleTask], *, bias: bool = True, solver: str = DEFAULT_SOLVER,
    basis: np.ndarray | None = None, polish: bool = True,
) -> ConicResult:
    """Compact eigenvalue form as an LMI of size J + sum_t D_t::

        max_{alpha, s}  sum_t 2 1^T a_t - s
        s.t.  [[s I_J, B_1^T, ..., B_T^T], [B_1, I, 0..], ..., [B_T, 0.., I]] >> 0,
              0 <= a_t <= C_t  (y_t^T a_t = 0 with a bias)

    (the LMI says ``s >= lambda_max(sum_t B_t^T B_t)``). The optimal M is the J x J top-left
    block of the LMI's dual matrix (projected onto the spectraplex to remove round-off).
    The certificate is recomputed from (M, alpha) by the solver-independent bounds.

    ``basis`` (J x r, orthonormal columns P): the same problem restricted to the face
    ``M = P W P^T`` (``B_t^T`` replaced by ``P^T B_t^T``, an LMI of size r + sum_t D_t); its
    ``lower`` is a bound of the restricted problem only, so the returned certificate uses the
    full ``lambda_max`` (:func:`lower_bound`) and is valid for the whole problem.

    ``polish``: Newton on the KKT system of the identified face and support
    (:func:`~specopt.solvers.transformation.kkt_polish`); the polished pair replaces the
    solver's when its certified gap is smaller (Clarabel alone certifies 2e-7 - 3e-5 here).
    """
    t0 = time.perf_counter()
    J = tasks[0].J if basis is None else basis.shape[1]
    alphas = [cp.Variable(t.n) for t in tasks]
    s = cp.Variable()
    Bts = [_b_expr(t, a) for t, a in zip(tasks, alphas, strict=True)]
    if basis is not None:
        Bts = [basis.T @ Bt for Bt in Bts]
    blocks = [[s * np.eye(J)] + Bts]
    for k, t in enumerate(tasks):
        row = [Bts[k].T]
        for m, t2 in enumerate(tasks):
            row.append(np.eye(t.D) if m == k else np.zeros((t.D, t2.D)))
        blocks.append(row)
    lmi = cp.bmat(blocks)
    cons = [lmi >> 0, *_dual_box(tasks, alphas, bias)]
    prob = cp.Problem(cp.Maximize(2 * sum(cp.sum(a) for a in alphas) - s), cons)
    _solve(prob, solver)
    Z = np.asarray(cons[0].dual_value)
    M = project_spectraplex(Z[:J, :J])
    if basis is not None:
        M = basis @ M @ basis.T
        M = 0.5 * (M + M.T)
    al = _dual_values(tasks, alphas, bias)
    ub, biases = upper_bound(tasks, M, al, bias)
    lb = lower_bound(tasks, al)
    kk = kkt_polish(tasks, M, al, bias) if polish else None
    if kk is not None:
        ub_k, biases_k = upper_bound(tasks, kk[0], kk[1], bias)
        lb_k = lower_bound(tasks, kk[1])
        if relative_gap(ub_k, lb_k) < relative_gap(ub, lb):
            (M, al), ub, biases, lb = kk, ub_k, biases_k, lb_k
    return ConicResult(M=M, alphas=al, biases=biases, upper=ub, lower=lb,
                       gap=relative_gap(ub, lb), iterations=1,
                       solve_time=time.perf_counter() - t0, status=prob.status)


def qcqp_master(solver: str = DEFAULT_SOLVER):
    """Return a matrix-generation master (see ``specopt.solvers.transformation.Master``)::

        max_{alpha, s} sum_t 2 1^T a_t - s  s.t.  s >= sum_t ||B_t(a_t) u_k||^2  (all atoms k),
                       0 <= a_t <= C_t  (y_t^T a_t = 0 with a bias),

    solved through CVXPY with ``solver``; the weights d are the multipliers of the atom
    constraints (sum d = 1 at the optimum).
    """

    def master(tasks, U, bias):
        alphas = [cp.Variable(t.n) for t in tasks]
        s = cp.Variable()
        # B_t(a_t) as auxiliary variables: the dense N-column map is compiled once, not per atom
        Bts = [cp.Variable((t.J, t.D)) for t in tasks]
        links = [Bt == _b_expr(t, a) for Bt, t, a in zip(Bts, tasks, alphas, strict=True)]
        atom_cons = [sum(cp.sum_squares(u @ Bt) for Bt in Bts) <= s for u in U]
        cons = list(atom_cons) + links + _dual_box(tasks, alphas, bias)
        prob = cp.Problem(cp.Maximize(2 * sum(cp.sum(a) for a in alphas) - s), cons)
        _solve(prob, solver)
        d = np.array([max(float(np.ravel(c.dual_value)[0]), 0.0) for c in atom_cons])
        return _dual_values(tasks, alphas, bias), d

    return master


def face_polish(solver: str = DEFAULT_SOLVER):
    """Return a face polish for :func:`~specopt.solvers.transformation.matrix_generation`:
    ``polish(tasks, P, bias)`` solves the problem on the face ``M = P W P^T`` exactly (the
    compact LMI of :func:`solve_conic` with ``basis=P``, size r + sum_t D_t) and returns
    ``(M, alphas)``."""

    def polish(tasks, P, bias):
        r = solve_conic(tasks, bias=bias, solver=solver, basis=P, polish=False)
        return r.M, r.alphas

    return polish


def nc_tla(tasks: Sequence[SaddleTask], *, solver: str = DEFAULT_SOLVER) -> np.ndarray:
    """Norm-constrained transformation alignment in second-order-cone form::

        max_M  sum_t <K_t(M), y_t y_t^T>  s.t.  sum_t ||K_t(M)||_F^2 <= 1,  M PSD.

    ``K(M) = F2 (M kron I_D) F2^T``; with ``F2 = Q R`` (thin QR) ``||K(M)||_F =
    ||R (M kron I_D) R^T||_F``, a second-order cone in M of size (JD)^2 instead of N^2 (the
    thesis's 2N x 2N LMI). Objective: ``<M, Q>`` with ``Q = sum_t G_t(1)``.
    """
    J = tasks[0].J
    M = cp.Variable((J, J), PSD=True)
    Q = sum(gram(t, np.ones(t.n)) for t in tasks)
    norms = []
    for t in tasks:
        R = np.linalg.qr(t.F2, mode="r")
        norms.append(cp.vec(R @ cp.kron(M, np.eye(t.D)) @ R.T, order="F"))
    cons = [cp.norm(cp.hstack(norms), 2) <= 1]
    prob = cp.Problem(cp.Maximize(cp.trace(M @ Q)), cons)
    _solve(prob, solver)
    Mv = np.asarray(M.value)
    return 0.5 * (Mv + Mv.T)
