"""CVXPY's dual values for the constraints the low-rank SDP route read (:func:`route_duals`)."""

from __future__ import annotations

import math
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..memory import physical_memory
from ._low_rank_read import LRData
from .analysis import affine_maps

#: The PSD dual matrix (and the centering duals, which need it) is formed densely and projected
#: onto the PSD cone by one dense ``eigh`` up to this side (measured at load 14: 0.27 s at
#: n = 500, 2.0 s at n = 1000, 12 s at n = 2000: more than the engine's own time on max-cut at
#: n = 2000). Above, the engine's certified lower bound ``lambda_min`` of the slack replaces the
#: projection: ``Z + max(0, -lambda_min) I`` is PSD (O(n^2), no ``eigh``).
PSD_DUAL_MAX_N = 1000
#: the dense ``n x n`` dual is formed only while a few copies of it (:data:`PSD_DUAL_COPIES`)
#: take at most this share of the physical memory (n = 10000: 0.8 GB per copy); above, ``None``
PSD_DUAL_MEMORY_FRACTION = 0.25
PSD_DUAL_COPIES = 4


def route_duals(d: LRData, y: np.ndarray, mu: float,
                lambda_min: float | None = None,
                eigh_max_n: int | None = None) -> dict[int, Any]:
    """CVXPY's dual values (``constraint.dual_value``) for the constraints the route read.

    CVXPY's convention: the Lagrangian ``f0 + nu^T (lhs - rhs) + lam (g) - <Z, K>`` for
    minimize, the duals of ``-f0`` for maximize. The engine's ``y`` gives the equality rows
    ``nu = -y`` (min) / ``y`` (max); its trace multiplier ``mu`` gives ``trace(K) <= t``
    (``mu / a`` for the spelling ``a tr K <= a t``); stationarity then gives the PSD dual
    ``Z = C - A^*(y) + mu I`` (min), ``A^*(y) - C + mu I`` (max). With centering the slack is PSD
    only on ``1^perp``: the centering duals move ``Z`` there: ``K 1 == 0`` (vector ``u``):
    ``Z + (u 1^T + 1 u^T) / 2 = P Z P``, ``P = I - 11^T / n``; ``sum(K) == 0`` (scalar ``w``):
    ``Z + w 11^T`` with the smallest ``w = 2^k ||Z||_F / n`` (``k < 10``) that leaves
    ``lambda_min`` within rounding of ``P Z P``'s (the scalar spelling's multiplier need not
    exist: ``K 1 = 0`` follows from ``1^T K 1 = 0`` only through ``K`` PSD). ``Z`` is finally
    projected onto the PSD cone (eigenvalues clipped at 0; at a certified point the clipped part
    is of the order of the certificate's tolerance; skipped, with its ``eigh``, when the engine's
    ``lambda_min`` of that slack is already >= 0).
    Constraints that repeat a centering condition get zero duals.
    """
    dual: dict[int, Any] = {}
    s = -1.0 if d.sense == "min" else 1.0
    y = np.asarray(y, dtype=float)
    for con, sl in d.rows:
        val = s * y[sl]
        dual[con.id] = val.reshape(con.shape, order="F") if con.shape else float(val[0])
    mu = float(mu or 0.0)
    if d.trace_con is not None:
        dual[d.trace_con[0].id] = mu / d.trace_con[1]
    n = d.n
    eigh_max_n = PSD_DUAL_MAX_N if eigh_max_n is None else eigh_max_n
    use_eigh = n <= eigh_max_n
    shift = None
    if not use_eigh:
        if lambda_min is None or not math.isfinite(lambda_min) or not dense_dual_fits(n):
            return dual
        shift = max(0.0, -float(lambda_min))
    Z = s * (d.A.pairs.adjoint(y).toarray() if d.A.m else np.zeros((n, n)))
    Z -= s * d.C.to_dense()
    Z[np.diag_indices(n)] += mu
    Z = 0.5 * (Z + Z.T)
    Z = _centering_duals(d, Z, dual, shift)
    if d.psd_con is not None:
        scalar_centering = any(c.size == 1 for c in d.centering_cons[:1])
        if shift is not None:
            if not scalar_centering:  # (the scalar spelling's Z carries the shift already)
                Z[np.diag_indices(n)] += shift
            dual[d.psd_con.id] = Z
        elif (lambda_min is not None and not scalar_centering
              and lambda_min >= 1e-8 * np.linalg.norm(Z)):
            # PSD as it is (on 1^perp and along 1 with centering); the margin covers the
            # rounding between the engine's scaled slack and this Z (a 0 could be -1e-9 ||Z||)
            dual[d.psd_con.id] = Z
        else:
            lam, V = np.linalg.eigh(0.5 * (Z + Z.T))
            dual[d.psd_con.id] = (V * np.maximum(lam, 0.0)) @ V.T
    return dual


