"""Stationarity of a point of the iterated-SDP route, ties of eigenvalues included
(:func:`stationarity_check`): the majorizer of every supergradient at the point must not allow a
decrease beyond the tolerance."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..solvers.iterated_sdp import majorizer_gap
from ._iterated_surrogate import Surrogate

#: Eigenvalues closer than this (relative to ``max(1, |lambda|_max)``) are treated as tied.
TIE_TOL = 1e-4
#: At most this many extra subproblem solves per stationarity check at ties, and at most
#: ``max(MIN_TIE_SOLVES, TIE_SOLVE_FRACTION * MM steps)``: the check is a bounded fraction of the
#: run (measured in docs/routes/iterated_sdp.md).
MAX_TIE_SOLVES = 12
MIN_TIE_SOLVES = 2
TIE_SOLVE_FRACTION = 0.5


def _tied_clusters(lam: np.ndarray, beta: np.ndarray) -> list[np.ndarray]:
    """Runs of (decreasing) eigenvalues within TIE_TOL on which the weights ``beta`` differ."""
    tol = TIE_TOL * max(1.0, float(np.max(np.abs(lam))) if lam.size else 1.0)
    out, start = [], 0
    for i in range(1, lam.size + 1):
        if i == lam.size or lam[i - 1] - lam[i] > tol:
            idx = np.arange(start, i)
            if idx.size > 1 and np.ptp(beta[idx]) > 0:
                out.append(idx)
            start = i
    return out


def _rotations(r: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Bases of an r-dim tied eigenspace to try: reversed order, then the angles pi/4, 3pi/4
    (r = 2) or seeded random orthogonal matrices (r > 2)."""
    qs = [np.eye(r)[:, ::-1]]
    if r == 2:
        for t in (np.pi / 4, 3 * np.pi / 4):
            qs.append(np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]))
    else:
        for _ in range(3):
            q, rr = np.linalg.qr(rng.standard_normal((r, r)))
            qs.append(q * np.sign(np.diag(rr)))
    return qs


def stationarity_check(surr: Surrogate, point: dict, run, tol: float, seed,
                       base_step: tuple[dict, float] | None = None,
                       budget: int = MAX_TIE_SOLVES) -> dict[str, Any]:
    """Is ``point`` (a K*) a stationary point, including at tied eigenvalues?

    With ``F = convex + h``, ``h`` concave spectral, K* is stationary iff for every supergradient
    G of h at K* the majorizer ``S_G = convex + tr(G K)`` (tight at K*) is minimized by K*:
    ``F(K*) - min_K S_G(K) <= tol (1 + |F(K*)|)``; ``S_G(K) = F(K) + majorizer_gap(K, G)`` at any
    point. When the eigenvalues of K* are distinct where ``beta`` changes, G is unique and one
    solve decides: the MM step that certified K* (``base_step``: its point and surrogate value;
    solved here when not given). At a tie the supergradients over the tied eigenspace U are
    ``U Q diag(beta_tie) Q^T U^T`` (Q orthogonal, and their convex hull); the test then tries the
    reversed basis, two more angles (r = 2) or seeded random bases, and the basis aligned with the
    best step found (smallest weight on the largest eigenvalue of ``U^T (K+ - K*) U``), at most
    ``budget`` solves, and stops at the first descent step found.
    Returns ``measured`` (largest relative decrease found), ``descent`` (the subproblem point of a
    decrease > tol, or None), ``supergradients_tested`` (solves done here), ``tied_dims`` and
    ``exhaustive`` (True when no tie was found: the single solve is then a complete test).
    """
    Ks = [np.asarray(k, dtype=float) for k in point["K"]]
    eig = []
    for K in Ks:
        lam, V = np.linalg.eigh(0.5 * (K + K.T))
        eig.append((lam[::-1], V[:, ::-1]))
    base = [(V * nd.beta) @ V.T for (lam, V), nd in zip(eig, surr.nodes, strict=True)]
    search = _Search(float(point["objective"]), run, [nd.beta for nd in surr.nodes], base,
                     budget, tol)
    if base_step is not None:
        search.record(*base_step)
    else:
        search.attempt(base)
    tied_dims: list[int] = []
    rng = np.random.default_rng(seed)
    for j, ((lam, V), nd) in enumerate(zip(eig, surr.nodes, strict=True)):
        for idx in _tied_clusters(lam, nd.beta):
            tied_dims.append(int(idx.size))
            if search.found:
                break
            search.tie(j, V, idx, Ks[j], rng)
    found = search.found
    return {"measured": float(max(search.best_dec, 0.0)),
            "descent": search.best_point if found else None,
            "supergradients_tested": search.tested, "tied_dims": tied_dims,
            "exhaustive": not tied_dims, "tolerance": tol}


class _Search:
    """The supergradients tried so far: the largest relative decrease of a majorizer over
    ``F`` (the objective at K*) and its point, and how many solves were made."""

    def __init__(self, F: float, run: Any, betas: list[np.ndarray], base: list[np.ndarray],
                 budget: int, tol: float) -> None:
        self.F, self.scale, self.run, self.betas, self.base = F, 1.0 + abs(F), run, betas, base
        self.budget, self.tol = budget, tol
        self.best_dec, self.best_point, self.tested = -np.inf, None, 0

    @property
    def found(self) -> bool:
        """Whether a descent step (decrease > tol) was found."""
        return self.best_dec > self.tol

    @property
    def spent(self) -> bool:
        return self.tested >= self.budget

    def record(self, p: dict, sval: float) -> float:
        dec = (self.F - sval) / self.scale
        if dec > self.best_dec:
            self.best_dec, self.best_point = dec, p
        return dec

    def attempt(self, Bs: list[np.ndarray]) -> tuple[dict, float]:
        """Solve the majorizer of ``Bs``; its point and relative decrease."""
        self.tested += 1
        p = self.run(Bs)
        return p, self.record(p, float(p["objective"]) + majorizer_gap(p["K"], Bs, self.betas))

    def rotated(self, j: int, V: np.ndarray, idx: np.ndarray, basis: np.ndarray
                ) -> list[np.ndarray]:
        """The base supergradients with term ``j``'s tied eigenspace in ``basis``."""
        Vc = V.copy()
        Vc[:, idx] = V[:, idx] @ basis
        Bs = list(self.base)
        Bs[j] = (Vc * self.betas[j]) @ Vc.T
        return Bs

    def tie(self, j: int, V: np.ndarray, idx: np.ndarray, K: np.ndarray,
            rng: np.random.Generator) -> None:
        """Term ``j``'s tied cluster ``idx``: the rotated bases, then the basis aligned with
        the best step among them (within the budget, until a descent step is found)."""
        local_dec, local_p = -np.inf, None
        for Q in _rotations(idx.size, rng):
            if self.spent or self.found:
                break
            p, dec = self.attempt(self.rotated(j, V, idx, Q))
            if dec > local_dec:
                local_dec, local_p = dec, p
        if local_p is not None and not self.spent and not self.found:
            U = V[:, idx]
            D = np.asarray(local_p["K"][j]) - K
            _, Y = np.linalg.eigh(U.T @ (0.5 * (D + D.T)) @ U)
            self.attempt(self.rotated(j, V, idx, Y[:, ::-1]))
