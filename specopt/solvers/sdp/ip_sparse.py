r"""A primal-dual interior-point method for one dense PSD block with *sparse* rows. No CVXPY here.

Problem (solver units; the caller scales rows and objective)::

    min  <C, K>   s.t.   A(K) = b   (m sparse rows, COO),   [tr K <= t],   K PSD

where the rows flagged ``ineq`` are ``A_r(K) <= b_r``: each has a slack ``s_r >= 0``
(``A_r(K) + s_r = b_r``) with dual ``z_r = -y_r >= 0``, as the trace row ``tr K + s = t`` has;
the Schur complement gains ``s_r / z_r`` on their diagonal and ``mu`` counts ``s^T z``.
                         [1^T K 1 = 0]   (centering)

With centering the feasible set has no interior (``K 1 = 0``), so ``K = Q W Q^T`` with ``Q``
an orthonormal basis of ``1^perp`` (the last ``n - 1`` columns of the Householder reflector
``H`` mapping ``e_1`` to ``1 / sqrt(n)``; ``Q W Q^T = H diag(0, W) H`` costs ``O(n^2)``), and
the IP runs on ``W`` of order ``n - 1``.

**Why a separate IP.** The rows of the SDE / MVU set (``K_ii + K_jj - 2 K_ij``), single entries
and the MVE subproblems have tiny supports, so every row matrix is a sum of one or two sparse
rank-one terms ``A_r = sum_t w_t f_t f_t^T`` (eigen-decomposition of the row on its support).
The HKM Schur complement ``M_rs = <A_r, X A_s Z^{-1}>`` is then

    M = O^T [ (w w^T) o (F^T X F) o (F^T Z^{-1} F) ] O

(``F`` the sparse ``n x R`` factor columns, ``O`` the ``R x m`` owner indicator, ``o`` the
elementwise product): ``O(R^2)`` work after ``X F`` (the structure DSDP exploits for MaxCut), so
a step costs a few dense ``n^3`` products plus a Cholesky factorization of the ``m x m``
matrix ``M``, instead of a conic solver's ``n^2 x n^2``-scaled KKT system. The Burer-Monteiro
engine (:mod:`specopt.solvers.sdp`) is the method for larger ``n``; this one reaches
1e-8 in 20-40 steps on near-degenerate instances (swiss-roll SDEs) where the augmented
Lagrangian needs a huge penalty.

Method: infeasible-start HKM direction, Mehrotra predictor-corrector, a centring step when the
corrector blocks the step (as :mod:`specopt.solvers.sdp.ip_small`), one step of iterative
refinement of the Schur system (whose factor is float32 with float64 refinement from
``SCHUR_F32_MIN_M`` rows on: :class:`SchurSolve`). The direction's ``X A^*(dy) Z^-1`` is formed
in the full space as ``lift(X) S lift(Z^-1)`` with ``S = sum_r dy_r A_r`` sparse (one dense
product instead of two, from ``SPARSE_SANDWICH_MIN_N``), and ``A(lift W)`` reads only the lifted
entries the rows touch (:meth:`_Space.entries`). Stops when the relative primal and dual
residuals and the relative gap are all ``<= tol``, at ``max_iters``, at ``time_limit`` (best
iterate returned, ``converged=False``). The caller computes the certificate (a valid bound from
the dual ``y`` and the smallest eigenvalue of ``C - A^*(y)``), so the IP's own stopping test is
not the claim.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg.blas import dger as _dger
from scipy.linalg.blas import dtrsv as _dtrsv

from ._kernels import PairForm
from ._schur_form import padded_factors, row_factors, schur_complement
from ._schur_solve import SCHUR_F32_MIN_M, SchurSolve

__all__ = ["SparseIPResult", "row_factors", "solve_sparse_sdp_ip"]


@dataclass
class SparseIPResult:
    """``K = Y Y^T`` (n x r, the eigenvalues above a trace-relative cut, largest first), the
    row multipliers ``y``, the trace multiplier ``mu >= 0`` (0 without a trace row) and the IP
    trace."""

    Y: np.ndarray
    y: np.ndarray
    mu: float
    iterations: int
    converged: bool
    primal_residual: float
    dual_residual: float
    gap: float
    history: list[tuple[float, ...]]
    #: the run stopped because ``accept`` took the current iterate (the caller's certificate)
    accepted: bool = False
    #: Schur solves that fell back from float32 to float64 (:class:`SchurSolve`)
    schur_fallbacks: int = 0


# --------------------------------------------------------------------------------------------
# The reduced space (centering)
# --------------------------------------------------------------------------------------------
class _Space:
    """``K = lift(W)``: identity, or ``Q W Q^T`` with ``Q`` the basis of ``1^perp``."""

    def __init__(self, n: int, centered: bool, V: np.ndarray | None = None) -> None:
        self.n, self.centered = n, centered and n > 1
        self.V = None if V is None else np.ascontiguousarray(V)
        self.k = V.shape[1] if V is not None else (n - 1 if self.centered else n)
        if self.centered:
            w = np.full(n, 1.0 / math.sqrt(n))
            w[0] -= 1.0
            self.w, self.c = w, 2.0 / float(w @ w)

    def _h(self, M: np.ndarray, overwrite: bool = False, symmetric: bool = True) -> np.ndarray:
        """``H M H = M - w a^T - b w^T`` (``H = I - c w w^T``) with ``a = c M^T w - c^2 (w^T M w)
        w``, ``b = c M w``; for symmetric ``M`` both are ``c M w - (c^2 w^T M w / 2) w``. Two
        in-place BLAS rank-one updates, O(n^2); ``overwrite``: ``M`` may be updated in place."""
        w, c = self.w, self.c
        Mw = M @ w
        if symmetric:
            a = b = self._h_vector(Mw)
        else:
            a, b = c * (M.T @ w) - (c * c * float(w @ Mw)) * w, c * Mw
        out = M if overwrite and M.flags.c_contiguous else np.array(M, order="C")
        # out.T is a Fortran-ordered view that dger updates in place: out[q, p] -= x_p y_q
        ot = _dger(-1.0, a, w, a=out.T, overwrite_a=1)  # out -= w a^T
        return _dger(-1.0, w, b, a=ot, overwrite_a=1).T  # out -= b w^T

    def _h_vector(self, Mw: np.ndarray) -> np.ndarray:
        """``a`` of :meth:`_h` from ``M w``."""
        return self.c * Mw - (0.5 * self.c * self.c * float(self.w @ Mw)) * self.w

    def lift(self, W: np.ndarray) -> np.ndarray:
        if self.V is not None:
            return self.V @ W @ self.V.T
        if not self.centered:
            return W
        M = np.zeros((self.n, self.n))
        M[1:, 1:] = W
        return self._h(M, overwrite=True)

    def entries(self, W: np.ndarray, ii: np.ndarray, jj: np.ndarray) -> np.ndarray:
        """``lift(W)[ii, jj]`` without forming ``lift(W)`` when centered: ``M_ij - w_i a_j -
        a_i w_j`` (:meth:`_h`, ``M`` = ``W`` padded by a zero first row and column; one product
        ``W w`` instead of the n x n lift)."""
        if self.V is not None or not self.centered:
            return self.lift(W)[ii, jj]
        w = self.w
        Mw = np.r_[0.0, W @ w[1:]]
        a = self._h_vector(Mw)
        inner = (ii > 0) & (jj > 0)
        out = np.zeros(ii.size)
        out[inner] = W[ii[inner] - 1, jj[inner] - 1]
        return out - w[ii] * a[jj] - a[ii] * w[jj]

    def lift_cols(self, V: np.ndarray) -> np.ndarray:
        """``Q V`` for an ``(n-1) x p`` block."""
        if self.V is not None:
            return self.V @ V
        if not self.centered:
            return V
        M = np.zeros((self.n, V.shape[1]))
        M[1:] = V
        return M - self.c * np.outer(self.w, self.w @ M)

    def reduce(self, M: np.ndarray, overwrite: bool = False,
               symmetric: bool = True) -> np.ndarray:
        """``Q^T M Q`` (``overwrite``: ``M`` may be used as scratch; ``symmetric=False`` for any
        square ``M``)."""
        if self.V is not None:
            return self.V.T @ M @ self.V
        return self._h(M, overwrite, symmetric)[1:, 1:] if self.centered else M


# --------------------------------------------------------------------------------------------
# Solver
# --------------------------------------------------------------------------------------------
def _sym(M: np.ndarray) -> np.ndarray:
    return 0.5 * (M + M.T)


#: Order up to which :func:`max_psd_step` uses the dense subset ``eigh``, Lanczos above.
#: Measured (random PD ``X``, symmetric ``dX``, one thread, CPU ms per call, Lanczos products by
#: BLAS ``dtrsv``): n = 150 dense 1.05 vs Lanczos 1.02, 200: 1.9 vs 1.1, 300: 6.3 vs 1.7, 400:
#: 11.6 vs 2.4, 1000: 118 vs 19; inside the MVE interior point (digits N = 400, the same 310
#: step-length calls and iterates, scipy's solve_triangular products): 9.9 s vs 4.6 s.
PSD_STEP_DENSE_MAX = 150


def max_psd_step(L: np.ndarray, dX: np.ndarray, dense_max: int = PSD_STEP_DENSE_MAX) -> float:
    """Largest a with ``X + a dX`` PSD, from the Cholesky factor ``L`` of ``X``: the smallest
    eigenvalue of ``L^-1 dX L^-T`` (dense subset ``eigh`` up to ``dense_max``; Lanczos on the
    operator above, ``O(n^2)`` per product instead of ``O(n^3)``; the caller checks the new
    iterate's Cholesky factorization and backtracks, so a Lanczos estimate is safe)."""
    k = L.shape[0]
    if k <= dense_max:
        T = sla.solve_triangular(L, sla.solve_triangular(L, dX, lower=True,
                                                         check_finite=False).T,
                                 lower=True, check_finite=False)
        lam = sla.eigh(_sym(T), eigvals_only=True, subset_by_index=[0, 0], driver="evr",
                       check_finite=False)[0]
    else:
        U = L.T  # Fortran-ordered view of L^T (upper): BLAS dtrsv without copies or checks

        def mv(v: np.ndarray) -> np.ndarray:
            u = _dtrsv(U, v, lower=0, trans=0)  # L^-T v
            return _dtrsv(U, dX @ u, lower=0, trans=1)  # L^-1 (dX u)

        op = spla.LinearOperator((k, k), matvec=mv, dtype=float)
        try:
            lam = float(spla.eigsh(op, k=1, which="SA", tol=1e-4, ncv=32, maxiter=20 * k,
                                   v0=np.ones(k))[0][0])
        except spla.ArpackNoConvergence as exc:
            lam = float(exc.eigenvalues[0]) if exc.eigenvalues.size else -math.inf
        lam *= 1.0 + 1e-3 if lam < 0 else 1.0
    return math.inf if lam >= 0 else -1.0 / lam


#: Order from which the Newton direction's ``left A^*(dy) right`` is formed through the sparse
#: rows in the full space (one dense product instead of two; :meth:`_Newton._sandwich`).
SPARSE_SANDWICH_MIN_N = 200


def _pd_update(X: np.ndarray, dX: np.ndarray, a: float, tries: int = 6):
    """``X + a dX`` with its Cholesky factor, shrinking ``a`` by 0.7 until it is PD."""
    for _ in range(tries):
        Xn = _sym(X + a * dX)
        try:
            return Xn, np.linalg.cholesky(Xn), a
        except np.linalg.LinAlgError:
            a *= 0.7
    return X, None, 0.0


def _lp_step(x: np.ndarray, dx: np.ndarray) -> float:
    """Largest ``a`` with ``x + a dx >= 0`` (``x > 0``; inf when no ``dx < 0``)."""
    neg = dx < 0
    return float(np.min(-x[neg] / dx[neg])) if np.any(neg) else math.inf


def _scalar_part(R: np.ndarray, noise_ref: float, rel: float = 1e-11) -> float | None:
    """``rho`` when ``R = rho I`` up to ``rel * noise_ref`` (Frobenius), else None."""
    rho = float(np.trace(R)) / R.shape[0]
    E = R.copy()
    E[np.diag_indices(R.shape[0])] -= rho
    return rho if float(np.linalg.norm(E)) <= rel * noise_ref else None


class _Newton:
    """The HKM Newton system at one iterate (Schur complement factored once), solved for the
    predictor, the corrector and the centring right sides."""

    def __init__(self, ops: _RowOps, cM, X, Zi, Lx, Lz, Rd, rp, rd_t, s_t, z_t, res_tol,
                 scaling, lifted=None, left_right=None, noise_ref: float = 0.0,
                 nt_frame=None):
        self.ops, self.A_op, self.At_op, self.cM = ops, ops.A_op, ops.At_op, cM
        self.nt_frame = nt_frame  # (G, v) of the NT scaling (:func:`_scaling`), None for HKM
        self.X, self.Zi, self.Lx, self.Lz, self.Rd, self.rp = X, Zi, Lx, Lz, Rd, rp
        self.rd_t, self.s_t, self.z_t, self.has_t, self.m = rd_t, s_t, z_t, ops.has_t, ops.m
        self.res_tol = res_tol
        self.left, self.right = scaling  # (X, Z^-1) for HKM, (W, W) for NT
        # (lift(left), lift(right)) for the sparse sandwich; ``left @ right`` for the trace row
        self.lifted, self.left_right = lifted, left_right
        # left Rd right (zero once the dual is feasible: skip the two products then; a multiple
        # of ``left right`` when Rd is a multiple of I, as on warm-started runs)
        self.rd_scalar = _scalar_part(Rd, noise_ref) if lifted is not None else None
        if np.abs(Rd).max(initial=0.0) <= 1e-14:
            self.XRdZi = 0.0
        elif self.rd_scalar is not None:
            lr = left_right if left_right is not None else self.left @ self.right
            self.XRdZi = self.rd_scalar * lr
        else:
            self.XRdZi = self.left @ Rd @ self.right

    def _complete(self, Rs: np.ndarray, Rl: float, dy: np.ndarray):
        # dX = sig_mu Z^-1 - X - left dZ right with dZ = Rd - A^T dy; ``Rs`` already holds
        # -left Rd right (``XRdZi``), so only the A^T dy part is added here
        S = self.ops.At_full_sparse(dy)
        Ady = self.ops.At_op(dy, S)
        dZ = self.Rd - Ady
        dX = _sym(Rs + self._sandwich(dy, S, Ady))
        J = self.ops.slack
        return dX, dZ, Rl + (self.s_t / self.z_t) * dy[J], self.rd_t - dy[J]

    def second_order(self, dX: np.ndarray, dy: np.ndarray, dZ: np.ndarray) -> np.ndarray:
        """The corrector's second-order term. HKM: ``dX dZ Z^-1`` (the linearization of
        ``X Z = sigma mu I`` times ``Z^-1``); when ``Rd = rho I`` (lifted scaling) ``dZ Z^-1 =
        rho Z^-1 - A^*(dy) Z^-1`` with ``A^*(dy) Z^-1 = Q^T (S lift(Z^-1)) Q`` (``S`` the sparse
        rows' part), so one dense product instead of two. NT: in the scaled space of
        :func:`_scaling` (``V = diag(v)``, ``dX~ = G^-1 dX G^-T``, ``dZ~ = G^T dZ G``) the
        equation is ``V o (dX~ + dZ~) = sigma mu I - V^2 - dX~ o dZ~`` (``o`` the symmetrized
        product), so the term is ``G P G^T`` with ``P_ij = (dX~ dZ~ + dZ~ dX~)_ij / (v_i +
        v_j)``; the HKM term with the NT scaling left the NT steps stalling near gap 1e-5."""
        if self.nt_frame is not None:
            G, v = self.nt_frame
            Gi = np.linalg.solve(G, np.eye(G.shape[0]))
            dXs = Gi @ dX @ Gi.T
            dZs = G.T @ dZ @ G
            S = dXs @ dZs
            P = (S + S.T) / (v[:, None] + v[None, :])
            return _sym(G @ P @ G.T)
        if self.rd_scalar is None or self.right is not self.Zi:
            return dX @ dZ @ self.Zi
        S = self.ops.At_full_sparse(dy)
        AZ = self.ops.sp_.reduce(np.asarray(S @ self.lifted[1]), overwrite=True,
                                 symmetric=False)
        if self.has_t:
            AZ += dy[self.m] * self.Zi
        return dX @ (self.rd_scalar * self.Zi - AZ)

    def _sandwich(self, dy: np.ndarray, S: sp.csr_array, Ady: np.ndarray) -> np.ndarray:
        """``left A^*(dy) right`` (up to symmetrization: the caller symmetrizes). With the
        lifted scaling, the rows' part is one sparse and one dense product in the full space,
        ``reduce(sym(lift(left) S lift(right)))`` with ``S = sum_r dy_r A_r`` sparse, instead of
        two dense ``n^3`` products (``Q^T Q = I``, so it equals ``left Q^T S Q right``); ``S`` is
        :meth:`_RowOps.At_full_sparse` of ``dy``, ``Ady`` its :meth:`_RowOps.At_op`."""
        if self.lifted is None:
            return self.left @ Ady @ self.right
        Lf, Rf = self.lifted
        out = self.ops.sp_.reduce(_sym(np.asarray(S @ Lf).T @ Rf), overwrite=True)
        if self.has_t:
            out += dy[self.m] * self.left_right
        return out

    def direction(self, sig_mu: float, corr: np.ndarray | None, corr_t: float):
        """``dX = sig_mu Z^-1 - X - corr - X (Rd - A^T dy) Z^-1`` (symmetrized), ``dZ = Rd -
        A^T dy``, ``M dy = rp - A(R_s)``; refined against the unreduced equations."""
        s_t, z_t = self.s_t, self.z_t
        Rs = sig_mu * self.Zi - self.X - self.XRdZi
        if corr is not None:
            Rs = Rs - corr
        Rs = _sym(Rs)
        Rl = (sig_mu - s_t * z_t - corr_t) / z_t - (s_t / z_t) * self.rd_t
        h = self.rp - self.A_op(Rs, Rl)
        dy = self.cM.solve(h)
        dX, dZ, dst, dzt = self._complete(Rs, Rl, dy)
        res = self.rp - self.A_op(dX, dst)
        if np.linalg.norm(res) > self.res_tol:  # one refinement step
            dy = dy + self.cM.solve(res)
            dX, dZ, dst, dzt = self._complete(Rs, Rl, dy)
        return dX, dy, dZ, dst, dzt

    def steps(self, dX, dZ, dst, dzt, frac: float = 0.98) -> tuple[float, float]:
        """Primal and dual step lengths (``frac`` of the way to the boundary, at most 1)."""
        lp_p = frac * _lp_step(self.s_t, dst)
        lp_d = frac * _lp_step(self.z_t, dzt)
        return (min(1.0, frac * max_psd_step(self.Lx, dX), lp_p),
                min(1.0, frac * max_psd_step(self.Lz, dZ), lp_d))


def _warm_start(sp_: _Space, warm: tuple, ops: _RowOps, Cr: np.ndarray,
                shift: float) -> _IPState:
    """A starting point near a previous solution ``(Y, y[, mu])``: ``X = W + a I`` (``W`` the
    reduced ``Y Y^T``), the same ``y`` (and trace multiplier ``mu >= 0``), and its dual slack
    ``Z = C - A^*(y) + mu I + c I``, both shifted into the interior: ``a = shift * tr W / k``,
    ``c = max(0, -lambda_min(C - A^*(y) + mu I)) + shift * ||C - A^*(y) + mu I||_F / sqrt k``.
    The dual residual is ``-c I``; the primal one that of ``Y``. With a trace row
    ``tr X + s = t``: ``s = t - tr X`` (at least ``1e-3 t``) and its dual ``z = mu + c``; the
    same for inequality rows (``s = b - A(X)``, ``z = max(-y, 0) + c``)."""
    Y, y0 = warm[0], warm[1]
    mu_t = max(float(warm[2]), 0.0) if len(warm) > 2 and ops.has_t else 0.0
    W = sp_.reduce(Y @ Y.T)
    k = W.shape[0]
    m = ops.m
    a = shift * max(float(np.trace(W)) / k, 1e-8)
    y = np.zeros(ops.me)
    y[:m] = np.asarray(y0, dtype=float)[:m]
    if ops.has_t:
        y[m] = -mu_t
    S = _sym(Cr - ops.At_op(y))
    lam = float(sla.eigh(S, eigvals_only=True, subset_by_index=[0, 0], check_finite=False)[0])
    c = max(0.0, -lam) + shift * max(float(np.linalg.norm(S)) / math.sqrt(k), 1e-8)
    X = _sym(W) + a * np.eye(k)
    J = ops.slack  # the slacks inside (the trace row's: t - tr X, at least 1e-3 t), duals + c
    s_t = np.maximum(ops.bb[J] - ops.A_op(X, 0.0)[J], np.maximum(1e-3 * np.abs(ops.bb[J]),
                                                                    1e-12))
    return _IPState(X, S + c * np.eye(k), y, s_t, np.maximum(-y[J], 0.0) + c)


def solve_sparse_sdp_ip(
    C: np.ndarray,
    rows: np.ndarray,
    ii: np.ndarray,
    jj: np.ndarray,
    vals: np.ndarray,
    b: np.ndarray,
    *,
    centered: bool = False,
    trace_bound: float | None = None,
    tol: float = 1e-8,
    max_iters: int = 300,
    time_limit: float | None = None,
    rank_cut: float = 1e-9,
    face: np.ndarray | None = None,
    direction_kind: str = "hkm",
    verbose: bool = False,
    callback=None,
    objective_scale: float = 1.0,
    objective_offset: float = 0.0,
    warm: tuple[np.ndarray, np.ndarray] | None = None,
    warm_shift: float = 0.1,
    start_scale: float = 1.0,
    accept=None,
    accept_err: float = 0.0,
    schur_mixed: bool | None = None,
    ineq: np.ndarray | None = None,
) -> SparseIPResult:
    """Solve ``min <C, K> s.t. A(K) = b, [tr K <= t], [K 1 = 0], K PSD`` (module docstring).

    ``C`` dense symmetric ``n x n``; rows in COO form (``A(K)_r = sum_k vals_k K[ii_k, jj_k]``);
    ``rank_cut``: eigenvalues of ``K`` below ``rank_cut * tr K`` are dropped from the factor.
    ``face``: an orthonormal basis ``V`` (``K = V W V^T``, e.g. a facial reduction's).
    ``direction_kind``: "hkm" (``dX + X dZ Z^-1`` symmetrized, Schur ``<A_r, X A_s Z^-1>``) or
    "nt" (``dX + W dZ W`` with the Nesterov-Todd scaling ``W Z W = X``, Schur
    ``<A_r, W A_s W>``; the same kernel).
    ``warm``: ``(Y, y)`` or ``(Y, y, mu)``, a previous solution (``K = Y Y^T``, the row
    multipliers, the trace row's ``mu >= 0``; e.g. the last majorize-minimize step's, whose
    problem differed only in ``C``): :func:`_warm_start`. ``start_scale`` multiplies the cold
    start's ``X = xi I``.
    ``accept``: ``accept(Y, y, mu) -> bool``, asked at every iterate whose error (the largest of
    the relative gap and residuals) is ``<= accept_err`` before ``tol`` is reached; True stops
    the run there (``accepted``, ``converged``): e.g. the caller's certificate already holds at
    its own tolerance, so the steps down to ``tol`` are not needed.
    ``schur_mixed``: factor the Schur complement in float32 with float64 refinement
    (:class:`SchurSolve`); None: from ``SCHUR_F32_MIN_M`` rows on.
    ``ineq``: bool mask of the rows that are ``A_r(K) <= b_r`` (slacks; ``y_r <= 0``).
    """
    if direction_kind not in ("hkm", "nt"):
        raise ValueError(f"direction_kind must be 'hkm' or 'nt', got {direction_kind!r}")
    t0 = time.perf_counter()
    m = int(b.size)
    sp_ = _Space(C.shape[0], centered, face)
    ops = _RowOps(rows, ii, jj, vals, b, C.shape[0], sp_, trace_bound, ineq)
    ops.schur_f32_min_m = SCHUR_F32_MIN_M if schur_mixed is None else (
        0 if schur_mixed else math.inf)
    Cr = sp_.reduce(_sym(np.asarray(C, dtype=float)))
    ops.c_norm = float(np.linalg.norm(Cr))
    st = _cold_start(Cr, ops.bb, sp_.k, ops.slack.size, start_scale)
    if warm is not None:
        st = _warm_start(sp_, warm, ops, Cr, warm_shift)
    nb = 1.0 + float(np.linalg.norm(ops.bb))
    nc = 1.0 + ops.c_norm
    hist: list[tuple[float, ...]] = []
    best, best_err, best_it = None, math.inf, 0
    short = converged = accepted = False
    it = 0
    for it in range(1, max_iters + 1):
        with np.errstate(over="ignore", invalid="ignore"):
            meas = _measure(ops, Cr, st, nb, nc)
        hist.append(meas.row)
        _report(it, meas, verbose, callback, objective_scale, objective_offset, t0)
        if not np.isfinite(meas.err):
            break
        if meas.err < best_err:
            best_err, best, best_it = meas.err, (st.X, st.y, st.s_t, st.z_t), it
        if meas.err <= tol:
            converged = True
            break
        if accept is not None and meas.err <= accept_err:
            Y_it = _factor_of(st.X, sp_, rank_cut, ops, meas.rp[:m])
            if accept(Y_it, st.y[:m].copy(), float(-st.y[m]) if ops.has_t else 0.0):
                best, best_it = (st.X, st.y, st.s_t, st.z_t), it
                converged = accepted = True
                break
        # no progress (accuracy lost near the boundary): neither the error nor mu improved over
        # 8 steps. Degenerate problems (no interior: swiss-roll SDEs) converge linearly but
        # steadily, so a few steps without a new best error are not a stall.
        if it - best_it >= 8 and meas.mu > 0.5 * hist[-9][5]:
            break
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            break
        try:
            # (an infeasible set drives slacks / duals to 0 or inf: the next measure is not
            # finite and the loop ends, without numpy's warnings)
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                short = _step(st, ops, Cr, meas, direction_kind, 1e-3 * tol * nb, short)
        except np.linalg.LinAlgError:
            break
        if st.Lx is None or st.Lz is None:
            break
    X, y, s_t, z_t = best if best is not None else (st.X, st.y, st.s_t, st.z_t)
    h = hist[best_it - 1] if best_it else hist[-1]
    Y_out = Y_it if accepted else _factor_of(
        X, sp_, rank_cut, ops, (ops.bb - ops.A_op(X, s_t))[:m])
    return SparseIPResult(Y=Y_out, y=y[:m].copy(),
                          mu=float(-y[m]) if ops.has_t else 0.0, iterations=it,
                          converged=converged and best_it == it, primal_residual=h[3],
                          dual_residual=h[4], gap=h[2], history=hist, accepted=accepted,
                          schur_fallbacks=st.fallbacks)


class _RowOps:
    """The rows as operators on the reduced space: ``A_op``
    (``A(lift W)``, plus ``tr W + s`` with a trace bound) and its adjoint ``At_op``; ``bb`` the
    right-hand side (``b``, plus ``t``)."""

    def __init__(self, rows, ii, jj, vals, b: np.ndarray, n: int, sp_: _Space,
                 trace_bound: float | None, ineq: np.ndarray | None = None) -> None:
        m = int(b.size)
        self.rows = np.asarray(rows, dtype=np.int64)
        self.ii = np.asarray(ii, dtype=np.int64)
        self.jj = np.asarray(jj, dtype=np.int64)
        self.vals = np.asarray(vals, dtype=float)
        self.m, self.n, self.sp_ = m, n, sp_
        self.pf = padded_factors(*row_factors(self.rows, self.ii, self.jj, self.vals, m, n))
        self.has_t = trace_bound is not None
        self.me = m + (1 if self.has_t else 0)
        self.schur_f32_min_m: float = SCHUR_F32_MIN_M
        self.bb = np.r_[b, trace_bound] if self.has_t else np.asarray(b, dtype=float)
        # the rows with a slack ``s >= 0`` (``A_r(K) + s_r = b_r``, dual ``z_r = -y_r >= 0``):
        # the inequality rows, then the trace row
        rows_le = np.flatnonzero(np.asarray(ineq, dtype=bool)) if ineq is not None \
            else np.zeros(0, dtype=np.int64)
        self.slack = np.r_[rows_le, m] if self.has_t else rows_le
        self._adj: tuple | None = None
        self.c_norm = 0.0  # ||C|| on the reduced space (set by the solver)

    @functools.cached_property
    def pairs(self) -> PairForm:
        """The rows grouped by matrix entry (``pairs.yyt(Y) = A(Y Y^T)`` on a full-space factor,
        no trace row), built on first use."""
        return PairForm(self.rows, self.ii, self.jj, self.vals, self.m, self.n)

    def A_entries(self, W: np.ndarray) -> np.ndarray:
        """``A(lift W)`` from the lifted entries the rows read (:meth:`_Space.entries`)."""
        return np.bincount(self.rows, weights=self.vals * self.sp_.entries(W, self.ii, self.jj),
                           minlength=self.m)

    def A_op(self, W: np.ndarray, s: np.ndarray | float) -> np.ndarray:
        """``A(lift W)`` (and ``tr W``) plus the slacks ``s`` on their rows."""
        out = self.A_entries(W)
        if self.has_t:
            out = np.r_[out, np.trace(W)]
        out[self.slack] += s
        return out

    def At_full_sparse(self, yv: np.ndarray) -> sp.csr_array:
        """``sum_r y_r (A_r + A_r^T) / 2`` in the full space as a sparse matrix (no trace row):
        the data is ``T y`` for a pattern and map built once (``nnz(A)`` work per call)."""
        if self._adj is None:
            r, c = np.r_[self.ii, self.jj], np.r_[self.jj, self.ii]
            key, inv = np.unique(r * self.n + c, return_inverse=True)
            T = sp.csr_array((np.r_[0.5 * self.vals, 0.5 * self.vals],
                              (inv, np.r_[self.rows, self.rows])), shape=(key.size, self.m))
            indptr = np.r_[0, np.cumsum(np.bincount(key // self.n, minlength=self.n))]
            self._adj = (T, (key % self.n).astype(np.int32), indptr.astype(np.int32))
        T, indices, indptr = self._adj
        return sp.csr_array((T @ yv[:self.m], indices, indptr), shape=(self.n, self.n))

    def At_op(self, yv: np.ndarray, S: sp.csr_array | None = None) -> np.ndarray:
        """``A^*(y)`` on the reduced space (``S``: :meth:`At_full_sparse` of ``yv``, if built)."""
        S = self.At_full_sparse(yv) if S is None else S
        out = self.sp_.reduce(S.toarray(), overwrite=True)
        if self.has_t:
            out[np.diag_indices(self.sp_.k)] += yv[self.m]
        return out


@dataclass
class _IPState:
    """The iterate: ``X``, ``Z`` (reduced space) with their Cholesky factors, the multipliers
    ``y`` and the slacks ``s_t`` (inequality rows, then the trace row) with their duals
    ``z_t``."""

    X: np.ndarray
    Z: np.ndarray
    y: np.ndarray
    s_t: np.ndarray
    z_t: np.ndarray
    Lx: np.ndarray | None = None
    Lz: np.ndarray | None = None
    fallbacks: int = 0


def _cold_start(Cr: np.ndarray, bb: np.ndarray, k: int, n_slack: int,
                start_scale: float) -> _IPState:
    """Infeasible start, SDPT3-like scaling: ``X = xi I``, ``Z = eta I``."""
    xi = max(10.0, math.sqrt(k), float(np.max(1.0 + np.abs(bb), initial=1.0)))
    eta = max(10.0, math.sqrt(k), float(np.linalg.norm(Cr)) / math.sqrt(k) + 1.0)
    return _IPState((start_scale * xi) * np.eye(k), eta * np.eye(k), np.zeros(bb.size),
                    np.full(n_slack, xi), np.full(n_slack, eta))


@dataclass(frozen=True)
class _Measure:
    """Residuals and objectives at one iterate; ``row`` is its history entry."""

    rp: np.ndarray
    Rd: np.ndarray
    rd_t: np.ndarray
    pobj: float
    dobj: float
    gap: float
    pinf: float
    dinf: float
    mu: float

    @property
    def err(self) -> float:
        return max(self.gap, self.pinf, self.dinf)

    @property
    def row(self) -> tuple[float, ...]:
        return (self.pobj, self.dobj, self.gap, self.pinf, self.dinf, self.mu)


def _measure(ops: _RowOps, Cr: np.ndarray, st: _IPState, nb: float, nc: float) -> _Measure:
    """``rp = b - A(X)``, ``Rd = C - A^T y - Z``, the relative gap and residuals, and ``mu``."""
    rp = ops.bb - ops.A_op(st.X, st.s_t)
    Rd = Cr - ops.At_op(st.y) - st.Z
    rd_t = -st.y[ops.slack] - st.z_t
    pobj = float(np.vdot(Cr, st.X))
    dobj = float(ops.bb @ st.y)
    nu = st.X.shape[0] + ops.slack.size
    mu = (float(np.vdot(st.X, st.Z)) + float(st.s_t @ st.z_t)) / nu
    gap = abs(pobj - dobj) / (1.0 + abs(pobj) + abs(dobj))
    pinf = float(np.linalg.norm(rp)) / nb
    dinf = math.sqrt(float(np.linalg.norm(Rd)) ** 2 + float(rd_t @ rd_t)) / nc
    return _Measure(rp, Rd, rd_t, pobj, dobj, gap, pinf, dinf, mu)


def _report(it: int, meas: _Measure, verbose: bool, callback, scale: float, offset: float,
            t0: float) -> None:
    """A verbose line and the callback, in the caller's objective ``scale <C, K> + offset``."""
    if not verbose and callback is None:
        return
    shown = (scale * meas.pobj + offset, scale * meas.dobj + offset)
    if verbose:
        print(f"[sparse_ip] {it:3d} {shown[0]:+.9e} {shown[1]:+.9e} gap {meas.gap:.1e} "
              f"pinf {meas.pinf:.1e} dinf {meas.dinf:.1e} mu {meas.mu:.1e} "
              f"({time.perf_counter() - t0:.1f} s)")
    if callback is not None:
        callback(it, objective=shown[0], gap=meas.gap, violation=meas.pinf)


def _scaling(direction_kind: str, st: _IPState, Zi: np.ndarray):
    """``((X, Z^-1), None)`` for HKM; for NT ``((W, W), (G, v))``: ``W = L U D^-1/2 U^T L^T``
    with ``L^T Z L = U D U^T`` (so ``W Z W = X``), ``G = L U D^-1/4`` (``G G^T = W``) and
    ``v = D^1/2``, the scaled iterate ``G^-1 X G^-T = G^T Z G = diag(v)``."""
    if direction_kind != "nt":
        return (st.X, Zi), None
    D, U = np.linalg.eigh(st.Lx.T @ st.Z @ st.Lx)
    D = np.clip(D, 1e-300, None)
    LU = st.Lx @ U
    Wn = _sym((LU / np.sqrt(D)) @ LU.T)
    return (Wn, Wn), (LU * D ** -0.25, np.sqrt(D))


def _schur_factor(ops: _RowOps, scaling, lifted, left_right, st: _IPState) -> SchurSolve:
    """The Schur complement ``M_rs = <A_r, left A_s right>`` (sparse rows, through the rank-one
    factors; ``lifted`` the scaling in the full space), bordered by the trace row, with a tiny
    diagonal shift, factored (:class:`SchurSolve`: float32 with refinement from
    ``SCHUR_F32_MIN_M`` rows on)."""
    left, right = scaling
    M = schur_complement(ops.pf, lifted[0], lifted[1], ops.m)
    if ops.has_t:
        Mt = np.zeros((ops.me, ops.me))
        Mt[:ops.m, :ops.m] = M
        Mt[ops.m, :ops.m] = ops.A_entries(_sym(left_right))
        Mt[ops.m, ops.m] = float(np.vdot(left, right))
        M = Mt
    M[ops.slack, ops.slack] += st.s_t / st.z_t
    dM = np.diag(M).copy()
    M[np.diag_indices(ops.me)] += 1e-13 * max(1.0, float(dM.max(initial=1.0)))
    return SchurSolve(M, mixed=ops.me >= ops.schur_f32_min_m)


def _step(st: _IPState, ops: _RowOps, Cr: np.ndarray, meas: _Measure, direction_kind: str,
          res_tol: float, short: bool) -> bool:
    """One Mehrotra predictor-corrector step, in place; returns whether it was short. Raises
    LinAlgError on a failed factorization (the caller stops); leaves ``st.Lx``/``st.Lz`` None
    when the new iterate is not positive definite."""
    if st.Lx is None or st.Lz is None:
        st.Lz = np.linalg.cholesky(st.Z)
        st.Lx = np.linalg.cholesky(st.X)
    Zi, info = sla.lapack.dpotri(st.Lz, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError("Z is not positive definite")
    Zi = np.tril(Zi) + np.tril(Zi, -1).T
    scaling, nt_frame = _scaling(direction_kind, st, Zi)
    lifted = (ops.sp_.lift(scaling[0]), ops.sp_.lift(scaling[1]))
    left_right = scaling[0] @ scaling[1] if ops.has_t else None
    cM = _schur_factor(ops, scaling, lifted, left_right, st)
    sparse = ops.sp_.V is None and ops.n >= SPARSE_SANDWICH_MIN_N
    # what rounding leaves in Rd = C - A^*(y) - Z is relative to the terms' size
    noise = ops.c_norm + float(np.linalg.norm(st.Z)) if sparse else 0.0
    newton = _Newton(ops, cM, st.X, Zi, st.Lx, st.Lz, meas.Rd, meas.rp, meas.rd_t, st.s_t,
                     st.z_t, res_tol, scaling, lifted if sparse else None, left_right, noise,
                     nt_frame)
    dX, dy, dZ, dst, dzt, ap, ad = _predictor_corrector(newton, st, Zi, meas.mu, short)
    st.fallbacks += cM.fallbacks
    short = min(ap, ad) < 0.2
    # the new iterate must be positive definite (Lanczos step lengths): backtrack if not
    st.X, st.Lx, ap = _pd_update(st.X, dX, ap)
    st.Z, st.Lz, ad = _pd_update(st.Z, dZ, ad)
    if st.Lx is None or st.Lz is None:
        return short  # the caller stops
    st.y = st.y + ad * dy
    st.s_t = st.s_t + ap * dst
    st.z_t = st.z_t + ad * dzt
    return short


def _predictor_corrector(newton: _Newton, st: _IPState, Zi: np.ndarray, mu: float,
                         short: bool):
    """Predictor (affine) step, ``sigma = (mu_aff / mu)^3`` (at least 0.5 after a short step),
    corrector with the second-order term ``dX dZ Z^-1``; a pure centring step instead when it
    goes further than a corrector shorter than 0.1. Returns the direction and step lengths."""
    direction, steps = newton.direction, newton.steps
    nu = st.X.shape[0] + newton.ops.slack.size
    dX, dy, dZ, dst, dzt = direction(0.0, None, 0.0)
    ap, ad = steps(dX, dZ, dst, dzt, 1.0)
    mu_aff = (float(np.vdot(st.X + ap * dX, st.Z + ad * dZ))
              + float((st.s_t + ap * dst) @ (st.z_t + ad * dzt))) / nu
    sigma = min(1.0, (mu_aff / mu) ** 3)
    if short:
        sigma = max(sigma, 0.5)
    corr = newton.second_order(dX, dy, dZ)
    dX, dy, dZ, dst, dzt = direction(sigma * mu, corr, dst * dzt)
    ap, ad = steps(dX, dZ, dst, dzt)
    if min(ap, ad) < 0.1:
        alt = direction(max(sigma, 0.5) * mu, None, 0.0)
        ap2, ad2 = steps(alt[0], alt[2], alt[3], alt[4])
        if min(ap2, ad2) > min(ap, ad):
            (dX, dy, dZ, dst, dzt), ap, ad = alt, ap2, ad2
    return dX, dy, dZ, dst, dzt, ap, ad


def _factor_of(X: np.ndarray, sp_: _Space, rank_cut: float, ops: _RowOps | None = None,
               rp: np.ndarray | None = None) -> np.ndarray:
    """``Y`` with ``K = Y Y^T``: the eigenvalues of ``X`` above ``rank_cut * tr``, largest
    first, lifted to the full space.

    With the rows (``ops``) and ``X``'s residual ``rp = b - A(X)``: the cut is lowered (by
    1e3 at a time, to every positive eigenvalue) until the dropped part ``X_d`` moves the rows
    by little, ``||rp + A(X_d)|| <= 2 ||rp|| + 1e-12 ||b||``. An interior iterate keeps
    ``n - r`` eigenvalues of order ``mu / z``; at n = 1000 they carried 2.8e-4 of the rows
    (relative) below a 1e-9 cut while ``X`` itself was at 4e-7, and the factor's certificate
    failed on its residual for 15 interior-point steps."""
    ev, U = np.linalg.eigh(X)
    ev, U = ev[::-1], U[:, ::-1]
    tr = max(float(np.sum(np.clip(ev, 0, None))), 1e-300)
    cut = rank_cut
    keep = ev > cut * tr
    if ops is not None and rp is not None:
        budget = 2.0 * float(np.linalg.norm(rp)) + 1e-12 * float(np.linalg.norm(ops.bb))
        positive = int(np.count_nonzero(ev > 0))
        while int(np.count_nonzero(keep)) < positive:
            drop = ~keep & (ev > 0)
            Yd = sp_.lift_cols(U[:, drop] * np.sqrt(ev[drop]))
            if float(np.linalg.norm(rp + ops.pairs.yyt(Yd))) <= budget:
                break
            cut *= 1e-3
            keep = ev > (cut * tr if cut > 1e-300 else 0.0)
    return np.ascontiguousarray(sp_.lift_cols(U[:, keep] * np.sqrt(ev[keep])))
