r"""The spectraplex LP and the run options, checked once by the front end.

::

    max_{X, z}  <C, X> + c^T z + offset
    s.t.        lb <= A(X) + G z <= ub,   zlb <= z <= zub,   X PSD,  tr X = t  (or <= t)

The masters (:mod:`.lp_master`, :mod:`.psd_master`, :mod:`.cuts`) take a :class:`SpectraplexLP`
and :class:`MGOptions` and assume valid input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from ._operators import DenseOperator, StackedOperator, SymOperator, zero_objective

__all__ = ["LPSide", "MGOptions", "SpectraplexLP", "spectraplex_lp"]


@dataclass(frozen=True, eq=False)
class LPSide:
    """The LP variables' side of a problem over the spectraplex (or of a master): rows
    ``lb <= (terms in X) + G z <= ub``, bounds ``zlb <= z <= zub``, objective ``c^T z``."""

    G: sp.csr_array
    c: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    zlb: np.ndarray
    zub: np.ndarray


@dataclass(frozen=True, eq=False, kw_only=True)
class SpectraplexLP(LPSide):
    """The problem data (module docstring): its :class:`LPSide` (``G`` CSR (m, p), all bounds
    as float arrays, ``+-inf`` allowed), ``A`` with m rows, ``C`` a 1-row operator,
    ``trace`` > 0."""

    A: SymOperator
    C: SymOperator
    trace: float
    trace_eq: bool
    offset: float = 0.0

    @property
    def n(self) -> int:
        return self.A.n

    @property
    def m(self) -> int:
        return self.A.m

    @property
    def p(self) -> int:
        return self.G.shape[1]

    @cached_property
    def full(self) -> StackedOperator:
        """``C`` stacked on ``A``: the pricing matrix is ``full.adjoint(w)`` at ``w = (1, -y)``."""
        return StackedOperator([self.C, self.A])


def spectraplex_lp(A: SymOperator, C: SymOperator | np.ndarray | None,
                   G: sp.spmatrix | np.ndarray | None, c: np.ndarray | None,
                   lb: np.ndarray | None, ub: np.ndarray | None, zlb: np.ndarray | None,
                   zub: np.ndarray | None, trace: float, trace_eq: bool,
                   offset: float = 0.0) -> SpectraplexLP:
    """Check and normalize the data of :func:`~specopt.solvers.mg.solve_spectraplex_lp`
    (None means: ``C = 0``, no LP variables, unbounded rows / variables)."""
    n, m = A.n, A.m
    if trace <= 0:
        raise ValueError(f"trace bound must be positive, got {trace}")
    if C is None:
        C = zero_objective(n)
    elif isinstance(C, np.ndarray):
        if C.shape != (n, n):
            raise ValueError(f"C must be ({n}, {n}), got {C.shape}")
        C = DenseOperator(C.reshape(1, -1, order="F"), n)
    G = sp.csr_array((m, 0)) if G is None else sp.csr_array(G, dtype=float)
    p = G.shape[1]
    if G.shape[0] != m:
        raise ValueError(f"G must have {m} rows, got {G.shape[0]}")
    c = np.zeros(p) if c is None else np.asarray(c, float).ravel()
    lb = np.full(m, -np.inf) if lb is None else np.asarray(lb, float).ravel()
    ub = np.full(m, np.inf) if ub is None else np.asarray(ub, float).ravel()
    zlb = np.full(p, -np.inf) if zlb is None else np.asarray(zlb, float).ravel()
    zub = np.full(p, np.inf) if zub is None else np.asarray(zub, float).ravel()
    for name, arr, size in (("c", c, p), ("lb", lb, m), ("ub", ub, m), ("zlb", zlb, p),
                            ("zub", zub, p)):
        if arr.size != size:
            raise ValueError(f"{name} must have {size} entries, got {arr.size}")
    return SpectraplexLP(G, c, lb, ub, zlb, zub, A=A, C=C, trace=trace, trace_eq=trace_eq,
                         offset=offset)


@dataclass(frozen=True, eq=False)
class MGOptions:
    """Options of a run (as documented in ``solve_spectraplex_lp``); ``dense``: eigen-solves by
    dense ``eigh`` (n at most ``dense_threshold``), else Lanczos."""

    tol: float = 1e-6
    max_iters: int = 2000
    time_limit: float = np.inf
    columns_per_round: int = 5
    smoothing: float = 0.5
    prune_after: int = 0
    max_columns: int | None = None
    dense: bool = True
    init_columns: np.ndarray | None = None
    big_m: float = 1e4
    max_rank: int = 30
    row_selection: int = 500
    row_band: float = 1e-2
    max_join: float = np.inf
    resolve_rows: bool = False
    warm_start: bool = True
    full_space: int = 0
    pricing: str = "eig"
    verbose: bool = False
    callback: Callable[..., None] | None = None
