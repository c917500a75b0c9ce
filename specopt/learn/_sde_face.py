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
the face's optimum at ``<W, K> / tr K = 1e-7``). :func:`face_violation` measures it.
:class:`FaceLeg` is the estimator's Clarabel leg on the face (conic route, with retries).
"""

from __future__ import annotations

import time
from typing import Any

import cvxpy as cp
import numpy as np

from ..reductions._iterated_steps import _CLARABEL_POLISH, _CLARABEL_POLISH_REG
from ..solvers.sdp import SparseRows
from ..solvers.sdp.facial import clique_face, face_basis, face_row_matrix, independent_rows
from ._base import solve_certified
from ._low_rank import LOW_RANK_TOL

__all__ = ["SDE_FACE_RETRIES", "FaceLeg", "face_reduced_sde", "face_violation"]

#: Clarabel settings the raced SDE's face leg retries with after a failure (``_face_leg``):
#: the iterated route's for its conic steps, its polish tolerances, then a larger static
#: regularization. Measured (S-curve N = 60, face 32 / 36, Clarabel failed at its defaults in
#: 0.7 / 0.9 s): seed 1 `optimal` at the polish tolerances in 0.65 s (rows 5.6e-6); seed 2
#: failed there and solved with the regularization in 1.6 s (rows 7.5e-5: `optimal_inaccurate`,
#: against the engine's 9.3e-4). The 2-turn spiral N = 60 (8.6 s to fail) gets no retry: its
#: budget (Clarabel's typical 7.5 s) is spent.
SDE_FACE_RETRIES = (_CLARABEL_POLISH, _CLARABEL_POLISH_REG)


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


class FaceLeg:
    """The raced ``SemidefiniteEmbedding``'s Clarabel leg on the face (``_raced_fit``): the
    face of the estimator's k-NN graph, the SDE on it, and the retries within the race's
    budget. A mixin of the estimator (its ``preserve`` and ``verbose``)."""

    def _face_leg(self, A, C, face, opts: dict, deadline: float, leg: dict) -> Any:
        """Clarabel on the face (``_face_conic_fit``), and when it fails, again with the
        settings of ``SDE_FACE_RETRIES`` while the race is within its budget (``deadline``,
        the engine leg's start plus Clarabel's typical time): a retry never starts after it,
        and runs with the time left as its limit. ``leg["tries"]`` counts the solves; the last
        ``SolverError`` is raised when none succeeds."""
        leg["tries"] = 0
        for extra in ({}, *SDE_FACE_RETRIES):
            left = deadline - time.perf_counter()
            if leg["tries"] and left <= 0:
                break
            run = {**opts, **extra}
            if leg["tries"]:
                run["time_limit"] = min(left, opts.get("time_limit", left))
            leg["tries"] += 1
            try:
                return self._face_conic_fit(A, C, face, "CLARABEL", run)
            except cp.error.SolverError as err:
                last = err
        raise last

    def _rigid_face(self, A, C):
        """The face exposed by the k-NN graph's rigid cliques
        (:func:`specopt.solvers.sdp.facial.clique_face`), or None: no clique reduces it, or
        ``preserve`` adds rows the face does not know. Used however little it reduces: a
        2-turn planar spiral (one flat 5-clique, face 47 of 50 / 57 of 60) fails on Clarabel
        either way, in 3.6 / 8.8 s on the face against 3.8 / 12.8 s on the set as written."""
        if self.preserve != "edges":
            return None
        from . import embedding as emb  # (it imports this module)

        edges = np.argwhere(np.triu(C, 1))
        face = clique_face(A.shape[0], edges, emb._sq_dist(A)[edges[:, 0], edges[:, 1]],
                           centered=True)
        return face if face is not None and 0 < face.dim < A.shape[0] - 1 else None

    def _face_conic_fit(self, A, C, face, solver: str, opts: dict) -> Any:
        """The SDE on the rigid cliques' face (:func:`face_reduced_sde`) on a conic
        solver: every feasible ``K`` lies on it, and the PSD block shrinks from ``n`` to
        ``face.dim`` (S-curve N = 50: 29; Clarabel 0.4 s against 3.4 s on the set as written).
        ``optimal`` also needs every edge row (the dropped ones too) within
        ``SDE_ROW_TOL_FACTOR * LOW_RANK_TOL`` relative. The certificate's ``extra["face"]``:
        the face's side, the kept rows, the row residual over all edges, ``<W, K> / tr K``."""
        from . import embedding as emb  # (it imports this module; its helpers and row factor)

        edges = np.argwhere(np.triu(C, 1))
        d2 = emb._sq_dist(A)[edges[:, 0], edges[:, 1]]
        prob, Z, keep, B = face_reduced_sde(face.V, edges, d2)
        # retry=False: a Clarabel answer the gate rejects is this leg's answer (downgraded);
        # the SCS retry on these sets ran 100000 iterations (S-curve N = 50: 17 s)
        cert = solve_certified(prob, "SDE solve on the rigid cliques' face failed with status "
                               "{}", route="conic", solver=solver, verbose=bool(self.verbose),
                               retry=False, **opts)
        Zv = np.asarray(Z.value)
        w, U = np.linalg.eigh(0.5 * (Zv + Zv.T))  # K = Y Y^T with Y = B U sqrt(w+): PSD exactly
        Y = B @ (U * np.sqrt(np.maximum(w, 0.0)))
        K = Y @ Y.T
        rows = emb.edge_row_residual(Y, edges, d2)
        cert.extra["face"] = {"dim": face.dim, "cliques": face.cliques_used,
                              "rows_kept": int(len(keep)), "rows": int(len(edges)),
                              "row_residual": rows, "face_violation": face_violation(face, K)}
        if cert.status == cp.OPTIMAL and rows > emb.SDE_ROW_TOL_FACTOR * LOW_RANK_TOL:
            cert.status = cp.OPTIMAL_INACCURATE
            cert.extra["downgraded"] = (f"row-wise residual {rows:.1e} over all edges above "
                                        f"{emb.SDE_ROW_TOL_FACTOR * LOW_RANK_TOL:.0e}")
        return emb._KernelFit(K, 1, cert)
