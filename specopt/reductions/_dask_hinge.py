r"""The matrix-generation route's direct path for one hinge over Dask rows: nothing on the client
grows with the number of rows.

A CVXPY model of the form (``X`` the PSD variable, ``z`` scalar LP variables)::

    maximize / minimize   <C, X> + c^T z + const  -/+  w sum_r max(0, g_r(X, z))
    subject to            trace(X) == t  (or <= t),   X PSD,  (sign attributes on z)

    g_r = sum_j a_j v_{j,r}^T X v_{j,r} + e^T z + o       (a_j, e, o, w the same in every row)

with each ``v_j`` a Dask-backed ``row_quad_forms(V_j, X)`` (e.g. ``rho - (row_quad_forms(P, M)
- row_quad_forms(Q, M))``, PSDBoost) is read structurally (the hinge's argument by the
analysis' row reader, no CVXPY compilation, no per-row arrays: every coefficient is a scalar)
and handed to the 1-slack cut master with its per-row state on the workers
(:func:`specopt.solvers.mg._dask_hinge.dask_hinge`). The hinge row ``t_r >= g_r, t_r >= 0`` is
the cut master's ``s (<A_r, X> + g^T z) + gabs t_r >= b`` with ``A_r = sum_j a_j v v^T``,
``s = -1``, ``g = e``, ``b = o``, ``gabs = 1``, weight ``C = w`` (max sense).

Anything else (per-row coefficients, other constraints, a second hinge) is left to the general
path (:func:`specopt.reductions.matrix_generation.extract`), which holds per-row LP arrays.
"""

from __future__ import annotations

import time
from dataclasses import fields, replace
from typing import Any

import numpy as np

from ..solvers.mg._dask_hinge import SINGLE_MIN_TOL
from ..solvers.mg._problem import MGOptions
from ..solvers.mg._result import RoundLog, UnboundedProblem
from .analysis import HingeTerm
from .analysis.affine import _has_dask_rows, _NotRows, _row_read
from .base import RouteMismatch

__all__ = ["dask_hinge_data", "run_dask_hinge"]

_MG_FIELDS = {f.name for f in fields(MGOptions)}


def _uniform(w: Any) -> float | None:
    """The common value of a scalar or an array whose entries are all equal (a broadcast view
    is read without a pass), else None."""
    w = np.asarray(w, dtype=float)
    if w.size == 0:
        return None
    if w.ndim == 0 or all(s == 0 for s in w.strides):
        return float(w.flat[0])
    first = float(w.flat[0])
    return first if bool(np.all(w == first)) else None


def dask_hinge_data(desc: Any, problem: Any, X: Any, psd_con: Any, zvars: list,
                    mg: Any) -> Any:
    """The route's data (``mg.MGData`` with ``hinge`` set) for the form of the module
    docstring, or None when the problem has another form (the general path reads it).
    ``mg``: the module :mod:`specopt.reductions.matrix_generation` (its helpers)."""
    from ..solvers.mg._dask_hinge import dask_hinge
    from ..solvers.mg.dask_rows import DaskRowOperator, is_dask_array

    hinges = [t for t in desc.terms if isinstance(t, HingeTerm)]
    if len(hinges) != 1 or len(desc.terms) != 1 or not _has_dask_rows(hinges[0].inner):
        return None
    t = hinges[0]
    inner = t.inner
    m = int(inner.size)
    w = _uniform(t.weights)
    if inner.ndim != 1 or w is None or w == 0 or any(v.size != 1 for v in zvars):
        return None
    acc: dict = {"fac": {}, "lin": {}, "off": 0.0}
    try:
        _row_read(inner, m, 1.0, acc)
    except _NotRows:
        return None
    if any(np.ndim(a) for a, _, _ in acc["fac"].values()) or np.ndim(acc["off"]) or any(
            kind != "bcast" or np.ndim(c) for kind, c, _ in acc["lin"].values()):
        return None  # per-row coefficients: the general path
    if any(xid != X.id or not is_dask_array(V) for (xid, _), (_, V, _) in acc["fac"].items()):
        return None
    sense = -float(desc.sense)  # +1 maximize
    C = -sense * w  # the hinge's weight in the maximized objective: -C sum max(0, g)
    if C < 0:
        raise RouteMismatch(f"the hinge term {t.label} has the wrong sign (it is not concave "
                            "in the maximized objective)")
    zslices, zlb, zub = mg._lp_bounds(zvars)
    # the objective's affine part and the constraints (trace only): small maps
    oX, ofac, oG, _ = mg._parts(desc.affine, X, zvars, "the objective")
    if ofac:
        return None
    items = [(info.con, info.map, info.kind) for info in desc.affine_constraints()]
    parsed = [(con, *mg._parts(amap, X, zvars, mg.short(con)), kind)
              for con, amap, kind in items]
    if any(p[2] for p in parsed):
        return None
    trace_val, trace_eq, trace_con, pending = mg._trace_bound(parsed, X.shape[0])
    if pending:
        return None
    n = X.shape[0]
    Cop, _ = mg._build_operator([sense * oX], [(0, 1, [])], 1, n)
    try:
        A = DaskRowOperator([(float(a), V) for a, V, _ in acc["fac"].values()])
    except ValueError as exc:
        raise RouteMismatch(str(exc)) from exc
    if A.n != n:
        raise RouteMismatch(f"row_quad_forms(V, X): V has {A.n} columns, X is {n} x {n}")
    g = np.zeros(len(zvars))
    for vid, (_, c, _) in acc["lin"].items():
        g[zslices[vid].start] = float(c)
    h = dask_hinge(A, c_shared=sense * oG.toarray().ravel(), zlb=zlb, zub=zub, g_shared=g,
                   sign=-1.0, b=float(acc["off"]), weight=C, gabs=1.0, trace=float(trace_val),
                   trace_eq=trace_eq, C=Cop, offset=sense * float(desc.constant))
    return mg.MGData(X=X, zvars=zvars, zslices=zslices, lp=h.prob, sense=sense,
                     trace_con=trace_con, psd_con=psd_con, n_factored=m * A.nsig, hinge=h)


def run_dask_hinge(data: Any, callback: Any, kw: dict) -> tuple[str, Any]:
    """Solve the route's data of :func:`dask_hinge_data` with the cut master; returns
    ``(status, result)``, the result's ``z`` the shared LP variables only (the hinge's slacks
    stay on the workers) and its ``H`` the pricing matrix ``C - A^*(y)`` of the bound."""
    from ..solvers.mg.cuts import solve_hinge_cuts

    if kw.get("cuts") is False or kw.get("master", "psd") != "psd":
        raise ValueError("a hinge over Dask rows is solved by the 1-slack cut master: the "
                         "options cuts=False and master='lp' do not apply to it")
    h, lp = data.hinge, data.lp
    opts = MGOptions(callback=callback, dense=lp.n <= kw.get("dense_threshold", 300),
                     **{k: v for k, v in kw.items() if k in _MG_FIELDS and k != "dense"})
    log = RoundLog(time.perf_counter(), lp.offset, callback, ("cuts",))
    try:
        res = solve_hinge_cuts(h.prob, opts, h.hs, log,
                               hinge=replace(h, single=opts.tol >= SINGLE_MIN_TOL))
    except UnboundedProblem as exc:
        raise ValueError("the cut master's relaxation of the hinge problem is unbounded "
                         f"({exc}); check the sign and size of the hinge weight") from exc
    res.z = np.asarray(res.row_summary["z_shared"], dtype=float)
    return res.status, res

