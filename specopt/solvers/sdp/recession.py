"""Unboundedness: a recession direction of the SDP's feasible set along which the objective
improves without bound (a connected component of the rows' support graph). No CVXPY here."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ._data import SparseRows, SymOp

__all__ = ["feasibility_trace_cap", "recession_ray"]


def recession_ray(C: SymOp, A: SparseRows, centered: bool, sense: str,
                  max_components: int = 64) -> np.ndarray | None:
    """A direction ``v`` with ``K + s v v^T`` feasible for all ``s >= 0`` whenever ``K`` is,
    along which the objective improves without bound, or None.

    Candidates: the indicator of a connected component of the rows' support graph (edges
    ``(i, j)`` of every row entry), minus its mean when centering. Accepted when
    ``A(v v^T) = 0`` (to rounding), ``v^T 1 = 0`` when centered, and ``<C, v v^T>`` strictly
    improves the objective (``> 0`` when maximizing, ``< 0`` when minimizing). Then the problem is
    unbounded as soon as it is feasible (the SDE of a disconnected neighbour graph: the
    components drift apart).
    """
    n = A.n
    if A.rows.size == 0:
        return None
    off = A.ii != A.jj
    G = sp.coo_array((np.ones(int(off.sum())), (A.ii[off], A.jj[off])), shape=(n, n))
    ncomp, lab = connected_components(G, directed=False)
    if ncomp < 2:
        return None
    sgn = 1.0 if sense == "max" else -1.0
    cn = C.fro_norm()
    an = float(np.max(np.abs(A.vals)))
    for c in range(min(ncomp, max_components)):
        v = (lab == c).astype(float)
        if centered:
            v -= v.mean()
        nv2 = float(v @ v)
        if nv2 == 0:
            continue
        if np.max(np.abs(A.pairs.yyt(np.ascontiguousarray(v[:, None]))),
                  initial=0.0) > 1e-12 * an * nv2:
            continue
        gain = sgn * float(v @ C.matmat(v[:, None])[:, 0])
        if gain > 1e-9 * max(cn, 1e-300) * nv2:
            return v / math.sqrt(nv2)
    return None


def feasibility_trace_cap(A: SparseRows, b: np.ndarray) -> float:
    """``T = n (1 + sum_r sqrt(|b_r| / ||A_r||))^2``: with ``tr K <= T`` added, the problem keeps
    a feasible point if it has one (enough for distance rows: every ``K_ii`` is at most a squared
    path length), so a bounded solve decides feasibility when a recession ray exists."""
    norms = A.row_norms()
    norms[norms == 0] = 1.0
    return A.n * (1.0 + float(np.sum(np.sqrt(np.abs(b) / norms)))) ** 2
