"""Route "bregman": ITML-type LogDet problems by cyclic Bregman projections.

Recognized form (W a d x d variable, V rows v_c constant, bounds constant and > 0)::

    minimize    c1 * logdet_div(W, W0) [+ c2 * burg_div(xi, xi0)] [+ const]
    subject to  v_c^T W v_c <= u_c      (similar)        or  <= xi_k   (slack form)
                v_c^T W v_c >= l_c      (dissimilar)     or  >= xi_k
                [W >> 0]  [xi >= 0]     (implied by the domains; accepted and ignored)

with c1, c2 > 0 constant. The quadratic forms may be written with ``row_quad_forms(V, W)``
(read directly) or with any affine expression whose coefficient on W is a rank-one PSD matrix
v v^T, e.g. ``cp.quad_form(v, W)`` for a constant v (read through ``affine_coefficients``).
In the slack form every constraint uses its own entry of xi with coefficient 1, and
gamma = c2 / c1, xi0_c = the burg_div reference of that entry; without slack gamma = inf.

The problem is solved by :func:`specopt.solvers.bregman.itml_linear` (O(d^2) per projection).
Certificate: dual value g(lam) (a lower bound, scaled by c1), relative gap and relative
violation below ``tol``. Duals: the multiplier of constraint c is c1 * lam_c. Hard constraints
that admit no W > 0 are reported ``infeasible`` (a Farkas ray is found).

Options: ``tol`` (1e-8), ``max_sweeps`` (100000), ``time_limit`` (None, seconds).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .._progress import user_history
from ..backends import backend_status
from ..solvers._jit import numba_loaded
from ..solvers._status import SolverStatus
from ..solvers.bregman import NEWTON_MAX_CONSTRAINTS, itml_linear
from .analysis import BurgTerm, LogDetTerm, try_analyze
from .base import Match, Route, RouteMismatch, RouteResult, RunContext
from .registry import get_route, register_route

_ROUTE_OPTS = ("tol", "max_sweeps", "time_limit", "check_every", "method", "seed", "slow_after")

#: Seconds of sweeping after which the route measures the convergence rate and, when the sweeps
#: would reach ``max_sweeps`` before ``tol``, hands the problem to the conic route (Clarabel):
#: hard-constraint ITML on breast cancer (1150 + 1150 pairs) swept to the 100,000 cap for
#: 75-110 s where Clarabel takes 23 s (issue 23). ``slow_after=None`` keeps sweeping.
SLOW_AFTER = 2.0
_RANK_ONE_TOL = 1e-9

#: ``route="auto"`` picks Bregman from this dimension on (slack form, <= NEWTON_MAX_CONSTRAINTS:
#: dual Newton, numpy only). Measured in ``benchmarks/bregman.py`` part 4 (fresh interpreter,
#: FIRST route call vs Clarabel in the same process, 4 instances per size, load 9-18): d=5, m=20:
#: median 2.5x, worst 2.1x; d=30, m=400: median 128x, worst 89x.
PAYS_OFF_MIN_DIM = 2
#: Beyond ``NEWTON_MAX_CONSTRAINTS`` (or with hard constraints) the solver sweeps with a compiled
#: kernel whose first call in a process costs 0.3-5 s (numba import and cache load; 3-5 s measured
#: at load average 13-18 on the shared 2-core machine). benchmarks/bregman.py part 4 (fresh
#: interpreter, first call vs Clarabel in the same process, 4 instances per size): d=3, m=1000:
#: worst 0.13x (Clarabel 0.6-0.8 s); d=10, m=2000: worst 0.81x, median 0.94x (Clarabel 3-5 s);
#: repeats (kernel loaded) 5x-49x faster. So auto takes the sweeping route only once numba is
#: loaded in the process, or when m * d^2 reaches this (see PAYS_OFF_SWEEPS_NOTE).
PAYS_OFF_SWEEPS_MIN_WORK = 2e6
PAYS_OFF_SWEEPS_NOTE = ("measured at d=20, m=5000 (m d^2 = 2e6), fresh interpreter: first call "
                        "3.1-3.6 s vs Clarabel 49-55 s, 14x-16x, 2 instances, load 14-17")
PAYS_OFF_NOTE = "2.1x-218x faster than Clarabel from the first call (benchmarks/bregman.py)"


@dataclass
class ITMLData:
    """What the recognizer extracts."""

    W: cp.Variable
    W0: np.ndarray
    V: np.ndarray  # (m, d)
    bounds: np.ndarray  # (m,)
    delta: np.ndarray  # (m,)
    gamma: float
    c1: float
    c2: float
    offset: float
    xis: list[cp.Variable] = field(default_factory=list)  # slack variables (burg_div terms)
    xi0_full: np.ndarray | None = None  # burg reference of every slack entry (stacked, F order)
    slack_index: np.ndarray | None = None  # stacked slack entry used by each constraint
    slack_scale: np.ndarray | None = None  # a in v^T W v <= a xi (the solver's slack is a xi)
    rows: list[tuple[int, tuple[int, ...], slice]] = field(default_factory=list)  # con id, shape


def _objective_terms(desc):
    """``(W, W0, c1, burg terms, c2, offset)`` from the normalized description."""
    if desc.sense != 1:
        raise RouteMismatch("the objective must be minimized (min logdet_div(W, W0) + ...)")
    for t in desc.terms:
        if not isinstance(t, (LogDetTerm, BurgTerm)):
            raise RouteMismatch(
                f"objective term {t.label} is not c * logdet_div(W, W0) or c * burg_div(xi, xi0)"
            )
    if desc.affine.variable_ids():
        raise RouteMismatch("the objective has a linear term that is not part of a LogDet or "
                            "Burg divergence")
    lds = [t for t in desc.terms if isinstance(t, LogDetTerm)]
    burgs = [t for t in desc.terms if isinstance(t, BurgTerm)]
    offset = desc.constant
    if not lds:
        raise RouteMismatch("the objective has no logdet_div(W, W0) term "
                            "(nor tr(S W) - log_det(W))")
    W = lds[0].X
    if any(t.X is not W for t in lds):
        raise RouteMismatch("logdet_div terms on different matrices")
    for t in [*lds, *burgs]:
        if not t.scale > 0:
            raise RouteMismatch("the divergence terms need positive weights")
    # sum_k c_k D(W, A_k) = c D(W, X0) + const, X0^{-1} = sum_k c_k A_k^{-1} / c
    c1 = float(sum(t.scale for t in lds))
    if len(lds) == 1:
        W0 = np.asarray(lds[0].X0, dtype=float)
    else:
        P = sum(t.scale * np.linalg.inv(t.X0) for t in lds) / c1
        W0 = np.linalg.inv(0.5 * (P + P.T))
        W0 = 0.5 * (W0 + W0.T)
        offset += sum(t.scale * np.linalg.slogdet(t.X0)[1] for t in lds)
        offset -= c1 * np.linalg.slogdet(W0)[1]
    c2 = 0.0
    if burgs:
        scales = np.array([t.scale for t in burgs])
        if not np.allclose(scales, scales[0], rtol=1e-12):
            raise RouteMismatch("burg_div terms with different weights (ITML has one gamma)")
        c2 = float(scales[0])
        ids = [t.x.id for t in burgs if isinstance(t.x, cp.Variable)]
        if len(ids) != len(burgs) or len(set(ids)) != len(ids):
            raise RouteMismatch("burg_div must act directly on distinct slack variables")
    return W, W0, c1, burgs, c2, float(offset)


def _signed_rank_one(coef, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a coefficient matrix as ``sigma_r v_r v_r^T``; ``(V, sigma)``; else mismatch."""
    dense = coef.toarray() if hasattr(coef, "toarray") else np.asarray(coef)
    out = np.zeros((dense.shape[0], d))
    sig = np.ones(dense.shape[0])
    for r in range(dense.shape[0]):
        A = dense[r].reshape((d, d), order="F")
        A = 0.5 * (A + A.T)
        ev, U = np.linalg.eigh(A)
        top = max(abs(ev[0]), abs(ev[-1]))
        if top == 0:
            continue  # v = 0: dropped later with a warning
        if abs(ev[-1]) >= abs(ev[0]):
            lead, rest, vec, sig[r] = ev[-1], ev[:-1], U[:, -1], 1.0
        else:
            lead, rest, vec, sig[r] = -ev[0], ev[1:], U[:, 0], -1.0
        if lead <= 0 or np.max(np.abs(rest)) > _RANK_ONE_TOL * top:
            raise RouteMismatch(
                "a constraint is not a squared distance v^T W v (its coefficient on W is not a "
                "rank-one PSD matrix)"
            )
        out[r] = math.sqrt(lead) * vec
    return out, sig