def dense_dual_fits(n: int) -> bool:
    """Whether :data:`PSD_DUAL_COPIES` dense ``n x n`` float arrays take at most
    :data:`PSD_DUAL_MEMORY_FRACTION` of the physical memory (unknown memory: ``n <= 10000``)."""
    need = PSD_DUAL_COPIES * 8.0 * n * n
    mem = physical_memory()
    return need <= PSD_DUAL_MEMORY_FRACTION * mem if mem else n <= 10000


def _centering_duals(d: LRData, Z: np.ndarray, dual: dict[int, Any],
                     shift: float | None = None) -> np.ndarray:
    """The centering constraints' duals (into ``dual``) and the PSD slack ``Z`` they move onto
    ``1^perp`` (see :func:`route_duals`); repeated centering constraints get zeros. With
    ``shift`` (no ``eigh``: large ``n``) the scalar spelling's ``w`` is the closed form of
    :func:`_scalar_centering_shifted`, and its ``Z`` comes back shifted."""
    n = d.n
    for k, con in enumerate(d.centering_cons):
        c = _centering_scale(con, d.K)
        if k > 0 or c == 0:
            dual[con.id] = np.zeros(con.shape) if con.shape else 0.0
            continue
        if con.size == 1 and shift is not None:
            Z, w = _scalar_centering_shifted(Z, shift)
            dual[con.id] = w / c
        elif con.size == 1:  # sum(K) == 0: Z + c w 11^T
            Q = complement_basis(n)
            target = float(np.linalg.eigvalsh(Q.T @ Z @ Q)[0]) if n > 1 else 0.0
            w = max(float(np.linalg.norm(Z)), 1e-300) / n
            for _ in range(10):  # no finite w may exist (degenerate): then the projection
                if float(np.linalg.eigvalsh(Z + w * np.ones((n, n)))[0]) >= (
                        target - 1e-10 * max(1.0, abs(target))):
                    break
                w *= 2.0
            Z = Z + w * np.ones((n, n))
            dual[con.id] = w / c
        else:  # K @ 1 == 0 (or 1 @ K): Z + c (u 1^T + 1 u^T) / 2 = P Z P
            z1 = Z.sum(axis=1)
            u = -2.0 * z1 / n + (float(z1.sum()) / n**2)
            # P Z P = Z + (u 1^T + 1 u^T) / 2 (O(n^2); P = I - 11^T / n)
            Z = Z + 0.5 * (u[:, None] + u[None, :])
            dual[con.id] = (u / c).reshape(con.shape)
    return Z


def _scalar_centering_shifted(Z: np.ndarray, shift: float) -> tuple[np.ndarray, float]:
    """``(Z + (shift + eta) I + w 11^T, w)``, PSD, for ``Z`` whose smallest eigenvalue on
    ``1^perp`` is at least ``-shift`` (O(n^2)).

    With ``Z' = Z + (shift + eta) I`` (``Z' >= eta I`` on ``1^perp``), ``x = u + a 1/sqrt(n)``
    (``u`` orthogonal to 1): ``x^T (Z' + w 11^T) x >= eta |u|^2 - 2 |a| |u| |g| + a^2 (c + w n)``
    with ``g = P Z' 1 / sqrt(n)``, ``c = 1^T Z' 1 / n``, nonnegative once
    ``(c + w n) eta >= |g|^2``: ``w = max(0, (|g|^2 / eta - c) / n)``. ``eta`` is ``1e-9`` of the
    largest diagonal magnitude (or ``shift`` when larger): the multiplier of the scalar spelling
    need not exist, and a large ``w`` says so."""
    n = Z.shape[0]
    eta = max(shift, 1e-9 * max(float(np.max(np.abs(np.diag(Z)))), 1e-300))
    Zs = Z.copy()
    Zs[np.diag_indices(n)] += shift + eta
    z1 = Zs.sum(axis=1)
    c = float(z1.sum()) / n
    g = (z1 - c) / math.sqrt(n)
    w = max(0.0, (float(g @ g) / eta - c) / n)
    Zs += w
    return Zs, w


def _centering_scale(con: cp.Constraint, K: cp.Variable) -> float:
    """``c`` of a centering constraint ``c (K 1) == 0`` / ``c sum(K) == 0`` (its one
    coefficient, see ``ConstraintInfo.is_centering``)."""
    expr = con.args[0] - con.args[1]
    coef = sp.coo_array(affine_maps([expr], [K])[0].coef(K))
    return float(coef.data[0]) if coef.nnz else 0.0


def complement_basis(n: int) -> np.ndarray:
    """Orthonormal basis (n x (n - 1)) of ``1^perp``: the Householder reflection of ``e_1`` onto
    ``1 / sqrt(n)``, without its first column."""
    v = np.full(n, 1.0 / math.sqrt(n))
    v[0] -= 1.0
    nv = float(v @ v)
    H = np.eye(n) - (2.0 / nv) * np.outer(v, v) if nv > 0 else np.eye(n)
    return H[:, 1:]
