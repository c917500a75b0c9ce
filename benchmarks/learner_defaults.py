"""Held-out accuracy and fit time against ``tol`` for the metric learners on bundled data.

    python benchmarks/learner_defaults.py [--quick] [--data wine,breast_cancer,digits]

For each learner and data set (scikit-learn's wine, breast cancer and digits, standardized) and
each of 3 seeded train/test splits (50/50, stratified): fit with a given ``tol``, score a
1-nearest-neighbour classifier in the learned metric on the test half, and record the fit time
and the certificate the learner reports (relative gap or sweep/pass count, converged or not).
Prints a markdown table (median accuracy / time / gap over the splits, worst accuracy) and
writes ``benchmarks/results/learner_defaults.json``. The default ``tol`` of a learner should sit
where the accuracy has stopped moving (docs/learners.md).
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings

from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import StandardScaler

from benchmarks._common import markdown_table, write_json
from specopt.learn import ITMLSupervised, PSDBoostMetric, RelativeComparisonMetric

DATA = {"wine": load_wine, "breast_cancer": load_breast_cancer, "digits": load_digits}
TOLS = (1e-2, 1e-3, 1e-4, 1e-6, 1e-8)


def _learner(name: str, tol: float, seed: int):
    if name == "ITMLSupervised":
        return ITMLSupervised(tol=tol, random_state=seed)
    if name == "PSDBoostMetric":
        return PSDBoostMetric(tol=tol, random_state=seed)
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


def run(quick: bool = False, sets: tuple[str, ...] = ("wine", "breast_cancer")) -> list[dict]:
    rows = []
    splits = (0,) if quick else (0, 1, 2)
    sets = ("wine",) if quick else sets
    for data in sets:
        X, y = DATA[data](return_X_y=True)
        for learner in ("ITMLSupervised", "PSDBoostMetric", "RelativeComparisonMetric"):
            for tol in TOLS:
                accs, times, gaps, conv = [], [], [], []
                for seed in splits:
                    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=seed,
                                                          stratify=y)
                    sc = StandardScaler().fit(Xtr)
                    Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
                    est = _learner(learner, tol, seed)
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # non-convergence is recorded below
                        _fit(est, Xtr, ytr)
                    times.append(time.perf_counter() - t0)
                    knn = KNeighborsClassifier(1).fit(est.transform(Xtr), ytr)
                    accs.append(knn.score(est.transform(Xte), yte))
                    g, c = _gap(est)
                    gaps.append(g)
                    conv.append(c)
                rows.append({
                    "data": data, "learner": learner, "tol": tol,
                    "accuracy": statistics.median(accs), "worst accuracy": min(accs),
                    "time [s]": statistics.median(times), "worst time [s]": max(times),
                    "rel. gap": statistics.median(gaps), "converged": sum(conv),
                    "splits": len(splits),
                })
                print(markdown_table(rows[-1:], list(rows[-1])).splitlines()[-1], flush=True)
    return rows


if __name__ == "__main__":
    sets = ("wine", "breast_cancer")
    if "--data" in sys.argv:
        sets = tuple(sys.argv[sys.argv.index("--data") + 1].split(","))
    rows = run("--quick" in sys.argv, sets)
    cols = ["data", "learner", "tol", "accuracy", "worst accuracy", "time [s]",
            "worst time [s]", "rel. gap", "converged", "splits"]
    print()
    print(markdown_table(rows, cols))
    write_json("learner_defaults", rows, {"tols": list(TOLS)})
