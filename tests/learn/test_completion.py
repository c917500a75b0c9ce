"""Spectral matrix completion vs the nuclear-norm heuristic on the same random masks."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from specopt.learn.completion import (
    NuclearNormCompletion,
    SpectralMatrixCompletion,
    make_low_rank,
)
from tests._helpers import recorded_kwarg


@pytest.mark.parametrize("rank", [1, 2])
def test_spectral_beats_nuclear_norm_on_average(rank):
    nn_err, sp_err = [], []
    for seed in range(3):
        M, mask = make_low_rank(20, 20, rank, observed=0.45, random_state=100 * rank + seed)
        Xo = np.where(mask, M, np.nan)
        nn = NuclearNormCompletion().fit(Xo)
        sp = SpectralMatrixCompletion(rank=rank).fit(Xo)
        nn_err.append(-nn.score(M))
        sp_err.append(-sp.score(M))
        # data consistency and a monotone objective trace
        assert np.allclose(sp.completion_[mask], M[mask], atol=1e-4 * np.abs(M).max())
        hist = np.array(sp.history_["objective"])
        assert np.all(np.diff(hist) <= 1e-4 * max(1.0, abs(hist[0])))
        assert np.trace(sp.kernel_) <= sp.trace_bound_ * (1 + 1e-4)
    assert np.mean(sp_err) < np.mean(nn_err)
    assert np.mean(sp_err) < 1e-2


def test_slackened_observations_and_api():
    M, mask = make_low_rank(8, 7, 1, observed=0.6, random_state=3)
    Xo = np.where(mask, M, np.nan)
    sp = SpectralMatrixCompletion(rank=1, C=10.0)
    assert clone(sp).get_params() == sp.get_params()
    with pytest.raises(NotFittedError):
        sp.predict()
    assert sp.fit(Xo) is sp
    assert sp.predict().shape == M.shape
    assert -sp.score(M) < 0.1
    with pytest.raises(ValueError, match="no observed"):
        NuclearNormCompletion().fit(np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match="rank"):
        SpectralMatrixCompletion(rank=0).fit(Xo)
    with pytest.raises(ValueError, match="The 'C' parameter of NuclearNormCompletion"):
        NuclearNormCompletion(C=-1.0).fit(Xo)
    with pytest.raises(ValueError, match="Expected 2D array"):
        NuclearNormCompletion().fit(np.ones(4))


# --------------------------------------------------------------------------------------------
# The low-rank engine path (solver="LOW_RANK", and the default from LOW_RANK_MIN_ORDER)
# --------------------------------------------------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import specopt.learn.completion as completion_mod  # noqa: E402
from specopt.learn._low_rank import LOW_RANK_TOL, mm_stationarity  # noqa: E402

CASES = [(12, 12, 1, 0.5, 2), (20, 20, 2, 0.5, 1), (15, 15, 2, 0.6, 3), (10, 10, 1, 0.3, 4),
         (14, 9, 2, 0.7, 5)]


def _observed(m, n, rank, observed, seed, scale=1.0):
    M, mask = make_low_rank(m, n, rank, observed=observed, random_state=seed)
    return M * scale, np.where(mask, M * scale, np.nan), mask


def _spectral_cost(K, d):
    lam = np.linalg.eigvalsh(0.5 * (K + K.T))[::-1]
    return float(lam.sum() - 2 * lam[:d].sum())


@pytest.mark.parametrize("case", CASES)
def test_nuclear_norm_low_rank_agrees_with_clarabel(case):
    """Same data: the engine's objective tr(K)/2 is Clarabel's to its tolerance, certified."""
    M, Xo, mask = _observed(*case)
    lr = NuclearNormCompletion(solver="LOW_RANK").fit(Xo)
    cl = NuclearNormCompletion(solver="CLARABEL").fit(Xo)
    assert lr.certificate_.route == "low_rank_sdp" and lr.certificate_.status == "optimal"
    assert cl.certificate_.status == "optimal"
    f_lr, f_cl = 0.5 * np.trace(lr.kernel_), 0.5 * np.trace(cl.kernel_)
    assert abs(f_lr - f_cl) <= LOW_RANK_TOL * (1 + abs(f_cl))
    assert lr.certificate_.gap <= LOW_RANK_TOL
    # the kernel is the factor's, PSD, and holds the data
    assert np.allclose(lr.kernel_, lr.factor_ @ lr.factor_.T)
    assert np.max(np.abs(lr.completion_[mask] - M[mask])) <= 1e-3 * np.abs(M).max()
    assert lr.nuclear_norm_ == pytest.approx(cl.nuclear_norm_, rel=1e-3)


@pytest.mark.parametrize("case", CASES)
def test_spectral_low_rank_same_stationary_point_as_clarabel(case):
    """Same start (the nuclear-norm solution), the same tau, the same MM tolerance: both reach
    the bound's optimum -tau (a rank-d completion with tr K = tau) and recover M as well."""
    M, Xo, mask = _observed(*case)
    d = case[2]
    cl = SpectralMatrixCompletion(rank=d, solver="CLARABEL", max_iter=30).fit(Xo)
    # engine steps to 1e-5 (Clarabel's are ~1e-8): at the default 1e-4 the recovery error of
    # the ill-conditioned 10 x 10, 30 % member is 1.4e-3 (2.5e-5 at 1e-5), the cost the same
    lr = SpectralMatrixCompletion(rank=d, solver="LOW_RANK", max_iter=30,
                                  trace_bound=cl.trace_bound_,
                                  solver_options={"tol": 1e-5}).fit(Xo)
    c = lr.certificate_
    assert c.route == "low_rank_sdp" and c.status == "stationary_point"
    assert c.extra["converged"] and c.extra["inner_solves_accurate"] and c.extra["stationarity"][0]
    tau = cl.trace_bound_
    assert lr.trace_bound_ == tau
    # the cost of the returned K (recomputed), against Clarabel's and the lower bound -tau
    f_lr, f_cl = _spectral_cost(lr.kernel_, d), _spectral_cost(cl.kernel_, d)
    assert f_lr == pytest.approx(c.objective, rel=1e-8, abs=1e-8)
    assert abs(f_lr - f_cl) <= 1e-3 * (1 + abs(f_cl))
    assert f_lr >= -tau * (1 + 1e-4)
    assert np.trace(lr.kernel_) <= tau * (1 + 1e-4)
    err_lr, err_cl = -lr.score(M), -cl.score(M)
    assert err_lr <= max(10 * err_cl, 1e-3)
    hist = np.array(lr.history_["objective"])
    assert np.all(np.diff(hist) <= 1e-3 * max(1.0, abs(hist[0])))


