"""Compiled Bregman sweeps (linear and kernel forms) and the closed forms of the kernel
coefficients M. The kernels assume validated input (see :mod:`specopt.solvers.bregman`).

fastmath: gamma = inf never reaches them, see :func:`sweep_args`. The scalar step of one
projection (alpha, beta, the xi and lam updates) is :func:`_projection_step`, inlined into each
kernel at numba's IR level (``inline="always"``): a called jitted helper (an ordinary call)
compiled differently under fastmath and changed the iterates in the last bits (up to 5e-4
relative on singular hard-constraint kernels, measured); inlined, the kernels compute the same
bits as with the step written out in each.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sps

from .._jit import lazy_njit


def sweep_args(gamma: float) -> tuple[float, float, bool]:
    """(gamma or 0, gamma/(gamma+1) or 1, hard): no infinity enters the compiled code."""
    if math.isinf(gamma):
        return 0.0, 1.0, True
    return gamma, gamma / (gamma + 1.0), False


@lazy_njit(inline="always", fastmath=True)
def _projection_step(p, c, delta, xi, lam, gamma, ratio, hard):  # pragma: no cover
    """The scalar step of the Bregman projection onto constraint ``c`` at ``p = v^T A v``:
    the correction ``alpha`` (clipped at ``lam[c]``) and the rank-one weight ``beta``; updates
    ``xi[c]`` (slack form) and ``lam[c]`` in place. Returns ``(moved, beta)``, ``moved`` False
    (nothing updated) when ``alpha == 0``."""
    dl = delta[c]
    alpha = dl * ratio * (1.0 / p - 1.0 / xi[c])
    if lam[c] < alpha:
        alpha = lam[c]
    if alpha == 0.0:
        return False, 0.0
    beta = dl * alpha / (1.0 - dl * alpha * p)
    if not hard:
        xi[c] = gamma * xi[c] / (gamma + dl * alpha * xi[c])
    lam[c] -= alpha
    return True, beta


def sweeps_linear(A, V, delta, xi, lam, gamma, ratio, hard, n_sweeps):
    """``n_sweeps`` cyclic Bregman sweeps of the linear form; A, xi, lam updated in place
    (:func:`sweeps_linear_idx` visiting every constraint in order)."""
    order = np.arange(V.shape[0], dtype=np.int64)
    sweeps_linear_idx(A, V, delta, xi, lam, gamma, ratio, hard, order, n_sweeps)


@lazy_njit(cache=True, fastmath=True)
def sweeps_linear_idx(A, V, delta, xi, lam, gamma, ratio, hard, idx, n_sweeps):  # noqa: E501  # pragma: no cover
    """As :func:`sweeps_linear`, visiting only the constraints ``idx`` (in that order)."""
    m, d = V.shape
    Av = np.empty(d)
    for _ in range(n_sweeps):
        for k in range(idx.shape[0]):
            c = idx[k]
            p = 0.0
            for i in range(d):
                acc = 0.0
                for j in range(d):
                    acc += A[i, j] * V[c, j]
                Av[i] = acc
                p += V[c, i] * acc
            moved, beta = _projection_step(p, c, delta, xi, lam, gamma, ratio, hard)
            if not moved:
                continue
            for i in range(d):
                bi = beta * Av[i]
                for j in range(d):
                    A[i, j] += bi * Av[j]


@lazy_njit(cache=True, fastmath=True)
def sweeps_kernel(K, M, K0, I, J, delta, xi, lam, gamma, ratio, hard, n_sweeps):  # noqa: E501
    """Cyclic sweeps of the kernel form on the support; K, M, xi, lam updated in place.

    With ``M`` and ``K0`` None numba compiles a K-only kernel (the ``M is None`` branch is
    pruned at compile time): :func:`sweeps_kernel_K`."""
    m = I.shape[0]
    s = K.shape[0]
    Kv = np.empty(s)
    w = np.empty(s)
    K0v = np.empty(s)
    for _ in range(n_sweeps):
        for c in range(m):
            i = I[c]
            j = J[c]
            p = K[i, i] + K[j, j] - 2.0 * K[i, j]
            moved, beta = _projection_step(p, c, delta, xi, lam, gamma, ratio, hard)
            if not moved:
                continue
            if M is None:
                for a in range(s):
                    Kv[a] = K[i, a] - K[j, a]
                for a in range(s):
                    ka = beta * Kv[a]
                    for b in range(s):
                        K[a, b] += ka * Kv[b]
                continue
            for a in range(s):
                Kv[a] = K[i, a] - K[j, a]
                K0v[a] = K0[i, a] - K0[j, a]
            for a in range(s):
                acc = 0.0
                for b in range(s):
                    acc += M[a, b] * K0v[b]
                w[a] = acc
            w[i] += 1.0
            w[j] -= 1.0
            for a in range(s):
                ka = beta * Kv[a]
                wa = beta * w[a]
                for b in range(s):
                    K[a, b] += ka * Kv[b]
                    M[a, b] += wa * w[b]


def sweeps_kernel_K(K, I, J, delta, xi, lam, gamma, ratio, hard, n_sweeps):
    """Kernel sweeps updating K only (M recovered from lam in closed form afterwards):
    :func:`sweeps_kernel` without M."""
    sweeps_kernel(K, None, None, I, J, delta, xi, lam, gamma, ratio, hard, n_sweeps)


@lazy_njit(cache=True, fastmath=True)
def kernel_block(K, U, bet, nb, I, J, delta, xi, lam, gamma, ratio, hard, c0):  # pragma: no cover
    """Kernel projections on K = K_base + sum_t bet_t u_t u_t^T with the u_t kept in U (lazy).

    Processes constraints c0, c0+1, ... until the buffer U (B x s) is full or the sweep ends;
    returns (nb, next c). Rows of K cost O(s nb), p and skipped constraints O(nb); the caller
    folds U into K_base (two symmetric rank-k updates, BLAS-3) when the buffer is full. Only the
    lower triangle of K_base is read (and kept up to date by the caller).
    """
    m = I.shape[0]
    B, s = U.shape
    coef = np.empty(B)
    c = c0
    while c < m and nb < B:
        i = I[c]
        j = J[c]
        p = K[i, i] + K[j, j] - 2.0 * K[max(i, j), min(i, j)]
        for t in range(nb):
            q = U[t, i] - U[t, j]
            coef[t] = bet[t] * q
            p += coef[t] * q
        moved, beta = _projection_step(p, c, delta, xi, lam, gamma, ratio, hard)
        if moved:
            # row i of K from the lower triangle: K[i, :i+1] then the column K[i+1:, i]
            for a in range(i + 1):
                U[nb, a] = K[i, a]
            for a in range(i + 1, s):
                U[nb, a] = K[a, i]
            for a in range(j + 1):
                U[nb, a] -= K[j, a]
            for a in range(j + 1, s):
                U[nb, a] -= K[a, j]
            for t in range(nb):
                ct = coef[t]
                for a in range(s):
                    U[nb, a] += ct * U[t, a]
            bet[nb] = beta
            nb += 1
        c += 1
    return nb, c


def sym_from_lower(K):
    """Symmetric matrix from the lower triangle of K."""
    L = np.tril(K)
    return L + np.tril(K, -1).T


def pair_laplacian(s: int, I, J, w) -> np.ndarray:
    """C = sum_c w_c (e_i - e_j)(e_i - e_j)^T (s x s, dense) for pairs (I[c], J[c])."""
    C = np.zeros((s, s))
    np.add.at(C, (I, I), w)
    np.add.at(C, (J, J), w)
    np.add.at(C, (I, J), -w)
    np.add.at(C, (J, I), -w)
    return C


def m_closed_form(K0s, I, J, w):
    """M = -C (I + K0 C)^{-1}, C = sum_c w_c (e_i - e_j)(e_i - e_j)^T; no K0^{-1} or C^{-1}."""
    s = K0s.shape[0]
    act = w != 0
    ma = int(act.sum())
    if ma < s:
        # constraint space (only active constraints, lam_c > 0, enter C): C = P^T D P with
        # incidence rows e_i - e_j in P (ma x s), D = diag w, Q = P K0 P^T (ma x ma):
        # M = -(I + P^T D P K0)^{-1} P^T D P = -P^T (I_ma + D Q)^{-1} D P
        Ia, Ja, wa = I[act], J[act], w[act]
        Q = K0s[np.ix_(Ia, Ia)] - K0s[np.ix_(Ia, Ja)]
        Q += K0s[np.ix_(Ja, Ja)] - K0s[np.ix_(Ja, Ia)]
        X = np.linalg.solve(np.eye(ma) + wa[:, None] * Q, np.diag(wa))
        rows = np.repeat(np.arange(ma), 2)
        cols = np.ravel([Ia, Ja], "F")
        P = sps.csr_matrix((np.tile([1.0, -1.0], ma), (rows, cols)), shape=(ma, s))
        XP = np.asarray(P.T @ X.T).T
        M = -np.asarray(P.T @ XP)
    else:
        C = pair_laplacian(s, I, J, w)
        # M = -C (I + K0 C)^{-1} = -(I + C K0)^{-1} C   (push-through identity)
        M = -np.linalg.solve(np.eye(s) + C @ K0s, C)
    return 0.5 * (M + M.T)


def m_closed_form_factored(G, I, J, w):
    """The same M with K0 = G G^T (G is s x r): by Woodbury,
    M = -C + (C G) (I_r + G^T C G)^{-1} (C G)^T, O(s^2 r); I_r + G^T C G = W^{-1} is PD."""
    C = pair_laplacian(G.shape[0], I, J, w)
    CG = C @ G
    S = np.eye(G.shape[1]) + G.T @ CG
    S = 0.5 * (S + S.T)
    M = -C + CG @ np.linalg.solve(S, CG.T)
    return 0.5 * (M + M.T)

