"""Held-out accuracy and fit time against ``tol`` for the metric learners on bundled data.

    python -m benchmarks.learner_defaults [--quick] [--data wine,breast_cancer,digits]
    python -m benchmarks.learner_defaults --part variants     # KernelITML, LowRankITML
    python -m benchmarks.learner_defaults --part embedding    # SDE (SCS eps), MVE (tol)
    python -m benchmarks.learner_defaults --part completion   # SpectralMatrixCompletion (tol)
    python -m benchmarks.learner_defaults --part lowrank      # LowRankITML defaults vs ITML

For each learner and data set (scikit-learn's wine, breast cancer and digits, standardized) and
each of 3 seeded train/test splits (50/50, stratified): fit with a given ``tol``, score a
1-nearest-neighbour classifier in the learned metric on the test half, and record the fit time
and the certificate the learner reports (relative gap or sweep/pass count, converged or not).
Prints a markdown table (median accuracy / time / gap over the splits, worst accuracy) and
writes ``benchmarks/results/learner_defaults.json``. The default ``tol`` of a learner should sit
where the accuracy has stopped moving (docs/learners.md).

``--part variants``: the same protocol for ``KernelITML`` (1-NN on its learned kernel distances)
and ``LowRankITML``. ``--part embedding``: 3 seeded stratified subsamples of 50 points of wine
and digits (standardized; SCS forced); quality of the 2-D embedding = trustworthiness
(5 neighbours) and leave-one-out 1-NN accuracy of the labels in it; knob = SCS ``eps`` for SDE
(one SDP), ``tol`` for MVE (iterated SDP). ``--part completion``: ``SpectralMatrixCompletion``
on 3 seeded masks of a rank-2 15 x 15 Gaussian matrix and of a 20-row wine subsample (13
standardized features), 60 % observed; quality = RMSE on the held-out entries.
``--part lowrank``: ``LowRankITML()`` at its defaults (and with ``gamma=inf``, the exact
hard-constraint problem that was the default before), ``ITMLSupervised()`` at its defaults and
the Euclidean 1-NN, on iris, wine, breast cancer and digits, the 3 seeded 50/50 splits above:
held-out 1-NN accuracy, fit time, how many splits fitted (hard constraints can be infeasible).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.manifold import trustworthiness
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import StandardScaler

from benchmarks._common import markdown_table, write_json
from specopt.learn import (
    ITMLSupervised,
    KernelITML,
    LowRankITML,
    PSDBoostMetric,
    RelativeComparisonMetric,
)
from specopt.learn.completion import (
    NuclearNormCompletion,
    SpectralMatrixCompletion,
    make_low_rank,
)
from specopt.learn.embedding import MinimumVolumeEmbedding, SemidefiniteEmbedding

DATA = {"wine": load_wine, "breast_cancer": load_breast_cancer, "digits": load_digits}
TOLS = (1e-2, 1e-3, 1e-4, 1e-6, 1e-8)


def _learner(name: str, tol: float, seed: int, d: int = 0):
    if name == "ITMLSupervised":
        return ITMLSupervised(tol=tol, random_state=seed)
    if name == "PSDBoostMetric":
        return PSDBoostMetric(tol=tol, random_state=seed)
    if name == "KernelITML":
        return KernelITML(tol=tol, random_state=seed)
    if name == "LowRankITML":
        return LowRankITML(tol=tol, random_state=seed)  # defaults (rank 5, gamma 1)
    return RelativeComparisonMetric(tol=tol, random_state=seed)


def _fit(est, X, y):
    if isinstance(est, RelativeComparisonMetric):
        return est.fit_supervised(X, y)
    return est.fit(X, y)


def _gap(est) -> tuple[float | None, bool | None]:
    if isinstance(est, RelativeComparisonMetric):
        return float(est.gap_) / max(1.0, abs(est.objective_)), bool(est.converged_)
    if isinstance(est, PSDBoostMetric):
        c = est.certificate_
        return c.gap, c.status == "optimal"
    r = est.result_
    return float(r.gap), r.status == "optimal"


def _score(est, Xtr, ytr, Xte, yte) -> float:
    """Held-out 1-NN accuracy in the learned metric (KernelITML: its kernel distances)."""
    if isinstance(est, KernelITML):
        knn = KNeighborsClassifier(1, metric="precomputed").fit(
            est.pairwise_distances(Xtr), ytr)
        return knn.score(est.pairwise_distances(Xte, Xtr), yte)
    knn = KNeighborsClassifier(1).fit(est.transform(Xtr), ytr)
    return knn.score(est.transform(Xte), yte)


METRIC_LEARNERS = ("ITMLSupervised", "PSDBoostMetric", "RelativeComparisonMetric")
VARIANTS = ("KernelITML", "LowRankITML")


def run(quick: bool = False, sets: tuple[str, ...] = ("wine", "breast_cancer"),
        learners: tuple[str, ...] = METRIC_LEARNERS) -> list[dict]:
    rows = []
    splits = (0,) if quick else (0, 1, 2)
    sets = ("wine",) if quick else sets
    for data in sets:
        X, y = DATA[data](return_X_y=True)
        for learner in learners:
            for tol in TOLS:
                accs, times, gaps, conv = [], [], [], []
                for seed in splits:
                    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=seed,
                                                          stratify=y)
                    sc = StandardScaler().fit(Xtr)
                    Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
                    est = _learner(learner, tol, seed, X.shape[1])
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # non-convergence is recorded below
                        try:
                            _fit(est, Xtr, ytr)
                        except ValueError as exc:  # infeasible hard constraints (LowRankITML)
                            print(f"{data} {learner} split {seed}: {exc}", flush=True)
                            break
                    times.append(time.perf_counter() - t0)
                    accs.append(_score(est, Xtr, ytr, Xte, yte))
                    g, c = _gap(est)
                    gaps.append(g)
                    conv.append(c)
                if not accs:
                    continue
                rows.append({
                    "data": data, "learner": learner, "tol": tol,
                    "accuracy": statistics.median(accs), "worst accuracy": min(accs),
                    "time [s]": statistics.median(times), "worst time [s]": max(times),
                    "rel. gap": statistics.median(gaps), "converged": sum(conv),
                    "splits": len(accs),
                })
                print(markdown_table(rows[-1:], list(rows[-1])).splitlines()[-1], flush=True)
    return rows


LOWRANK_LEARNERS = {
    "Euclidean": None,
    "ITMLSupervised": lambda seed: ITMLSupervised(random_state=seed),
    "LowRankITML": lambda seed: LowRankITML(random_state=seed),
    "LowRankITML(gamma=inf)": lambda seed: LowRankITML(gamma=np.inf, random_state=seed),
}


def run_lowrank(quick: bool = False, sets=("iris", "wine", "breast_cancer", "digits"),
                learners=tuple(LOWRANK_LEARNERS)) -> list[dict]:
    """LowRankITML's defaults against ITMLSupervised (module docstring, ``--part lowrank``)."""
    data_sets = {**DATA, "iris": load_iris}
    rows = []
    splits = (0,) if quick else (0, 1, 2)
    for data in sets:
        X, y = data_sets[data](return_X_y=True)
        for learner in learners:
            accs, times, fitted, conv = [], [], 0, 0
            for seed in splits:
                Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=seed,
                                                      stratify=y)
                sc = StandardScaler().fit(Xtr)
                Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
                make = LOWRANK_LEARNERS[learner]
                if make is None:
                    accs.append(KNeighborsClassifier(1).fit(Xtr, ytr).score(Xte, yte))
                    fitted += 1
                    conv += 1
                    continue
                est = make(seed)
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # non-convergence is recorded below
                    try:
                        est.fit(Xtr, ytr)
                    except ValueError as exc:  # infeasible hard constraints
                        print(f"{data} {learner} split {seed}: {str(exc)[:100]}", flush=True)
                        continue
                times.append(time.perf_counter() - t0)
                fitted += 1
                conv += est.result_.status == "optimal"
                accs.append(_score(est, Xtr, ytr, Xte, yte))
            rows.append({
                "data": data, "learner": learner,
                "accuracy": statistics.median(accs) if accs else None,
                "worst accuracy": min(accs) if accs else None,
                "time [s]": statistics.median(times) if times else None,
                "worst time [s]": max(times) if times else None,
                "fitted": fitted, "converged": conv, "splits": len(splits),
                "load": round(os.getloadavg()[0], 1),
            })
            print(markdown_table(rows[-1:], list(rows[-1])).splitlines()[-1], flush=True)
    return rows


