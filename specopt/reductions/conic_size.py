"""How large the conic form of a problem will be, and the conic backend chosen by it.

MOSEK is picked when it has a working licence. Otherwise Clarabel (interior point, ~1e-8
accuracy, ~15-30 factorizations) or SCS (first order, one factorization then cheap iterations,
whose iteration count grows with the problem's conditioning). Clarabel factors a KKT system with
one dense block of dimension ``n_i (n_i + 1) / 2`` per PSD cone of side ``n_i``; the blocks factor
one after another and the rows that couple densely to a PSD matrix (``row_quad_forms`` rows) join
them, so its cost is set by

    b = max_i n_i (n_i + 1) / 2 + dense rows        (:func:`largest_kkt_block`)

(~30 b^3 / 3 flops), not by the sum over blocks: SDPLIB's truss8 has 33 blocks of 19 (sum 6270,
largest 190), control2 blocks 20 and 10 with 65 dense rows (sum 330, largest 275). The rule:
Clarabel while ``b <= CLARABEL_MAX_DENSE_DIM = 300``, SCS above.

Measured (``benchmarks/conic_backend.py``, which joins ``benchmarks/sdplib.py``'s runs with the
rule; Clarabel defaults, SCS eps 1e-5, 40 s cap, on 2 cores at load 15-19, so times are
inflated several-fold; ``b`` in brackets):

* Clarabel's side. SDPLIB control1 [75]: Clarabel 0.65 s, 1.1e-6 off (its flag
  ``optimal_inaccurate``, the gate's checks pass), SCS > 40 s. control2 [275]: Clarabel
  1.3 s, 8.0e-6 off; SCS > 40 s (34 % off after 41 s in the issue). hinf10-15 [56-262]: Clarabel
  0.25-1.3 s, SCS 14 s to > 40 s and further off. truss5-7 [55, 6, 3; 34-151 blocks]: Clarabel
  1.8-2.8 s correct, SCS 7 s to > 40 s and outside the published precision. lambda_sum_largest of
  three matrices, n = 10 [55]: Clarabel 0.61 s, SCS 1.19 s; n = 20 [210]: Clarabel 0.85 s, SCS
  0.43-0.73 s (in one process; 4.9 / 1.4 s in the loaded run), SCS 3e-6 off. PSDBoost D = 10,
  |S| = 200 [255]: Clarabel 0.47 s, SCS 0.34 s.
* SCS's side. lambda_sum_largest n = 30 [465]: Clarabel 19 s, SCS 2.6 s. PSDBoost D = 16,
  |S| = 320 [456]: Clarabel 1.65 s ``optimal_inaccurate``, SCS 0.94 s; D = 24, |S| = 480 [780]:
  Clarabel 10.9 s inaccurate, SCS 7.6 s. SDPLIB control3-5 [600-1626]: Clarabel fails, SCS
  > 40 s. Earlier (``shared/reference/cvxpy-extension-notes.md``,
  section E): lambda_sum_largest n = 50 [1275]: SCS 0.23 s, Clarabel 8.75 s.

Below the threshold the worst Clarabel loss measured is ~3.5x on a well-conditioned problem
that both solve in about a second, while SCS's losses there are unbounded (it stalls on
ill-conditioned problems: control, hinf). Clarabel fails outright on some SDPLIB problems
(hinf13, hinf15, control3, qap6: "Solver 'CLARABEL' failed"); ``solve.run_route`` then solves
with SCS. The older rule summed the blocks (``dense_kkt_dimension``) and sent control2 and
truss8 to SCS.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .._tree import walk
from ..atoms import LinearSpectral, LogDetDiv, RowQuadForms
from ..atoms.linear_spectral import sum_largest_blocks
from ..backends import available_backends, mosek_licensed
from .analysis import LogDetTerm, OtherTerm, SpectralTerm, analyze

CLARABEL_MAX_DENSE_DIM = 300
#: Programs in SDPLIB's dual form with two or more cone blocks (:func:`dual_form_blocks`: the
#: control, truss, hinf and arch families) go to Clarabel up to this largest PSD block
#: ``n (n + 1) / 2``, whatever their dense rows: Clarabel's answer that does not settle is
#: retried on the LMI form (``specopt.conic_lmi``), and SCS stalls on these. Measured
#: (``benchmarks/sdplib.py --backends specopt clarabel clarabel-lmi``, load 2-6): control3-5
#: [465-1275; 136-351 dense rows] Clarabel fails on the given form in 0.9-3.8 s and solves the
#: LMI form in 0.4-3.7 s within the published precision, where SCS (the old pick) ended 22 % to
#: 8x off after 13-45 s; arch0 [13041] Clarabel 44-66 s, 5.0e-7 off, SCS 437 s, 2.4 % off.
#: The price on an easy program of that shape (random, blocks 40 and 20, 100 dense rows):
#: Clarabel 1.4 s, SCS 0.34 s. Single-block programs keep the general rule: a trace-one
#: n = 60 takes Clarabel 3.0 s and SCS 0.01 s (and ``auto`` sends large single-block SDPs to
#: the low_rank_sdp route anyway).
CLARABEL_LMI_MAX_DIM = 13100


def _breakpoint_sides(n: int, breakpoints) -> list[int]:
    """The PSD blocks of the sums of largest eigenvalues ``f_i`` at ``breakpoints`` (the ``i``
    of an ``n x n`` spectral term), as ``linear_spectral`` compiles them
    (:func:`specopt.atoms.linear_spectral.sum_largest_blocks`)."""
    return [n for i in breakpoints for _ in range(sum_largest_blocks(n, int(i)))]


def _atom_block_sides(root) -> list[int]:
    """PSD blocks of the PSD atoms in one expression tree (one of side n per lambda_max, two per
    lambda_sum_largest breakpoint, m + n per normNuc / sigma_max, 2n for log_det)."""
    sides: list[int] = []
    for node in walk(root):
        if isinstance(node, LinearSpectral):
            n = node.args[0].shape[0]
            sides.extend(_breakpoint_sides(n, [i for i, _ in node.breakpoints()[1]]))
        elif isinstance(node, (LogDetDiv, cp.log_det)):
            sides.append(2 * node.args[0].shape[0])
        elif isinstance(node, cp.lambda_sum_largest):
            sides.extend([node.args[0].shape[0]] * 2)
        elif isinstance(node, cp.lambda_max):  # (lambda_sum_largest is a subclass: above)
            sides.append(node.args[0].shape[0])
        elif isinstance(node, (cp.normNuc, cp.sigma_max)):
            sides.append(sum(node.args[0].shape))
    return sides


def psd_block_sides(problem: cp.Problem) -> list[int]:
    """Sides of the PSD cones the conic form of ``problem`` will have (estimated).

    Read from the normalized description so that the spelling does not matter: PSD variables
    (``PSD=True`` or ``X >> 0``, counted once), other ``>>`` constraints, two blocks of side n per
    breakpoint of each spectral term, one at ``i = 1`` and ``i = n - 1`` (CVXPY's ``lambda_*``
    atoms on one matrix merged, as ``linear_spectral`` compiles them), 2n per LogDet term, and
    the PSD atoms inside any other term or constraint.
    """
    try:
        desc = analyze(problem)
    except Exception:  # a parameter without a value, an unreadable expression: the tree
        sides = [v.shape[0] for v in problem.variables()
                 if v.attributes.get("PSD") or v.attributes.get("NSD")]
        for root in [problem.objective.expr, *problem.constraints]:
            if isinstance(root, cp.constraints.PSD):
                sides.append(root.args[0].shape[0])
            sides += _atom_block_sides(root)
        return sides
    sides = [v.shape[0] for v in desc.psd_variables()]
    sides += [v.shape[0] for v in desc.variables if v.attributes.get("NSD")]
    for c in desc.constraints:
        if c.kind == "psd" and c.var is None:
            sides.append(c.con.args[0].shape[0])
        if c.kind in ("psd", "cone", "nonaffine", "unreadable"):
            sides += _atom_block_sides(c.con)
    for t in desc.terms:
        if isinstance(t, SpectralTerm):
            n = t.K.shape[0]
            sides += _breakpoint_sides(n, np.flatnonzero(np.diff(t.alpha)) + 1)
        elif isinstance(t, LogDetTerm):
            sides.append(2 * t.X.shape[0])
        elif isinstance(t, OtherTerm):
            sides += _atom_block_sides(t.expr)
    return sides


def dense_rows(problem: cp.Problem) -> int:
    """Rows that couple densely to a PSD matrix, counted on the normalized description
    (``reductions.analysis``), so every spelling of the same rows counts alike:
    ``row_quad_forms(V, X) >= ...``, a list of ``trace(A_r @ X) >= ...`` and hinge terms
    ``pos(rho - <A_r, X>)``."""
    try:
        return analyze(problem).dense_rows()
    except Exception:  # a parameter without a value, an unreadable expression: the tree
        roots = [problem.objective.expr, *problem.constraints]
        return sum(node.size for root in roots for node in walk(root)
                   if isinstance(node, RowQuadForms))


def dense_kkt_dimension(problem: cp.Problem) -> int:
    """``sum_i n_i (n_i + 1) / 2`` over the PSD blocks plus the dense rows: the size of the
    conic form's dense part taken as one block (what a Clarabel solve must hold at most; the
    gate's feasibility probe is sized by it)."""
    return sum(n * (n + 1) // 2 for n in psd_block_sides(problem)) + dense_rows(problem)


def largest_kkt_block(problem: cp.Problem) -> int:
    """``max_i n_i (n_i + 1) / 2`` over the PSD blocks plus the dense rows: the largest dense
    block of Clarabel's KKT system, which sets its cost (the blocks factor one by one; the
    rows couple them)."""
    sides = psd_block_sides(problem)
    return max((n * (n + 1) // 2 for n in sides), default=0) + dense_rows(problem)


def dual_form_blocks(problem: cp.Problem) -> int:
    """The number of cone blocks (PSD matrices and nonnegative vectors) when ``problem`` is in
    SDPLIB's dual form: a linear objective, every variable a PSD matrix or a vector bounded
    ``>= 0`` entry by entry, and otherwise only equality rows; else 0. Such a conic form has an
    LMI form (``specopt.conic_lmi``), which Clarabel is retried on."""
    try:
        desc = analyze(problem)
    except Exception:  # a parameter without a value, an unreadable expression
        return 0
    if desc.terms:
        return 0
    psd_ids = {v.id for v in desc.psd_variables()}
    bounded: set[int] = {v.id for v in desc.variables if v.attributes.get("nonneg")}
    for c in desc.constraints:
        if c.kind == "eq" or (c.kind == "psd" and c.var is not None):
            continue
        if c.kind == "le" and c.is_bound() and not np.any(c.map.offset):
            (vid,) = c.map.variable_ids()
            coef = sp.csr_array(c.map.coeffs[vid])
            if np.all(coef.data < 0) and np.unique(coef.indices).size == coef.shape[1]:
                bounded.add(vid)  # -x <= 0 on every entry of x
                continue
        return 0
    if not all(v.id in psd_ids or v.id in bounded for v in desc.variables):
        return 0
    return len(desc.variables)


def default_backend(problem: cp.Problem) -> str:
    """MOSEK if licensed; else Clarabel while the largest dense KKT block is small
    (:func:`largest_kkt_block` ``<= CLARABEL_MAX_DENSE_DIM``), or, for a program in SDPLIB's
    dual form with two or more cone blocks (:func:`dual_form_blocks`), while its largest PSD
    block's ``n (n + 1) / 2 <= CLARABEL_LMI_MAX_DIM``; SCS above."""
    if mosek_licensed():
        return "MOSEK"
    usable = available_backends()
    if "CLARABEL" in usable and (
            largest_kkt_block(problem) <= CLARABEL_MAX_DENSE_DIM
            or (max((n * (n + 1) // 2 for n in psd_block_sides(problem)), default=0)
                <= CLARABEL_LMI_MAX_DIM and dual_form_blocks(problem) >= 2)):
        return "CLARABEL"
    if "SCS" in usable:
        return "SCS"
    if usable:
        return usable[0]
    raise cp.error.SolverError("no conic solver (Clarabel, SCS or MOSEK) is installed")
