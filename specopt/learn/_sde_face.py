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

The face is written in an echelon basis ``B = V V[P]^{-1}`` (``facial.face_basis``; ``P`` the
``dim`` rows a pivoted QR of ``V^T`` picks, so ``B[P] = I``) rather than the orthonormal ``V``:
the same face, ``K = B Z B^T`` and ``tr K = <B^T B, Z>``, but a row touches only the entries of
``Z`` that its two points' rows of ``B`` reach. In ``V`` every row is dense in ``Z``, and
Clarabel's iterations cost more than on the set as written. Measured (Clarabel, conic route,
same values): swiss roll N = 60 seed 2, face 45: 334k -> 29k nonzeros, 6.1 -> 2.2 s; seed 0,
face 42: 2.9 -> 1.2 s; S-curve N = 50, face 29: 0.72 -> 0.40 s; ``cond(B)`` 3.5-4.1.

A point of the original set that is off this face by ``<W, K> = omega`` satisfies the rows only
to ``O(omega)``: a conic solver's tolerance lets it leave the face and gain value (S-curve seed 1,
N = 50, benchmarks/sde_learner.py: Clarabel on the set as written returned ``tr K`` 3.6 % above
the face's optimum at ``<W, K> / tr K = 1e-7``). :func:`face_violation` measures it. No solver
here; CVXPY only builds the problem.
"""

from __future__ import annotations

from typing import Any

import cvxpy as cp
import numpy as np

from ..solvers.sdp import SparseRows
from ..solvers.sdp.facial import face_basis, face_row_matrix, independent_rows

__all__ = ["face_reduced_sde", "face_violation"]

def face_reduced_sde(V: np.ndarray, edges: np.ndarray, d2: np.ndarray
                     ) -> tuple[cp.Problem, cp.Variable, np.ndarray, np.ndarray]:
    """``max tr K`` over the face spanned by ``V`` (module docstring) as a CVXPY problem in the
    echelon basis ``B`` (:func:`~specopt.solvers.sdp.facial.face_basis`); also the variable
    ``Z``, the kept edge indices and ``B``. ``K = B Z.value B^T`` after a solve."""
    B = face_basis(V)
    M = face_row_matrix(SparseRows.from_pairs(edges, V.shape[0]), B)
    keep = independent_rows(M)
    r = B.shape[1]
    Z = cp.Variable((r, r), PSD=True, name="Z")
    prob = cp.Problem(cp.Maximize(cp.trace(B.T @ B @ Z)),
                      [M[keep] @ cp.vec(Z, order="C") == d2[keep]])
    return prob, Z, keep, B


def face_violation(face: Any, K: np.ndarray) -> float:
    """``<W, K>`` for the face's exposing matrix ``W`` (with ``1 1^T / n`` when centered): how far
    a PSD ``K`` is off the face, relative to ``tr K`` (0 on the face)."""
    val = float(face.W.multiply(K).sum())
    if face.centered:
        val += float(K.sum()) / face.n
    return val / max(float(np.trace(K)), np.finfo(float).tiny)
