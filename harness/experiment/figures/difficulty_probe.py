"""Figure and summary lines of the difficulty-bias probe (harness/probes/difficulty.py; docs/studies.md (b))."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.experiment.figures.probe import probe_points, probe_verdict

if TYPE_CHECKING:
    from harness.experiment.figures.data import StudyData


def difficulty_probe_figure(data: StudyData, probe: dict):
    """The difficulty-bias probe (harness/probes/difficulty.py): per arm the gradient-norm share
    of the extreme groups at the batch; the paired differences (group_std minus the others) of
    that share and of the advantage-mass share; the change of held-out pass@1 per bucket."""
    import matplotlib.pyplot as plt

    S, arms = probe["summary"], probe["arms"]
    st = {(e["key"], e["a"]): e for e in S["stats"]}
    ch = {(e["key"], e["a"]): e for e in S["change"]}
    fig, axs = plt.subplots(1, 3, figsize=(19, 4.3), layout="constrained", width_ratios=[1, 1, 1.3])
    probe_points(
        axs[0],
        [st[("grad/share_extreme", a)] for a in arms],
        arms,
        [data.color(a) for a in arms],
        "||g_extreme|| / (||g_extreme|| + ||g_rest||)",
        "gradient-norm share of extreme groups, per arm",
        zero=False,
    )
    sp = S["stat_pairs"]
    probe_points(
        axs[1],
        sp,
        [f"{e['key'].split('/')[0]} share:\n{e['a']} − {e['b']}" for e in sp],
        ["tab:purple" if e["key"].startswith("grad") else "tab:gray" for e in sp],
        "paired difference of the share (same batch)",
        f"{arms[0]} minus the others, paired by batch",
    )
    buckets = ["easy", "medium", "hard"]
    for j, a in enumerate(arms):
        es = [ch[(f"eval/pass_at_1/{b}", a)] for b in buckets]
        xs = [i + (j - (len(arms) - 1) / 2) * 0.2 for i in range(len(buckets))]
        axs[2].errorbar(
            xs,
            [e["mean"] for e in es],
            yerr=[[e["half"] for e in es], [e["half"] for e in es]],
            fmt=data.marker(a),
            color=data.color(a),
            capsize=4,
            mfc="none",
            label=a,
        )
    axs[2].axhline(0, color="k", lw=0.8)
    axs[2].set_xticks(range(len(buckets)), buckets)
    axs[2].set_xlabel("difficulty bucket of the held-out prompts")
    axs[2].set_ylabel("change of held-out pass@1 after one update")
    axs[2].set_title("which prompts one update serves, per arm")
    axs[2].legend()
    fig.suptitle(
        data.title(
            "difficulty-bias probe: one update per advantage scale from the same policy and batch",
            f"{probe['settings']['batches']} batches; error bars: 95% t-interval over batches",
        )
    )
    return fig


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
