"""A bound on a conic program's optimum from a conic solver's dual point, checked.

CVXPY hands SCS and Clarabel the same canonical form

    minimize  1/2 x^T P x + c^T x + d   subject to  A x + s = b,  s in K,

(cones in the order zero, nonnegative, second-order, PSD in svec form, exponential, power), whose
Lagrange dual function at ``y in K*`` (the dual cone) is

    g(y) = d - b^T y + min_x ( 1/2 x^T P x + (c + A^T y)^T x ).

Weak duality (``g(y) <= p*`` for every ``y in K*``) makes ``g`` a proven lower bound, but only at a
point that *is* dual feasible: the solver's ``dobj`` is ``g`` evaluated as if its ``y`` were, and
an SCS run at loose tolerances leaves ``y`` outside ``K*`` and ``A^T y + c + P x`` away from zero
by ~``eps``; its ``dobj`` can then lie above the optimum (issue 23: 0.2018000 against Clarabel's
0.2017853 on a small spectraplex problem). So the bound is recomputed:

1. ``y`` is projected onto ``K*`` (free on the zero cone; clipped on the nonnegative orthant;
   the second-order cone's projection; the PSD blocks' negative eigenvalues dropped; on an
   exponential dual cone ``(u, v, w)`` the smallest change of ``w``, or of ``u`` to 0, that puts
   it inside). Power cones are not handled: no bound.
2. With ``x`` the solver's primal point, the residual ``e = c + A^T y + P x`` of the projected
   ``y`` is reduced by moving the free part of ``y`` (the zero cone's duals, which stay in
   ``K*`` whatever they are) by the least-squares solution of ``A_z^T delta = -e``, then
   measured. For ``x' = x + delta``,
   ``1/2 x'^T P x' + (c + A^T y)^T x' >= -1/2 x^T P x + e^T x'``, so

       g(y) >= d - b^T y - 1/2 x^T P x + min over the feasible x' of e^T x',

   and ``e^T x'`` at the optimum is estimated by ``-|e|^T |x|`` (exact when ``e = 0``; otherwise
   a measured, not a proven, correction: its error ``|e|^T |x' - x|`` is of second order in the
   solver's accuracy; before step 2's least-squares step it reached 8.5e-7 relative on 1 of 137
   small spectraplex problems solved by SCS at eps 1e-2).
3. The bound is reported only while the relative residual ``max|e| / (1 + max|c|)`` is at most
   :data:`DUAL_RESIDUAL_TOL` (the gate's primal feasibility tolerance, the same measure as SCS's
   and Clarabel's own relative residuals); otherwise it is *unproven* and the certificate says
   so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

#: Largest relative dual residual (after projection onto the dual cone) of a reported bound.
DUAL_RESIDUAL_TOL = 1e-4


@dataclass
class DualBound:
    """``bound`` (canonical minimization sense, offset included) or None with ``reason``;
    ``residual``: the projected dual's relative residual; ``shift``: how far the projection moved
    the solver's ``y`` (max-norm), a measure of its dual-cone violation."""

    bound: float | None
    residual: float | None
    shift: float | None
    reason: str = ""


def _svec_index(n: int, upper: bool) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of each svec entry: column-major lower triangle (SCS) or column-major
    upper triangle (Clarabel), as CVXPY's ``psd_format_mat`` lays them out."""
    i, j = np.triu_indices(n) if upper else np.tril_indices(n)
    order = np.lexsort((i, j))  # column-major: by column j, then by row i
    return i[order], j[order]


def project_svec_psd(v: np.ndarray, n: int, upper: bool) -> np.ndarray:
    """Projection of a scaled svec (off-diagonals times sqrt 2) onto the PSD cone."""
    i, j = _svec_index(n, upper)
    off = i != j
    M = np.zeros((n, n))
    vals = np.where(off, v / math.sqrt(2.0), v)
    M[i, j] = vals
    M[j, i] = vals
    w, U = np.linalg.eigh(M)
    Mp = (U * np.maximum(w, 0.0)) @ U.T
    out = Mp[i, j]
    out[off] *= math.sqrt(2.0)
    return out


def project_soc(v: np.ndarray) -> np.ndarray:
    """Projection onto ``{(t, z): |z| <= t}`` (self-dual)."""
    t, z = v[0], v[1:]
    nz = float(np.linalg.norm(z))
    if nz <= t:
        return v.copy()
    if nz <= -t:
        return np.zeros_like(v)
    a = 0.5 * (t + nz)
    return np.concatenate([[a], a * z / nz])