EMB_KNOBS = {"SemidefiniteEmbedding": (1e-2, 1e-3, 1e-4, 1e-6),
             "MinimumVolumeEmbedding": (1e-2, 1e-3, 1e-4, 1e-6)}
EMB_DATA = {"wine": load_wine, "digits": load_digits}


def _subsample(X, y, n: int, seed: int):
    idx, _ = train_test_split(np.arange(len(y)), train_size=n, random_state=seed, stratify=y)
    return StandardScaler().fit_transform(X[idx]), y[idx]


def _loo_1nn(Y: np.ndarray, y: np.ndarray) -> float:
    D = np.sum((Y[:, None] - Y[None]) ** 2, axis=-1)
    np.fill_diagonal(D, np.inf)
    return float(np.mean(y[np.argmin(D, axis=1)] == y))


def run_embedding(quick: bool = False, n: int = 50) -> list[dict]:
    """SDE against SCS eps, MVE against tol; trustworthiness and LOO 1-NN of the embedding."""
    rows = []
    splits = (0,) if quick else (0, 1, 2)
    for data in (("wine",) if quick else EMB_DATA):
        X, y = EMB_DATA[data](return_X_y=True)
        for learner, knobs in EMB_KNOBS.items():
            for knob in knobs:
                trust, acc, times, iters, conv, stat = [], [], [], [], [], []
                for seed in splits:
                    Xs, ys = _subsample(X, y, n, seed)
                    if learner == "SemidefiniteEmbedding":
                        est = SemidefiniteEmbedding(
                            solver="SCS", solver_options={"eps_abs": knob, "eps_rel": knob})
                    else:
                        est = MinimumVolumeEmbedding(solver="SCS", tol=knob)
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        Y = est.fit_transform(Xs)
                    times.append(time.perf_counter() - t0)
                    trust.append(trustworthiness(Xs, Y, n_neighbors=5))
                    acc.append(_loo_1nn(Y, ys))
                    iters.append(est.n_iter_)
                    cert = est.certificate_
                    stat.append(cert.status)
                    conv.append(bool(getattr(est, "converged_", True)))
                rows.append({
                    "data": data, "learner": learner,
                    "knob": "SCS eps" if learner == "SemidefiniteEmbedding" else "tol",
                    "value": knob,
                    "trustworthiness": statistics.median(trust), "worst trust.": min(trust),
                    "1-NN acc.": statistics.median(acc), "worst 1-NN acc.": min(acc),
                    "time [s]": statistics.median(times), "worst time [s]": max(times),
                    "iterations": statistics.median(iters), "converged": sum(conv),
                    "statuses": ",".join(sorted(set(stat))), "splits": len(splits),
                })
                print(markdown_table(rows[-1:], list(rows[-1])).splitlines()[-1], flush=True)
    return rows


