"""What the learners that run the low-rank SDP engine share (embeddings, completion).

* :func:`use_low_rank`: the size switch (``solver="LOW_RANK"`` forces the engine, any other
  ``solver`` the conic path, ``solver=None`` the engine from a measured size on);
* :func:`low_rank_certificate`: a :class:`~specopt.certificate.Certificate` for one engine solve
  (``optimal`` only when the engine's own certificate says so: relative primal residual and gap
  within ``tol``);
* :func:`mm_certificate`: the same for a majorize-minimize run (:func:`low_rank_mm`):
  ``stationary_point`` only when the MM loop converged, every inner solve was certified and the
  stationarity test passed; ``optimal_inaccurate`` otherwise, with the failing parts in ``extra``.
"""

from __future__ import annotations

from typing import Any

import cvxpy as cp

#: ``solver`` value that selects the low-rank engine in the learners.
LOW_RANK = "LOW_RANK"
#: Relative accuracy of each low-rank solve (primal residual and gap) in the learners.
LOW_RANK_TOL = 1e-4


def use_low_rank(solver: str | None, n: int, min_n: int | None, applicable: bool = True) -> bool:
    """Whether a learner runs the low-rank engine.

    ``solver="LOW_RANK"``: yes; another solver name: no (conic path); ``None``: from ``min_n``
    (matrix order) on, when the problem is in the engine's form (``applicable``); ``min_n=None``
    means never by default.
    """
    if solver is not None:
        return str(solver).upper() == LOW_RANK
    return applicable and min_n is not None and n >= min_n


def low_rank_certificate(res: Any, sense: str, **extra: Any):
    """A :class:`specopt.certificate.Certificate` for one :func:`solve_low_rank_sdp` result."""
    from specopt.certificate import Certificate

    return Certificate(
        route="low_rank_sdp", backend="low_rank_sdp",
        status=cp.OPTIMAL if res.status == "optimal" else cp.OPTIMAL_INACCURATE,
        objective=res.objective, bound=res.bound, gap=res.gap,
        max_violation=res.max_abs_residual, iterations=res.iterations,
        solve_time=res.solve_time, history=res.history, is_global=True,
        extra={"sense": sense, "rank": res.rank, "lambda_min": res.lambda_min,
               "primal_residual": res.primal_residual, "inner_iterations": res.inner_iterations,
               "engine_status": res.status, **extra},
    )


def mm_certificate(res: Any, stationarity: tuple[bool, float, float] | None = None,
                   **extra: Any):
    """A :class:`specopt.certificate.Certificate` for a :func:`low_rank_mm` result.

    ``stationary_point`` needs ``res.converged``, the inner solves the claim rests on
    ``optimal`` (``res.claim_steps``: after the stationarity stop the returned iterate's step and
    the certifying one, both to the inner tolerance; otherwise every step, each to its scheduled
    tolerance, ``extra["step_tols"]``) and, when given, ``stationarity = (passed, measured,
    tolerance)``; otherwise ``optimal_inaccurate``.
    """
    from specopt.certificate import STATIONARY, Certificate

    inner_ok = bool(res.inner_certified)
    stat_ok = stationarity is None or bool(stationarity[0])
    status = STATIONARY if res.converged and inner_ok and stat_ok else cp.OPTIMAL_INACCURATE
    last = res.inner[-1]
    return Certificate(
        route="low_rank_sdp", backend="low_rank_sdp", status=status,
        objective=res.objective, max_violation=last.max_abs_residual,
        iterations=res.iterations, solve_time=sum(r.solve_time for r in res.inner),
        history=res.history, is_global=False,
        extra={"converged": res.converged, "stop_reason": res.stop_reason,
               "inner_solves_accurate": inner_ok,
               "stationarity": stationarity,
               "monotone": not res.monotone_violations,
               "monotone_violations": res.monotone_violations,
               "run_values": [res.objective], "inner_iterations": res.inner_iterations,
               "inner_status": [r.status for r in res.inner], "rank": last.rank,
               "step_tols": list(getattr(res, "step_tols", [])),
               "extrapolated": list(getattr(res, "extrapolated", [])),
               "extrapolation_rejected": list(getattr(res, "extrapolation_rejected", [])),
               "inner_summary": [(r.iterations, r.inner_iterations, r.rank, r.status,
                                  round(r.solve_time, 2)) for r in res.inner], **extra},
    )