def correct_exp_dual(v: np.ndarray) -> np.ndarray:
    """A point of the dual exponential cone ``{(u, v, w): u < 0, -u e^(v/u) <= e w}`` closure
    near ``v``: raise ``w`` (u < 0), or set ``u`` to 0 and clip ``v, w`` at 0 (u >= 0, or the
    needed ``w`` beyond floating point)."""
    u, vv, w = (float(x) for x in v)
    if u < 0 and vv / u - 1.0 < 700.0:  # else e^(v/u) overflows: the u = 0 face instead
        return np.array([u, vv, max(w, -u * math.exp(vv / u - 1.0))])
    return np.array([0.0, max(vv, 0.0), max(w, 0.0)])


def project_dual(y: np.ndarray, dims: Any, upper_triangle: bool) -> np.ndarray | None:
    """``y`` moved into ``K*`` block by block (None when a cone is not handled)."""
    if getattr(dims, "p3d", None) or getattr(dims, "pnd", None):
        return None
    y = np.array(y, dtype=float)
    k = int(dims.zero)
    if dims.nonneg:
        y[k:k + dims.nonneg] = np.maximum(y[k:k + dims.nonneg], 0.0)
        k += int(dims.nonneg)
    for q in dims.soc:
        y[k:k + q] = project_soc(y[k:k + q])
        k += int(q)
    for n in dims.psd:
        m = n * (n + 1) // 2
        y[k:k + m] = project_svec_psd(y[k:k + m], int(n), upper_triangle)
        k += m
    for _ in range(int(dims.exp)):
        y[k:k + 3] = correct_exp_dual(y[k:k + 3])
        k += 3
    if k != y.size:
        return None  # a cone this module does not know
    return y


def _absorb_in_free_duals(A: sp.csc_array, y: np.ndarray, e: np.ndarray, n_zero: int,
                          ) -> np.ndarray:
    """``y`` with its free part (the zero cone's duals, any sign) moved by the least-squares
    ``delta`` of ``A_z^T delta = -e``: the residual shrinks to its part outside the range of
    ``A_z^T`` and ``y`` stays in ``K*``."""
    if n_zero == 0 or not np.any(e):
        return y
    from scipy.sparse.linalg import lsqr

    Az_T = sp.csr_array(A[:n_zero].T)
    delta = lsqr(Az_T, -e, atol=1e-14, btol=1e-14, iter_lim=500)[0]
    out = y.copy()
    out[:n_zero] += delta
    return out


def dual_bound(
    A: Any, b: np.ndarray, c: np.ndarray, P: Any, offset: float, dims: Any,
    x: np.ndarray, y: np.ndarray, upper_triangle: bool,
) -> DualBound:
    """The checked lower bound of the module docstring (canonical minimization sense)."""
    if x is None or y is None:
        return DualBound(None, None, None, "the solver returned no primal/dual point")
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return DualBound(None, None, None, "the solver's point is not finite")
    yp = project_dual(y, dims, upper_triangle)
    if yp is None:
        return DualBound(None, None, None, "the conic form has cones (power cones) whose dual "
                         "this check does not handle")
    A = sp.csc_array(A)
    b = np.asarray(b, dtype=float).ravel()
    Px = np.zeros_like(x) if P is None else np.asarray(sp.csc_array(P) @ x).ravel()
    e = np.asarray(c, dtype=float).ravel() + np.asarray(A.T @ yp).ravel() + Px
    yp = _absorb_in_free_duals(A, yp, e, int(dims.zero))
    e = np.asarray(c, dtype=float).ravel() + np.asarray(A.T @ yp).ravel() + Px
    residual = float(np.max(np.abs(e), initial=0.0)) / (
        1.0 + float(np.max(np.abs(c), initial=0.0)))
    shift = float(np.max(np.abs(yp - y), initial=0.0))
    bound = (float(offset) - float(np.dot(b, yp)) - 0.5 * float(np.dot(x, Px))
             - float(np.dot(np.abs(e), np.abs(x))))
    if not math.isfinite(bound):
        return DualBound(None, residual, shift, "the projected dual gives no finite bound")
    if residual > DUAL_RESIDUAL_TOL:
        return DualBound(None, residual, shift,
                         f"the solver's dual point is not dual feasible: relative residual "
                         f"{residual:.2g} after projection onto the dual cone (> "
                         f"{DUAL_RESIDUAL_TOL:g})")
    return DualBound(bound, residual, shift)
