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
factorization with a dense ``k(k+1)/2`` scaling block. Rows given as sums of rank-one terms,
``A_i = sum_l F_il v_l v_l^T`` (``factors``; PSDBoost's rows have two), form the Schur
complement as ``F ((V X V^T) o (V Z^-1 V^T)) F^T`` in ``O(nv^2 k)`` (``nv`` terms) instead.
A warm start (``start``) begins from a guessed pair moved into the interior. Mehrotra
predictor-corrector; stops at relative gap and residuals <= tol. It returns ``None`` when it
does not converge (the caller has a general conic solver to fall back on, which also decides
infeasibility and unboundedness).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.linalg.blas as blas
import scipy.sparse as sp

from .ip_sparse import max_psd_step

__all__ = ["SmallSDPSolution", "SmallStart", "solve_small_sdp"]


@dataclass
class SmallSDPSolution:
    X: np.ndarray
    xl: np.ndarray
    xf: np.ndarray
    y: np.ndarray
    primal: float
    dual: float
    iterations: int


@dataclass(frozen=True)
class SmallStart:
    """A guess of a primal-dual pair for a warm start: ``X`` (k, k), ``xl`` (nl,), ``xf`` (nf,),
    ``y`` (me,), e.g. the solution of a nearby problem. Need not be feasible or interior:
    :func:`_small_start_warm` moves it into the interior (the duals ``Z``, ``sl`` are those
    of ``y``)."""

    X: np.ndarray
    xl: np.ndarray
    xf: np.ndarray
    y: np.ndarray


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
                 rtol_p, rtol_d, refine=3):
        self.refine = refine
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
        for _ in range(self.refine):  # solve, then refine against the unreduced equations
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
    start: SmallStart | None = None,
    factors: tuple[np.ndarray, sp.spmatrix] | None = None,
    refine: int = 3,
    verbose: bool = False,
) -> SmallSDPSolution | None:
    """Solve the standard-form SDP of the module docstring; ``None`` when it does not converge.

    Stops at relative gap, primal and dual residuals all <= ``tol``; when accuracy is lost
    before that (no progress for 4 iterations), the best iterate is returned if it is within
    ``accept * tol``. ``start``: a warm start (:class:`SmallStart`, e.g. the solution of a
    nearby problem) instead of the standard cold start. ``factors``: ``(V, F)`` with ``V``
    (nv, k) and ``F`` (me, nv) sparse such that ``A_i = sum_l F[i, l] v_l v_l^T`` (the same
    matrices as ``Amats``); the Schur complement is then formed from them when that is cheaper.
    ``refine``: iterative-refinement steps per Newton direction (at most; they stop once the
    unreduced equations hold to 1e-3 of the tolerance).

    ``Amats`` (me, k, k) symmetric, ``Al`` (me, nl) sparse or dense, ``Af`` (me, nf) dense.
    """
    data = _SmallData(Amats, b, C, Al, cl, Af, cf, factors)
    st = _small_start(data) if start is None else _small_start_warm(data, start)
    best_err, best, best_it = np.inf, None, 0
    short_steps = False
    for it in range(1, max_iters + 1):
        meas = _small_measure(data, st)
        if verbose:
            print(f"[ip] {it:3d} {meas.pobj:+.9e} {meas.dobj:+.9e} gap {meas.gap:.1e} "
                  f"pinf {meas.pinf:.1e} dinf {meas.dinf:.1e} mu {meas.mu:.1e}")
        err = max(meas.gap, meas.pinf, meas.dinf)
        if not np.isfinite(err):
            break
        if err < best_err:
            best_err, best_it = err, it
            best = (st.X, st.xl, st.xf, st.y, meas.pobj, meas.dobj, it)
        if err <= tol:
            break
        if it - best_it >= 4 and best_err < 1e-5:  # accuracy lost near the boundary
            break
        try:
            short_steps = _small_step(data, st, meas, tol, short_steps, verbose, refine)
        except np.linalg.LinAlgError:
            break
    if best is None or best_err > accept * max(tol, 1e-12):
        return None
    return SmallSDPSolution(*best)


