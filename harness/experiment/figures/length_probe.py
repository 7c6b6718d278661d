"""Figure and summary lines of the length-bias probe (harness/probes/length.py; docs/studies.md (a))."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.experiment.figures.encoding import described, record, suptitle
from harness.experiment.figures.probe import probe_points, probe_verdict

if TYPE_CHECKING:
    from harness.experiment.figures.data import StudyData


def length_probe_figure(data: StudyData, probe: dict):
    """The length-bias probe (harness/probes/length.py): per arm, the change of the mean length of
    wrong and of right answers after one update (95% t-intervals over batches), and the share of
    the gradient weight each aggregation puts on end tokens."""
    import matplotlib.pyplot as plt

    S, arms = probe["summary"], probe["arms"]
    colors = [data.color(a) for a in arms]
    ch = {(e["key"], e["a"]): e for e in S["change"]}
    st = {(e["key"], e["a"]): e for e in S["stats"]}
    fig, axs = plt.subplots(1, 3, figsize=(16, 4.3), layout="constrained")
    probe_points(
        axs[0],
        [ch[("eval/length/incorrect", a)] for a in arms],
        arms,
        colors,
        "change of mean length, wrong answers (tokens)",
        "after one update: WRONG answers",
    )
    probe_points(
        axs[1],
        [ch[("eval/length/correct", a)] for a in arms],
        arms,
        colors,
        "change of mean length, right answers (tokens)",
        "after one update: RIGHT answers",
    )
    xs = range(len(arms))
    axs[2].bar(
        [x - 0.18 for x in xs],
        [st[("agg/eos_share_incorrect", a)]["mean"] for a in arms],
        0.36,
        color=colors,
        alpha=0.45,
        label="end tokens of wrong answers",
    )
    axs[2].bar(
        [x + 0.18 for x in xs],
        [st[("agg/eos_share_correct", a)]["mean"] for a in arms],
        0.36,
        color=colors,
        alpha=1.0,
        hatch="//",
        label="end tokens of right answers",
    )
    axs[2].set_xticks(list(xs), arms, rotation=12)
    axs[2].set_ylabel("share of the update's gradient weight (0-1)")
    axs[2].set_title("where the aggregation puts the end tokens' weight")
    axs[2].legend()
    record(axs[2], "bars: mean share over the probe's batches (no interval)")
    suptitle(
        fig,
        data,
        "length-bias probe: one update per aggregation from the same policy and batch",
        f"{probe['settings']['batches']} batches, the same sampling seed for every arm; {described(fig)}",
    )
    return fig


def length_probe_lines(probe: dict) -> list[str]:
    """Markdown lines of the length-bias probe: the policy before, then each paired verdict."""
    S, st = probe["summary"], probe["settings"]
    lines = [
        f"## Probe: one update per arm ({st['batches']} batches, {st['probe_prompts']} held-out prompts x "
        f"{st['probe_samples']}, {probe['wall_seconds']:.0f} s)",
        "",
        f"Before the update: pass@1 {S['base']['eval/pass_at_1']:.3f}, length of right / wrong answers "
        f"{S['base']['eval/length/correct']:.2f} / {S['base']['eval/length/incorrect']:.2f} tokens.",
        "",
    ]
    for e in S["change"]:
        if e["key"] in ("eval/length/incorrect", "eval/length/correct"):
            lines.append("- " + probe_verdict(e, f"{e['key']} after one update, {e['a']} − before", "tokens"))
    for e in S["pairs"]:
        if e["key"] in ("eval/length/incorrect", "eval/length/correct", "eval/pass_at_1"):
            unit = "" if e["key"] == "eval/pass_at_1" else "tokens"
            lines.append("- " + probe_verdict(e, f"{e['key']} after one update, {e['a']} − {e['b']}", unit))
    for e in S["stats"]:
        lines.append(f"- {e['key']} ({e['a']}, at the batch): {e['mean']:.4f} ± {e['half']:.2g}")
    if S.get("regime"):
        lines += [
            "",
            "The probe's training batches (what the mechanism needs; harness/probes/regime.py): "
            + "; ".join(f"{e['key'].split('/', 1)[1]} {e['mean']:.3f} ± {e['half']:.2g}" for e in S["regime"]),
        ]
    return lines
