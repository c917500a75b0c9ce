r"""Solve a conic program in *dual standard form* through its LMI form (no CVXPY here).

CVXPY hands a conic solver ``min c'x  s.t.  A x + s = b,  s in K`` with ``K = {0}^{m_E} x K_C``
(``K_C``: nonnegative, second-order and PSD cones, all self-dual). A problem written as
SDPLIB's dual form, ``max <F0, Y> s.t. <F_i, Y> = c_i, Y PSD`` (every variable lies in exactly
one cone: ``A_C = -D P`` with ``P`` a permutation of the variables and ``D > 0`` diagonal, the
svec scaling), has the conic dual

    max -b_E'z_E - b_C'z_C   s.t.  A_E'z_E + A_C'z_C + c = 0,  z_C in K_C,

and the equality fixes ``z_C = D^{-1} P (A_E'z_E + c)``. What is left is an LMI in the ``m_E``
free multipliers alone (SDPLIB's primal form ``min c'y s.t. sum y_i F_i - F0 PSD``):

    min  q'v + b_C'h   s.t.  G v + t = h,  t in K_C,
    G = -D^{-1} P A_E',   h = D^{-1} P c,   q = b_E - G'b_C,

with ``z_E = v`` and ``z_C = t``. Its dual multiplier ``w in K_C`` gives back the original
primal: ``x = P'D^{-1}(w - b_C)`` satisfies ``A_E x = b_E`` and ``s_C = b_C - A_C x = w``.
Infeasibility swaps sides: an infeasible LMI is an infeasible dual (the original unbounded),
and an unbounded LMI an infeasible original.

Why: Clarabel's KKT system for the original carries ``n_x`` extra free variables and ``n_x``
cone rows tied to them by ``-D``; the LMI drops both. On SDPLIB's control2 (blocks 20 and 10, 66
rows) Clarabel ends the original ``optimal_inaccurate`` 8.0e-6 from the published optimum and
fails outright with tighter tolerances; the LMI form reaches 5.8e-8 in 0.6 s
(``benchmarks/conic_lmi.py`` measures the family).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import scipy.sparse as sp

#: Clarabel status names of the LMI problem -> the original's (infeasibility swaps sides)
SWAPPED_STATUS = {
    "PrimalInfeasible": "DualInfeasible",
    "DualInfeasible": "PrimalInfeasible",
    "AlmostPrimalInfeasible": "AlmostDualInfeasible",
    "AlmostDualInfeasible": "AlmostPrimalInfeasible",
}


@dataclass(frozen=True)
class LMIForm:
    """The LMI form of a dual-standard-form conic program and what maps its solution back.

    ``G``, ``h``, ``q``, ``offset``: the LMI problem ``min q'v + offset, G v + t = h, t in K_C``.
    ``var_of_row[r]`` is the variable in cone row ``r`` and ``scale[r] = D_r`` its coefficient's
    magnitude; ``b_C`` the cone rows' right-hand side, ``m_E`` the number of equality rows.
    """

    G: sp.csc_array
    h: np.ndarray
    q: np.ndarray
    offset: float
    var_of_row: np.ndarray
    scale: np.ndarray
    b_C: np.ndarray
    c: np.ndarray
    m_E: int


def lmi_form(A: Any, b: np.ndarray, c: np.ndarray, m_E: int, P: Any = None) -> LMIForm | None:
    """The LMI form of ``min c'x, A x + s = b, s in {0}^{m_E} x K_C``, or None when the program is
    not in dual standard form (a quadratic objective, no equality rows, or cone rows that are not
    one negative multiple of one variable each, covering every variable once)."""
    if P is not None and sp.issparse(P) and P.nnz and np.any(P.data != 0):
        return None
    A = sp.csr_array(A)
    n_rows, n_x = A.shape
    n_C = n_rows - m_E
    if m_E <= 0 or n_C != n_x or n_x == 0:
        return None
    A_C = A[m_E:]
    A_C.eliminate_zeros()
    if A_C.nnz != n_C or not np.all(np.diff(A_C.indptr) == 1) or np.any(A_C.data >= 0):
        return None
    var_of_row = A_C.indices.astype(np.int64)
    if np.bincount(var_of_row, minlength=n_x).max() != 1:
        return None  # a variable in two cone rows: not a permutation
    scale = -A_C.data.astype(float)
    b = np.asarray(b, dtype=float)
    c = np.asarray(c, dtype=float)
    b_E, b_C = b[:m_E], b[m_E:]
    A_Et = sp.csr_array(A[:m_E].T)  # n_x x m_E
    G = sp.csc_array(-(sp.diags_array(1.0 / scale) @ A_Et[var_of_row]))
    h = c[var_of_row] / scale
    q = b_E - G.T @ b_C
    return LMIForm(G, h, q, float(b_C @ h), var_of_row, scale, b_C, c, m_E)


def recover(form: LMIForm, v: np.ndarray | None, w: np.ndarray | None, status: str,
            **info: Any) -> SimpleNamespace:
    """The original program's solution from the LMI problem's primal ``v`` and dual ``w``:
    ``x = P'D^{-1}(w - b_C)``, ``z = (v, t)``, ``s = (0, w)``, in the fields a Clarabel solution
    has (``x z s status obj_val obj_val_dual``, plus ``info``). The dual slack is recomputed as
    ``t = h - G v`` rather than taken from the solver, so the dual equality holds to rounding and
    the cone membership carries the solver's error instead (on SDPLIB's control3 that moves the
    measured dual residual from 1.5e-4 to below the gate's 1e-4)."""
    status = SWAPPED_STATUS.get(status, status)
    x = z = s = None
    pobj = dobj = float("nan")
    if v is not None and w is not None:
        w = np.asarray(w, dtype=float)
        v = np.asarray(v, dtype=float)
        x = np.empty(form.scale.size)
        x[form.var_of_row] = (w - form.b_C) / form.scale
        z = np.concatenate([v, form.h - form.G @ v])
        s = np.concatenate([np.zeros(form.m_E), w])
        pobj = float(form.c @ x)
        dobj = -float(form.q @ v + form.offset)
    return SimpleNamespace(x=x, z=z, s=s, status=status, obj_val=pobj, obj_val_dual=dobj,
                           **info)
