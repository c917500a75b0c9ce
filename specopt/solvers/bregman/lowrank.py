"""Identity-plus-low-rank ITML (Sec. 3.6 of Jain et al.): the reduction to a k x k linear
ITML with shifted bounds, and the lift of its solution. Input is validated by the front end
(:func:`specopt.solvers.bregman.itml_lowrank`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._status import SolverStatus
from ._data import BregmanResult


@dataclass(frozen=True)
class Reduction:
    """The k x k problem: rows ``Vp`` = U^T R^T v, shifted bounds ``b``, the constraints it
    keeps (``active``) and those that cannot hold in the family (``bad``, first five)."""

    Q: np.ndarray
    L0: np.ndarray
    Vp: np.ndarray
    b: np.ndarray
    active: np.ndarray
    bad: list[int]


def orthonormal_basis(U, d: int) -> np.ndarray:
    """Orthonormal Q spanning U (d x k, full column rank)."""
    U = np.asarray(U, dtype=float)
    if U.ndim != 2 or U.shape[0] != d or U.shape[1] > d or U.shape[1] < 1:
        raise ValueError(f"U must be d x k with 1 <= k <= d = {d}, got {U.shape}")
    Q, Rq = np.linalg.qr(U)
    if np.min(np.abs(np.diag(Rq))) < 1e-12 * np.max(np.abs(np.diag(Rq))):
        raise ValueError("U must have full column rank")
    return Q


def reduce(V, xi0, delta, nonzero, Q, W0) -> Reduction:
    """Shifted bounds b = xi0 - ||(I - U U^T) R^T v||^2; constraints with v' = 0 are constant
    (kept out, or ``bad`` when violated), dissimilar ones with b <= 0 always hold, similar ones
    with b <= 0 cannot hold."""
    d = V.shape[1]
    L0 = np.eye(d) if W0 is None else np.linalg.cholesky(np.asarray(W0, dtype=float))
    Vt = V @ L0  # rows R^T v
    Vp = Vt @ Q  # rows U^T R^T v
    resid = np.einsum("ij,ij->i", Vt, Vt) - np.einsum("ij,ij->i", Vp, Vp)
    b = xi0 - np.maximum(resid, 0.0)
    vnorm = np.sqrt(np.einsum("ij,ij->i", Vp, Vp))
    tiny = vnorm <= 1e-12 * max(float(np.sqrt(np.einsum("ij,ij->i", Vt, Vt)).max()), 1e-300)
    scale_b = 1e-12 * xi0
    # constant constraints (v' = 0) and those always met
    tiny &= nonzero
    viol_const = tiny & (delta * b < -scale_b)  # similar: resid > u; dissimilar: resid < l
    infeasible_sim = (~tiny) & (delta > 0) & (b <= scale_b)
    bad = np.flatnonzero(viol_const | infeasible_sim)[:5].tolist()
    active = nonzero & (~tiny) & ~((delta < 0) & (b <= scale_b))
    return Reduction(Q=Q, L0=L0, Vp=Vp, b=b, active=active, bad=bad)


def infeasible_result(m: int, xi0: np.ndarray, bad: list[int]) -> BregmanResult:
    """The answer when some constraint cannot hold for any W in the family."""
    return BregmanResult(
        status=SolverStatus.INFEASIBLE, form="lowrank", lam=np.zeros(m), xi=xi0.copy(),
        primal=math.inf, dual=math.inf, gap=math.inf, max_violation=math.inf, iterations=0,
        solve_time=0.0,
        extra={"reason": f"constraints {bad} cannot hold for any W in the low-rank family"},
    )


def lift(sub: BregmanResult, red: Reduction, xi0: np.ndarray) -> BregmanResult:
    """The k x k solution F as W = R (I + U (F - I) U^T) R^T, indexed like the caller's
    constraints (``sub`` is updated and returned)."""
    F = sub.W
    d = red.L0.shape[0]
    W = red.L0 @ (np.eye(d) + red.Q @ (F - np.eye(F.shape[0])) @ red.Q.T) @ red.L0.T
    lam = np.zeros(xi0.size)
    lam[red.active] = sub.lam
    sub.form = "lowrank"
    sub.lam = lam
    sub.xi = xi0.copy()
    sub.W = 0.5 * (W + W.T)
    sub.extra.update({"F": F, "U": red.Q, "shifted_bounds": red.b, "active": red.active})
    return sub