COMPLETION_TOLS = (1e-2, 1e-3, 1e-4, 1e-6)


def _completion_cases(seed: int):
    M, mask = make_low_rank(15, 15, rank=2, observed=0.6, random_state=seed)
    yield "gaussian rank 2 (15x15)", M, mask
    X, y = load_wine(return_X_y=True)
    Xs, _ = _subsample(X, y, 20, seed)
    rng = np.random.default_rng(seed)
    while True:
        mask = rng.random(Xs.shape) < 0.6
        if mask.any(axis=0).all() and mask.any(axis=1).all():
            break
    yield "wine (20x13)", Xs, mask


def run_completion(quick: bool = False) -> list[dict]:
    """SpectralMatrixCompletion against tol: held-out RMSE (NuclearNormCompletion: reference)."""
    rows = []
    splits = (0,) if quick else (0, 1, 2)
    results: dict[tuple[str, object], list] = {}
    for seed in splits:
        for data, M, mask in _completion_cases(seed):
            Mo = np.where(mask, M, np.nan)
            held = ~mask
            for tol in (None, *COMPLETION_TOLS):
                est = NuclearNormCompletion() if tol is None else SpectralMatrixCompletion(
                    rank=2, tol=tol)
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(Mo)
                dt = time.perf_counter() - t0
                rmse = float(np.sqrt(np.mean((est.completion_ - M)[held] ** 2)))
                it = getattr(est, "n_iter_", 1)
                st = est.certificate_.status if hasattr(est, "certificate_") else "-"
                conv = bool(est.certificate_.extra.get("converged", True)) if hasattr(
                    est, "certificate_") else True
                results.setdefault((data, tol), []).append((rmse, dt, it, st, conv))
    for (data, tol), rs in results.items():
        rows.append({
            "data": data,
            "learner": "NuclearNormCompletion" if tol is None else "SpectralMatrixCompletion",
            "tol": "-" if tol is None else tol,
            "held-out RMSE": statistics.median(r[0] for r in rs),
            "worst RMSE": max(r[0] for r in rs),
            "time [s]": statistics.median(r[1] for r in rs),
            "worst time [s]": max(r[1] for r in rs),
            "MM steps": statistics.median(r[2] for r in rs), "converged": sum(r[4] for r in rs),
            "statuses": ",".join(sorted({r[3] for r in rs})), "splits": len(rs),
        })
        print(markdown_table(rows[-1:], list(rows[-1])).splitlines()[-1], flush=True)
    return rows