class _SmallData:
    """The problem's data with the row operator ``A(X, xl, xf) = <A_i, X> + Al xl + Af xf``, its
    adjoint, and the norms the residuals are measured against."""

    def __init__(self, Amats, b, C, Al, cl, Af, cf, factors=None) -> None:
        self.Amats, self.b, self.C, self.cl, self.Af, self.cf = Amats, b, C, cl, Af, cf
        self.Al = sp.csr_array(Al)
        self.AlT = sp.csr_array(self.Al.T)
        self.me, self.k, _ = Amats.shape
        self.V = self.F = None
        if factors is not None:
            V, F = np.asarray(factors[0], dtype=float), sp.csr_array(factors[1])
            if V.shape[1:] != (self.k,) or F.shape != (self.me, V.shape[0]):
                raise ValueError("factors: V must be (nv, k) and F (me, nv)")
            # the factored Schur complement costs ~2 nv^2 k, the dense one me^2 k^2 + 2 me k^3
            if 2 * V.shape[0] ** 2 < self.me ** 2 * self.k + 2 * self.me * self.k ** 2:
                self.V, self.F = V, F
        self.nl, self.nf = self.Al.shape[1], Af.shape[1]
        self.Aflat = Amats.reshape(self.me, self.k * self.k)
        self.nb = 1.0 + np.linalg.norm(b)
        self.nc = 1.0 + np.sqrt(np.linalg.norm(C) ** 2 + np.linalg.norm(cl) ** 2
                                + np.linalg.norm(cf) ** 2)

    def A_op(self, Xm, xlv, xfv):
        return self.Aflat @ Xm.ravel() + self.Al @ xlv + self.Af @ xfv

    def At_op(self, yv):
        return np.tensordot(yv, self.Amats, axes=1), self.AlT @ yv, self.Af.T @ yv


@dataclass
class _SmallState:
    """The iterate: ``X`` PSD, ``xl >= 0``, ``xf`` free; dual ``y``, ``Z`` PSD, ``sl >= 0``."""

    X: np.ndarray
    Z: np.ndarray
    xl: np.ndarray
    sl: np.ndarray
    xf: np.ndarray
    y: np.ndarray


def _small_start(d: _SmallData) -> _SmallState:
    """Infeasible start (SDPT3-like scaling): ``X = xi I``, ``Z = eta I``, ``xl = xi``,
    ``sl = eta``."""
    anorm = np.maximum(np.linalg.norm(d.Aflat, axis=1),
                       np.asarray(abs(d.Al).sum(axis=1)).ravel() if d.nl else 0.0)
    xi = max(10.0, np.sqrt(d.k), float(np.max((1.0 + np.abs(d.b)) / (1.0 + anorm), initial=1.0)))
    eta = max(10.0, np.sqrt(d.k), float(anorm.max(initial=1.0)), float(np.linalg.norm(d.C)))
    return _SmallState(xi * np.eye(d.k), eta * np.eye(d.k), np.full(d.nl, xi),
                       np.full(d.nl, eta), np.zeros(d.nf), np.zeros(d.me))


#: The warm start's shift into the interior (:func:`_small_start_warm`), relative to the size
#: of the guess: eigenvalues of ``X`` and ``Z`` (and entries of ``xl``, ``sl``) are raised to at
#: least this fraction of the largest.
WARM_SHIFT = 1e-2


