"""Minimum volume embedding of handwritten digits in 2-D, saved as a scatter plot.

    python examples/embedding_scatter.py [OUT.png] [N_POINTS]

Takes ``N_POINTS`` (default 60) images of the digits 0, 1, 6 and 7 from scikit-learn's bundled
digits, learns a 2-D embedding with ``specopt.learn.MinimumVolumeEmbedding`` (k-nearest-neighbour
distances preserved, the non-convex MVE objective solved by specopt's iterated SDP route), and
saves a scatter plot coloured by digit (default ``mve_digits.png``).
"""

from __future__ import annotations

import sys

import matplotlib

matplotlib.use("Agg")  # a script writes a file; no window needed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

from specopt.learn import MinimumVolumeEmbedding  # noqa: E402


def main(out: str = "mve_digits.png", n_points: int = 60) -> str:
    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, (0, 1, 6, 7))
    X, y = X[keep], y[keep]
    idx = np.sort(np.random.default_rng(0).choice(len(y), size=n_points, replace=False))
    X, y = X[idx] / 16.0, y[idx]
    mve = MinimumVolumeEmbedding(n_components=2, n_neighbors=5)
    Z = mve.fit_transform(X)
    fig, ax = plt.subplots(figsize=(5, 4.5))
    for digit in np.unique(y):
        sel = y == digit
        ax.scatter(Z[sel, 0], Z[sel, 1], s=18, label=str(digit))
    ax.set_title(f"minimum volume embedding of {n_points} digits (specopt)")
    ax.legend(title="digit", fontsize=8)
    ax.set_aspect("equal", adjustable="datalim")
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    path = main(args[0] if args else "mve_digits.png", int(args[1]) if len(args) > 1 else 60)
    print(f"embedding plot written to {path}")