def _distance_rows(amap, W, label: str) -> tuple[np.ndarray, np.ndarray]:
    """``(V, sigma)``: the W part of each row is ``sigma_r v_r^T W v_r``."""
    d = W.shape[0]
    k = amap.size
    fac = amap.factored.get(W.id, [])
    dense = amap.coef(W)
    if not fac:
        return _signed_rank_one(dense, d)
    if dense.nnz or len(fac) != 1:
        raise RouteMismatch(f"constraint {label} mixes row_quad_forms with other terms in W")
    M, V = fac[0]
    M = sp.csr_array(M)
    if np.any(np.diff(M.indptr) != 1):
        raise RouteMismatch(f"constraint {label}: each row must be one v^T W v")
    cols, vals = M.indices, M.data
    Vr = np.asarray(V[cols], dtype=float) if k else np.zeros((0, d))
    return Vr * np.sqrt(np.abs(vals))[:, None], np.sign(vals)


def extract(problem: cp.Problem) -> ITMLData:
    """Recognize the ITML form (module docstring); RouteMismatch says what does not fit."""
    desc, why = try_analyze(problem)
    if desc is None:
        raise RouteMismatch(why)
    W, W0, c1, burgs, c2, offset = _objective_terms(desc)
    xis = [t.x for t in burgs]
    _check_variables(problem, W, xis)
    blocks, rows, start = [], [], 0
    for info in desc.constraints:
        if info.kind == "psd" and info.var is W:
            continue
        block = _distance_block(info, W, xis)
        if block is None:  # implied by the domain
            continue
        blocks.append(block)
        k = block.V.shape[0]
        rows.append((info.con.id, info.con.shape, slice(start, start + k)))
        start += k
    if not blocks:
        raise RouteMismatch("no distance constraints (the solution is W = W0)")
    bounds, slack_index, slack_scale = (np.concatenate([getattr(bl, f) for bl in blocks])
                                        for f in ("bounds", "slack", "scale"))
    xi0_full = None
    gamma = math.inf
    if xis:
        xi0_full = np.concatenate(
            [np.broadcast_to(np.asarray(t.x0, dtype=float), t.x.shape).ravel(order="F")
             for t in burgs])
        if np.unique(slack_index).size != slack_index.size:
            raise RouteMismatch("an entry of xi is shared by two constraints")
        bounds = slack_scale * xi0_full[slack_index]
        gamma = c2 / c1
    return ITMLData(
        W=W,
        W0=np.asarray(W0, dtype=float),
        V=np.ascontiguousarray(np.vstack([bl.V for bl in blocks])),
        bounds=bounds,
        delta=np.concatenate([bl.sig.copy() for bl in blocks]),
        gamma=gamma,
        c1=c1,
        c2=c2,
        offset=offset,
        xis=xis,
        xi0_full=xi0_full,
        slack_index=slack_index if xis else None,
        slack_scale=slack_scale if xis else None,
        rows=rows,
    )