def _small_start_warm(d: _SmallData, g: SmallStart, shift: float | None = None) -> _SmallState:
    """Warm start from a guess ``(X, xl, xf, y)``: ``Z = C - A^T y``, ``sl = cl - Al^T y``; the
    eigenvalues of ``X`` and ``Z`` and the entries of ``xl`` and ``sl`` are raised to at least
    ``shift`` times the largest *magnitude* of an eigenvalue / entry of their pair of blocks
    (``X, xl`` and ``Z, sl``), so the start is interior and its complementarity ``mu`` is about
    ``shift`` times the products of the sizes. The residuals this leaves (violated rows,
    directions with a negative reduced cost) are what the infeasible method removes.

    Magnitudes, not the largest positive value: a guess whose dual slack is zero at the optimum
    (``Z* = 0``, interior ``X*``) has ``Z`` of the size of its own error, partly negative; the
    largest positive eigenvalue then set a shift far below that error (start ``mu`` 2e-10
    against a dual residual 3e-2) and the iterates jammed at the boundary (11 steps against the
    cold start's 8; 1 of 600 random instances did not converge)."""
    shift = WARM_SHIFT if shift is None else shift
    if (g.X.shape != (d.k, d.k) or g.xl.shape != (d.nl,) or g.xf.shape != (d.nf,)
            or g.y.shape != (d.me,)):
        raise ValueError("warm start: X, xl, xf, y do not match the problem's dimensions")
    Z = d.C - np.tensordot(g.y, d.Amats, axes=1)
    sl = d.cl - d.AlT @ g.y
    lx, Vx = np.linalg.eigh(_sym(g.X))
    lz, Vz = np.linalg.eigh(_sym(Z))
    px = shift * max(np.abs(lx).max(initial=0.0), np.abs(g.xl).max(initial=0.0), 1e-8)
    pz = shift * max(np.abs(lz).max(initial=0.0), np.abs(sl).max(initial=0.0), 1e-8)
    return _SmallState((Vx * np.maximum(lx, px)) @ Vx.T, (Vz * np.maximum(lz, pz)) @ Vz.T,
                       np.maximum(g.xl, px), np.maximum(sl, pz), g.xf.astype(float),
                       g.y.astype(float))


@dataclass(frozen=True)
class _SmallMeasure:
    """Residuals (``rp``, ``Rd``, ``rdl``, ``rdf``), objectives, ``mu`` and relative errors."""

    rp: np.ndarray
    Rd: np.ndarray
    rdl: np.ndarray
    rdf: np.ndarray
    pobj: float
    dobj: float
    mu: float
    gap: float
    pinf: float
    dinf: float


def _small_measure(d: _SmallData, st: _SmallState) -> _SmallMeasure:
    rp = d.b - d.A_op(st.X, st.xl, st.xf)
    Ay_s, Ay_l, Ay_f = d.At_op(st.y)
    Rd = d.C - Ay_s - st.Z
    rdl = d.cl - Ay_l - st.sl
    rdf = d.cf - Ay_f
    pobj = float(np.vdot(d.C, st.X) + d.cl @ st.xl + d.cf @ st.xf)
    dobj = float(d.b @ st.y)
    mu = (float(np.vdot(st.X, st.Z)) + float(st.xl @ st.sl)) / (d.k + d.nl)
    gap = abs(pobj - dobj) / (1.0 + abs(pobj) + abs(dobj))
    pinf = np.linalg.norm(rp) / d.nb
    dinf = np.sqrt(np.linalg.norm(Rd) ** 2 + np.linalg.norm(rdl) ** 2
                   + np.linalg.norm(rdf) ** 2) / d.nc
    return _SmallMeasure(rp, Rd, rdl, rdf, pobj, dobj, mu, gap, pinf, dinf)