@pytest.mark.parametrize("case", CASES[:3])
def test_many_observed_entries_use_the_factored_steps(case, monkeypatch):
    """Above ``_IP_MAX_OBSERVED`` observed entries both the nuclear-norm solve and the spectral
    fit's MM steps run the factored method (the interior point's dense steps cost O(rows^3));
    the spectral fit is then stationary at the interior point's cost; the user's method wins."""
    import specopt.learn.completion as comp
    import specopt.solvers.sdp as sdp

    M, Xo, mask = _observed(*case)
    d = case[2]
    with recorded_kwarg(sdp, "low_rank_mm", "method") as seen:
        ip = SpectralMatrixCompletion(rank=d, solver="LOW_RANK", max_iter=30).fit(Xo)
        monkeypatch.setattr(comp, "_IP_MAX_OBSERVED", int(mask.sum()) - 1)
        bm = SpectralMatrixCompletion(rank=d, solver="LOW_RANK", max_iter=30).fit(Xo)
        SpectralMatrixCompletion(rank=d, solver="LOW_RANK", max_iter=30,
                                 solver_options={"method": "ip"}).fit(Xo)
    assert seen == ["auto", "bm", "ip"]
    assert ip.certificate_.status == bm.certificate_.status == "stationary_point"
    f_ip, f_bm = _spectral_cost(ip.kernel_, d), _spectral_cost(bm.kernel_, d)
    assert abs(f_bm - f_ip) <= 1e-3 * (1 + abs(f_ip))


