"""Compiled kernels of dual coordinate descent: seeded shuffles, one randomized pass over a
block of coordinates (with LIBLINEAR's shrinking), and ``v += Y^T x``. They assume validated
input (see :func:`specopt.solvers.dual_cd.dual_cd`)."""

from __future__ import annotations

import numpy as np

from .._jit import lazy_njit


@lazy_njit(cache=True)
def seed_rng(seed):
    np.random.seed(seed)


@lazy_njit(cache=True)
def _shuffle(idx, k):
    for a in range(k - 1, 0, -1):
        b = np.random.randint(0, a + 1)
        tmp = idx[a]
        idx[a] = idx[b]
        idx[b] = tmp


@lazy_njit(cache=True)
def block_pass(Y, qd, upper, margin, x, v, idx, n_act, pg_max_old, pg_min_old, shrink):
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
def combine(Y, x, v):
    """v += Y^T x, skipping zero entries of x (many multipliers sit at 0)."""
    m = v.shape[0]
    for i in range(x.shape[0]):
        xi = x[i]
        if xi != 0.0:
            yi = Y[i]
            for k in range(m):
                v[k] += xi * yi[k]