def _small_schur(d: _SmallData, st: _SmallState):
    """``(cho_factor(M), Z^-1)``: ``M_ij = <A_i, X A_j Z^-1> + Al diag(xl/sl) Al^T``; with
    ``X = R R^T`` and ``Z^-1 = S S^T``, ``M_ij = <S^T A_i R, S^T A_j R>``, one SYRK. Raises
    LinAlgError when ``X`` or ``Z`` is not positive definite."""
    Lz = np.linalg.cholesky(st.Z)
    S = sla.solve_triangular(Lz, np.eye(d.k), lower=True, trans="T")  # L^-T: Z^-1 = S S^T
    Zi = S @ S.T
    R = np.linalg.cholesky(st.X)
    if d.V is not None:
        # A_i = sum_l F_il v_l v_l^T: M_ij = sum_{l,l'} F_il F_jl' (v_l^T X v_l')(v_l'^T Z^-1 v_l)
        VR, VS = d.V @ R, d.V @ S
        H = (VR @ VR.T) * (VS @ VS.T)
        M = np.asarray(d.F @ np.asarray(d.F @ H).T)
    else:  # only the lower triangle is formed (and read by the Cholesky factorization)
        Bm = (S.T @ d.Amats @ R).reshape(d.me, d.k * d.k)
        M = blas.dsyrk(1.0, Bm.T, trans=1, lower=True)  # (Bm^T in Fortran order: no copy)
    if d.nl:
        M += (d.Al @ sp.diags_array(st.xl / st.sl) @ d.AlT).toarray()
    M[np.diag_indices(d.me)] += 1e-14 * max(1.0, float(np.abs(np.diag(M)).max()))
    return sla.cho_factor(M, lower=True, check_finite=False), Zi


def _small_step(d: _SmallData, st: _SmallState, meas: _SmallMeasure, tol: float,
                short_steps: bool, verbose: bool, refine: int = 3) -> bool:
    """One Mehrotra predictor-corrector step, in place; returns whether it was short. Raises
    LinAlgError when a factorization or a step length fails (the caller stops)."""
    k, nl, nu = d.k, d.nl, d.k + d.nl
    X, Z, xl, sl = st.X, st.Z, st.xl, st.sl
    cM, Zi = _small_schur(d, st)
    nt = _NewtonSystem(cM, d.Amats, d.Aflat, d.Al, d.AlT, d.Af, X, Zi, xl, sl, meas.Rd,
                       meas.rp, meas.rdl, meas.rdf, tol * d.nb, tol * d.nc, refine)
    # predictor
    dX, dxl, dxf, dy, dZ, dsl = nt.direction(0.0, np.zeros((k, k)), np.zeros(nl))
    ap = min(1.0, _max_step(X, dX), _max_step_lp(xl, dxl))
    ad = min(1.0, _max_step(Z, dZ), _max_step_lp(sl, dsl))
    mu_aff = (float(np.vdot(X + ap * dX, Z + ad * dZ))
              + float((xl + ap * dxl) @ (sl + ad * dsl))) / nu
    sigma = min(1.0, (mu_aff / meas.mu) ** 3)
    if short_steps:
        sigma = max(sigma, 0.5)  # recentre after blocked steps (else Mehrotra can stall)
    # corrector (Mehrotra second-order term)
    corr_s = dX @ dZ @ Zi
    corr_l = dxl * dsl
    dX, dxl, dxf, dy, dZ, dsl = nt.direction(sigma * meas.mu, corr_s, corr_l)
    ap, ad = _steps(X, xl, Z, sl, dX, dxl, dZ, dsl)
    if min(ap, ad) < 0.1:
        # the second-order term can block the step: a plain centring step instead
        alt = nt.direction(max(sigma, 0.5) * meas.mu, np.zeros((k, k)), np.zeros(nl))
        ap2, ad2 = _steps(X, xl, Z, sl, alt[0], alt[1], alt[4], alt[5])
        if min(ap2, ad2) > min(ap, ad):
            (dX, dxl, dxf, dy, dZ, dsl), ap, ad = alt, ap2, ad2
    if verbose:
        print(f"      steps {ap:.2e} {ad:.2e} sigma {sigma:.2f}")
    st.X = _sym(X + ap * dX)
    st.xl = xl + ap * dxl
    st.xf = st.xf + ap * dxf
    st.y = st.y + ad * dy
    st.Z = _sym(Z + ad * dZ)
    st.sl = sl + ad * dsl
    return min(ap, ad) < 0.2