#: Relative eigenvalue difference below which two eigenvalues of K count as tied (as in the
#: iterated-SDP route's stationarity test).
TIE_RTOL = 1e-4


def mm_stationarity(C0: Any, beta: Any, A: Any, b: Any, mm: Any, tol: float, *,
                    trace_bound: float | None = None, max_tie_solves: int = 4, seed: int = 0,
                    **solve_kw: Any) -> tuple[bool, float, float]:
    """Stationarity test of the point ``K* = Y Y^T`` returned by :func:`low_rank_mm`.

    ``F(K) = <C0, K> + sum_i beta_i lambda_i(K)`` (``beta`` nondecreasing: concave part). K* is
    stationary iff for every supergradient ``G = V diag(beta) V^T`` (``V``: top eigenvectors of
    K*) the majorizer ``<C0 + G, K>``, tight at K*, is minimized over the feasible set by K*.
    One warm-started engine solve of that SDP gives a *proven* lower bound ``L`` on its minimum
    (the engine's dual bound), so ``measured = max(0, F(K*) - L) / (1 + |F(K*)|)`` bounds the
    decrease any feasible K can make on the majorizer. At a tie of eigenvalues across a change of
    ``beta`` the supergradient is not unique: up to ``max_tie_solves`` rotated bases of the tied
    eigenspace are tried as well (seeded; not exhaustive). A solve without a bound (no trace
    bound and a non-PSD slack) counts as ``measured = inf``. Returns ``(passed, measured, tol)``.
    """
    import math

    import numpy as np

    from specopt.solvers.sdp import (
        SymOp,
        linear_spectral_factored,
        solve_low_rank_sdp,
        top_eig_factor,
    )

    beta = np.asarray(beta, dtype=float)
    q = beta.size
    Y = mm.Y
    F = linear_spectral_factored(C0, beta, Y)
    # eigenpairs of K* = Y Y^T (padded with zero eigenvalues past the rank of Y)
    lam, U = top_eig_factor(Y, min(Y.shape[0], max(Y.shape[1], q + 1)))
    last = mm.inner[-1]

    def decrease(V: np.ndarray) -> float:
        Ct = SymOp(C0.n, sparse=C0.sparse, dense=C0.dense,
                   U=V if C0.U is None else np.c_[C0.U, V],
                   w=beta if C0.U is None else np.r_[C0.w, beta])
        r = solve_low_rank_sdp(Ct, A, b, sense="min", trace_bound=trace_bound, Y0=Y, y0=last.y,
                               sigma0=min(last.sigma, 1e2), tol=tol / 10, **solve_kw)
        if r.bound is None or not math.isfinite(r.bound):
            return math.inf
        return max(0.0, F - r.bound) / (1.0 + abs(F))

    measured = decrease(U[:, :q])
    # tied eigenvalues across the boundaries where beta changes
    scale = TIE_RTOL * max(1.0, float(lam[0]) if lam.size else 1.0)
    cuts = [k for k in range(1, q + 1) if k == q or beta[k - 1] != beta[k]]
    rng = np.random.default_rng(seed)
    tries = 0
    for k in cuts:
        if k >= lam.size or lam[k - 1] - lam[k] > scale or not math.isfinite(measured):
            continue
        idx = np.flatnonzero(np.abs(lam - lam[k - 1]) <= scale)
        for _ in range(max_tie_solves):
            if tries >= max_tie_solves:
                break
            tries += 1
            Q, R = np.linalg.qr(rng.standard_normal((idx.size, idx.size)))
            V = U.copy()
            V[:, idx] = U[:, idx] @ (Q * np.sign(np.diag(R)))
            measured = max(measured, decrease(V[:, :q]))
    return measured <= tol, float(measured), float(tol)
