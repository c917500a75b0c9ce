"""Classified objective terms: what the analysis reads the objective into (see the package
docstring for the spellings each class covers)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .names import short


@dataclass
class Term:
    """One classified objective term; ``expr`` is the node it was read from (for names)."""

    kind: str
    expr: Any

    @property
    def label(self) -> str:
        return short(self.expr)


@dataclass
class QuadTerm(Term):
    """``u^T P u`` (P symmetric, weights included) with ``u`` an affine expression."""

    u: Any = None
    #: dense, or sparse diagonal for sum_squares / square / quad_over_lin (O(size), not size^2)
    P: np.ndarray | sp.sparray | None = None


@dataclass
class HingeTerm(Term):
    """``sum_i w_i max(g_i, 0)`` with ``g`` affine (``inner``, flattened column-major)."""

    inner: Any = None
    weights: np.ndarray | None = None


@dataclass
class SpectralTerm(Term):
    """``sum_i alpha_i lambda_i(K)`` (eigenvalues decreasing); ``sources`` names the pieces."""

    K: Any = None
    alpha: np.ndarray | None = None
    sources: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{spectral_name(self.alpha)}({short(self.K, 20)})"


@dataclass
class LogDetTerm(Term):
    """``scale * logdet_div(X, X0)``; ``handwritten`` when read from ``tr(S X) - log det X``."""

    X: Any = None
    X0: np.ndarray | None = None
    scale: float = 1.0
    handwritten: bool = False

    @property
    def label(self) -> str:
        return f"{self.scale:.4g} * logdet_div({short(self.X, 20)}, X0)"


@dataclass
class BurgTerm(Term):
    """``scale * burg_div(x, x0)`` (x0 of x's shape)."""

    x: Any = None
    x0: np.ndarray | None = None
    scale: float = 1.0
    handwritten: bool = False

    @property
    def label(self) -> str:
        return f"{self.scale:.4g} * burg_div({short(self.x, 20)}, x0)"


@dataclass
class OtherTerm(Term):
    """A term none of the classes above covers, with its weight (scalar or per entry)."""

    weight: Any = 1.0


_SLACK_IDS = itertools.count(-1, -1)


class HingeSlack:
    """The slack ``t >= 0`` of a lifted hinge term: a symbol, not a CVXPY variable (a hinge
    over |S| rows, e.g. Dask-backed ``row_quad_forms``, builds no CVXPY object of size |S|).
    It has what LP-type routes read of a variable: a unique ``id`` (negative, so never one of
    CVXPY's), ``size``, ``shape``, ``attributes`` (nonneg) and ``name()``; its value is not
    written back to the user's problem."""

    def __init__(self, size: int):
        self.id = next(_SLACK_IDS)
        self.size, self.shape = int(size), (int(size),)
        self.attributes = {"nonneg": True}
        self.value = None

    def name(self) -> str:
        return "hinge_slack"


def spectral_name(alpha: np.ndarray) -> str:
    """``mve_cost`` / ``eigengap`` / ``lambda_sum_largest`` / ``trace`` / ``linear_spectral``."""
    a = np.asarray(alpha, dtype=float)
    n = a.size
    if np.allclose(a, a[0]):
        return "trace"
    for d in range(1, n):
        if np.array_equal(a, np.concatenate([-np.ones(d), np.ones(n - d)])):
            return f"mve_cost[d={d}]"
        e = np.zeros(n)
        e[d - 1], e[d] = 1.0, -1.0
        if np.allclose(a, e, atol=1e-12):
            return f"eigengap[d={d}]"
        if np.array_equal(a, np.concatenate([np.ones(d), np.zeros(n - d)])):
            return f"lambda_sum_largest[k={d}]"
    return "linear_spectral"