def test_spectral_low_rank_leaves_the_balanced_saddle():
    """Exact nuclear-norm recovery gives a balanced factor, a stationary point of the spectral
    cost where warm-started steps do not move (cost -tau/2); the rescaled start reaches -tau."""
    M, Xo, mask = _observed(12, 12, 1, 0.5, 2)
    lr = SpectralMatrixCompletion(rank=1, solver="LOW_RANK").fit(Xo)
    assert lr.certificate_.objective == pytest.approx(-lr.trace_bound_, rel=1e-3)
    assert -lr.score(M) < 1e-3


def test_low_rank_capped_iterations_are_not_certified():
    M, Xo, mask = _observed(20, 20, 2, 0.5, 1)
    # the factored method capped at one outer iteration; any method stopped at once by time
    nn = NuclearNormCompletion(solver="LOW_RANK",
                               solver_options={"max_iters": 1, "method": "bm"}).fit(Xo)
    assert nn.certificate_.status == "optimal_inaccurate"
    assert nn.certificate_.extra["engine_status"] == "inaccurate"
    nn = NuclearNormCompletion(solver="LOW_RANK", solver_options={"time_limit": 0.0}).fit(Xo)
    assert nn.certificate_.status == "optimal_inaccurate"
    sp = SpectralMatrixCompletion(rank=2, solver="LOW_RANK", max_iter=1).fit(Xo)
    assert sp.certificate_.status == "optimal_inaccurate"
    assert not sp.certificate_.extra["converged"]
    # each engine step capped by time: not certified either
    sp = SpectralMatrixCompletion(rank=2, solver="LOW_RANK",
                                  solver_options={"time_limit": 0.0}).fit(Xo)
    assert sp.certificate_.status == "optimal_inaccurate"


def test_stationarity_test_detects_a_non_stationary_point():
    """One MM step from a random factor is not a fixed point: the test measures the decrease."""
    from specopt.solvers.sdp import SymOp, low_rank_mm

    M, Xo, mask = _observed(15, 15, 2, 0.6, 3)
    rows, b = completion_mod._entry_rows(M, mask)
    N = 30
    Y0 = np.random.default_rng(0).standard_normal((N, 4))
    C0, beta = SymOp.identity(N), np.full(2, -2.0)
    tau = 4 * np.linalg.svd(M, compute_uv=False).sum()
    one = low_rank_mm(C0, beta, rows, b, Y0, trace_bound=tau, max_iters=1, inner_tol=1e-4)
    passed, measured, tol = mm_stationarity(C0, beta, rows, b, one, 1e-3, trace_bound=tau)
    assert not passed and measured > 1e-2
    # converged from the (rescaled) nuclear-norm factor, as the learner does: stationary
    F = NuclearNormCompletion(solver="LOW_RANK").fit(Xo).factor_
    Ys = np.r_[np.sqrt(1.1) * F[:15], F[15:] / np.sqrt(1.1)]
    full = low_rank_mm(C0, beta, rows, b, Ys, trace_bound=tau, max_iters=30, inner_tol=1e-4,
                       tol=1e-4, tol_K=1e-3)
    assert full.converged
    passed, measured, _ = mm_stationarity(C0, beta, rows, b, full, 1e-3, trace_bound=tau)
    assert passed and measured <= 1e-3


