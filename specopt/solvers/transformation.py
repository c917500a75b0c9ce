"""Large-margin transformation learning: the saddle problem, its certificate, and solvers.

Data of one task: ``F`` of shape ``(N, J, D)`` with ``F[n, j] = phi_j(x_n)`` (the j-th base
transformation of example n, a D-vector), labels ``y`` in {-1, +1}^N and the box bound C.
Base kernels ``K_ij = Phi_i Phi_j^T`` (N x N, ``Phi_j = F[:, j, :]``); the matrix-mixture kernel
is ``K(M) = sum_ij M_ij K_ij`` on the spectraplex ``{M PSD, tr M <= 1}``.

The convex problem (all tasks t share M; ``alpha_t^T y_t = 0`` only with a bias)::

    p* = min_M max_alpha sum_t S_t(M, alpha_t),   S_t = 2 1^T a_t - a_t^T Y_t K_t(M) Y_t a_t,
       = max_alpha sum_t 2 1^T a_t - lambda_max(sum_t G_t(a_t)),   0 <= a_t <= C_t,

with ``G(a) = B(a)^T B(a)``, ``B(a) = [Phi_1^T Y a, ..., Phi_J^T Y a]`` (D x J). Certificate for
a pair (M, alpha): the lower bound ``D(alpha) = sum_t 2 1^T a_t - lambda_max(sum_t G_t(a_t))``
(valid for any feasible alpha) and the upper bound ``U(M, alpha) >= P(M) = max_a sum_t S_t(M, a)``
obtained from the primal SVM with ``w_t = Z_t^T Y a_t`` (Z_t the features of K_t(M))::

    U = sum_t [ a_t^T Y K(M) Y a_t + 2 C_t min_b sum_n (1 - y_n (f_n + b))_+ ],  f = K(M) Y a_t,

(b = 0 without a bias). ``U - D >= P(M) - p* >= 0`` and both vanish at a saddle point.
No CVXPY here: conic pieces (compact LMI form, QCQP master) live outside ``solvers/`` and are
passed in as callbacks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linprog

from ._status import SolverStatus

__all__ = [
    "SaddleTask",
    "make_tasks",
    "b_matrix",
    "gram",
    "kernel_margins",
    "lower_bound",
    "upper_bound",
    "best_bias",
    "relative_gap",
    "record_bounds",
    "top_eigvec",
    "MatrixGenerationResult",
    "SaddleResult",
    "matrix_generation",
    "GreedyResult",
    "greedy_mixture",
    "mwtla",
    "svm_primal_objective",
    "linear_svm_qp",
]


@dataclass(frozen=True)
class SaddleTask:
    """One classification task: ``F`` (N, J, D), labels ``y`` (N,), box bound ``C``."""

    F: np.ndarray
    y: np.ndarray
    C: float

    @property
    def n(self) -> int:
        return self.F.shape[0]

    @property
    def J(self) -> int:
        return self.F.shape[1]

    @property
    def D(self) -> int:
        return self.F.shape[2]

    @property
    def F2(self) -> np.ndarray:
        """``F`` as an (N, J*D) matrix (row n = [phi_1(x_n), ..., phi_J(x_n)])."""
        return self.F.reshape(self.F.shape[0], -1)


def make_tasks(
    F: np.ndarray | Sequence[np.ndarray],
    y: np.ndarray | Sequence[np.ndarray],
    C: float | Sequence[float],
) -> list[SaddleTask]:
    """Validate and wrap one task (arrays) or several (sequences of arrays) as SaddleTasks."""
    if isinstance(F, np.ndarray):
        F, y = [F], [y]
    F, y = list(F), list(y)
    if len(F) != len(y) or not F:
        raise ValueError(f"need as many label vectors as feature arrays, got {len(F)} and {len(y)}")
    Cs = [float(C)] * len(F) if np.isscalar(C) else [float(c) for c in C]
    if len(Cs) != len(F):
        raise ValueError(f"need one C per task, got {len(Cs)} for {len(F)} tasks")
    tasks = []
    J = None
    for t, (Ft, yt, Ct) in enumerate(zip(F, y, Cs, strict=True)):
        Ft = np.ascontiguousarray(Ft, dtype=float)
        yt = np.asarray(yt, dtype=float).ravel()
        if Ft.ndim != 3:
            raise ValueError(f"task {t}: F must have shape (N, J, D), got {Ft.shape}")
        if Ft.shape[0] != yt.size:
            raise ValueError(f"task {t}: F has {Ft.shape[0]} rows but y has {yt.size} labels")
        if not np.all(np.isin(yt, (-1.0, 1.0))):
            raise ValueError(f"task {t}: labels must be -1 or +1")
        if not np.all(np.isfinite(Ft)):
            raise ValueError(f"task {t}: F contains NaN or inf")
        if not Ct > 0:
            raise ValueError(f"task {t}: C must be positive, got {Ct}")
        if J is None:
            J = Ft.shape[1]
        elif Ft.shape[1] != J:
            raise ValueError(f"all tasks must share the number of transformations J={J}")
        tasks.append(SaddleTask(Ft, yt, Ct))
    return tasks


def b_matrix(task: SaddleTask, a: np.ndarray) -> np.ndarray:
    """``B(a)^T`` as a (J, D) array: row j is ``Phi_j^T Y a``."""
    return (task.F2.T @ (task.y * a)).reshape(task.J, task.D)


def gram(task: SaddleTask, a: np.ndarray) -> np.ndarray:
    """``G(a)_ij = a^T Y K_ij Y a = b_i^T b_j`` (J x J)."""
    Bt = b_matrix(task, a)
    return Bt @ Bt.T


def kernel_margins(task: SaddleTask, M: np.ndarray, Bt: np.ndarray) -> np.ndarray:
    """``f = K(M) Y a = sum_ij M_ij Phi_i b_j`` given ``Bt = B(a)^T``."""
    return task.F2 @ (M @ Bt).ravel()


def top_eigvec(G: np.ndarray) -> tuple[float, np.ndarray]:
    """Largest eigenvalue of a symmetric matrix and a unit eigenvector (sign: sum >= 0)."""
    w, V = np.linalg.eigh(0.5 * (G + G.T))
    u = V[:, -1]
    if u.sum() < 0:
        u = -u
    return float(w[-1]), u


def lower_bound(tasks: Sequence[SaddleTask], alphas: Sequence[np.ndarray]) -> float:
    """``D(alpha) = sum_t 2 1^T a_t - lambda_max(sum_t G_t(a_t))`` (valid for feasible alpha)."""
    G = sum(gram(t, a) for t, a in zip(tasks, alphas, strict=True))
    return float(sum(2.0 * a.sum() for a in alphas) - np.linalg.eigvalsh(G)[-1])


def best_bias(y: np.ndarray, f: np.ndarray) -> tuple[float, float]:
    """Exact ``min_b h(b)``, ``h(b) = sum_n (1 - y_n (f_n + b))_+``; returns (b, h(b)).

    h is convex piecewise linear with breakpoints ``y_n - f_n``; it is evaluated at every
    breakpoint with sorted cumulative sums (O(N log N)).
    """
    pos = y > 0
    t = np.sort(1.0 - f[pos])  # positives contribute (t - b)_+
    c = np.sort(-1.0 - f[~pos])  # negatives contribute (b - c)_+
    cand = np.concatenate([t, c])
    if cand.size == 0:
        return 0.0, 0.0
    tsuf = np.concatenate([np.cumsum(t[::-1])[::-1], [0.0]])
    cpre = np.concatenate([[0.0], np.cumsum(c)])
    it = np.searchsorted(t, cand, side="right")  # t[it:] > b
    ic = np.searchsorted(c, cand, side="left")  # c[:ic] < b
    h = (tsuf[it] - cand * (t.size - it)) + (cand * ic - cpre[ic])
    k = int(np.argmin(h))
    return float(cand[k]), float(max(h[k], 0.0))


def upper_bound(
    tasks: Sequence[SaddleTask], M: np.ndarray, alphas: Sequence[np.ndarray], bias: bool
) -> tuple[float, list[float]]:
    """Primal upper bound ``U(M, alpha) >= P(M)`` and the per-task biases that attain it.

    ``U = sum_t a_t^T Y K(M) Y a_t + 2 C_t min_b sum_n (1 - y_n (f_n + b))_+`` with
    ``f = K(M) Y a_t`` (the hinge loss of ``w_t = Z_t^T Y a_t``; b = 0 without a bias).
    Valid for any PSD M: it is the primal objective of a feasible primal point.
    """
    total = 0.0
    biases = []
    for task, a in zip(tasks, alphas, strict=True):
        Bt = b_matrix(task, a)
        f = kernel_margins(task, M, Bt)
        wsq = float(np.sum((M @ Bt) * Bt))
        if bias:
            b, h = best_bias(task.y, f)
        else:
            b, h = 0.0, float(np.maximum(0.0, 1.0 - task.y * f).sum())
        total += wsq + 2.0 * task.C * h
        biases.append(b)
    return total, biases


def relative_gap(upper: float, lower: float) -> float:
    """``(U - L) / max(1, |U|)`` (the certificate convention of specopt)."""
    return float((upper - lower) / max(1.0, abs(upper)))


# --------------------------------------------------------------------------------------------
# Matrix generation: QCQP master over rank-one atoms, pricing by the top eigenvector of G.
# --------------------------------------------------------------------------------------------

#: master(tasks, U, bias) -> (alphas, d): solves the restricted problem over the atoms (rows of
#: U, unit vectors): max_a sum_t 2 1^T a_t - s  s.t.  s >= sum_t ||B_t(a_t) u_k||^2 for all k,
#: box (and y^T a = 0 with a bias); returns the maximizer and the constraint multipliers
#: d >= 0 (sum d = 1), i.e. the restricted matrix M = sum_k d_k u_k u_k^T.
Master = Callable[[Sequence[SaddleTask], np.ndarray, bool], tuple[list[np.ndarray], np.ndarray]]

#: polish(tasks, P, bias) -> (M, alphas): the problem restricted to the face M = P W P^T
#: (P: J x r, orthonormal columns) solved exactly, e.g. the compact LMI of size r + sum_t D_t.
Polish = Callable[[Sequence[SaddleTask], np.ndarray, bool], tuple[np.ndarray, list[np.ndarray]]]


@dataclass
class SaddleResult:
    """A certified point of the saddle problem (module docstring), as every solver here
    returns it: ``(M, alphas, biases)`` the primal point of the best upper bound ``upper``,
    ``lower`` the best lower bound, ``gap = (upper - lower) / max(1, |upper|)``."""

    M: np.ndarray
    alphas: list[np.ndarray]
    biases: list[float]
    upper: float
    lower: float
    gap: float
    iterations: int
    status: str
    solve_time: float
    history: dict[str, list[float]] = field(default_factory=dict)

    @property
    def converged(self) -> bool:
        """Whether the certified relative gap reached ``tol``."""
        return self.status == SolverStatus.OPTIMAL


def record_bounds(hist: dict[str, list[float]], upper: float, lower: float,
                  **more: float) -> float:
    """Append the best bounds, their relative gap and ``more`` (key: value) to the history
    ``hist``; returns the gap."""
    gap = relative_gap(upper, lower)
    for key, value in (("upper", upper), ("lower", lower), ("gap", gap), *more.items()):
        hist[key].append(value)
    return gap


@dataclass(kw_only=True)
class MatrixGenerationResult(SaddleResult):
    """Result of :func:`matrix_generation`: M = sum_k d_k u_k u_k^T (``atoms`` u_k, ``weights``
    d_k), alphas, certificate (:class:`SaddleResult`).

    ``status``: ``SolverStatus.OPTIMAL`` (gap <= tol), ``TIME_LIMIT``, ``MAX_ITERS``, or
    ``STALLED`` (the oracle repeats an atom, or the single master of ``diagonal=True`` left a
    gap above tol).
    """

    atoms: np.ndarray
    weights: np.ndarray


def _price(G: np.ndarray, U: np.ndarray, n_price: int) -> tuple[float, np.ndarray]:
    """lambda_max(G) and up to n_price top eigenvectors whose eigenvalue exceeds the current
    restricted value ``max_k u_k^T G u_k`` (violated cuts; at least the top one)."""
    w, V = np.linalg.eigh(0.5 * (G + G.T))
    cut = float(np.max(np.einsum("kj,ji,ki->k", U, G, U)))
    take = [k for k in range(G.shape[0] - 1, -1, -1) if w[k] > cut][: max(1, n_price)]
    new = V[:, take or [G.shape[0] - 1]].T
    return float(w[-1]), new * np.where(new.sum(axis=1) < 0, -1.0, 1.0)[:, None]


def kkt_polish(
    tasks: Sequence[SaddleTask], M: np.ndarray, alphas: Sequence[np.ndarray], bias: bool,
    *, iters: int = 10, free_tol: float = 1e-5, max_sets: int = 6,
) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """Newton polish of a near-optimal ``(M, alpha)`` on its identified face and support.

    With ``M = L L^T`` (L: J x r, r = rank M), the free duals ``F_t`` (strictly inside
    ``(0, C)``) and the bounded ones held at 0 or C, the saddle point solves

        y_n f_n = 1 (n in F_t),  y_t^T a_t = 0 (bias),  G(alpha) L = lambda L,  ||L||_F^2 = 1,

    ``f = K(M) Y a_t + b_t`` (the SVM's free support vectors lie on the margin; the range of M
    is an eigenspace of ``G = sum_t G_t`` for its top eigenvalue lambda, of multiplicity r),
    in the unknowns ``(L, a_F, b, lambda)`` (L up to a rotation: the steps are least-squares
    Gauss-Newton steps, which also handle a degenerate system), with a central-difference
    Jacobian (the residual is a polynomial of degree 3), until the residual stops falling.
    Then the support is corrected as in an active-set method (a bounded dual whose point
    violates its margin condition becomes free, a free one that left the box is fixed at that
    bound) and Newton repeats, at most ``max_sets`` times. Returns ``(M, alphas)`` (alphas
    projected back into their box; None if Newton diverged); the caller re-certifies the pair
    with :func:`upper_bound` / :func:`lower_bound`, so a
    failed polish costs nothing but time.
    """
    from .extragradient import project_box  # (extragradient imports this module)

    lam, V = np.linalg.eigh(0.5 * (M + M.T))
    on = lam > 1e-6 * max(lam[-1], 1e-300)
    L = V[:, on] * np.sqrt(lam[on])
    J, r = L.shape
    nw = J * r
    als = [np.asarray(a, dtype=float).copy() for a in alphas]
    free = [(a > free_tol * t.C) & (a < (1.0 - free_tol) * t.C)
            for t, a in zip(tasks, als, strict=True)]
    G = sum(gram(t, a) for t, a in zip(tasks, als, strict=True))
    lam_ = float(np.sum(L * (G @ L)) / np.sum(L * L))
    bs = []
    for t, f, a in zip(tasks, free, als, strict=True):  # b from the free support vectors
        fm = kernel_margins(t, M, b_matrix(t, a))
        bs.append(float(np.mean(t.y[f] - fm[f])) if bias and f.any() else 0.0)
    for _ in range(max_sets):
        idx = [np.flatnonzero(f) for f in free]
        base = [np.where(f, 0.0, np.where(a >= 0.5 * t.C, t.C, 0.0))
                for t, f, a in zip(tasks, free, als, strict=True)]
        x = np.concatenate([L.ravel(), *[np.r_[a[i], [b] * bias] for a, i, b in
                                     zip(als, idx, bs, strict=True)], [lam_]])

        def unpack(x, idx=idx, base=base):
            out, k = [], nw
            for i, a0 in zip(idx, base, strict=True):
                a = a0.copy()
                a[i] = x[k:k + i.size]
                k += i.size
                out.append((a, x[k] if bias else 0.0))
                k += int(bias)
            return x[:nw].reshape(J, r), out, x[-1]

        def residual(x, idx=idx, unpack=unpack):
            L, parts, lam_ = unpack(x)
            Mx = L @ L.T
            res, Gf = [], np.zeros((J, J))
            for t, i, (a, b) in zip(tasks, idx, parts, strict=True):
                Bt = b_matrix(t, a)
                res.append(t.y[i] * (kernel_margins(t, Mx, Bt)[i] + b) - 1.0)
                if bias:
                    res.append([t.y @ a])
                Gf += Bt @ Bt.T
            res += [(Gf @ L - lam_ * L).ravel(), [np.sum(L * L) - 1.0]]
            return np.concatenate(res)

        res = residual(x)
        for _ in range(iters):
            h = 1e-6 * max(1.0, float(np.max(np.abs(x))))
            Jac = np.empty((res.size, x.size))
            for j in range(x.size):
                e = np.zeros(x.size)
                e[j] = h
                Jac[:, j] = (residual(x + e) - residual(x - e)) / (2.0 * h)
            x_new = x - np.linalg.lstsq(Jac, res, rcond=None)[0]
            res_new = residual(x_new)
            if not np.linalg.norm(res_new) < 0.5 * np.linalg.norm(res):
                break
            x, res = x_new, res_new
        L, parts, lam_ = unpack(x)
        als = [a for a, _ in parts]
        bs = [b for _, b in parts]
        Mx = L @ L.T
        changed = False
        for t, f, a, b in zip(tasks, free, als, bs, strict=True):
            yf = t.y * (kernel_margins(t, Mx, b_matrix(t, a)) + b)
            tol = 1e-10 * max(1.0, float(np.max(np.abs(yf))))
            enter = ~f & (((a == 0.0) & (yf < 1.0 - tol)) | ((a == t.C) & (yf > 1.0 + tol)))
            leave = f & ((a < 0.0) | (a > t.C))
            if enter.any() or leave.any():
                changed = True
                a[leave] = np.clip(a[leave], 0.0, t.C)
                f[leave] = False
                f[enter] = True
        if not changed:
            break
    if not np.all(np.isfinite(L)):
        return None
    Mx = L @ L.T / np.sum(L * L)
    als = [project_box(a, t.C, t.y if bias else None) for t, a in zip(tasks, als, strict=True)]
    return 0.5 * (Mx + Mx.T), als


def _face_basis(M: np.ndarray, G: np.ndarray) -> np.ndarray:
    """Orthonormal basis of range(M) plus the top ``rank(M) + 1`` eigenvectors of G (the
    face the polish of :func:`matrix_generation` solves on)."""
    lam, V = np.linalg.eigh(0.5 * (M + M.T))
    rng = V[:, lam > 1e-6 * max(lam[-1], 1e-300)]
    top = np.linalg.eigh(0.5 * (G + G.T))[1][:, ::-1][:, : rng.shape[1] + 1]
    Qb, R = np.linalg.qr(np.hstack([rng, top]))
    return Qb[:, np.abs(np.diag(R)) > 1e-8]


def _atoms_to_M(U: np.ndarray, d: np.ndarray) -> np.ndarray:
    d = np.maximum(np.asarray(d, dtype=float), 0.0)
    if d.sum() > 1.0:
        d = d / d.sum()
    M = (U.T * d) @ U
    return 0.5 * (M + M.T)


def matrix_generation(
    tasks: Sequence[SaddleTask],
    master: Master,
    *,
    bias: bool = True,
    tol: float = 1e-4,
    max_iter: int = 100,
    atoms0: np.ndarray | None = None,
    diagonal: bool = False,
    n_price: int = 1,
    smoothing: float = 0.5,
    time_limit: float | None = None,
    callback: Callable[..., None] | None = None,
    polish: Polish | None = None,
) -> MatrixGenerationResult:
    """Matrix generation for ``min_{M in spectraplex} P(M)`` (``P`` as in the module docstring).

    Iteration k: the master over the atoms ``u_1..u_k`` gives alpha and weights d; the pricing
    oracle returns ``(lambda, u) = top eigenpair of sum_t G_t(alpha_t)``; the certified gap is
    ``U(sum_k d_k u_k u_k^T, alpha) - D(alpha)`` (relative); u is added when it is new.
    ``n_price > 1`` adds up to that many top eigenvectors per round (those whose eigenvalue
    exceeds the master's value of ``max_k u_k^T G u_k``: violated cuts).
    ``smoothing = theta`` (Wentges stabilization): also price at ``theta * alpha_c +
    (1 - theta) * alpha_master`` with ``alpha_c`` the alpha of the best lower bound so far
    (feasible by convexity, and its ``D`` is a valid lower bound too).
    ``diagonal=True`` solves multiple kernel learning instead (M diagonal): atoms are the unit
    vectors e_j and the lower bound uses ``max_j G_jj`` in place of ``lambda_max`` (one master).
    ``callback(round, objective=upper, bound=lower, gap=rel. gap)`` is called every round.

    ``polish`` (face polish, run once at the end): the atoms identify the face of the optimal
    M (its range lies in the top eigenspace of G(alpha*)); the problem restricted to
    ``M = P W P^T``, P an orthonormal basis of the range of the best M and the top
    ``rank(M) + 1`` eigenvectors of G(alpha), is solved exactly. The polished pair replaces
    the best one when its upper bound is not worse; its lower bound uses the full
    ``lambda_max``, so the certificate stays that of the whole problem. The atoms' multipliers
    determine M only to about the square root of the gap (the decision values moved by
    0.8-6.5e-4 at gap 1e-6); on the face M is as accurate as the conic form.
    """
    t0 = time.perf_counter()
    J = tasks[0].J
    if diagonal:
        U = np.eye(J)
    elif atoms0 is not None:
        U = np.atleast_2d(np.asarray(atoms0, dtype=float))
        U = U / np.linalg.norm(U, axis=1, keepdims=True)
    else:  # start from the top eigenvector at the box midpoint
        G = sum(gram(t, np.full(t.n, 0.5 * t.C)) for t in tasks)
        U = top_eigvec(G)[1][None, :]
    hist: dict[str, list[float]] = {"upper": [], "lower": [], "gap": [], "atoms": [], "time": []}
    best_u, best_l = np.inf, -np.inf
    best = center = None
    status = SolverStatus.MAX_ITERS
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007
        alphas, d = master(tasks, U, bias)
        M = _atoms_to_M(U, d)
        ub, biases = upper_bound(tasks, M, alphas, bias)
        G = sum(gram(t, a) for t, a in zip(tasks, alphas, strict=True))
        if diagonal:
            lam = float(np.max(np.diag(G)))
        else:
            lam, new = _price(G, U, n_price)
        lb = float(sum(2.0 * a.sum() for a in alphas) - lam)
        if ub < best_u:
            best_u, best = ub, (M, alphas, biases, U.copy(), np.asarray(d, float))
        if not diagonal and smoothing > 0 and center is not None:
            a_s = [smoothing * c + (1.0 - smoothing) * a
                   for c, a in zip(center, alphas, strict=True)]
            G_s = sum(gram(t, a) for t, a in zip(tasks, a_s, strict=True))
            lam_s, new_s = _price(G_s, U, n_price)
            lb_s = float(sum(2.0 * a.sum() for a in a_s) - lam_s)
            new = np.vstack([new, new_s])
            if lb_s > best_l:
                best_l, center = lb_s, a_s
        if lb > best_l:
            best_l, center = lb, alphas
        gap = record_bounds(hist, best_u, best_l, atoms=U.shape[0],
                            time=time.perf_counter() - t0)
        if callback is not None:
            callback(it, objective=best_u, bound=best_l, gap=gap)
        if gap <= tol:
            status = SolverStatus.OPTIMAL
            break
        if diagonal:
            status = SolverStatus.STALLED
            break
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            status = SolverStatus.TIME_LIMIT
            break
        keep = []
        for u in new:
            if np.min(np.linalg.norm(np.vstack([U, *keep]) - u, axis=1)) > 1e-10:
                keep.append(u)
        if not keep:
            status = SolverStatus.STALLED
            break  # the oracle repeats an atom: the master is as good as it gets numerically
        U = np.vstack([U, *keep])
    M, alphas, biases, Ub, db = best
    if polish is not None and not diagonal:
        P = _face_basis(M, sum(gram(t, a) for t, a in zip(tasks, alphas, strict=True)))
        pt = polish(tasks, P, bias)  # the face solve, then Newton from its point
        for stage in ("face", "kkt"):
            if stage == "kkt":
                pt = kkt_polish(tasks, pt[0], pt[1], bias)
            if pt is None:
                break
            Mp, ap = pt
            ub_p, biases_p = upper_bound(tasks, Mp, ap, bias)
            lb_p = lower_bound(tasks, ap)
            if ub_p - max(best_l, lb_p) <= best_u - best_l:
                lam, V = np.linalg.eigh(Mp)
                on = lam > 1e-12
                best_u, M, alphas, biases, Ub, db = ub_p, Mp, ap, biases_p, V[:, on].T, lam[on]
            best_l = max(best_l, lb_p)
            record_bounds(hist, best_u, best_l, atoms=P.shape[1],
                          time=time.perf_counter() - t0)
        hist["polished"] = [P.shape[1]]
        if relative_gap(best_u, best_l) <= tol:
            status = SolverStatus.OPTIMAL
    return MatrixGenerationResult(
        M=M, alphas=alphas, biases=biases, atoms=Ub, weights=db, upper=best_u, lower=best_l,
        gap=relative_gap(best_u, best_l), iterations=it, status=status,
        solve_time=time.perf_counter() - t0, history=hist,
    )


# --------------------------------------------------------------------------------------------
# Greedy mixture of transformations (block coordinate descent, Algorithm 1 of the thesis).
# --------------------------------------------------------------------------------------------


def svm_primal_objective(
    Z: np.ndarray, y: np.ndarray, w: np.ndarray, b: float, C: float
) -> float:
    """``||w||^2 + 2C sum_n (1 - y_n (z_n^T w + b))_+`` (the scale of the dual used here)."""
    return float(w @ w + 2.0 * C * np.maximum(0.0, 1.0 - y * (Z @ w + b)).sum())


def linear_svm_qp(Z: np.ndarray, y: np.ndarray, C: float, bias: bool) -> tuple[np.ndarray, float]:
    """Exact linear SVM ``min ||w||^2 + 2C sum xi, y_n(z_n^T w + b) >= 1 - xi_n, xi >= 0``.

    Solved as a QP with HiGHS (variables w, b, xi; Hessian 2 I on w).
    """
    import highspy

    from ._highs import new_highs, run_highs

    N, D = Z.shape
    nv = D + 1 + N
    h = new_highs()
    inf = highspy.kHighsInf
    lower = np.concatenate([np.full(D, -inf), [-inf if bias else 0.0], np.zeros(N)])
    upper = np.concatenate([np.full(D, inf), [inf if bias else 0.0], np.full(N, inf)])
    cost = np.concatenate([np.zeros(D + 1), np.full(N, 2.0 * C)])
    h.addVars(nv, lower, upper)
    h.changeColsCost(nv, np.arange(nv, dtype=np.int32), cost)
    # rows: y_n z_n^T w + y_n b + xi_n >= 1 (CSR)
    A = np.hstack([y[:, None] * Z, y[:, None], np.ones((N, 1))])
    starts = np.arange(N, dtype=np.int32) * (D + 2)
    index = np.hstack([np.tile(np.arange(D + 1), (N, 1)), (D + 1 + np.arange(N))[:, None]])
    h.addRows(N, np.ones(N), np.full(N, inf), N * (D + 2), starts,
              index.ravel().astype(np.int32), A.ravel())
    # Hessian (lower triangle, column-wise): 2 on the w diagonal
    hstart = np.minimum(np.arange(nv), D).astype(np.int32)
    h.passHessian(nv, D, highspy.HessianFormat.kTriangular, hstart,
                  np.arange(D, dtype=np.int32), np.full(D, 2.0))
    run_highs(h)
    x = np.asarray(h.getSolution().col_value)
    return x[:D], float(x[D])


def _lp_mixture(A: np.ndarray, y: np.ndarray, b: float) -> np.ndarray:
    """LP step: ``min sum xi  s.t.  y_n (A_n^T m + b) >= 1 - xi_n, xi >= 0, m >= 0, 1^T m <= 1``."""
    N, J = A.shape
    c = np.concatenate([np.zeros(J), np.ones(N)])
    A_ub = np.vstack([
        np.hstack([-(y[:, None] * A), -np.eye(N)]),
        np.concatenate([np.ones(J), np.zeros(N)])[None, :],
    ])
    b_ub = np.concatenate([y * b - 1.0, [1.0]])
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=[(0, None)] * (J + N), method="highs")
    if res.status != 0:
        raise RuntimeError(f"greedy LP step failed: {res.message}")
    return np.clip(res.x[:J], 0.0, None)


@dataclass
class GreedyResult:
    """Result of :func:`greedy_mixture`: m (J,), w (D,), b, monotone objective trace."""

    m: np.ndarray
    w: np.ndarray
    b: float
    objective: float
    iterations: int
    history: dict[str, list[float]] = field(default_factory=dict)


def greedy_mixture(
    F: np.ndarray,
    y: np.ndarray,
    C: float,
    *,
    bias: bool = True,
    m0: np.ndarray | None = None,
    max_iter: int = 30,
    tol: float = 1e-6,
    svm: Callable[[np.ndarray, np.ndarray, float, bool], tuple[np.ndarray, float]] | None = None,
) -> GreedyResult:
    """Greedy mixture of transformations ``Phi_m(x) = sum_j m_j phi_j(x)`` (thesis Alg. 1).

    Block coordinate descent on ``J(w, b, m) = ||w||^2 + 2C sum_n (1 - y_n(<w, Phi_m(x_n)> + b))_+``
    over ``m >= 0, 1^T m <= 1``: SVM step (exact QP in (w, b), m fixed), LP step (m and slacks, w
    and b fixed; ||w||^2 is constant there). Each step is exact, so the objective is
    non-increasing; a step that would increase it (solver round-off) is rejected.
    ``svm(Z, y, C, bias) -> (w, b)`` solves the SVM step (default :func:`linear_svm_qp`, exact
    but slow for larger D; the learners pass libsvm/liblinear).
    """
    F = np.asarray(F, dtype=float)
    y = np.asarray(y, dtype=float)
    N, J, D = F.shape
    m = np.full(J, 1.0 / J) if m0 is None else np.asarray(m0, dtype=float)
    if np.any(m < 0) or m.sum() > 1 + 1e-12:
        raise ValueError("m0 must satisfy m >= 0 and sum(m) <= 1")
    w, b = np.zeros(D), 0.0
    obj = svm_primal_objective(np.einsum("njd,j->nd", F, m), y, w, b, C)
    hist = {"objective": [obj]}
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007
        Z = np.einsum("njd,j->nd", F, m)
        w1, b1 = (svm or linear_svm_qp)(Z, y, C, bias)
        o1 = svm_primal_objective(Z, y, w1, b1, C)
        if o1 <= obj:
            w, b, obj = w1, b1, o1
        A = np.einsum("njd,d->nj", F, w)
        m1 = _lp_mixture(A, y, b)
        o2 = svm_primal_objective(np.einsum("njd,j->nd", F, m1), y, w, b, C)
        prev = hist["objective"][-1]
        if o2 <= obj:
            m, obj = m1, o2
        hist["objective"].append(obj)
        if prev - obj <= tol * max(1.0, abs(prev)):
            break
    return GreedyResult(m=m, w=w, b=b, objective=obj, iterations=it, history=hist)


def mwtla(tasks: Sequence[SaddleTask]) -> tuple[np.ndarray, float]:
    """Mixing-weight-constrained transformation alignment (closed form).

    ``max_{M PSD, tr M <= 1} <K(M), y y^T> = lambda_max(Q)``, ``Q = V^T V``, ``V = [Phi_j^T y]_j``
    (summed over tasks); the maximizer is ``M* = u u^T`` with u the top eigenvector of Q, sign
    fixed so that sum(u) >= 0. Returns (M*, lambda_max(Q)).
    """
    Q = sum(gram(t, np.ones(t.n)) for t in tasks)
    lam, u = top_eigvec(Q)
    return np.outer(u, u), lam
