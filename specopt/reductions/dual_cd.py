r"""Route "dual_cd": the relative-comparison metric QP by dual coordinate descent.

Recognized forms (w a vector variable, L constant symmetric positive definite, Z constant)::

    minimize    0.5 * cp.quad_form(w, L) + C * cp.sum(xi)          (explicit slacks)
    subject to  Z @ w >= 1 - xi,  xi >= 0,  [w >= 0]

    minimize    0.5 * cp.quad_form(w, L) + C * cp.sum(cp.pos(1 - Z @ w))   (hinge form)
    subject to  [w >= 0]

More precisely, the objective is a sum of terms ``c * quad_form(w, P)`` / ``c * sum_squares(w)``
(giving L), hinge terms ``c * sum(pos(a + A w))`` or ``c_vec @ pos(a + A w)`` with a > 0
(row i becomes z_i = -A_i / a_i with weight C_i = c_i a_i), terms affine in slack variables, and
constants. Every constraint row is one of: ``b w_j >= 0`` (b > 0; also ``Variable(nonneg=True)``),
``a' s >= 0`` for a slack entry s, or a margin row ``alpha^T w + a s + beta >= 0`` with a > 0,
beta < 0 (normalized to ``z^T w >= 1 - xi'`` with z = alpha / -beta, xi' = a s / -beta). Each slack
entry needs exactly one margin row, one sign row and a positive objective weight. Any mixture
of the two forms is accepted. Solved by :func:`specopt.solvers.dual_cd.dual_cd`.

Certificate: the dual value of (lam, t) (a lower bound) and the primal value of the returned
feasible w; status ``optimal`` when ``gap / max(1, objective) <= tol``. Duals: margin row
``lam_i / -beta``; slack sign row ``(C_i - lam_i) a / (-beta a')``; ``w_j >= 0`` row ``t_j / b``.

Options: ``tol`` (1e-8), ``max_passes``, ``seed``, ``shrinking``, ``ridge``, ``check_every``,
``polish``, ``time_limit``, ``newton``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..solvers._status import SolverStatus
from ..solvers.dual_cd import dual_cd
from .analysis import HingeTerm, QuadTerm, affine_maps, dense_value, try_analyze
from .base import Match, Route, RouteMismatch, RouteResult, RunContext
from .registry import register_route

_ROUTE_OPTS = ("tol", "max_passes", "seed", "shrinking", "ridge", "check_every", "polish",
               "time_limit", "newton")

#: ``route="auto"`` picks dual CD from this many margin rows on. Measured in benchmarks/dual_cd.py
#: over families (6 instances per size: C, L identity/general/ill-conditioned, classes, feature
#: scales, random/nearest-neighbour triplets, label noise), each in a fresh interpreter, FIRST
#: route call (recognition, extraction, solve, unpack) vs Clarabel in the same process, loaded
#: 2-core machine: n = 100, m = 5: median 1.2x, worst 0.99x; n = 300, m = 10: median 1.4x, worst
#: 0.92x; n = 1000, m = 10: median 1.8x, worst 1.5x; n = 20000, m = 20: worst 18x. Below 1000
#: rows the route is not reliably faster, so those stay on the conic route.
PAYS_OFF_MIN_ROWS = 1000


@dataclass
class DualCDData:
    """What the recognizer extracts (normalized problem + how to map results back)."""

    w: cp.Variable
    L: np.ndarray
    Z: np.ndarray  # (n, m) normalized margin rows
    C: np.ndarray  # (n,)
    mask: np.ndarray  # (m,) sign-constrained entries of w
    offset: float  # minimization form
    sense: int  # +1 minimize, -1 maximize (user objective = sense * min-form objective)
    slacks: list[cp.Variable]
    starts: np.ndarray  # offsets of each slack variable in the stacked slack vector
    slack_s: np.ndarray  # slack entry of each slack margin row (rows after the hinge rows)
    slack_nb: np.ndarray  # -beta of each slack margin row
    slack_a: np.ndarray  # slack coefficient a of each slack margin row
    margin_of: np.ndarray  # slack margin row of each slack entry
    # dual mapping per constraint: (id, shape, kind, index, scale) with kind 0 none, 1 t_j,
    # 2 slack sign row of entry index, 3 slack margin row index; user dual = value / scale
    con_rows: list = field(default_factory=list)
    n_hinge: int = 0


# --------------------------------------------------------------------------------------------
# Objective
# --------------------------------------------------------------------------------------------
def _const(expr) -> np.ndarray | None:
    if isinstance(expr, cp.Expression) and expr.is_constant() and not expr.parameters():
        return dense_value(expr.value)
    return None


def _objective(problem: cp.Problem):
    """Returns (w, L, hinge rows (inner, weights), slack map, offset, sense) in minimization form
    from the normalized description (every spelling of the quadratic and hinge terms)."""
    desc, why = try_analyze(problem)
    if desc is None:
        raise RouteMismatch(why)
    s = desc.sense
    w, L = None, None
    hinges = []
    for t in desc.terms:
        if isinstance(t, QuadTerm):
            us = t.u.variables()
            if len(us) != 1:
                raise RouteMismatch(f"the quadratic term {t.label} is not of one vector w")
            x = us[0]
            if w is not None and x.id != w.id:
                raise RouteMismatch("the quadratic terms must all be of the same variable w")
            (um,) = affine_maps([t.u], [x])
            if np.any(um.offset):
                raise RouteMismatch(f"the quadratic term {t.label} has a part linear in w")
            A = um.coef(x).toarray()
            Q = 2.0 * s * (A.T @ t.P @ A)
            w = x
            L = Q if L is None else L + Q
        elif isinstance(t, HingeTerm):
            weights = s * np.asarray(t.weights, dtype=float)
            if not np.all(np.isfinite(weights)):
                raise ValueError(f"the hinge term {t.label} has NaN or infinite weights")
            if np.any(weights < 0):
                raise RouteMismatch(f"the hinge term {t.label} has a negative weight (concave)")
            hinges.append((t, weights))
        else:
            raise RouteMismatch(
                f"objective term {t.label} is not a quadratic form of w, a hinge sum "
                "C * sum(pos(1 - Z @ w)), or affine in slack variables")
    if w is None:
        raise RouteMismatch("no quadratic term 0.5 * quad_form(w, L) in the objective")
    if w.ndim > 1 and min(w.shape) > 1:
        raise RouteMismatch("w must be a vector variable")
    if w.id in desc.affine.variable_ids():
        raise RouteMismatch("a term linear in w is not part of the relative-comparison QP")
    if desc.affine.factored:
        raise RouteMismatch("row_quad_forms terms are not part of the relative-comparison QP")
    return w, 0.5 * (L + L.T), hinges, desc, s * desc.constant, s


def _affine_in_w(expr, w):
    """``(A, b)`` with ``expr = A w + b`` for the common hinge arguments (``1 - Z @ w``, sums,
    negations, scalar multiples), read from the expression tree without CVXPY's coefficient
    extraction (which dominates recognition time at n = 1e5); None for anything else."""
    m = w.size
    cv = _const(expr)
    if cv is not None:
        return np.zeros((expr.size, m)), np.broadcast_to(cv.ravel(order="F"), (expr.size,))
    name = type(expr).__name__
    if expr is w or (isinstance(expr, cp.Variable) and expr.id == w.id):
        return np.eye(m), np.zeros(m)
    if name == "NegExpression":
        r = _affine_in_w(expr.args[0], w)
        return None if r is None else (-r[0], -r[1])
    if name == "AddExpression":
        A, b = np.zeros((expr.size, m)), np.zeros(expr.size)
        for arg in expr.args:
            r = _affine_in_w(arg, w)
            if r is None:
                return None
            A, b = A + r[0], b + r[1]  # broadcasting covers promoted scalars
        return A, b
    if name == "Promote":
        r = _affine_in_w(expr.args[0], w)
        if r is None or r[0].shape[0] != 1:
            return None
        return np.repeat(r[0], expr.size, axis=0), np.repeat(r[1], expr.size)
    if name == "MulExpression" and len(expr.args) == 2 and expr.args[1] is w:
        Zc = _const(expr.args[0])
        if Zc is not None and Zc.ndim == 2 and w.ndim == 1:
            return Zc, np.zeros(Zc.shape[0])
    if name == "multiply" and len(expr.args) == 2:  # elementwise, constant on one side
        for c, e in (expr.args, expr.args[::-1]):
            cv = _const(c)
            if cv is not None and _const(e) is None and cv.size in (1, expr.size):
                r = _affine_in_w(e, w)
                if r is None:
                    return None
                cv = np.broadcast_to(cv.ravel(order="F"), (expr.size,))
                return cv[:, None] * r[0], cv * r[1]
    return None


# --------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------
def extract(problem: cp.Problem) -> DualCDData:
    w, L, hinges, desc, offset, sense = _objective(problem)
    slacks = [v for v in problem.variables() if v.id != w.id]
    for v in [w, *slacks]:
        bad = [k for k, val in v.attributes.items() if val and k != "nonneg"]
        if bad:
            raise RouteMismatch(f"variable {v.name()} has unsupported attribute(s) {bad}")
    starts = np.concatenate([[0], np.cumsum([v.size for v in slacks])]).astype(int)
    split = _Split(w, slacks)
    # slack objective weights (minimization form)
    c_slack = sense * split(desc.affine)[1].toarray().ravel()
    Zs, Cs, n_hinge = _hinge_rows(hinges, w, split)
    reader = _RowReader(w, slacks, starts)
    for info in desc.constraints:
        reader.read(info, split)
    slack_s, nb, aa, margin_of = reader.slack_margins(c_slack)
    if slack_s.size:
        Zs.append(np.vstack(reader.margin_Z))
        Cs.append(c_slack[slack_s] * nb / aa)
    if not Zs:
        raise RouteMismatch("no margin constraints or hinge terms")
    Z = np.ascontiguousarray(np.vstack(Zs))
    C = np.concatenate(Cs)
    if np.any(C <= 0):
        raise RouteMismatch("the weights C must be > 0")
    try:
        np.linalg.cholesky(L)
    except np.linalg.LinAlgError:
        raise RouteMismatch("L is not positive definite (use the conic route, or the option "
                            "ridge=r to solve with L + r I)") from None
    return DualCDData(w=w, L=L, Z=Z, C=C, mask=reader.mask, offset=offset, sense=sense,
                      slacks=slacks, starts=starts, slack_s=slack_s, slack_nb=nb, slack_a=aa,
                      margin_of=margin_of, con_rows=reader.con_rows, n_hinge=n_hinge)


class _Split:
    """``split(amap) -> (Aw, As, b)``: an affine map's dense coefficients on w, sparse ones on
    the stacked slack variables, and its offset."""

    def __init__(self, w: cp.Variable, slacks: list[cp.Variable]) -> None:
        self.w, self.slacks = w, slacks

    def __call__(self, amap: Any) -> tuple[np.ndarray, sp.csr_array, np.ndarray]:
        Aw = amap.coef(self.w).toarray()
        if self.slacks:
            As = sp.hstack([amap.coef(v) for v in self.slacks], format="csr")
        else:
            As = sp.csr_array((amap.size, 0))
        return Aw, sp.csr_array(As), np.asarray(amap.offset, dtype=float)


def _hinge_rows(hinges: list, w: cp.Variable, split: _Split
                ) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    """Hinge rows ``c * max(0, a + A w)`` with a > 0 -> ``z = -A / a``, ``C = c * a``."""
    Zs, Cs = [], []
    n_hinge = 0
    for term, c in hinges:
        inner = term.inner
        if any(v.id != w.id for v in inner.variables()):
            raise RouteMismatch(f"the hinge argument of {term.label} must be affine in w only")
        keep = c > 0
        fast = _affine_in_w(inner, w) if inner.ndim <= 1 else None
        if fast is not None:
            Aw, a = fast
        else:
            (imap,) = affine_maps([inner], [w])
            Aw, _, a = split(imap)
        Aw, a, c = np.asarray(Aw)[keep], np.asarray(a)[keep], c[keep]
        if np.any(a <= 0):
            raise RouteMismatch(f"hinge {term.label} is not pos(a - Z @ w) with a > 0 "
                                "(e.g. 1 - Z @ w)")
        Zs.append(-Aw / a[:, None])
        Cs.append(c * a)
        n_hinge += a.size
    return Zs, Cs, n_hinge


_TOL = 1e-12


class _RowReader:
    """Reads the constraint rows: ``b w_j >= 0`` (sign rows), ``a' s >= 0`` (slack sign rows)
    and margin rows ``alpha^T w + a s + beta >= 0``; records how each user row's dual is
    mapped back (``DualCDData.con_rows``)."""

    def __init__(self, w: cp.Variable, slacks: list[cp.Variable], starts: np.ndarray) -> None:
        m, ns = w.size, int(starts[-1])
        self.mask = np.zeros(m, dtype=bool)
        if w.attributes.get("nonneg"):
            self.mask[:] = True
        self.s_nonneg = np.zeros(ns, dtype=bool)
        for k, v in enumerate(slacks):
            if v.attributes.get("nonneg"):
                self.s_nonneg[starts[k]:starts[k + 1]] = True
        self.seen_sign = np.zeros(m, dtype=bool)
        self.seen_snn = np.zeros(ns, dtype=bool)
        self.margin_slack: list = []
        self.margin_nb: list = []
        self.margin_a: list = []
        self.margin_Z: list = []
        self.n_margin = 0
        self.con_rows: list = []

    def read(self, info: Any, split: _Split) -> None:
        if info.kind not in ("le", "ge") or info.map is None:
            raise RouteMismatch(f"constraint {info.label} is not an inequality; only "
                                "margin rows, xi >= 0 and w >= 0 are recognized")
        if info.map.factored:
            raise RouteMismatch(f"constraint {info.label} has row_quad_forms rows")
        rows = info.map if info.kind == "ge" else info.map.scaled(-1.0)
        Aw, As, b = split(rows)  # rows: Aw w + As s + b >= 0
        r = _classify(Aw, As, b)
        bad = np.flatnonzero(~(r.is_sign | r.is_snn | r.is_margin))
        if bad.size:
            raise RouteMismatch(f"constraint row {bad[0]} of {info.label} is not w^T z >= 1 - xi, "
                                "xi >= 0 or w >= 0")
        nr = Aw.shape[0]
        kind = np.zeros(nr, dtype=np.int8)  # 0: no dual (duplicate), 1: t, 2: mu, 3: lam
        idx = np.zeros(nr, dtype=np.int64)
        scale = np.ones(nr)
        for i in np.flatnonzero(r.is_sign):
            j = int(r.j_idx[i])
            if not self.seen_sign[j]:
                kind[i], idx[i], scale[i] = 1, j, r.j_val[i]
            self.seen_sign[j] = self.mask[j] = True
        rs = np.flatnonzero(r.is_snn)
        ss = r.s_idx[rs]
        _, first = np.unique(ss, return_index=True)
        fresh = first[~self.seen_snn[ss[first]]]
        kind[rs[fresh]], idx[rs[fresh]], scale[rs[fresh]] = 2, ss[fresh], r.s_val[rs[fresh]]
        self.seen_snn[ss] = self.s_nonneg[ss] = True
        rm = np.flatnonzero(r.is_margin)
        kind[rm], idx[rm], scale[rm] = 3, self.n_margin + np.arange(rm.size), -b[rm]
        self.margin_slack.append(r.s_idx[rm])
        self.margin_nb.append(-b[rm])
        self.margin_a.append(r.s_val[rm])
        self.margin_Z.append(Aw[rm] / -b[rm, None])
        self.n_margin += rm.size
        self.con_rows.append((info.con.id, info.con.shape, kind, idx, scale))

    def slack_margins(self, c_slack: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(slack entry, -beta, a)`` of each slack margin row and the margin row of each
        slack entry, after checking that every slack entry has exactly one margin row, a sign
        row and a positive weight."""
        ns = self.s_nonneg.size
        margin_of = np.full(ns, -1)
        slack_s = (np.concatenate(self.margin_slack) if self.margin_slack
                   else np.zeros(0, dtype=int))
        if slack_s.size:
            if np.unique(slack_s).size != slack_s.size:
                raise RouteMismatch("a slack entry appears in more than one margin constraint")
            margin_of[slack_s] = np.arange(slack_s.size)
        if ns:
            if np.any(margin_of < 0):
                raise RouteMismatch("every slack entry must appear in exactly one margin "
                                    "constraint")
            if not np.all(self.s_nonneg):
                raise RouteMismatch("every slack entry needs xi >= 0")
            if np.any(c_slack <= 0):
                raise RouteMismatch("slack weights C in the objective must be > 0")
        nb = np.concatenate(self.margin_nb) if self.margin_nb else np.zeros(0)
        aa = np.concatenate(self.margin_a) if self.margin_a else np.zeros(0)
        return slack_s, nb, aa, margin_of


