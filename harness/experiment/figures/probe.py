"""The mechanism probe's results (probe.json, `harness probe`, harness/probes/): reading them, one
point per arm with its interval, a verdict sentence."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from harness.experiment.figures.encoding import record
from harness.experiment.figures.gap import fit_gap
from harness.experiment.figures.ranges import clipped_yerr, metric_range

if TYPE_CHECKING:
    from harness.experiment.figures.data import StudyData


def load_probe(data: StudyData) -> dict | None:
    """<study dir>/probe.json written by `harness probe` (harness/probes/), or None."""
    path = data.dir / "probe.json"
    return json.loads(path.read_text()) if path.exists() else None


def probe_points(
    ax,
    entries: list[dict],
    labels: list[str],
    colors: list[str],
    ylabel: str,
    title: str,
    zero: bool = True,
    bounds: tuple[float, float] | None = None,
) -> None:
    """One point per entry (mean over the probe's batches) with its 95% t-interval as an error
    bar, clipped to `bounds` (the range the quantity can take: a share's [0, 1]); entries: dicts
    with mean / half (harness.probes.engine.paired or arm_mean); zero (a difference): a line at 0
    and y-limits fitted to the points, their intervals and 0 (gap.fit_gap)."""
    rng = metric_range(None, bounds)
    xs = list(range(len(entries)))
    ys = []
    for x, e, c in zip(xs, entries, colors):
        half = e.get("half")
        bar = half is not None and math.isfinite(half)
        yerr = clipped_yerr([e["mean"]], [e["mean"] - half], [e["mean"] + half], rng) if bar else None
        ax.errorbar([x], [e["mean"]], yerr=yerr, fmt="o", color=c, capsize=5, ms=7, mfc="none", mew=1.6)
        ys += [e["mean"]] + ([e["mean"] - yerr[0][0], e["mean"] + yerr[1][0]] if bar else [])
    if zero:  # a difference: the axis fits the points, their intervals and 0
        fit_gap(ax, ys)
        ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(xs, labels, rotation=12)
    ax.set_xlim(-0.6, len(xs) - 0.4)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    record(ax, "points: mean over the probe's batches, bar: 95% t-interval over batches")


def probe_verdict(e: dict, effect: str, unit: str = "") -> str:
    """One sentence on a paired probe difference (mean over batches, 95% t-interval)."""
    u = f" {unit}" if unit else ""
    rng = f"{e['mean']:+.3g}{u}, 95% CI [{e['lo']:+.3g}, {e['hi']:+.3g}] over {e['n']} batches"
    if e.get("excludes_zero"):
        return f"{effect}: {rng}: the interval excludes 0, the difference APPEARS (sign as shown)."
    return f"{effect}: {rng}: the interval includes 0, the difference does NOT appear."
