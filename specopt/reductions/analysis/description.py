"""The normalized description of a problem: what every route matches against."""

from __future__ import annotations

from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .affine import AffineMap, cached_maps
from .constraints import ConstraintInfo
from .terms import HingeSlack, HingeTerm, Term


@dataclass
class Description:
    """The normalized problem: objective terms, affine part, constant, classified constraints.

    ``sense`` is +1 for minimize, -1 for maximize; the objective (in the user's sense) is
    ``constant + affine + sum(terms)``.
    """

    sense: int
    variables: list[cp.Variable]
    terms: list[Term]
    affine: AffineMap
    constant: float
    constraints: list[ConstraintInfo]
    has_parameters: bool = False
    _hinge_maps: list | None = field(default=None, repr=False)
    _expr_maps: dict = field(default_factory=dict, repr=False)  # shared per-problem cache

    # -- objective queries ---------------------------------------------------------------------
    def of_kind(self, *kinds: str) -> list[Term]:
        return [t for t in self.terms if t.kind in kinds]

    def affine_variable_ids(self) -> set[int]:
        return self.affine.variable_ids()

    # -- constraint queries --------------------------------------------------------------------
    def psd_variables(self) -> list[cp.Variable]:
        """Variables declared PSD or constrained ``X >> 0`` directly."""
        out: list[cp.Variable] = [v for v in self.variables if v.attributes.get("PSD")]
        for c in self.constraints:
            if c.kind == "psd" and c.var is not None and all(c.var is not v for v in out):
                out.append(c.var)
        return out

    def psd_constraints(self) -> list[ConstraintInfo]:
        return [c for c in self.constraints if c.kind == "psd"]

    def affine_constraints(self) -> list[ConstraintInfo]:
        return [c for c in self.constraints if c.kind in ("eq", "le", "ge")]

    def hinge_maps(self) -> list[AffineMap]:
        """Affine maps of the hinge terms' arguments (rows of their slack lift), read once."""
        if self._hinge_maps is None:
            hinges = [t for t in self.terms if isinstance(t, HingeTerm)]
            self._hinge_maps = cached_maps([t.inner for t in hinges], self.variables,
                                           self._expr_maps)
        return self._hinge_maps

    def hinge_slack_rows(self) -> list[tuple[HingeSlack, AffineMap, np.ndarray]]:
        """Hinge terms lifted for LP-type routes: for ``sum_i w_i max(g_i, 0)`` a slack
        ``t >= 0`` (a :class:`HingeSlack` symbol, not a CVXPY variable: nothing of CVXPY's
        grows with the rows), the rows ``g - t <= 0`` and the objective weights ``w`` (``w^T
        t`` replaces the term where it is convex in the minimized objective)."""
        out = []
        hinges = [t for t in self.terms if isinstance(t, HingeTerm)]
        for t, g in zip(hinges, self.hinge_maps(), strict=True):
            k = int(np.asarray(t.weights).size)
            slack = HingeSlack(k)
            rows = AffineMap(k, dict(g.coeffs), g.factored, g.offset)
            rows.coeffs[slack.id] = sp.csr_array(-sp.identity(k, format="csr"))
            out.append((slack, rows, np.asarray(t.weights, dtype=float)))
        return out

    def dense_rows(self, psd_vars: list[cp.Variable] | None = None) -> int:
        """Rows coupling densely to a PSD matrix (more than n entries of an n x n PSD variable,
        or a factored ``row_quad_forms`` row), in constraints and in hinge arguments (which a
        conic form lifts to rows): what the KKT estimate of ``backends`` counts. The same for
        every spelling of the rows (``row_quad_forms``, a list of ``trace(A_r @ X)``, hinges)."""
        psd_vars = self.psd_variables() if psd_vars is None else psd_vars
        maps = [c.map for c in self.affine_constraints() if c.map is not None]
        maps += self.hinge_maps()
        total = 0
        for m in maps:
            dense = np.zeros(m.size, dtype=bool)
            for X in psd_vars:
                n = X.shape[0]
                C = m.coeffs.get(X.id)
                if C is not None and C.nnz:
                    dense |= np.diff(sp.csr_array(C).indptr) > n
                for M, _ in m.factored.get(X.id, []):
                    dense |= np.diff(sp.csr_array(M).indptr) > 0
            total += int(dense.sum())
        return total


def objective_summary(desc: Description) -> str:
    """One line naming the objective's terms (for explain)."""
    parts = [t.label for t in desc.terms]
    if desc.affine.variable_ids():
        parts.append("affine")
    return " + ".join(parts) if parts else "constant"