class _RowKinds(NamedTuple):
    """Per row: the one slack entry (-1: none) and its coefficient, the one w entry and its
    coefficient, and which of the three row kinds it is."""

    s_idx: np.ndarray
    s_val: np.ndarray
    j_idx: np.ndarray
    j_val: np.ndarray
    is_sign: np.ndarray
    is_snn: np.ndarray
    is_margin: np.ndarray


def _classify(Aw: np.ndarray, As: sp.csr_array, b: np.ndarray) -> _RowKinds:
    """The kind of each row of ``Aw w + As s + b >= 0``."""
    As.data[np.abs(As.data) <= _TOL] = 0.0
    As.eliminate_zeros()
    nr = Aw.shape[0]
    nzs = np.diff(As.indptr)
    first = np.minimum(As.indptr[:-1], As.nnz)  # padded arrays: rows without entries -> -1
    s_idx = np.where(nzs == 1, np.append(As.indices, -1)[first], -1)
    s_val = np.where(nzs == 1, np.append(As.data, 0.0)[first], 0.0)
    nzw_mask = np.abs(Aw) > _TOL
    nzw = nzw_mask.sum(axis=1)
    j_idx = np.argmax(nzw_mask, axis=1)
    j_val = Aw[np.arange(nr), j_idx]
    return _RowKinds(
        s_idx, s_val, j_idx, j_val,
        is_sign=(nzs == 0) & (nzw == 1) & (j_val > 0) & (np.abs(b) <= _TOL),
        is_snn=(nzw == 0) & (nzs == 1) & (s_val > 0) & (np.abs(b) <= _TOL),
        is_margin=(nzs == 1) & (s_val > 0) & (b < -_TOL),
    )


