"""Conventions shared by every figure of the analysis notebooks (harness/experiment/figures/)."""

from __future__ import annotations

import math
import os

X_STEP = "training step (policy iterations)"
MARKERS = "osD^vP*Xph"
SEED_LINES_MAX = 3  # up to this many seeds: each seed drawn thin, the mean bold, no t-band
POINTS_BELOW = 4  # a series with fewer x values is drawn as points with intervals, not a line and a band


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


def seeds_label(n: int) -> str:
    return "n=1 seed" if n == 1 else f"n={n} seeds"


def setup() -> None:
    import matplotlib

    if not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.titlesize": 10,
            "axes.labelsize": 9,
            "legend.fontsize": 7,
            "xtick.labelsize": 8,
            "ytick.labelsize": 8,
            "figure.titlesize": 11,
        }
    )
