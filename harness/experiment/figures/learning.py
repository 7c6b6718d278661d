"""Does each arm learn? The paired rise of held-out pass@1 (first -> last in-loop eval, same prompts
and sampling seed, bootstrap 95% interval over prompts) per arm and seed."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from harness.experiment.figures.encoding import record
from harness.experiment.figures.gap import fit_gap
from harness.experiment.figures.ranges import UNIT, clipped_yerr, difference_range

if TYPE_CHECKING:
    from harness.experiment.figures.data import StudyData


def paired_rises(data: StudyData, cells: list[dict]) -> list[dict]:
    """Per cell (seed): summary.json's paired_rise (first -> last in-loop eval, same prompts and
    sampling seed, bootstrap 95% interval over prompts), with the cell's seed; cells without it
    are skipped."""
    out = []
    for c in cells:
        p = data.run_dir(c) / "summary.json"
        rise = json.loads(p.read_text()).get("paired_rise") if p.exists() else None
        if rise:
            out.append({"seed": c.get("seed", c["axes"].get("seed")), **rise})
    return out


def rise_lines(data: StudyData, label: str, cells: list[dict]) -> list[str]:
    """Markdown lines: the paired rise of held-out pass@1 of each seed of an arm, with its interval."""
    lines = []
    for r in paired_rises(data, cells):
        lo, hi = r["ci95"]
        verdict = (
            "learns (interval above 0)" if lo > 0 else ("falls (interval below 0)" if hi < 0 else "interval includes 0")
        )
        lines.append(
            f"- {label}, seed {r['seed']}: held-out pass@1 rise {r['delta_pass_at_1']:+.3f} "
            f"[{lo:+.3f}, {hi:+.3f}] (steps {r['from_step']} -> {r['to_step']}, {r['prompts']} prompts): {verdict}"
        )
    return lines or [f"- {label}: no paired rise recorded (fewer than two evals)"]


def rise_panel(ax, data: StudyData, groups: dict[str, list[dict]]) -> None:
    """Paired rise of held-out pass@1 per arm and seed, each with its bootstrap 95% interval over
    prompts (clipped to [-1, 1], the range of a difference of two pass@1); y-limits fitted to the
    points, their intervals and 0 (gap.fit_gap), so that a rise of a few points is visible."""
    x, labels, ys = 0, [], []
    for lab, cells in groups.items():
        rs = paired_rises(data, cells)
        for j, r in enumerate(rs):
            d, (lo, hi) = r["delta_pass_at_1"], r["ci95"]
            below, above = clipped_yerr([d], [lo], [hi], difference_range(UNIT))
            ax.errorbar(
                [x + (j - (len(rs) - 1) / 2) * 0.15],
                [d],
                yerr=[below, above],
                fmt=data.marker(lab),
                color=data.color(lab),
                capsize=3,
                mfc="none",
            )
            ys += [d, d - below[0], d + above[0]]
        labels.append(f"{lab}\n({len(rs)} seed{'' if len(rs) == 1 else 's'})")
        x += 1
    fit_gap(ax, ys)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_ylabel("paired rise of held-out pass@1\n(first -> last eval)")
    ax.set_title("does each arm learn? one point per seed")
    if ys:
        record(ax, "rise: one point per seed, bar: bootstrap 95% interval over prompts")