if __name__ == "__main__":
    part = sys.argv[sys.argv.index("--part") + 1] if "--part" in sys.argv else "metric"
    quick = "--quick" in sys.argv
    if part == "embedding":
        rows = run_embedding(quick)
        print()
        print(markdown_table(rows, list(rows[0])))
        write_json("learner_defaults_embedding", rows, {"n": 50, "knobs": EMB_KNOBS})
        sys.exit(0)
    if part == "lowrank":
        sets = ("iris", "wine", "breast_cancer", "digits")
        if "--data" in sys.argv:
            sets = tuple(sys.argv[sys.argv.index("--data") + 1].split(","))
        rows = run_lowrank(quick, sets)
        print()
        print(markdown_table(rows, list(rows[0])))
        write_json("learner_defaults_lowrank", rows, {"splits": 1 if quick else 3})
        sys.exit(0)
    if part == "completion":
        rows = run_completion(quick)
        print()
        print(markdown_table(rows, list(rows[0])))
        write_json("learner_defaults_completion", rows, {"tols": list(COMPLETION_TOLS)})
        sys.exit(0)
    sets = ("wine", "breast_cancer")
    if "--data" in sys.argv:
        sets = tuple(sys.argv[sys.argv.index("--data") + 1].split(","))
    learners = VARIANTS if part == "variants" else METRIC_LEARNERS
    rows = run(quick, sets, learners)
    cols = ["data", "learner", "tol", "accuracy", "worst accuracy", "time [s]",
            "worst time [s]", "rel. gap", "converged", "splits"]
    print()
    print(markdown_table(rows, cols))
    write_json("learner_defaults" if part == "metric" else "learner_defaults_variants", rows,
               {"tols": list(TOLS)})
