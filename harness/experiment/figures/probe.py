"""The mechanism probe's results (probe.json, `harness probe`, harness/probes/): reading them, one
point per arm with its interval, a verdict sentence."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.experiment.figures.data import StudyData


def load_probe(data: StudyData) -> dict | None:
    """<study dir>/probe.json written by `harness probe` (harness/probes/), or None."""
    path = data.dir / "probe.json"
    return json.loads(path.read_text()) if path.exists() else None


def probe_points(
    ax, entries: list[dict], labels: list[str], colors: list[str], ylabel: str, title: str, zero: bool = True
) -> None:
    """One point per entry (mean over the probe's batches) with its 95% t-interval as an error
    bar; entries: dicts with mean / half (harness.probes.engine.paired or arm_mean)."""
    xs = list(range(len(entries)))
    for x, e, c in zip(xs, entries, colors):
        half = e.get("half")
        ax.errorbar(
            [x],
            [e["mean"]],
            yerr=[[half], [half]] if half is not None and math.isfinite(half) else None,
            fmt="o",
            color=c,
            capsize=5,
            ms=7,
            mfc="none",
            mew=1.6,
        )
    if zero:
        ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(xs, labels, rotation=12)
    ax.set_xlim(-0.6, len(xs) - 0.4)
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def probe_verdict(e: dict, effect: str, unit: str = "") -> str:
    """One sentence on a paired probe difference (mean over batches, 95% t-interval)."""
    u = f" {unit}" if unit else ""
    rng = f"{e['mean']:+.3g}{u}, 95% CI [{e['lo']:+.3g}, {e['hi']:+.3g}] over {e['n']} batches"
    if e.get("excludes_zero"):
        return f"{effect}: {rng}: the interval excludes 0, the difference APPEARS (sign as shown)."
    return f"{effect}: {rng}: the interval includes 0, the difference does NOT appear."
