r"""The engine's certificate: a proven bound on the optimum from any multipliers ``y``.

For any ``y``, every feasible ``K`` satisfies

    <C, K> = b^T y + <S(y), K> >= b^T y + min(0, lambda_min(S(y))) * tr K,   S(y) = C - A^*(y)

(``lambda_min`` over ``1^\perp`` when centering is on, since then ``K 1 = 0``; with ``tr K <= t``
a constraint, ``S(y) = C - A^*(y) + mu I`` and the dual value ``b^T y - mu t``). With a bound
``tr K <= T`` this gives the valid lower bound ``b^T y + T min(0, lambda_min)``; without one, the
bound ``b^T y`` is valid only when ``lambda_min >= 0`` and is reported as ``None`` otherwise.
``lambda_min`` is exact (dense, smallest eigenpairs only) for ``n <= dense_threshold`` and a
Lanczos Ritz value minus its residual norm above (ARPACK on a LinearOperator, O(nnz + n) per
matvec, from a seeded random start). A face reduction (:mod:`specopt.solvers.sdp.facial`) adds
the exposing-matrix correction. Also here: the least-squares (complementarity) dual and the
Gauss-Newton polish that certify a nearly optimal point. All in solver units
(:class:`~specopt.solvers.sdp._data.Scaled`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse.linalg as spla

from ._data import Scaled
from .facial import face_correction

#: the deflated operator's smallest eigenvalue is dense up to this n, Lanczos above (no cluster at
#: 0 once range(Y) is deflated: maxG32, n = 2000, Lanczos 0.3 s against several s for the dense
#: subset solve at load ~15)
DEFLATED_DENSE_MAX_N = 600


@dataclass(frozen=True)
class SDPCertificate:
    """Bound and gap of a pair ``(K, y)`` in solver units.

    ``bound``: proven lower bound on ``<C, K>`` over the feasible set (None: none proven);
    ``dual``: the dual value ``b^T y - mu t``; ``gap``: ``|obj - bound| / (1 + |obj|)`` (against
    ``dual`` when there is no trace bound); ``dinf``: relative dual infeasibility
    ``max(0, -lambda_min) / (1 + ||C||)``; ``needs_dinf``: the test also needs ``dinf <= tol``
    (no trace bound: the criterion conic solvers use).
    """

    bound: float | None
    dual: float
    gap: float
    dinf: float
    needs_dinf: bool = False

    def ok(self, tol: float) -> bool:
        """The gap (and, without a trace bound, the dual infeasibility) within ``tol``."""
        return self.gap <= tol and (not self.needs_dinf or self.dinf <= tol)

    def bound_side_ok(self, P: Scaled, obj: float, rel: float = 5e-7) -> bool:
        """The bound on the proven side of the objective (a lower bound when minimizing in solver
        units): ``bound - obj <= rel * max(1, |obj|)`` in user units. A slightly infeasible ``Y``
        can have an objective beyond the optimum; then more outer iterations (or the polish) are
        needed before ``optimal`` (the verification gate's ``bound_side`` check, tolerance 1e-6)."""
        if self.bound is None:
            return True
        u = P.gamma * P.kappa
        return (self.bound - obj) * u <= rel * max(1.0, abs(obj) * u)


def certificate(P: Scaled, y: np.ndarray, mu: float, obj: float, lam: float) -> SDPCertificate:
    """Bound and gap in solver units (see the module docstring); ``lam`` is
    ``lambda_min(C - A^*(y) + mu I)`` (of ``V^T S V`` with a face), minus its error allowance."""
    dual = float(P.b @ y) - (mu * P.t if P.t is not None else 0.0)
    dinf = max(0.0, -lam) / (1.0 + P.C.fro_norm() / math.sqrt(P.n))
    if P.face is not None and P.t_cert is not None:
        # lam is lambda_min(V^T S V); valid for the original problem via the exposing matrix
        fr = P.face
        eps = fr.eps(P.t_cert * P.kappa) / P.kappa
        corr, _ = face_correction(lam, P.slack_norm_bound(y, mu), P.t_cert, eps, fr.omega,
                                  fr.w_face_min, fr.delta)
        bound = dual + corr
        return SDPCertificate(bound, dual, abs(obj - bound) / (1.0 + abs(obj)), dinf)
    scaled = scaled_dual_bound(P, dual, lam)
    if P.t_cert is not None:
        # tr K <= t makes -mu (t - tr K) <= 0:  <C, K> >= b^T y - mu t + min(0, lam) T
        bound = dual + min(0.0, lam) * P.t_cert
        if scaled is not None:
            bound = max(bound, scaled)
        return SDPCertificate(bound, dual, abs(obj - bound) / (1.0 + abs(obj)), dinf)
    if scaled is not None:
        return SDPCertificate(scaled, dual, abs(obj - scaled) / (1.0 + abs(obj)), dinf)
    return SDPCertificate(dual if lam >= 0 else None, dual, abs(obj - dual) / (1.0 + abs(obj)),
                          dinf, needs_dinf=True)


def scaled_dual_bound(P: Scaled, dual: float, lam: float) -> float | None:
    """With ``C <= -c I`` (``P.c_margin``; e.g. ``max tr K``) and ``lambda_min(S(y)) >= lam``,
    ``-c < lam < 0``: ``theta (y, mu)`` with ``theta = c / (c + lam) > 1`` is dual feasible,
    since ``S(theta y) = theta S(y) + (1 - theta) C >= -theta |lam| + (theta - 1) c = 0``; so
    ``theta (b^T y - mu t)`` is a proven bound with no trace bound needed (and it beats
    ``dual + lam T`` when ``T`` exceeds ``tr K``: the graph bound of an SDE is 2-4x).
    ``lam >= 0``: the better of ``dual`` and ``theta dual`` with ``theta = cmax / (cmax + lam)
    <= 1`` and ``cmax >= ||C||_2`` (both feasible). None without a margin (or with a face,
    whose ``lam`` is the reduced slack's)."""
    c = P.c_margin
    if c is None or P.face is not None or not math.isfinite(lam):
        return None
    if lam >= 0:
        # y and theta y are both dual feasible for theta = cmax / (cmax + lam) <= 1, cmax >=
        # ||C||: S(theta y) = theta S(y) + (1 - theta) C >= theta lam - (1 - theta) cmax = 0.
        # (Not with c: C <= -c I bounds C from above only; for max tr(D K) with D not a multiple
        # of I that gave bounds below the optimum: 14.638 < 14.6465, n 5, D in [0.5, 2].)
        cmax = P.C.norm2_bound()
        return max(dual, dual * cmax / (cmax + lam))
    if -lam >= c:
        return None
    return dual * c / (c + lam)


def relative_residual(P: Scaled, Y: np.ndarray) -> float:
    """``||A(Y Y^T) - b|| / (1 + ||b||)`` in solver units."""
    return float(np.linalg.norm(P.residual(Y))) / (1.0 + float(np.linalg.norm(P.b)))


def measure(P: Scaled, Y: np.ndarray, y: np.ndarray, mu: float, lam: float,
            tol: float) -> tuple[float, float, SDPCertificate, bool]:
    """``(relative residual, objective, certificate, certified)`` of the pair ``(Y, y)`` in
    solver units, ``lam`` the dual slack's smallest eigenvalue at ``y`` (already computed)."""
    res = relative_residual(P, Y)
    obj = float(np.sum(P.C.matmat(Y) * Y))
    cert = certificate(P, y, mu, obj, lam)
    return res, obj, cert, res <= tol and cert.ok(tol) and cert.bound_side_ok(P, obj)


def certify_point(P: Scaled, Y: np.ndarray, y: np.ndarray, mu: float, tol: float,
                  dense_threshold: int, eig_k: int, rng: np.random.Generator,
                  out_of_time: Callable[[], bool] = lambda: False) -> dict:
    """The certificate of ``(Y, y, mu)`` (solver units), after a polish of ``Y`` when it is
    nearly feasible and the bound is close but the point is not yet certified (the least-squares
    dual and the polish are skipped once ``out_of_time()``: 25 s at n = 600, rank 357)."""
    y = P.dual_feasible(y)
    lamv, _, err = min_eigs(P, y, mu, eig_k, dense_threshold, rng)
    lam = float(lamv[0]) - err
    res, obj, cert, ok = measure(P, Y, y, mu, lam, tol)
    if not ok and res <= 100 * tol and cert.gap <= 100 * tol and not out_of_time():
        # the complementarity dual (LSQR from y) can close a gap the IP's y leaves open
        y_ls = P.dual_feasible(ls_dual(P, Y, y, mu))
        lamv_ls, _, err_ls = min_eigs(P, y_ls, mu, eig_k, dense_threshold, rng)
        lam_ls = float(lamv_ls[0]) - err_ls
        if certificate(P, y_ls, mu, obj, lam_ls).gap < cert.gap:
            y, lam = y_ls, lam_ls
            res, obj, cert, ok = measure(P, Y, y, mu, lam, tol)
    if not ok and res <= 100 * tol and cert.gap <= 100 * tol and not out_of_time():
        Yp = polish(P, Y)
        res_p, obj_p, cert_p, ok_p = measure(P, Yp, y, mu, lam, tol)
        if ok_p or res_p < res:
            Y, res, cert, ok = Yp, res_p, cert_p, ok_p
    return {"Y": Y, "y": y, "mu": mu, "lam": lam, "cert": cert, "res": res, "optimal": ok,
            "score": max(res, cert.gap)}


def min_eigs(P: Scaled, y: np.ndarray, mu: float, k: int, dense_threshold: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """Smallest ``k`` eigenpairs of ``S = C - A^*(y) + mu I`` (on ``1^perp`` when centered).

    Returns ``(vals, vecs, err)`` with ``err`` an error allowance (residual norm for Lanczos).
    """
    n = P.n
    if P.V is not None:
        return min_eigs_face(P, y, mu, k, dense_threshold, rng)
    big = 0.0
    if P.centered:
        # P S P + big * 11^T / n: the constant vector (K 1 = 0) is pushed above the spectrum;
        # ||S||_2 <= ||C||_F + ||A^*(y)||_F + |mu|
        adj = P.A.pairs.adjoint(y)
        big = 2.0 * (P.C.fro_norm() + float(spla.norm(adj)) + abs(mu)) + 1.0

    def mat(X: np.ndarray) -> np.ndarray:
        X2 = X if X.ndim == 2 else X[:, None]
        Xp = X2 - X2.mean(axis=0, keepdims=True) if P.centered else X2
        out = P.slack_matmat(y, mu, np.ascontiguousarray(Xp))
        if P.centered:
            out = out - out.mean(axis=0, keepdims=True) + big * X2.mean(axis=0, keepdims=True)
        return out if X.ndim == 2 else out[:, 0]

    k = max(1, min(k, n - 1 if n > 1 else 1))
    if n <= dense_threshold:
        return dense_smallest(mat(np.eye(n)), k)
    # shift by a norm bound so that the wanted eigenvalues are far from 0: ARPACK's test is
    # relative to |theta|, hopeless for the (near-)zero eigenvalues of a complementary slack
    shift = big if P.centered else 2.0 * (
        P.C.fro_norm() + float(spla.norm(P.A.pairs.adjoint(y))) + abs(mu)) + 1.0

    def shifted(X: np.ndarray) -> np.ndarray:
        return mat(X) + shift * X

    op = spla.LinearOperator((n, n), matvec=shifted, matmat=shifted, dtype=float)
    v0 = rng.standard_normal(n)
    w = np.zeros(0)
    for ncv, tol_ in ((min(n, max(2 * k + 1, 40)), 1e-10), (min(n, max(4 * k + 1, 120)), 1e-8)):
        try:
            w, V = spla.eigsh(op, k=k, which="SA", v0=v0, tol=tol_, ncv=ncv,
                              maxiter=max(1000, 5 * n))
            break
        except spla.ArpackNoConvergence as exc:
            w, V = exc.eigenvalues, exc.eigenvectors
            if w.size:
                break
    if w.size == 0:
        if n <= 4000:
            S = mat(np.eye(n))
            w, V = sla.eigh(0.5 * (S + S.T))
            return w[:k], V[:, :k], 1e-12 * max(1.0, float(np.max(np.abs(w))))
        return np.array([-math.inf]), np.zeros((n, 1)), 0.0
    w = w - shift
    order = np.argsort(w)
    w, V = w[order], V[:, order]
    res = np.linalg.norm(mat(V) - V * w, axis=0)
    return w, V, float(res[0]) if res.size else 0.0


class _OutOfTime(Exception):
    """Raised inside a Lanczos product when the caller's time is up."""


def min_eig_lower_bound(P: Scaled, y: np.ndarray, mu: float, Y: np.ndarray,
                        dense_threshold: int, rng: np.random.Generator,
                        rel_cut: float = 1e-3,
                        out_of_time: Callable[[], bool] | None = None,
                        ) -> tuple[float, np.ndarray]:
    """A lower bound on ``lambda_min(S)``, ``S = C - A^*(y) + mu I`` (no centering, no face),
    with the near-null space of ``S`` at an optimum, ``range(Y)``, deflated.

    ``Q``: the left singular vectors of ``Y`` with ``sigma >= rel_cut sigma_max``. In the basis
    ``[Q, Q_perp]``, ``S = [[S11, E], [E^T, S22]]`` and for a unit ``x = (u, v)``
    ``x^T S x >= a |u|^2 + b |v|^2 - 2 e |u| |v|`` with ``a = lambda_min(S11)`` (an ``r x r``
    eigenproblem), ``b = lambda_min(S22)`` (Lanczos on ``P_perp S P_perp + beta Q Q^T``, whose
    spectrum has no cluster at 0, minus the Ritz residual) and ``e = ||P_perp S Q||_2``; so
    ``lambda_min(S) >= lambda_min([[a, e], [e, b]])``. Returns the bound and the Ritz vector of
    ``b`` (the direction for a rank growth). ``b`` is exact (dense) for
    ``n <= min(dense_threshold, DEFLATED_DENSE_MAX_N)``; above, the Lanczos Ritz value is the
    extreme one with probability one, not certainty. ``out_of_time``: checked at every Lanczos
    product; when it says so the bound is ``-inf`` (nothing proven) and the vector zero (at
    n = 1e5 one Lanczos run took minutes past the solve's time limit)."""
    n = P.n
    U, sv, _ = np.linalg.svd(Y, full_matrices=False)
    Q = np.ascontiguousarray(U[:, sv >= rel_cut * sv[0]]) if sv.size and sv[0] > 0 \
        else np.zeros((n, 0))
    SQ = P.slack_matmat(y, mu, Q)
    S11 = Q.T @ SQ
    a = float(np.linalg.eigvalsh(0.5 * (S11 + S11.T))[0]) if Q.shape[1] else math.inf
    E = SQ - Q @ S11
    e = float(np.linalg.norm(E, 2)) if Q.shape[1] else 0.0
    bound = P.slack_norm_bound(y, mu) + 1.0

    def perp(X: np.ndarray) -> np.ndarray:
        return X - Q @ (Q.T @ X)

    def mat(X: np.ndarray) -> np.ndarray:
        X2 = X if X.ndim == 2 else X[:, None]
        Xp = np.ascontiguousarray(perp(X2))
        out = perp(P.slack_matmat(y, mu, Xp)) + 2.0 * bound * (Q @ (Q.T @ X2))
        return out if X.ndim == 2 else out[:, 0]

    if n <= min(dense_threshold, DEFLATED_DENSE_MAX_N):
        w, V, err = dense_smallest(mat(np.eye(n)), 1)
    else:
        def shifted(X: np.ndarray) -> np.ndarray:
            if out_of_time is not None and out_of_time():
                raise _OutOfTime
            return mat(X) + bound * X

        op = spla.LinearOperator((n, n), matvec=shifted, matmat=shifted, dtype=float)
        try:
            w, V = spla.eigsh(op, k=1, which="SA", v0=rng.standard_normal(n), tol=1e-9,
                              ncv=min(n, 40), maxiter=max(1000, 5 * n))
        except _OutOfTime:
            return -math.inf, np.zeros((n, 1))
        except spla.ArpackNoConvergence as exc:
            w, V = exc.eigenvalues, exc.eigenvectors
            if not w.size:
                return -math.inf, np.zeros((n, 1))
        w = w - bound
        err = float(np.linalg.norm(mat(V) - V * w[0]))
    b = float(w[0]) - err
    lo = 0.5 * (a + b) - math.sqrt(0.25 * (a - b) ** 2 + e * e) if math.isfinite(a) else b
    return lo, V


def dense_smallest(S: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The ``k`` smallest eigenpairs of a dense symmetric matrix (LAPACK evr, subset only:
    0.5 s at n = 1800 against 1.9 s for the whole spectrum) and a rounding allowance."""
    S = 0.5 * (S + S.T)
    w, V = sla.eigh(S, subset_by_index=[0, k - 1], driver="evr")
    return w, V, 1e-12 * max(1.0, float(np.linalg.norm(S)))


def min_eigs_face(P: Scaled, y: np.ndarray, mu: float, k: int, dense_threshold: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """Smallest eigenpairs of the reduced slack ``V^T S V`` (eigenvectors returned as ``V x``)."""
    V = P.V
    f = V.shape[1]
    if f == 0:
        return np.array([math.inf]), np.zeros((P.n, 1)), 0.0
    k = max(1, min(k, f - 1 if f > 1 else 1))
    if f <= dense_threshold:
        w, U, err = dense_smallest(V.T @ P.slack_matmat(y, mu, V), k)
        return w, V @ U, err
    shift = 2.0 * P.slack_norm_bound(y, mu) + 1.0

    def mat(X: np.ndarray) -> np.ndarray:
        X2 = X if X.ndim == 2 else X[:, None]
        out = V.T @ P.slack_matmat(y, mu, np.ascontiguousarray(V @ X2))
        return out if X.ndim == 2 else out[:, 0]

    op = spla.LinearOperator((f, f), matvec=lambda x: mat(x) + shift * x,
                             matmat=lambda X: mat(X) + shift * X, dtype=float)
    try:
        w, U = spla.eigsh(op, k=k, which="SA", v0=rng.standard_normal(f), tol=1e-10,
                          ncv=min(f, max(2 * k + 1, 40)), maxiter=max(1000, 5 * f))
    except spla.ArpackNoConvergence as exc:
        w, U = exc.eigenvalues, exc.eigenvectors
        if not w.size:
            return np.array([-math.inf]), np.zeros((P.n, 1)), 0.0
    w = w - shift
    order = np.argsort(w)
    w, U = w[order], U[:, order]
    res = np.linalg.norm(mat(U) - U * w, axis=0)
    return w, V @ U, float(res[0])



def ls_dual(P: Scaled, Y: np.ndarray, y: np.ndarray, mu: float,
             iters: int = 200) -> np.ndarray:
    """``argmin_y ||P (C - A^*(y) + mu I) Y||_F`` by LSQR started at ``y`` (P: centering)."""
    A = P.A
    n, r = Y.shape
    Yc = np.ascontiguousarray(Y)

    def mv(w: np.ndarray) -> np.ndarray:
        return P.project(A.pairs.adj_times(w, Yc)).ravel()

    def rmv(z: np.ndarray) -> np.ndarray:
        Z = np.ascontiguousarray(P.project(z.reshape(n, r)))
        return 0.5 * A.pairs.ydt(Yc, Z)

    op = spla.LinearOperator((n * r, A.m), matvec=mv, rmatvec=rmv, dtype=float)
    target = P.project(P.C.matmat(Yc) + mu * Yc).ravel()
    dy = spla.lsqr(op, target - mv(y), atol=1e-12, btol=1e-12, iter_lim=iters)[0]
    return y + dy


def polish(P: Scaled, Y: np.ndarray, steps: int = 5, cg_iters: int = 400) -> np.ndarray:
    """Gauss-Newton steps toward ``A(YY^T) = b``: the least-norm ``D`` with
    ``J D = -r`` (``J D = A(Y D^T + D Y^T)``), ``D = -J^T (J J^T)^{-1} r`` by CG, with a
    backtracking step length (the quadratic term ``A(D D^T)`` can undo a full step)."""
    A = P.A

    def JT(w: np.ndarray, Yc: np.ndarray) -> np.ndarray:
        return P.project(2.0 * A.pairs.adj_times(w, Yc))

    for _ in range(steps):
        r = P.residual(Y)
        Yc = np.ascontiguousarray(Y)
        op = spla.LinearOperator(
            (A.m, A.m), dtype=float,
            matvec=lambda w, Yc=Yc: A.pairs.ydt(Yc, np.ascontiguousarray(JT(w, Yc))))
        with np.errstate(divide="ignore", invalid="ignore"):  # singular J J^T (e.g. Y = 0)
            w, _ = spla.cg(op, -r, maxiter=cg_iters, rtol=1e-6)
        if not np.all(np.isfinite(w)):
            break
        D = JT(w, Yc)
        nr = float(np.linalg.norm(r))
        for a in (1.0, 0.5, 0.25, 0.125):
            Yn = np.ascontiguousarray(Y + a * D)
            if np.linalg.norm(P.residual(Yn)) < nr:
                break
        else:
            break
        Y = Yn
    return Y