def _check_variables(problem: cp.Problem, W: Any, xis: list[cp.Variable]) -> None:
    """W a plain (PSD / symmetric) matrix variable; no variables but W and the slacks."""
    if not isinstance(W, cp.Variable):
        raise RouteMismatch("logdet_div must act directly on a matrix variable W")
    for attr in ("diag", "nonneg", "nonpos", "boolean", "integer", "bounds", "complex"):
        if W.attributes.get(attr):
            raise RouteMismatch(f"W carries the attribute {attr!r}; only PSD/symmetric is allowed")
    extra_vars = {v.id for v in problem.variables()} - {W.id} - {x.id for x in xis}
    if extra_vars:
        raise RouteMismatch("the problem has variables other than W and the slack xi")


class _DistanceBlock(NamedTuple):
    """The rows of one constraint: ``sig_r v_r^T W v_r <= bounds_r`` (hard) or ``<= scale_r
    xi[slack_r]`` (slack; ``slack_r = -1`` for hard rows)."""

    V: np.ndarray
    sig: np.ndarray
    bounds: np.ndarray
    slack: np.ndarray
    scale: np.ndarray


def _distance_block(info: Any, W: cp.Variable, xis: list[cp.Variable]) -> _DistanceBlock | None:
    """One constraint's distance rows; None for a row implied by burg_div's domain."""
    if info.kind not in ("le", "ge") or info.map is None:
        raise RouteMismatch(f"constraint {info.label} is not a distance inequality")
    g = info.map if info.kind == "le" else info.map.scaled(-1.0)  # g <= 0
    k = g.size
    S = (sp.hstack([g.coef(x) for x in xis], format="csr") if xis
         else sp.csr_array((k, 0)))
    S.eliminate_zeros()
    off = np.asarray(g.offset, dtype=float)
    if W.id not in g.variable_ids():
        # -a xi_j + c <= 0 with c <= 0: implied by burg_div's domain (xi > 0)
        ok = bool(xis) and np.all(np.diff(S.indptr) == 1) and np.all(S.data < 0) \
            and np.all(off <= 0)
        if ok:
            return None
        raise RouteMismatch(f"constraint {info.label} does not involve W")
    V, sig = _distance_rows(g, W, info.label)
    if S.nnz == 0:
        if xis:
            raise RouteMismatch(
                "mixed hard and slack constraints: every constraint must use the slack xi "
                "when burg_div(xi, xi0) is in the objective"
            )
        b = -sig * off  # sig q + off <= 0: q <= -off (sig 1) or q >= off (sig -1)
        if np.any(b <= 0):
            raise RouteMismatch(
                "a distance bound is <= 0 (squared distances need bounds u, l > 0)"
            )
        return _DistanceBlock(V, sig, b, np.full(k, -1), np.ones(k))
    if not xis:
        raise RouteMismatch(
            f"constraint {info.label}: bound is not constant and there is no slack"
        )
    if np.any(off != 0):
        raise RouteMismatch("a slack distance constraint has a constant offset")
    if np.any(np.diff(S.indptr) != 1):
        raise RouteMismatch("each slack distance row must use one entry of xi")
    a = -sig * S.data  # sig q + g xi <= 0: q <= -g xi (sig 1), q >= g xi (sig -1)
    if np.any(a <= 0):
        raise RouteMismatch(
            f"constraint {info.label}: the slack must bound the distance from the "
            "outside (v^T W v <= a xi for similar, >= a xi for dissimilar, a > 0)"
        )
    return _DistanceBlock(V, sig, np.zeros(k), S.indices.copy(), a)


