r"""A dense primal-dual interior-point method for small SDPs with many linear rows.

Problem (standard form, one PSD block of order k, nonnegative and free variables)::

    min  <C, X> + cl^T xl + cf^T xf
    s.t. <A_i, X> + (Al xl)_i + (Af xf)_i = b_i      (i < me)
         X PSD (k x k),  xl >= 0,  xf free

Dual: ``max b^T y`` s.t. ``Z = C - sum_i y_i A_i PSD``, ``sl = cl - Al^T y >= 0``,
``Af^T y = cf``.

Made for the restricted masters of matrix generation, where k is tens and the rows hundreds to
thousands: the Newton step is solved through the Schur complement in *row* space,
``M_ij = <A_i, X A_j Z^{-1}>`` (HKM direction) plus ``Al diag(xl / sl) Al^T``, bordered by the
free columns, so a step costs ``O(me k^3 + me^2 k^2 + me^3)`` dense BLAS work instead of a sparse
factorization with a dense ``k(k+1)/2`` scaling block. Mehrotra predictor-corrector; stops at
relative gap and residuals <= tol. It returns ``None`` when it does not converge (the caller has
a general conic solver to fall back on, which also decides infeasibility and unboundedness).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.linalg.blas as blas
import scipy.sparse as sp

from .ip_sparse import max_psd_step

__all__ = ["SmallSDPSolution", "solve_small_sdp"]


@dataclass
class SmallSDPSolution:
    X: np.ndarray
    xl: np.ndarray
    xf: np.ndarray
    y: np.ndarray
    primal: float
    dual: float
    iterations: int


def _sym(M: np.ndarray) -> np.ndarray:
    return 0.5 * (M + np.swapaxes(M, -1, -2))


def _max_step(X: np.ndarray, dX: np.ndarray) -> float:
    """Largest a in (0, inf] with X + a dX PSD (X positive definite)."""
    return max_psd_step(np.linalg.cholesky(X), dX)


def _max_step_lp(x: np.ndarray, dx: np.ndarray) -> float:
    neg = dx < 0
    return float(np.min(-x[neg] / dx[neg])) if neg.any() else np.inf


def _steps(X, xl, Z, sl, dX, dxl, dZ, dsl) -> tuple[float, float]:
    """Primal and dual step lengths (98% of the way to the boundary, at most 1)."""
    return (min(1.0, 0.98 * _max_step(X, dX), 0.98 * _max_step_lp(xl, dxl)),
            min(1.0, 0.98 * _max_step(Z, dZ), 0.98 * _max_step_lp(sl, dsl)))


class _NewtonSystem:
    """The HKM Newton system at one iterate, factored once, solved for several right sides."""

    def __init__(self, cM, Amats, Aflat, Al, AlT, Af, X, Zi, xl, sl, Rd, rp, rdl, rdf,
                 rtol_p, rtol_d):
        self.cM, self.Amats, self.Aflat, self.Al, self.AlT, self.Af = cM, Amats, Aflat, Al, AlT, Af
        self.X, self.Zi, self.xl, self.sl = X, Zi, xl, sl
        self.Rd, self.rp, self.rdl, self.rdf = Rd, rp, rdl, rdf
        self.d = xl / sl
        self.rtol_p, self.rtol_d = rtol_p, rtol_d
        self.nf = Af.shape[1]
        self.MiAf = sla.cho_solve(cM, Af, check_finite=False) if self.nf else None
        self.S_f = Af.T @ self.MiAf if self.nf else None

    def bordered(self, h, rf):
        """Solve ``[M Af; Af^T 0] [dy; dxf] = [h; rf]``."""
        Mih = sla.cho_solve(self.cM, h, check_finite=False)
        if not self.nf:
            return Mih, np.zeros(0)
        dxf = np.linalg.lstsq(self.S_f, self.Af.T @ Mih - rf, rcond=None)[0]
        return Mih - self.MiAf @ dxf, dxf

    def direction(self, sigma_mu, corr_s, corr_l):
        """PSD: ``dX = sigma_mu Z^-1 - X - corr_s - X dZ Z^-1`` (symmetrized), ``dZ = Rd -
        A^T dy``; LP: ``dxl = (sigma_mu - xl sl - corr_l) / sl - d (rdl - Al^T dy)``."""
        X, Zi, xl, sl, d = self.X, self.Zi, self.xl, self.sl, self.d
        Rs = sigma_mu * Zi - X - corr_s - X @ self.Rd @ Zi
        Rl = (sigma_mu - xl * sl - corr_l) / sl - d * self.rdl
        h = self.rp - (self.Aflat @ _sym(Rs).ravel()) - (self.Al @ Rl)
        dy = np.zeros(h.size)
        dxf = np.zeros(self.nf)
        r, rf = h, self.rdf
        for _ in range(3):  # solve, then refine against the unreduced equations
            ddy, ddxf = self.bordered(r, rf)
            dy += ddy
            dxf += ddxf
            dZ = self.Rd - np.tensordot(dy, self.Amats, axes=1)
            dX = _sym(Rs - X @ dZ @ Zi)
            Aty = self.AlT @ dy
            dxl = Rl + d * Aty
            r = self.rp - (self.Aflat @ dX.ravel() + self.Al @ dxl + self.Af @ dxf)
            rf = self.rdf - self.Af.T @ dy
            if (np.linalg.norm(r) <= 1e-3 * self.rtol_p
                    and np.linalg.norm(rf) <= 1e-3 * self.rtol_d):
                break
        dsl = self.rdl - Aty
        return dX, dxl, dxf, dy, dZ, dsl


def solve_small_sdp(
    Amats: np.ndarray,
    b: np.ndarray,
    C: np.ndarray,
    Al: np.ndarray,
    cl: np.ndarray,
    Af: np.ndarray,
    cf: np.ndarray,
    *,
    tol: float = 1e-9,
    max_iters: int = 80,
    accept: float = 100.0,
    verbose: bool = False,
) -> SmallSDPSolution | None:
    """Solve the standard-form SDP of the module docstring; ``None`` when it does not converge.

    Stops at relative gap, primal and dual residuals all <= ``tol``; when accuracy is lost
    before that (no progress for 4 iterations), the best iterate is returned if it is within
    ``accept * tol``.

    ``Amats`` (me, k, k) symmetric, ``Al`` (me, nl) sparse or dense, ``Af`` (me, nf) dense.
    """
    Al = sp.csr_array(Al)
    AlT = sp.csr_array(Al.T)
    me, k, _ = Amats.shape
    nl, nf = Al.shape[1], Af.shape[1]
    Aflat = Amats.reshape(me, k * k)
    nb = 1.0 + np.linalg.norm(b)
    nc = 1.0 + np.sqrt(np.linalg.norm(C) ** 2 + np.linalg.norm(cl) ** 2 + np.linalg.norm(cf) ** 2)
    # infeasible start (SDPT3-like scaling)
    anorm = np.maximum(np.linalg.norm(Aflat, axis=1),
                       np.asarray(abs(Al).sum(axis=1)).ravel() if nl else 0.0)
    xi = max(10.0, np.sqrt(k), float(np.max((1.0 + np.abs(b)) / (1.0 + anorm), initial=1.0)))
    eta = max(10.0, np.sqrt(k), float(anorm.max(initial=1.0)), float(np.linalg.norm(C)))
    X = xi * np.eye(k)
    Z = eta * np.eye(k)
    xl = np.full(nl, xi)
    sl = np.full(nl, eta)
    xf = np.zeros(nf)
    y = np.zeros(me)
    nu = k + nl
    best_err, best, best_it = np.inf, None, 0
    short_steps = False

    def A_op(Xm, xlv, xfv):
        return Aflat @ Xm.ravel() + Al @ xlv + Af @ xfv

    def At_op(yv):
        return np.tensordot(yv, Amats, axes=1), AlT @ yv, Af.T @ yv

    for it in range(1, max_iters + 1):
        rp = b - A_op(X, xl, xf)
        Ay_s, Ay_l, Ay_f = At_op(y)
        Rd = C - Ay_s - Z
        rdl = cl - Ay_l - sl
        rdf = cf - Ay_f
        pobj = float(np.vdot(C, X) + cl @ xl + cf @ xf)
        dobj = float(b @ y)
        mu = (float(np.vdot(X, Z)) + float(xl @ sl)) / nu
        gap = abs(pobj - dobj) / (1.0 + abs(pobj) + abs(dobj))
        pinf = np.linalg.norm(rp) / nb
        dinf = np.sqrt(np.linalg.norm(Rd) ** 2 + np.linalg.norm(rdl) ** 2
                       + np.linalg.norm(rdf) ** 2) / nc
        if verbose:
            print(f"[ip] {it:3d} {pobj:+.9e} {dobj:+.9e} gap {gap:.1e} pinf {pinf:.1e} "
                  f"dinf {dinf:.1e} mu {mu:.1e}")
        err = max(gap, pinf, dinf)
        if not np.isfinite(err):
            break
        if err < best_err:
            best_err, best, best_it = err, (X, xl, xf, y, pobj, dobj, it), it
        if err <= tol:
            break
        if it - best_it >= 4 and best_err < 1e-5:  # accuracy lost near the boundary
            break
        try:
            Lz = np.linalg.cholesky(Z)
        except np.linalg.LinAlgError:
            break
        S = sla.solve_triangular(Lz, np.eye(k), lower=True, trans="T")  # L^-T: Z^-1 = S S^T
        Zi = S @ S.T
        # Schur complement M_ij = <A_i, X A_j Z^-1> + Al diag(xl/sl) Al^T
        # with X = R R^T and Z^-1 = S S^T: M_ij = <S^T A_i R, S^T A_j R>, one SYRK
        try:
            R = np.linalg.cholesky(X)
        except np.linalg.LinAlgError:
            break
        Bm = (S.T @ Amats @ R).reshape(me, k * k)
        M = blas.dsyrk(1.0, Bm, lower=True)
        M = np.tril(M) + np.tril(M, -1).T
        d = xl / sl
        if nl:
            M += (Al @ sp.diags_array(d) @ AlT).toarray()
        M[np.diag_indices(me)] += 1e-14 * max(1.0, float(np.abs(np.diag(M)).max()))
        try:
            cM = sla.cho_factor(M, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            break
        nt = _NewtonSystem(cM, Amats, Aflat, Al, AlT, Af, X, Zi, xl, sl, Rd, rp, rdl, rdf,
                           tol * nb, tol * nc)
        # predictor
        dX, dxl, dxf, dy, dZ, dsl = nt.direction(0.0, np.zeros((k, k)), np.zeros(nl))
        try:
            ap = min(1.0, _max_step(X, dX), _max_step_lp(xl, dxl))
            ad = min(1.0, _max_step(Z, dZ), _max_step_lp(sl, dsl))
        except np.linalg.LinAlgError:
            break
        mu_aff = (float(np.vdot(X + ap * dX, Z + ad * dZ))
                  + float((xl + ap * dxl) @ (sl + ad * dsl))) / nu
        sigma = min(1.0, (mu_aff / mu) ** 3)
        if short_steps:
            sigma = max(sigma, 0.5)  # recentre after blocked steps (else Mehrotra can stall)
        # corrector (Mehrotra second-order term)
        corr_s = dX @ dZ @ Zi
        corr_l = dxl * dsl

        try:
            dX, dxl, dxf, dy, dZ, dsl = nt.direction(sigma * mu, corr_s, corr_l)
            ap, ad = _steps(X, xl, Z, sl, dX, dxl, dZ, dsl)
            if min(ap, ad) < 0.1:
                # the second-order term can block the step: a plain centring step instead
                alt = nt.direction(max(sigma, 0.5) * mu, np.zeros((k, k)), np.zeros(nl))
                ap2, ad2 = _steps(X, xl, Z, sl, alt[0], alt[1], alt[4], alt[5])
                if min(ap2, ad2) > min(ap, ad):
                    (dX, dxl, dxf, dy, dZ, dsl), ap, ad = alt, ap2, ad2
        except np.linalg.LinAlgError:
            break
        short_steps = min(ap, ad) < 0.2
        if verbose:
            print(f"      steps {ap:.2e} {ad:.2e} sigma {sigma:.2f}")
        X = _sym(X + ap * dX)
        xl = xl + ap * dxl
        xf = xf + ap * dxf
        y = y + ad * dy
        Z = _sym(Z + ad * dZ)
        sl = sl + ad * dsl
    if best is None or best_err > accept * max(tol, 1e-12):
        return None
    return SmallSDPSolution(*best)
