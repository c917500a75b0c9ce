r"""The SDE on the face exposed by the k-NN graph's rigid cliques, as a CVXPY problem.

The SDE set ``{K PSD, K 1 = 0, K_ii + K_jj - 2 K_ij = d2_ij on the edges}`` has no interior when
the graph has cliques whose points are realized in fewer dimensions than the clique has points
(5-cliques of a k-NN graph of 3-D data): every feasible ``K`` lies on the face
``{V Z V^T : Z PSD}`` exposed by the cliques (:func:`specopt.solvers.sdp.facial.clique_face`,
Krislock & Wolkowicz 2010). On that face the problem

    max tr Z   s.t.   (v_i - v_j)^T Z (v_i - v_j) = d2_ij   (independent edges),   Z PSD

(``v_i`` the rows of ``V``; ``tr V Z V^T = tr Z``, ``V^T 1 = 0``) has a PSD block of side
``dim`` instead of ``n`` and no rigid clique left. Edge rows that are linear combinations of the
others on the face (within each clique most are) are dropped: they hold whenever the kept ones do
(up to the rank test's ``1e-9``), and an interior point's KKT system would be singular with them.

A point of the original set that is off this face by ``<W, K> = omega`` satisfies the rows only
to ``O(omega)``: a conic solver's tolerance lets it leave the face and gain value (S-curve N = 50:
Clarabel on the set as written returned ``tr K`` 0.6 % above the face's optimum at
``<W, K> = 1.3e-5``). :func:`face_violation` measures it. No solver here; CVXPY only builds the
problem.
"""

from __future__ import annotations

from typing import Any

import cvxpy as cp
import numpy as np
import scipy.linalg as sla

__all__ = ["face_reduced_sde", "face_violation", "independent_face_rows"]

#: Rows whose face coefficients are within this relative tolerance of the span of the others
#: (pivoted QR) are dropped: ``clique_face``'s own rank threshold.
ROW_RANK_TOL = 1e-9


def _face_row_matrix(V: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Row ``e`` of the result is ``vec((v_i - v_j)(v_i - v_j)^T)`` (row-major ``r x r``), so
    that the edge row reads ``M @ vec(Z) = d2`` on the face."""
    D = V[edges[:, 0]] - V[edges[:, 1]]
    return (D[:, :, None] * D[:, None, :]).reshape(len(edges), -1)


def independent_face_rows(V: np.ndarray, edges: np.ndarray, tol: float = ROW_RANK_TOL
                          ) -> np.ndarray:
    """Indices (sorted) of a maximal set of edges whose rows are linearly independent on the face
    ``K = V Z V^T`` (pivoted QR of the rows' coefficients on the symmetric ``Z``)."""
    M = _face_row_matrix(V, edges)
    _, R, piv = sla.qr(M.T, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.sum(diag > tol * diag[0])) if diag.size and diag[0] > 0 else 0
    return np.sort(piv[:rank])


def face_reduced_sde(V: np.ndarray, edges: np.ndarray, d2: np.ndarray
                     ) -> tuple[cp.Problem, cp.Variable, np.ndarray]:
    """``max tr Z`` over the face (module docstring) as a CVXPY problem; also the variable ``Z``
    and the kept edge indices. ``K = V Z.value V^T`` after a solve."""
    keep = independent_face_rows(V, edges)
    r = V.shape[1]
    Z = cp.Variable((r, r), PSD=True, name="Z")
    M = _face_row_matrix(V, edges[keep])
    prob = cp.Problem(cp.Maximize(cp.trace(Z)), [M @ cp.vec(Z, order="C") == d2[keep]])
    return prob, Z, keep


def face_violation(face: Any, K: np.ndarray) -> float:
    """``<W, K>`` for the face's exposing matrix ``W`` (with ``1 1^T / n`` when centered): how far
    a PSD ``K`` is off the face, relative to ``tr K`` (0 on the face)."""
    val = float(face.W.multiply(K).sum())
    if face.centered:
        val += float(K.sum()) / face.n
    return val / max(float(np.trace(K)), np.finfo(float).tiny)