class BregmanRoute(Route):
    """Cyclic Bregman projections for ITML-type problems (module docstring)."""

    name = "bregman"
    is_global = True
    priority = 20

    def extract(self, problem: cp.Problem) -> ITMLData:
        return extract(problem)

    def describe(self, data: ITMLData) -> str:
        kind = "hard" if math.isinf(data.gamma) else f"slack, gamma={data.gamma:.3g}"
        return f"ITML problem: d={data.W.shape[0]}, {data.V.shape[0]} distance constraints ({kind})"

    def pays_off(self, problem: cp.Problem, match: Match) -> tuple[bool, str]:
        data: ITMLData = match.data
        d, m = data.V.shape[1], data.V.shape[0]
        if d < PAYS_OFF_MIN_DIM:
            return False, "d=1: a scalar problem, the conic route is as fast"
        if not math.isinf(data.gamma) and m <= NEWTON_MAX_CONSTRAINTS:
            return True, (f"d={d}, {m} constraints: dual Newton (no compiled kernel), measured "
                          f"{PAYS_OFF_NOTE}")
        if numba_loaded():
            return True, (f"d={d}, {m} constraints: random-order sweeps; their compiled-kernel "
                          "start-up is already paid in this process")
        if m * d * d >= PAYS_OFF_SWEEPS_MIN_WORK:
            return True, (f"d={d}, {m} constraints: m d^2 >= {PAYS_OFF_SWEEPS_MIN_WORK:.0e}, "
                          "sweeps beat Clarabel including the compiled-kernel start-up "
                          f"({PAYS_OFF_SWEEPS_NOTE})")
        return False, (f"{m} constraints {'(hard)' if math.isinf(data.gamma) else ''}: the sweeps' "
                       "one-off compiled-kernel start-up (0.3-1.5 s per process) exceeds "
                       "Clarabel's time at this size")

    OPTIONS = _ROUTE_OPTS
    UNIT = "iter"
    STATUS_MAP = {SolverStatus.OPTIMAL: cp.OPTIMAL, SolverStatus.INFEASIBLE: cp.INFEASIBLE}

    def to_user(self, data: ITMLData) -> Callable[[float], float]:
        def user(v: float) -> float:  # the solver's objective -> the user's
            return data.c1 * v + data.offset

        return user

    def run(self, data: ITMLData, ctx: RunContext, **opts: Any) -> Any:
        opts = {"slow_after": SLOW_AFTER, **opts}
        return itml_linear(data.V, data.bounds, data.delta, data.W0, data.gamma,
                           callback=ctx.callback, **opts)

    def invert(self, res: Any, ctx: RunContext) -> RouteResult:
        if res.status == "slow":
            return self._hand_to_conic(ctx.problem, res, ctx.elapsed(), ctx.verbose)
        data: ITMLData = ctx.data
        user = self.to_user(data)
        elapsed = ctx.elapsed()
        history = user_history(res.history, user)
        extra = {"sweeps": res.iterations, "gamma": data.gamma, "form": "linear"}
        status = self.map_status(res.status)
        if status == cp.INFEASIBLE:
            extra["farkas_ray"] = res.extra.get("farkas_ray")
            return RouteResult.no_point(status, 1, backend="bregman", iterations=res.iterations,
                                        solve_time=elapsed, history=history, extra=extra)
        extra.update(relative_violation=res.max_violation, lam=res.lam)
        return self.primal_dual_result(res, ctx, status, primal=_primal(data, res),
                                       dual=_duals(data, res), solve_time=elapsed, extra=extra)

    @staticmethod
    def _hand_to_conic(problem: cp.Problem, res: Any, swept: float, verbose: bool) -> RouteResult:
        """The conic route's result (Clarabel when usable), after sweeps that converged too
        slowly; ``extra`` says what the sweeps reached."""
        conic = get_route("conic")
        match = conic.recognize(problem)
        if not match.ok:
            raise RouteMismatch(f"the sweeps converge too slowly and the conic route does not "
                                f"apply: {match.reason}")
        solver = "CLARABEL" if backend_status("CLARABEL")[0] else None
        out = conic.solve(problem, match, solver=solver, verbose=verbose)
        out.extra = {**(out.extra or {}), "handed_to_conic": {
            "sweeps": res.iterations, "seconds": swept, "gap": res.gap,
            "max_violation": res.max_violation,
            "why": "the measured convergence rate would reach max_sweeps before tol"}}
        out.backend = f"bregman->{out.backend}"
        out.solve_time = (out.solve_time or 0.0) + swept
        return out


def _primal(data: ITMLData, res: Any) -> dict[int, np.ndarray]:
    """W and the slack variables (each entry ``xi / a`` of its row, the reference elsewhere)."""
    primal = {data.W.id: res.W}
    if data.xis:
        xi_val = data.xi0_full.copy()
        xi_val[data.slack_index] = res.xi / data.slack_scale
        pos = 0
        for x in data.xis:
            primal[x.id] = xi_val[pos:pos + x.size].reshape(x.shape, order="F")
            pos += x.size
    return primal


def _duals(data: ITMLData, res: Any) -> dict[int, Any]:
    """The multiplier of each distance constraint: ``c1 * lam``."""
    dual = {}
    for cid, shape, sl in data.rows:
        lam = data.c1 * res.lam[sl]
        dual[cid] = lam.reshape(shape, order="F") if shape else float(lam[0])
    return dual


register_route(BregmanRoute())