# --------------------------------------------------------------------------------------------
# The route
# --------------------------------------------------------------------------------------------
class DualCDRoute(Route):
    """Dual coordinate descent for the relative-comparison QP (module docstring)."""

    name = "dual_cd"
    is_global = True
    priority = 20

    def extract(self, problem: cp.Problem) -> DualCDData:
        try:
            return extract(problem)
        except RouteMismatch:
            raise
        except ValueError as exc:  # e.g. non-affine pieces affine_coefficients refuses
            raise RouteMismatch(f"not the relative-comparison QP: {exc}") from exc

    def describe(self, data: DualCDData) -> str:
        n, m = data.Z.shape
        sign = "w >= 0" if data.mask.all() else ("w free" if not data.mask.any()
                                                 else f"{data.mask.sum()} of w >= 0")
        return (f"relative-comparison QP: m={m}, n={n} margin rows "
                f"({data.n_hinge} hinge, {n - data.n_hinge} slack), {sign}")

    def pays_off(self, problem: cp.Problem, match: Match) -> tuple[bool, str]:
        n = match.data.Z.shape[0]
        if n >= PAYS_OFF_MIN_ROWS:
            return True, f"{n} margin rows >= {PAYS_OFF_MIN_ROWS} (measured faster than conic)"
        return False, f"only {n} margin rows (< {PAYS_OFF_MIN_ROWS}); conic is as fast"

    OPTIONS = _ROUTE_OPTS
    UNIT = "iter"
    STATUS_MAP = {SolverStatus.OPTIMAL: cp.OPTIMAL}

    def to_user(self, data: DualCDData) -> Callable[[float], float]:
        def user(v: float) -> float:  # the solver's minimization form -> the user's objective
            return data.sense * (v + data.offset)

        return user

    def run(self, data: DualCDData, ctx: RunContext, **opts: Any) -> Any:
        return dual_cd(data.L, data.Z, data.C, nonneg=data.mask, callback=ctx.callback, **opts)

    def invert(self, res: Any, ctx: RunContext) -> RouteResult:
        data: DualCDData = ctx.data
        elapsed = ctx.elapsed()
        user = self.to_user(data)
        solver_status = SolverStatus.OPTIMAL if res.converged else SolverStatus.MAX_ITERS
        result = self.primal_dual_result(
            res, ctx, self.map_status(solver_status), primal=_primal(data, res),
            dual=_duals(data, res), setup_time=res.setup_time, solve_time=elapsed,
            extra={"passes": res.iterations, "rel_gap": res.rel_gap, "n": data.Z.shape[0],
                   "m": data.Z.shape[1], "polish": res.n_polish, "method": res.method},
        )
        # the bound at each check (``gap`` is the absolute P - D there), in the user's sign
        result.history["bound"] = [user(p - g) for p, g in zip(
            res.history.get("primal", []), res.history.get("gap", []), strict=True)]
        return result


