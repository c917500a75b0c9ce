r"""Dual coordinate descent for the relative-comparison metric QP (Nguyen, Morell, De Baets).

Primal (Schultz-Joachims QP (2.3), optionally without the sign constraint)::

    min_{w, xi}  1/2 w^T L w + sum_i C_i xi_i
    s.t.         w^T z_i >= 1 - xi_i,  xi_i >= 0  (i = 1..n),   w_j >= 0  (j in J)

with ``L`` symmetric positive definite, ``Z = [z_1 ... z_n]^T`` of shape (n, m) and ``J`` the
sign-constrained coordinates (all, none or a mask). Dual (3.8), written with ``f`` to minimize::

    min_{lam, t}  f(lam, t) = 1/2 (Z^T lam + t)^T L^{-1} (Z^T lam + t) - sum_i lam_i
    s.t.          0 <= lam_i <= C_i,   t_j >= 0 (j in J),   t_j = 0 (j not in J)

with ``w = L^{-1}(Z^T lam + t)``. (The paper prints ``+ sum lam``; the sign is ``-``.)

Implementation (Algorithm 2, in Cholesky coordinates). With ``L = R^T R`` and ``v = R w``::

    v = Y^T lam + S^T t,  Y = Z R^{-1} (rows y_i = R^{-T} z_i),  S = R^{-1} (rows R^{-T} e_j)

so ``z_i^T w = y_i^T v``, ``z_i^T L^{-1} z_i = |y_i|^2``, ``(L^{-1})_jj = |s_j|^2`` and
``1/2 w^T L w = 1/2 |v|^2``. One coordinate step is O(m)::

    lam_i <- clip(lam_i - (y_i^T v - 1) / |y_i|^2, 0, C_i),   v += (lam_i - lam_old) y_i
    t_j   <- max(t_j - (s_j^T v) / |s_j|^2, 0),               v += (t_j - t_old) s_j

(``s_j^T v = w_j``). Only ``Y`` (n x m, replacing Z) and the m x m ``R^{-1}`` are formed; no
``L^{-1}`` and no extra n x m product. Each pass visits the coordinates in a fresh random order
(seeded) and shrinks variables stuck at a bound (LIBLINEAR's rule on the projected gradient).

Certificate, evaluated over ALL constraints (unshrunk) at checks: the dual value
``D = sum lam - 1/2 |v|^2`` of the current dual-feasible (lam, t), the primal value
``P = 1/2 wp^T L wp + sum C_i max(0, 1 - wp^T z_i)`` of the primal-feasible
``wp = w`` with its sign-constrained entries clipped at 0, and ``gap = P - D >= 0``
(weak duality). The solver stops when ``gap / max(1, P) <= tol``; then ``P - P* <= gap`` and,
as the primal is L-strongly convex in w, ``|w - w*|_L <= sqrt(2 gap)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from ._jit import lazy_njit


@dataclass
class DualCDResult:
    """Result of :func:`dual_cd`.

    ``w`` is primal feasible (sign-constrained entries >= 0), ``xi = max(0, 1 - Z w)``;
    ``lam`` (n,) and ``t`` (m,, zero off the sign-constrained set) are dual feasible.
    ``primal``/``dual`` are the objective values at those points and ``gap = primal - dual``.
    ``history`` has ``"dual"`` after every pass and ``"primal"``, ``"gap"``, ``"pass"`` at checks.
    """

    w: np.ndarray
    xi: np.ndarray
    lam: np.ndarray
    t: np.ndarray
    primal: float
    dual: float
    gap: float
    rel_gap: float
    converged: bool
    iterations: int
    setup_time: float
    solve_time: float
    history: dict[str, list[float]] = field(default_factory=dict)
    n_polish: int = 0
    method: str = "cd"


# --------------------------------------------------------------------------------------------
# Compiled kernels
# --------------------------------------------------------------------------------------------
@lazy_njit(cache=True)
def _seed(seed):
    np.random.seed(seed)


@lazy_njit(cache=True)
def _shuffle(idx, k):
    for a in range(k - 1, 0, -1):
        b = np.random.randint(0, a + 1)
        tmp = idx[a]
        idx[a] = idx[b]
        idx[b] = tmp


@lazy_njit(cache=True)
def _block_pass(Y, qd, upper, margin, x, v, idx, n_act, pg_max_old, pg_min_old, shrink):
    """One randomized pass over the active coordinates of one block.

    Minimizes ``1/2 |v|^2 - margin * sum x`` over ``x_i in [0, upper_i]`` coordinate-wise, with
    ``v = sum_i x_i Y[i] + const`` kept up to date. Returns the new active count and the
    max/min projected gradient seen (for shrinking and the stopping heuristic).
    """
    m = v.shape[0]
    _shuffle(idx, n_act)
    pg_max = -np.inf
    pg_min = np.inf
    s = 0
    while s < n_act:
        i = idx[s]
        yi = Y[i]
        g = -margin
        for k in range(m):
            g += yi[k] * v[k]
        xi = x[i]
        ui = upper[i]
        if xi <= 0.0:
            if shrink and g > pg_max_old:
                n_act -= 1
                idx[s] = idx[n_act]
                idx[n_act] = i
                continue
            pg = min(g, 0.0)
        elif xi >= ui:
            if shrink and g < pg_min_old:
                n_act -= 1
                idx[s] = idx[n_act]
                idx[n_act] = i
                continue
            pg = max(g, 0.0)
        else:
            pg = g
        if pg > pg_max:
            pg_max = pg
        if pg < pg_min:
            pg_min = pg
        if pg != 0.0:
            q = qd[i]
            if q > 0.0:
                new = min(max(xi - g / q, 0.0), ui)
            else:  # y_i = 0: the coordinate is linear with slope -margin
                new = ui if g < 0.0 else 0.0
            d = new - xi
            if d != 0.0:
                x[i] = new
                for k in range(m):
                    v[k] += d * yi[k]
        s += 1
    return n_act, pg_max, pg_min


@lazy_njit(cache=True)
def _combine(Y, x, v):
    """v += Y^T x, skipping zero entries of x (many multipliers sit at 0)."""
    m = v.shape[0]
    for i in range(x.shape[0]):
        xi = x[i]
        if xi != 0.0:
            yi = Y[i]
            for k in range(m):
                v[k] += xi * yi[k]


def _exact_step(r, sd, C, mu, wLd, dLd, a_max):
    """Minimizer of the convex piecewise quadratic ``phi(a) = P_mu(w + a d)`` on [0, a_max]
    (see :func:`_huber_newton`): root of the increasing, piecewise linear ::

        phi'(a) = w^T L d + a d^T L d - sum_i C_i sd_i clip((r_i - a sd_i) / mu, 0, 1)

    by safeguarded Newton steps inside a bracket (exact once the iterate lies on the root's
    linear piece). numpy only: each probe is O(n)."""
    Csd = C * sd
    Csd2 = Csd * sd / mu

    def dphi(a):
        x = (r - a * sd) / mu
        g = wLd + a * dLd - float(Csd @ np.clip(x, 0.0, 1.0))
        h = dLd + float(Csd2 @ ((x > 0.0) & (x < 1.0)))
        return g, h

    g, h = dphi(0.0)
    if g >= 0.0:
        return 0.0
    lo, hi = 0.0, a_max
    a = min(1.0, a_max)
    for _ in range(100):
        g, h = dphi(a)
        if g == 0.0:
            return a
        if g < 0.0:
            lo = a
            if lo >= a_max:
                return a_max
        else:
            hi = a
        if hi - lo <= 1e-12 * hi:
            break
        nxt = a - g / h if h > 0 else np.inf
        if abs(nxt - a) <= 1e-13 * a:  # on the root's linear piece: Newton step is exact
            return nxt if lo < nxt < hi else a
        if not (lo < nxt < hi):
            nxt = 0.5 * (lo + hi) if np.isfinite(hi) else 2.0 * max(a, lo)
        a = nxt
    return a


# --------------------------------------------------------------------------------------------
# Input checks and precomputation
# --------------------------------------------------------------------------------------------
def _check_inputs(L, Z, C, nonneg, ridge):
    Z = np.asarray(Z, dtype=float)
    L = np.asarray(L, dtype=float)
    if Z.ndim != 2:
        raise ValueError(f"Z must be a 2-D array (n constraints x m features), got shape {Z.shape}")
    n, m = Z.shape
    if n == 0 or m == 0:
        raise ValueError(f"Z must be non-empty, got shape {Z.shape}")
    if L.shape != (m, m):
        raise ValueError(
            f"L must have shape ({m}, {m}) to match Z of shape {Z.shape}, got {L.shape}"
        )
    if not np.all(np.isfinite(Z)):
        raise ValueError("Z contains NaN or infinite entries")
    if not np.all(np.isfinite(L)):
        raise ValueError("L contains NaN or infinite entries")
    C_arr = np.asarray(C, dtype=float)
    if C_arr.ndim == 0:
        C_arr = np.full(n, float(C_arr))
    elif C_arr.shape != (n,):
        raise ValueError(f"C must be a scalar or have shape ({n},), got {C_arr.shape}")
    if not np.all(np.isfinite(C_arr)):
        raise ValueError("C must be finite (got NaN or inf)")
    if np.any(C_arr <= 0):
        raise ValueError(f"C must be > 0, got min(C) = {C_arr.min():.6g}")
    if not (np.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge!r}")
    if isinstance(nonneg, (bool, np.bool_)):
        mask = np.full(m, bool(nonneg))
    else:
        mask = np.asarray(nonneg, dtype=bool)
        if mask.shape != (m,):
            raise ValueError(f"nonneg must be a bool or a boolean mask of shape ({m},)")
    scale = max(1.0, np.abs(L).max())
    if np.abs(L - L.T).max() > 1e-10 * scale:
        raise ValueError("L must be symmetric")
    return L, Z, C_arr, mask


def _factor(L, ridge):
    """Upper Cholesky factor R of L + ridge I (diagonal fast path) and whether it is diagonal."""
    m = L.shape[0]
    Lr = L + ridge * np.eye(m) if ridge > 0 else L
    off = Lr - np.diag(np.diag(Lr))
    if not off.any():
        d = np.diag(Lr)
        if np.all(d > 0):
            return np.diag(np.sqrt(d)), True
    else:
        try:
            R = sla.cholesky(0.5 * (Lr + Lr.T), lower=False)
            if np.all(np.diag(R) > 0):
                return R, False
        except np.linalg.LinAlgError:
            pass
    lam_min = float(np.linalg.eigvalsh(0.5 * (Lr + Lr.T))[0])
    kind = "singular" if abs(lam_min) <= 1e-12 * max(1.0, np.abs(Lr).max()) else (
        "indefinite" if lam_min < 0 else "numerically singular")
    raise ValueError(
        f"L must be positive definite; it is {kind} (smallest eigenvalue {lam_min:.3g}). "
        "Pass ridge=r > 0 to solve with L + r*I instead."
    )


def _transform(Z, R, diagonal):
    """Y = Z R^{-1} (C-contiguous, n x m) and S = R^{-1}."""
    m = R.shape[0]
    if diagonal:
        r = np.diag(R)
        if np.all(r == 1.0):
            return np.ascontiguousarray(Z), np.eye(m)
        return np.ascontiguousarray(Z / r), np.diag(1.0 / r)
    # Solve R^T Y^T = Z^T; LAPACK returns Y^T in Fortran order, so Y = (Y^T)^T is C-ordered.
    Yt = sla.solve_triangular(R, Z.T, trans="T", lower=False, check_finite=False)
    S = sla.solve_triangular(R, np.eye(m), lower=False, check_finite=False)
    return np.ascontiguousarray(Yt.T), S


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------
def dual_cd(
    L: np.ndarray,
    Z: np.ndarray,
    C: float | np.ndarray = 1.0,
    *,
    nonneg: bool | np.ndarray = True,
    tol: float = 1e-8,
    max_passes: int = 2000,
    seed: int = 0,
    shrinking: bool = True,
    ridge: float = 0.0,
    check_every: int = 10,
    polish: bool = True,
    time_limit: float | None = None,
    verbose: bool = False,
    newton: bool | None = None,
    callback: Callable[..., None] | None = None,
) -> DualCDResult:
    """Solve ``min 1/2 w^T L w + sum C_i xi_i s.t. Z w >= 1 - xi, xi >= 0, w_J >= 0``.

    Parameters
    ----------
    L : (m, m) symmetric positive definite matrix.
    Z : (n, m) array, row i is z_i.
    C : positive scalar or (n,) array of per-constraint weights.
    nonneg : True (w >= 0), False (w free, the linear-SVM-like case) or a boolean mask.
    tol : stop when ``(P - D) / max(1, P) <= tol`` (P primal, D dual value).
    max_passes : limit on outer passes; if reached, ``converged`` is False.
    seed : seed of the per-pass random permutations.
    shrinking : drop variables stuck at a bound from passes (re-checked before stopping).
    ridge : solve with ``L + ridge * I`` (for singular or indefinite L); 0 means L must be PD.
    check_every : evaluate the full certificate at least every this many passes.
    polish : at certificate checks (backing off geometrically) also try the candidates of
        :func:`_polish_candidates` (KKT pair of the current partition; projected Newton on the
        Huber-smoothed primal with decreasing smoothing). A candidate is used only when it
        improves the certified primal or dual value, so the certificate stays rigorous;
        ``polish=False`` is plain Algorithm 2.
    time_limit : seconds; stop (not converged) after this much solve time.
    newton : first try the numpy-only primal path (:func:`_newton_first`: projected Newton on
        the Huber-smoothed primal with decreasing smoothing, then the KKT pair of the identified
        partition), certified exactly like the passes; if it does not reach ``tol``, coordinate
        descent continues from its best dual point. It needs no compiled kernel (no numba
        start-up cost) and costs a few O(n m) sweeps plus m x m solves. Default (None): on when
        ``polish`` is on and n >= 10 m, m <= 500 (many rows per feature).
    callback : called at every certificate check as ``callback(passes, objective=P,
        bound=D, gap=rel. gap, violation=0.0, time=seconds)`` (e.g. ``specopt._progress``).
    """
    t0 = time.perf_counter()
    L, Z, Cv, mask = _check_inputs(L, Z, C, nonneg, float(ridge))
    if not (tol > 0):
        raise ValueError(f"tol must be > 0, got {tol!r}")
    n, m = Z.shape
    R, diagonal = _factor(L, float(ridge))
    Lr = L + ridge * np.eye(m) if ridge else L
    if newton is None:
        newton = polish and n >= 10 * m and m <= 500
    hist: dict[str, list[float]] = {"dual": [], "primal": [], "gap": [], "pass": []}
    best_w, best_P, n_polish = None, np.inf, 0
    warm = None
    first = 0  # progress lines after the Newton path's candidates are numbered on from them
    if newton:
        t_n = time.perf_counter()
        def candidate(k: int, P: float, D: float) -> None:  # progress: one line per candidate
            callback(k, objective=P, bound=D, gap=(P - D) / max(1.0, P), violation=0.0,
                     time=time.perf_counter() - t0)

        out = _newton_first(Lr, Z, Cv, mask, R, tol, time_limit,
                            on_step=callback and candidate)
        best_w, best_P, warm, D, n_polish = out
        first = n_polish
        hist["dual"].append(D)
        hist["primal"].append(best_P)
        hist["gap"].append(best_P - D)
        hist["pass"].append(0)
        hist.setdefault("time", []).append(time.perf_counter() - t0)
        rel = (best_P - D) / max(1.0, best_P)
        if verbose:
            print(f"newton  P={best_P:.10g}  D={D:.10g}  rel.gap={rel:.3e}  candidates={n_polish}")
        if callback is not None and n_polish == 0:  # else the last candidate printed it
            callback(0, objective=best_P, bound=D, gap=rel, violation=0.0,
                     time=time.perf_counter() - t0)
        out_of_time = time_limit is not None and time.perf_counter() - t_n > time_limit
        if rel <= tol or out_of_time:
            lam_k, t_k = warm
            return DualCDResult(
                w=best_w, xi=np.maximum(0.0, 1.0 - Z @ best_w), lam=lam_k, t=t_k,
                primal=best_P, dual=D, gap=best_P - D, rel_gap=rel, converged=rel <= tol,
                iterations=0, setup_time=t_n - t0, solve_time=time.perf_counter() - t_n,
                history=hist, n_polish=n_polish, method="newton",
            )
    Y, S = _transform(Z, R, diagonal)
    qd = np.einsum("ij,ij->i", Y, Y)
    tcoords = np.flatnonzero(mask)
    Sr = np.ascontiguousarray(S[tcoords])  # rows s_j = R^{-T} e_j, j in J
    sd = np.einsum("ij,ij->i", Sr, Sr)
    nt = tcoords.size
    t_upper = np.full(nt, np.inf)

    lam = np.zeros(n)
    tv = np.zeros(nt)
    v = np.zeros(m)
    idx = np.arange(n, dtype=np.int64)
    tidx = np.arange(nt, dtype=np.int64)
    n_act, nt_act = n, nt
    if warm is not None:  # continue from the Newton path's best dual point
        lam[:] = warm[0]
        tv[:] = warm[1][tcoords]
        v = _dual_value(Y, Sr, lam, tv)[0]
    _seed(int(seed))
    setup_time = time.perf_counter() - t0

    inf = np.inf
    pg_max_old, pg_min_old = inf, -inf
    eps_pg = 1.0
    converged = False
    passes = 0
    next_polish = 0 if warm is None else 20
    t1 = time.perf_counter()
    while passes < max_passes:
        passes += 1
        n_act, pmax, pmin = _block_pass(
            Y, qd, Cv, 1.0, lam, v, idx, n_act, pg_max_old, pg_min_old, shrinking
        )
        if nt:
            nt_act, tmax, tmin = _block_pass(
                Sr, sd, t_upper, 0.0, tv, v, tidx, nt_act, pg_max_old, pg_min_old, shrinking
            )
            pmax, pmin = max(pmax, tmax), min(pmin, tmin)
        hist["dual"].append(float(lam.sum() - 0.5 * v @ v))
        spread = pmax - pmin if n_act + nt_act else 0.0
        out_of_time = time_limit is not None and time.perf_counter() - t1 > time_limit
        if not (spread <= eps_pg or passes % check_every == 0 or passes == max_passes
                or out_of_time):
            pg_max_old = pmax if pmax > 0 else inf
            pg_min_old = pmin if pmin < 0 else -inf
            continue
        # full (unshrunk) certificate
        v, D = _dual_value(Y, Sr, lam, tv)
        w, P = _primal_value(Y, R, v, tcoords, Cv)
        if P < best_P:
            best_w, best_P = w, P
        if polish and passes >= next_polish and (best_P - D) / max(1.0, best_P) > tol:
            next_polish = 2 * passes  # back off: a polish costs a few O(nm) sweeps
            t_full = np.zeros(m)
            t_full[tcoords] = tv
            for wk, lam_k, t_k in _polish_candidates(Lr, Z, Cv, mask, lam, t_full, best_w):
                n_polish += 1
                Pk = _primal_value(Y, R, R @ wk, tcoords, Cv)[1]
                if Pk < best_P:
                    best_w, best_P = wk, Pk
                vk, Dk = _dual_value(Y, Sr, lam_k, t_k[tcoords])
                if Dk > D:  # continue coordinate descent from the better dual point
                    lam[:], tv[:], v, D = lam_k, t_k[tcoords], vk, Dk
                    hist["dual"][-1] = D
                if (best_P - D) / max(1.0, best_P) <= tol:
                    break
        hist["primal"].append(best_P)
        hist["gap"].append(best_P - D)
        hist["pass"].append(passes)
        hist.setdefault("time", []).append(time.perf_counter() - t0)
        rel = (best_P - D) / max(1.0, best_P)
        if callback is not None:
            callback(first + passes, objective=best_P, bound=D, gap=rel, violation=0.0)
        if verbose:
            print(f"pass {passes:5d}  P={best_P:.10g}  D={D:.10g}  rel.gap={rel:.3e}"
                  f"  active={n_act}/{n}  polish={n_polish}")
        if rel <= tol:
            converged = True
            break
        if out_of_time:
            break
        if spread <= eps_pg:
            eps_pg *= 0.1
        # unshrink: the next pass sees every variable again
        n_act, nt_act = n, nt
        pg_max_old, pg_min_old = inf, -inf
    solve_time = time.perf_counter() - t1
    if not hist["pass"] or hist["pass"][-1] != passes:
        v, D = _dual_value(Y, Sr, lam, tv)
        w, P = _primal_value(Y, R, v, tcoords, Cv)
        if P < best_P:
            best_w, best_P = w, P
    else:
        D = hist["dual"][-1]
    t_full = np.zeros(m)
    t_full[tcoords] = tv
    gap = best_P - D
    return DualCDResult(
        w=best_w, xi=np.maximum(0.0, 1.0 - Z @ best_w), lam=lam, t=t_full, primal=best_P,
        dual=D, gap=gap, rel_gap=gap / max(1.0, best_P), converged=converged,
        iterations=passes, setup_time=setup_time, solve_time=solve_time, history=hist,
        n_polish=n_polish, method="newton+cd" if newton else "cd",
    )


def _newton_first(L, Z, C, mask, R, tol, time_limit, mu0=1e-1, mu_min=1e-9, band=2.0,
                  on_step=None):
    """numpy-only primal path, certified on ALL rows.

    For mu = mu0, mu0/10, ..., mu_min: projected Newton (:func:`_huber_newton`, warm-started) on
    the Huber-smoothed primal P_mu, then two candidates: the dual-feasible pair of the smoothed
    solution (``lam = C clip(r / mu, 0, 1)``) and the KKT pair of the partition it identifies
    (:func:`_kkt_polish`, exact once the partition is right). After the first level the smoothed
    problem is SHRUNK to the rows with ``|r| < band * mu0`` (r = 1 - z^T w): rows with larger r
    sit in the linear part of h_mu (they enter as the linear term ``q = sum C_i z_i``), rows with
    r <= -band mu0 in its flat part. The shrinking is a heuristic; the certificate is not: every
    candidate's primal value ``P(w)`` and dual value ``D(lam, t)`` are computed on all rows, and
    a wrong guess only shows as a gap (then coordinate descent takes over). Stops at the first
    relative gap <= tol.

    Returns ``(w, P, (lam, t), D, n_candidates)``: the best primal point and value, the best
    dual point and its value (a lower bound on the optimum). ``on_step(k, P, D)`` (if given)
    is called after the k-th candidate with the best values so far.
    """
    n, m = Z.shape
    t0 = time.perf_counter()
    best_w, best_P = np.zeros(m), float(C.sum())  # w = 0: every row at xi = 1
    best_lam, best_t, best_D = np.zeros(n), np.zeros(m), 0.0
    k = 0

    def certify(wk, lam_k, t_k):
        nonlocal best_w, best_P, best_lam, best_t, best_D, k
        k += 1
        wk = np.where(mask, np.maximum(wk, 0.0), wk)
        Pk = float(0.5 * wk @ L @ wk + C @ np.maximum(0.0, 1.0 - Z @ wk))
        if Pk < best_P:
            best_w, best_P = wk, Pk
        lam_k = np.clip(lam_k, 0.0, C)
        t_k = np.where(mask, np.maximum(t_k, 0.0), 0.0)
        u = sla.solve_triangular(R, Z.T @ lam_k + t_k, trans="T", lower=False,
                                 check_finite=False)  # |R^{-T} u|^2 = u^T L^{-1} u
        Dk = float(lam_k.sum() - 0.5 * u @ u)
        if Dk > best_D:
            best_lam, best_t, best_D = lam_k, t_k, Dk
        if on_step is not None:
            on_step(k, best_P, best_D)
        return (best_P - best_D) / max(1.0, best_P) <= tol

    act = None  # rows of the smoothed problem (None: all)
    q = None
    w = np.zeros(m)
    if n >= 80 * m:  # warm start from a 1-in-8 row sample (weights scaled by 8)
        sub = np.arange(0, n, 8)
        w = _huber_newton(L, Z[sub], 8.0 * C[sub], mask, w, mu0)
    mu = mu0
    while mu >= mu_min:
        info = {"converged": True}
        if act is None:
            w = _huber_newton(L, Z, C, mask, w, mu, info=info)
        else:
            w = _huber_newton(L, Z[act], C[act], mask, w, mu, q=q, info=info)
        if not info["converged"]:
            # badly scaled data: the smoothed solve did not converge, so neither its partition
            # nor a shrink can be trusted; hand over to coordinate descent
            r = 1.0 - Z @ w
            lam_mu = C * np.clip(r / mu, 0.0, 1.0)
            certify(w, lam_mu, np.where(mask, np.maximum(L @ w - Z.T @ lam_mu, 0.0), 0.0))
            break
        r = 1.0 - Z @ w
        # partition read with a symmetric band: rows within mu of the margin are in F
        lam_part = np.where(r >= mu, C, np.where(np.abs(r) < mu, 0.5 * C, 0.0))
        cand = _kkt_polish(L, Z, C, mask, lam_part, np.where(mask & (w <= 0.0), 1.0, 0.0))
        if cand is not None and certify(*cand):
            break
        if cand is None or mu < 10 * mu_min:  # the smoothed pair: fallback dual point
            lam_mu = C * np.clip(r / mu, 0.0, 1.0)
            t_mu = np.where(mask, np.maximum(L @ w - Z.T @ lam_mu, 0.0), 0.0)
            if certify(w, lam_mu, t_mu):
                break
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            break
        if act is None:
            keep = np.abs(r) < band * mu0
            if keep.sum() < 0.5 * n:  # shrink once: rows far from the margin are fixed
                act = np.flatnonzero(keep)
                up = r >= band * mu0
                q = Z[up].T @ C[up]
        mu *= 0.1
    return best_w, best_P, (best_lam, best_t), best_D, k


def _dual_value(Y, Sr, lam, tv):
    """``v = Y^T lam + S_J^T t`` recomputed (no drift) and ``D = sum lam - |v|^2 / 2``."""
    v = np.zeros(Y.shape[1])
    _combine(Y, lam, v)
    if tv.size:
        _combine(Sr, tv, v)
    return v, float(lam.sum() - 0.5 * v @ v)


def _primal_value(Y, R, v, tcoords, C):
    """Primal-feasible ``wp`` (w = R^{-1} v with w_J clipped at 0) and its objective P(wp)."""
    w = sla.solve_triangular(R, v, lower=False, check_finite=False)
    if tcoords.size:
        w[tcoords] = np.maximum(w[tcoords], 0.0)
    vp = R @ w
    margins = Y @ vp
    return w, float(0.5 * vp @ vp + C @ np.maximum(0.0, 1.0 - margins))


def _kkt_polish(L, Z, C, mask, lam, t):
    """Exact primal-dual pair for the active-set partition of the current dual iterate.

    With U = {lam_i = C_i}, F = {0 < lam_i < C_i} and T = {j in J: t_j > 0} (w_j held at 0)
    it solves (least squares) the KKT system of that partition::

        L w - Z_U^T C_U - Z_F^T lam_F - t = 0,   Z_F w = 1,   w_T = 0

    and returns ``w`` (w_J clipped at 0) and the dual point (lam, t) clipped to the dual-feasible
    set. Once coordinate descent has identified the partition this pair is optimal to rounding;
    before that it is just a candidate, and the caller uses it only through the certificate.
    """
    n, m = Z.shape
    U = np.flatnonzero(lam >= C)
    F = np.flatnonzero((lam > 0) & (lam < C))
    T = np.flatnonzero(mask & (t > 0))
    if F.size > 4 * m:  # partition not identified yet: the system would be overdetermined
        return None
    free = np.setdiff1d(np.arange(m), T)
    c_u = Z[U].T @ C[U]
    ZF = Z[np.ix_(F, free)]
    nfr, nf = free.size, F.size
    K = np.zeros((nfr + nf, nfr + nf))
    K[:nfr, :nfr] = L[np.ix_(free, free)]
    K[:nfr, nfr:] = -ZF.T
    K[nfr:, :nfr] = ZF
    sol = np.linalg.lstsq(K, np.concatenate([c_u[free], np.ones(nf)]), rcond=None)[0]
    w = np.zeros(m)
    w[free] = sol[:nfr]
    lam_k = np.zeros(n)
    lam_k[U] = C[U]
    lam_k[F] = np.clip(sol[nfr:], 0.0, C[F])
    t_k = np.zeros(m)
    t_k[T] = np.maximum(L[T] @ w - c_u[T] - Z[np.ix_(F, T)].T @ lam_k[F], 0.0)
    w[mask] = np.maximum(w[mask], 0.0)
    return w, lam_k, t_k


def _polish_candidates(L, Z, C, mask, lam, t, w, mu0=1e-2, mu_min=1e-9):
    """Primal-dual candidates for the certificate (a generator; the caller stops it early).

    First the KKT pair of the current dual partition; then, for mu = mu0, mu0/10, ..., a
    projected Newton solve (warm-started) of the Huber-smoothed primal::

        P_mu(w) = 1/2 w^T L w + sum_i C_i h_mu(1 - z_i^T w),
        h_mu(r) = 0 (r <= 0),  r^2 / (2 mu) (0 < r < mu),  r - mu/2 (r >= mu),

    over w_J >= 0, yielding its primal point with the dual-feasible pair
    ``lam_i = C_i clip((1 - z_i^T w) / mu, 0, 1)``, ``t_J = max(0, (L w - Z^T lam)_J)``, and the
    KKT pair of the partition that pair defines (exact once the partition is right).
    """
    cand = _kkt_polish(L, Z, C, mask, lam, t)
    if cand is not None:
        yield cand
    mu = mu0
    while mu >= mu_min:
        w = _huber_newton(L, Z, C, mask, w, mu)
        r = 1.0 - Z @ w
        lam_mu = C * np.clip(r / mu, 0.0, 1.0)
        t_mu = np.where(mask, np.maximum(L @ w - Z.T @ lam_mu, 0.0), 0.0)
        yield w, lam_mu, t_mu
        # partition read with a symmetric band: rows within mu of the margin are in F
        lam_part = np.where(r >= mu, C, np.where(np.abs(r) < mu, 0.5 * C, 0.0))
        t_part = np.where(mask & (w <= 0.0), 1.0, 0.0)
        cand = _kkt_polish(L, Z, C, mask, lam_part, t_part)
        if cand is not None:
            yield cand
        mu *= 0.1


def _huber_value(L, C, mu, w, r, q=None):
    h = np.where(r <= 0, 0.0, np.where(r < mu, r * r / (2 * mu), r - 0.5 * mu))
    val = 0.5 * w @ L @ w + C @ h
    return val if q is None else val - q @ w


def _huber_newton(L, Z, C, mask, w, mu, max_iter=50, q=None, info=None):
    """Projected Newton (Bertsekas) for min P_mu(w) - q^T w s.t. w_J >= 0 (q: optional linear
    term, the rows of a shrunk problem fixed in the linear part of h_mu).

    Direction: Newton on the free coordinates with the generalized Hessian
    ``L + sum_{0 < r_i < mu} (C_i / mu) z_i z_i^T``; coordinates at 0 (within eps) with a
    positive gradient are held. Step: the exact minimizer of the convex piecewise-quadratic
    ``P_mu(w + a d)`` along the ray (bisection on its derivative, O(n) per probe), then
    projected on w_J >= 0; if the projection undoes the decrease, backtrack along the arc.
    """
    w = w.copy()
    w[mask] = np.maximum(w[mask], 0.0)
    r = 1.0 - Z @ w
    f = _huber_value(L, C, mu, w, r, q)
    for _ in range(max_iter):
        lam = C * np.clip(r / mu, 0.0, 1.0)
        Lw = L @ w
        g = Lw - Z.T @ lam
        if q is not None:
            g -= q
        pg = np.where(mask & (w <= 0.0), np.minimum(g, 0.0), g)
        if np.abs(pg).max() <= 1e-12 * max(1.0, np.abs(Lw).max()):
            break
        wp = np.where(mask, np.maximum(w - g, 0.0), w - g)
        eps = min(1e-6, float(np.abs(w - wp).max()))
        bound = mask & (w <= eps) & (g > 0)
        Q = np.flatnonzero((r > 0) & (r < mu))
        ZQ = Z[Q]
        H = L + (ZQ.T * (C[Q] / mu)) @ ZQ
        free = ~bound
        d = np.zeros_like(w)
        d[free] = -np.linalg.solve(H[np.ix_(free, free)], g[free])
        sd = Z @ d
        wLd = float(w @ L @ d) - (0.0 if q is None else float(q @ d))
        step = _exact_step(r, sd, C, mu, wLd, float(d @ L @ d), np.inf)
        accepted = False
        for _ in range(40):
            wn = w + step * d
            bent = mask & (wn < 0)
            if bent.any():
                wn[bent] = 0.0
                rn = 1.0 - Z @ wn
            else:
                rn = r - step * sd
            fn = _huber_value(L, C, mu, wn, rn, q)
            if fn < f:
                accepted = True
                break
            if not bent.any():  # the exact step along the ray does not decrease: converged
                break
            step *= 0.5
        if not accepted or f - fn <= 1e-16 * abs(f):
            if accepted:
                w = wn
            break
        w, r, f = wn, rn, fn
    else:  # max_iter reached without a stopping test: not converged
        if info is not None:
            info["converged"] = False
    return w