def test_size_switch_both_sides(monkeypatch):
    """solver=None: the engine from LOW_RANK_MIN_ORDER = m + n on (exact observations, no
    restarts), the conic route below it, with C, or with restarts."""
    thr = completion_mod.LOW_RANK_MIN_ORDER
    m = thr // 2
    M, Xo, _ = _observed(m, thr - m, 1, 0.5, 7)
    assert NuclearNormCompletion().fit(Xo).certificate_.route == "low_rank_sdp"
    M, Xo, _ = _observed(m, thr - m - 1, 1, 0.5, 7)
    assert NuclearNormCompletion().fit(Xo).certificate_.route == "conic"
    # the spectral learner, on small data with the threshold moved (the rule, not the number)
    monkeypatch.setattr(completion_mod, "LOW_RANK_MIN_ORDER", 16)
    M, Xo, _ = _observed(8, 8, 1, 0.6, 8)
    assert SpectralMatrixCompletion(rank=1).fit(Xo).certificate_.route == "low_rank_sdp"
    assert SpectralMatrixCompletion(rank=1, C=10.0).fit(Xo).certificate_.route == "iterated_sdp"
    assert SpectralMatrixCompletion(rank=1, restarts=1).fit(Xo).certificate_.route == (
        "iterated_sdp")
    assert SpectralMatrixCompletion(rank=1, solver="CLARABEL").fit(
        Xo).certificate_.route == "iterated_sdp"
    M, Xo, _ = _observed(8, 7, 1, 0.6, 8)
    assert SpectralMatrixCompletion(rank=1).fit(Xo).certificate_.route == "iterated_sdp"
    assert NuclearNormCompletion().fit(Xo).certificate_.route == "conic"


def test_low_rank_bad_input():
    M, Xo, _ = _observed(8, 7, 1, 0.6, 3)
    with pytest.raises(ValueError, match="exact observations"):
        NuclearNormCompletion(C=1.0, solver="LOW_RANK").fit(Xo)
    with pytest.raises(ValueError, match="exact observations"):
        SpectralMatrixCompletion(C=1.0, solver="low_rank").fit(Xo)
    with pytest.raises(ValueError, match="restarts"):
        SpectralMatrixCompletion(restarts=2, solver="LOW_RANK").fit(Xo)
    with pytest.raises(ValueError, match="max_iters"):
        SpectralMatrixCompletion(solver="LOW_RANK", solver_options={"max_iters": 3}).fit(Xo)
    with pytest.raises(ValueError, match="The 'trace_bound' parameter"):
        SpectralMatrixCompletion(solver="LOW_RANK", trace_bound=-1.0).fit(Xo)
    with pytest.raises(ValueError, match="trace_scale"):
        SpectralMatrixCompletion(solver="LOW_RANK", trace_scale=0.5).fit(Xo)
    with pytest.raises(ValueError, match="rank"):
        SpectralMatrixCompletion(rank=15, solver="LOW_RANK").fit(Xo)
    with pytest.raises(ValueError, match="Input X contains infinity"):
        NuclearNormCompletion(solver="LOW_RANK").fit(np.where(np.isnan(Xo), np.nan, np.inf))


