"""y-limits for a panel whose point is a difference (a paired rise, arm − reference): the plotted
values, their intervals and 0 with a margin, so that the compared gap fills the axis instead of
sitting as a sliver on a fixed 0-1 range."""

from __future__ import annotations

import math

import numpy as np

MARGIN = 0.12  # share of the data's span added above and below


def gap_limits(values: list[float], zero: bool = True, margin: float = MARGIN) -> tuple[float, float] | None:
    """(bottom, top) covering the finite `values` (means and interval ends) and 0 (zero), widened
    by `margin` of their span on each side; None without a finite value."""
    vs = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)] + ([0.0] if zero else [])
    if not vs:
        return None
    lo, hi = min(vs), max(vs)
    pad = margin * (hi - lo) if hi > lo else max(abs(hi), 1e-3) * 0.5
    return lo - pad, hi + pad


def fit_gap(ax, values: list[float], zero: bool = True, margin: float = MARGIN) -> None:
    """Set the panel's y-limits to gap_limits(values) (unchanged without a finite value)."""
    lim = gap_limits(values, zero, margin)
    if lim is not None:
        ax.set_ylim(*lim)


def drawn_y(ax) -> list[float]:
    """Every y value drawn on the panel by lines, error bars and bands (the data fit_gap should
    cover), read back from the artists; the horizontal reference lines (axhline) are left out."""
    out: list[float] = []
    for line in ax.get_lines():
        if line.get_transform() is ax.transData:
            out += [float(y) for y in np.asarray(line.get_ydata(), float).ravel()]
    for coll in ax.collections:
        for path in coll.get_paths():
            out += [float(y) for y in path.vertices[:, 1]]
    return out