def _slack_values(data: DualCDData, res: Any) -> np.ndarray:
    """The stacked slack vector: ``xi_s = xi'_row * (-beta) / a``."""
    svals = np.zeros(int(data.starts[-1]))
    svals[data.slack_s] = res.xi[data.n_hinge:] * data.slack_nb / data.slack_a
    return svals


def _primal(data: DualCDData, res: Any) -> dict[int, Any]:
    w = data.w
    primal = {w.id: res.w.reshape(w.shape, order="F") if w.shape else float(res.w[0])}
    svals = _slack_values(data, res)
    for k, v in enumerate(data.slacks):
        val = svals[data.starts[k]:data.starts[k + 1]]
        primal[v.id] = val.reshape(v.shape, order="F") if v.shape else float(val[0])
    return primal


def _duals(data: DualCDData, res: Any) -> dict[int, Any]:
    """Multipliers of the normalized rows (``t_j``, ``mu_row = C_row - lam_row``, ``lam_row``)
    mapped to the user's constraints."""
    nh = data.n_hinge
    lam_s = res.lam[nh:]
    mu_entry = np.zeros(int(data.starts[-1]))
    mu_entry[data.slack_s] = ((data.C[nh:] - lam_s) * data.slack_a / data.slack_nb)
    dual = {}
    for cid, shape, kind, idx, scale in data.con_rows:
        vals = np.zeros(kind.size)
        for code, source in ((1, res.t), (2, mu_entry), (3, lam_s)):
            sel = kind == code
            vals[sel] = source[idx[sel]] / scale[sel]
        dual[cid] = vals.reshape(shape, order="F") if shape else float(vals[0])
    return dual


register_route(DualCDRoute())
