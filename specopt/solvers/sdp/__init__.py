"""One SDP engine for single-PSD-matrix SDPs with sparse rows (SDE/MVU, max-cut, theta,
completion, MVE steps, SDPLIB). No CVXPY here.

    min/max <C, K>  s.t.  A(K) = b,  K PSD   [1^T K 1 = 0]   [tr K <= t]

Modules (imports point down only: front end -> methods -> ``_data`` / ``_certificate``):

- ``_solve``: the front end :func:`solve_sdp` (= :func:`solve_low_rank_sdp`): validation, the
  choice of method by size, the result in the user's units;
- ``ip_sparse``: sparse-row interior point (small ``n``), with ``_schur_form`` (the rows' rank-one
  factors and the Schur complement kernel) and ``_schur_solve`` (its mixed-precision solves);
  ``ip_small``: dense interior point for small block SDPs (the matrix-generation masters);
- ``bm``: Burer-Monteiro augmented Lagrangian with rank growth (large ``n``);
- ``bm_diag``: Burer-Monteiro on a product of spheres when the rows fix the diagonal (max-cut):
  mixing sweeps, Riemannian trust-region Newton, deflated Lanczos certificate (every ``n`` from
  ``DIAG_MIN_N``);
- ``mm``: majorize-minimize on the factored iterate (linear-spectral costs, MVE);
- ``facial``: facial reduction by fixed-distance cliques; ``recession``: unboundedness rays;
- ``_certificate``: the dual bound from the smallest eigenvalue of the dual slack, residuals;
- ``_data``: rows, objective operator, result type, the problem in solver units;
  ``_kernels``: compiled ``A(YY^T)``, ``A^*(w) X``.
"""

from __future__ import annotations

from ._certificate import SDPCertificate
from ._data import (
    INACCURATE,
    OPTIMAL,
    UNBOUNDED,
    LowRankSDPResult,
    SparseRows,
    SymOp,
    distance_rows,
    graph_trace_bound,
)
from ._solve import IP_MAX_M, IP_MAX_N, mm_step_method, solve_low_rank_sdp
from .facial import FaceReduction, clique_face, face_correction, maximal_cliques
from .ip_small import SmallSDPSolution, solve_small_sdp
from .ip_sparse import SparseIPResult, solve_sparse_sdp_ip
from .mm import LowRankMMResult, linear_spectral_factored, low_rank_mm, top_eig_factor
from .recession import recession_ray

#: the engine's front end
solve_sdp = solve_low_rank_sdp
SDPResult = LowRankSDPResult

__all__ = [
    "INACCURATE",
    "IP_MAX_M",
    "IP_MAX_N",
    "OPTIMAL",
    "UNBOUNDED",
    "FaceReduction",
    "LowRankMMResult",
    "LowRankSDPResult",
    "SDPCertificate",
    "SDPResult",
    "SmallSDPSolution",
    "SparseIPResult",
    "SparseRows",
    "SymOp",
    "clique_face",
    "distance_rows",
    "face_correction",
    "graph_trace_bound",
    "linear_spectral_factored",
    "low_rank_mm",
    "maximal_cliques",
    "mm_step_method",
    "recession_ray",
    "solve_low_rank_sdp",
    "solve_sdp",
    "solve_small_sdp",
    "solve_sparse_sdp_ip",
    "top_eig_factor",
]
