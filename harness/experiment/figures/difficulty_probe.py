"""Figure and summary lines of the difficulty-bias probe (harness/probes/difficulty.py; docs/studies.md (b))."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.experiment.figures.encoding import described, record, suptitle
from harness.experiment.figures.gap import fit_gap
from harness.experiment.figures.probe import probe_points, probe_verdict
from harness.experiment.figures.ranges import UNIT, clipped_yerr, difference_range

if TYPE_CHECKING:
    from harness.experiment.figures.data import StudyData


def difficulty_probe_figure(data: StudyData, probe: dict):
    """The difficulty-bias probe (harness/probes/difficulty.py): per arm the gradient-norm share
    of the extreme groups at the batch; the paired differences (group_std minus the others) of
    that share and of the advantage-mass share; the change of held-out pass@1 per bucket."""
    import matplotlib.pyplot as plt

    S, arms = probe["summary"], probe["arms"]
    st = {(e["key"], e["a"]): e for e in S["stats"]}
    fig, axs = plt.subplots(1, 3, figsize=(19, 4.3), layout="constrained", width_ratios=[1, 1, 1.3])
    probe_points(
        axs[0],
        [st[("grad/share_extreme", a)] for a in arms],
        arms,
        [data.color(a) for a in arms],
        "||g_extreme|| / (||g_extreme|| + ||g_rest||)",
        "gradient-norm share of extreme groups, per arm",
        zero=False,
        bounds=UNIT,
    )
    sp = S["stat_pairs"]
    probe_points(
        axs[1],
        sp,
        [f"{e['key'].split('/')[0]} share:\n{e['a']} − {e['b']}" for e in sp],
        ["tab:purple" if e["key"].startswith("grad") else "tab:gray" for e in sp],
        "paired difference of the share (same batch)",
        f"{arms[0]} minus the others, paired by batch",
        bounds=difference_range(UNIT),
    )
    _bucket_panel(axs[2], data, arms, {(e["key"], e["a"]): e for e in S["change"]})
    suptitle(
        fig,
        data,
        "difficulty-bias probe: one update per advantage scale from the same policy and batch",
        f"{probe['settings']['batches']} batches; {described(fig)}",
    )
    return fig


def _bucket_panel(ax, data: StudyData, arms: list[str], ch: dict) -> None:
    """The change of held-out pass@1 per difficulty bucket after one update, per arm (95% t-interval
    over batches, clipped to [-1, 1]); y-limits fitted to the points, their intervals and 0."""
    buckets, ys = ["easy", "medium", "hard"], []
    for j, a in enumerate(arms):
        es = [ch[(f"eval/pass_at_1/{b}", a)] for b in buckets]
        means = [e["mean"] for e in es]
        below, above = clipped_yerr(
            means, [e["mean"] - e["half"] for e in es], [e["mean"] + e["half"] for e in es], difference_range(UNIT)
        )
        xs = [i + (j - (len(arms) - 1) / 2) * 0.2 for i in range(len(buckets))]
        ax.errorbar(
            xs, means, yerr=[below, above], fmt=data.marker(a), color=data.color(a), capsize=4, mfc="none", label=a
        )
        ys += [m - lo for m, lo in zip(means, below)] + [m + hi for m, hi in zip(means, above)]
    fit_gap(ax, ys)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(buckets)), buckets)
    ax.set_xlabel("difficulty bucket of the held-out prompts")
    ax.set_ylabel("change of held-out pass@1 after one update")
    ax.set_title("which prompts one update serves, per arm")
    ax.legend()
    record(ax, "points: mean over the probe's batches, bar: 95% t-interval over batches")


def difficulty_probe_lines(probe: dict) -> list[str]:
    """Markdown lines of the difficulty-bias probe: per-arm shares, then each paired verdict."""
    S, st = probe["summary"], probe["settings"]
    lines = [
        f"## Probe: one update per arm ({st['batches']} batches, {st['probe_prompts']} held-out prompts x "
        f"{st['probe_samples']}, {probe['wall_seconds']:.0f} s)",
        "",
    ]
    for e in S["stats"]:
        if math.isfinite(e["mean"]):
            lines.append(f"- {e['key']} ({e['a']}, at the batch): {e['mean']:.4g} ± {e['half']:.2g}")
    for e in S["stat_pairs"] + S["pairs"]:
        lines.append("- " + probe_verdict(e, f"{e['key']}, {e['a']} − {e['b']}"))
    return lines