@st.composite
def _instances(draw):
    m = draw(st.integers(3, 10))
    n = draw(st.integers(3, 10))
    rank = draw(st.integers(1, 2))
    tied = draw(st.booleans())  # equal singular values (tied eigenvalues of K)
    scale = 10.0 ** draw(st.integers(-3, 3))
    observed = draw(st.sampled_from([0.25, 0.5, 0.8]))
    seed = draw(st.integers(0, 10**6))
    rng = np.random.default_rng(seed)
    U = np.linalg.qr(rng.standard_normal((m, rank)))[0]
    V = np.linalg.qr(rng.standard_normal((n, rank)))[0]
    s = np.ones(rank) if tied else np.geomspace(1.0, 0.05, rank)
    rows = np.exp(rng.uniform(-2, 2, m)) if draw(st.booleans()) else np.ones(m)  # bad scaling
    M = scale * rows[:, None] * ((U * s) @ V.T)
    mask = rng.random((m, n)) < observed
    mask[rng.integers(m), :] = False  # possibly an unobserved row
    if not mask.any():
        mask[0, 0] = True
    return M, mask, rank


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_instances())
def test_low_rank_random_instances_honest(inst):
    """Random (few observations, tied singular values, badly scaled rows and magnitudes, empty
    rows): a certified nuclear-norm answer matches Clarabel's optimum; a spectral answer is
    data-consistent, within tr K <= tau, never below the bound -tau, and no worse than its
    start; certified only with the evidence behind it."""
    M, mask, rank = inst
    Xo = np.where(mask, M, np.nan)
    lr = NuclearNormCompletion(solver="LOW_RANK").fit(Xo)
    cl = NuclearNormCompletion(solver="CLARABEL").fit(Xo)
    f_lr, f_cl = 0.5 * np.trace(lr.kernel_), 0.5 * np.trace(cl.kernel_)
    if lr.certificate_.status == "optimal":
        assert abs(f_lr - f_cl) <= LOW_RANK_TOL * (1 + abs(f_cl))
    else:
        assert lr.certificate_.extra["engine_status"] == "inaccurate"
    sp = SpectralMatrixCompletion(rank=min(rank, sum(M.shape) - 1), solver="LOW_RANK").fit(Xo)
    c = sp.certificate_
    bscale = 1 + np.abs(M[mask]).max()
    assert np.max(np.abs(sp.completion_[mask] - M[mask])) <= 1e-2 * bscale
    tau = sp.trace_bound_
    assert np.trace(sp.kernel_) <= tau * (1 + 1e-2)
    f = _spectral_cost(sp.kernel_, sp.rank)
    assert f >= -tau * (1 + 1e-2)
    assert f <= sp.history_["objective"][0] + 1e-3 * (1 + abs(f))
    if c.status == "stationary_point":
        assert c.extra["converged"] and c.extra["inner_solves_accurate"]
        assert c.extra["stationarity"][0]
    else:
        assert not (c.extra["converged"] and c.extra["inner_solves_accurate"]
                    and c.extra["stationarity"][0])


@pytest.mark.parametrize("C", [np.nan, np.inf, 0.0])
def test_bad_c_named_before_any_solve(C):
    M, mask = make_low_rank(6, 5, rank=1, observed=0.7, random_state=0)
    Xo = np.where(mask, M, np.nan)
    for est in (NuclearNormCompletion(C=C), SpectralMatrixCompletion(C=C)):
        with pytest.raises(ValueError, match="The 'C' parameter"):
            est.fit(Xo)


def test_score_on_the_partial_matrix_is_a_number_and_fold_in_predict():
    """score on a matrix with NaN judges its observed entries (was nan); predict(X) completes
    rows by fold-in and gives back the completion on the fitted rows."""
    M, mask = make_low_rank(12, 10, rank=2, observed=0.7, random_state=3)
    Xo = np.where(mask, M, np.nan)
    est = SpectralMatrixCompletion(rank=2).fit(Xo)
    s_obs = est.score(Xo)
    assert np.isfinite(s_obs) and -s_obs < 1e-3  # observations are met
    assert np.isfinite(est.score(M)) and est.score(M) <= s_obs + 1e-12
    assert est.row_basis_.shape == (10, 2)
    np.testing.assert_allclose(est.predict(Xo), est.completion_, atol=1e-4 * np.abs(M).max())
    # rows completed one at a time: a subset and a permutation give the same rows
    P = est.predict(Xo[[5, 1]])
    np.testing.assert_allclose(P, est.predict(Xo)[[5, 1]])
    with pytest.raises(ValueError, match="features"):
        est.predict(Xo[:, :4])


def test_fully_observed_nuclear_norm_is_closed_form_and_agrees_with_clarabel():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((5, 4))
    fast = NuclearNormCompletion().fit(M)
    assert fast.certificate_.route == "closed_form"
    ref = NuclearNormCompletion(C=1e6, solver="CLARABEL").fit(M)  # conic path, same optimum
    assert abs(fast.nuclear_norm_ - np.linalg.svd(M, compute_uv=False).sum()) <= 1e-12
    assert abs(ref.certificate_.objective - fast.nuclear_norm_) <= 1e-5 * fast.nuclear_norm_
    assert np.linalg.eigvalsh(fast.kernel_)[0] >= -1e-10
    np.testing.assert_allclose(fast.kernel_[:5, 5:], M, atol=1e-12)
