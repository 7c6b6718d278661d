"""The rules every shared figure (harness/experiment/figures/) keeps, read back from the artists it drew:
bands and error bars inside the range the quantity can take; points with intervals, not a line and a
band, for fewer than 4 evals; one colour per arm in every figure of a study; a subtitle made from what
was drawn; a difference's axis that shows the gap; and the demo's learning.png drawn by these rules.

TEST FIXTURES: the study folders written here are made up (no training): the files and keys a study's
runs write (cells.json, study.json, runs/<cell>/metrics.jsonl, eval_prompts/, summary.json)."""

from __future__ import annotations

import json
import math
import os
import runpy
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import LineCollection, PolyCollection  # noqa: E402
from study_helpers import REPO  # noqa: E402

from harness.experiment import figures as F  # noqa: E402
from harness.experiment.figures.paired import paired_panel  # noqa: E402
from harness.experiment.figures.ranges import clipped_yerr  # noqa: E402


def write_folder(d, arms: dict[str, list[dict[int, float]]], key: str, name: str = "toy", probe_arms=()) -> F.StudyData:
    """A results folder: arms[arm] = one {step: value of `key`} per seed; probe.json naming probe_arms."""
    cells = []
    for arm, seeds in arms.items():
        for seed, series in enumerate(seeds, start=1):
            cid = f"arm={arm}__seed={seed}"
            run = d / "runs" / cid
            run.mkdir(parents=True)
            (run / "metrics.jsonl").write_text(
                "".join(json.dumps({"step": s, key: v}) + "\n" for s, v in series.items())
            )
            cells.append({"id": cid, "axes": {"arm": arm, "seed": seed}, "seed": seed, "run_dir": str(run)})
    (d / "cells.json").write_text(json.dumps(cells))
    (d / "study.json").write_text(json.dumps({"name": name, "scale": "fixture", "axes": ["arm", "seed"]}))
    if probe_arms:
        (d / "probe.json").write_text(json.dumps({"arms": list(probe_arms)}))
    return F.StudyData(d)


def band_y(ax) -> list[float]:
    """Every y of every filled band (PolyCollection) on the panel."""
    return [
        float(y)
        for c in ax.collections
        if isinstance(c, PolyCollection)
        for p in c.get_paths()
        for y in p.vertices[:, 1]
    ]


def errorbar_y(ax) -> list[float]:
    """Every y end of every error bar (the LineCollection of ax.errorbar) on the panel."""
    return [
        float(y) for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments() for y in seg[:, 1]
    ]


def joined_lines(ax) -> list:
    """Data lines drawn solid through more than one point."""
    return [
        ln
        for ln in ax.get_lines()
        if ln.get_linestyle() == "-" and len(ln.get_xdata()) > 1 and ln.get_transform() is ax.transData
    ]


# five seeds near the top of [0, 1] and far apart: their t-interval reaches past 1
SPREAD = [0.99, 0.6, 0.98, 0.97, 0.5]


def seeds_at(steps, values_per_seed) -> list[dict[int, float]]:
    return [{s: v for s in steps} for v in values_per_seed]


# ---------------------------------------------------------------- 1. bands clipped to the quantity's range
def test_metric_range_reads_the_key_and_the_caller_wins():
    assert F.metric_range("eval/pass_at_1") == (0.0, 1.0)
    assert F.metric_range("groups/zero_var_frac") == (0.0, 1.0)
    assert F.metric_range("rm/corr_correct") == (-1.0, 1.0)
    assert F.metric_range("eval/length/correct") == (0.0, math.inf)  # a length, although the key says 'correct'
    assert F.metric_range("loss/policy") == (-math.inf, math.inf)
    assert F.metric_range("loss/policy", bounds=(-3, 5)) == (-3.0, 5.0)
    assert F.difference_range((0.0, 1.0)) == (-1.0, 1.0)


def test_clip_helpers_by_hand():
    assert F.clip_interval([-0.2, 0.1], [0.5, 1.3], (0.0, 1.0)) == ([0.0, 0.1], [0.5, 1.0])
    # mean 0.9, interval [0.7, 1.2] in [0, 1]: 0.2 below, 0.1 above (to 1.0)
    below, above = clipped_yerr([0.9], [0.7], [1.2], (0.0, 1.0))
    assert below == pytest.approx([0.2]) and above == pytest.approx([0.1])


def test_a_pass_at_1_band_stays_in_0_1(tmp_path):
    data = write_folder(tmp_path, {"grpo": seeds_at(range(8), SPREAD)}, "eval/pass_at_1")
    assert F.combine(F.seed_series(data, data.cells, "eval/pass_at_1")).hi[0] > 1.0  # the raw interval leaves [0, 1]
    fig, ax = plt.subplots()
    F.panel(ax, data, data.by("arm"), "eval/pass_at_1", "pass@1", "t")
    ys = band_y(ax)
    assert ys and min(ys) >= 0.0 and max(ys) <= 1.0
    plt.close(fig)


def test_a_correlation_band_stays_in_minus1_1(tmp_path):
    data = write_folder(tmp_path, {"grpo": seeds_at(range(8), [0.99, -0.2, 0.95, 0.98, -0.9])}, "rm/corr_correct")
    fig, ax = plt.subplots()
    F.panel(ax, data, data.by("arm"), "rm/corr_correct", "corr", "t")
    ys = band_y(ax)
    assert ys and min(ys) >= -1.0 and max(ys) <= 1.0
    plt.close(fig)


def test_a_caller_range_clips_the_error_bars_of_few_evals(tmp_path):
    """'steps over 2' counts lie in [0, 3] here; the paired difference's error bars stay in [-3, 3]."""
    data = write_folder(
        tmp_path,
        {"a": seeds_at([0, 5], [0, 3, 0, 3, 0]), "b": seeds_at([0, 5], [3, 0, 3, 0, 3])},
        "steps_over_2",
    )
    fig, ax = plt.subplots()
    groups = data.by("arm")
    F.paired_difference_panel(ax, data, groups, ["a"], "b", "steps_over_2", "a − b", "t", "missing", bounds=(0, 3))
    ys = errorbar_y(ax)
    assert F.paired_difference(data, groups["a"], groups["b"], "steps_over_2").lo[0] < -3  # raw interval leaves it
    assert ys and min(ys) >= -3.0 and max(ys) <= 3.0
    plt.close(fig)


# ---------------------------------------------------------------- 2. points, not curves, below 4 evals
@pytest.mark.parametrize("n_seeds", [1, 3, 5])
def test_fewer_than_4_evals_are_points_with_intervals(tmp_path, n_seeds):
    data = write_folder(tmp_path, {"grpo": seeds_at([0, 10, 20], SPREAD[:n_seeds])}, "eval/pass_at_1")
    fig, ax = plt.subplots()
    F.panel(ax, data, data.by("arm"), "eval/pass_at_1", "pass@1", "t", fraction=True)
    assert not joined_lines(ax)
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]
    if n_seeds == 5:  # the mean's t-interval as error bars, clipped to [0, 1]
        ys = errorbar_y(ax)
        assert ys and max(ys) <= 1.0
    plt.close(fig)


def test_four_evals_are_still_a_curve(tmp_path):
    data = write_folder(tmp_path, {"grpo": seeds_at([0, 5, 10, 20], SPREAD)}, "eval/pass_at_1")
    fig, ax = plt.subplots()
    F.panel(ax, data, data.by("arm"), "eval/pass_at_1", "pass@1", "t")
    assert joined_lines(ax) and band_y(ax)
    plt.close(fig)


# ---------------------------------------------------------------- 3. one colour per arm across a study
ARMS = ["grpo", "dr_grpo", "dapo", "gspo", "ppo", "rloo", "group_std", "batch_std", "none", "clip_cov"]


def test_every_arm_has_its_own_colour_whatever_figure_asks_first(tmp_path):
    data = write_folder(tmp_path / "a", {a: seeds_at([0, 1], [0.5]) for a in ARMS[:7]}, "x", probe_arms=ARMS[7:])
    other = F.StudyData(tmp_path / "a")  # a second figure (a new reader) asking in the reverse order
    first = {a: data.color(a) for a in ARMS}
    second = {a: other.color(a) for a in reversed(ARMS)}
    assert first == second
    assert len(set(first.values())) == len(ARMS)  # ten arms, ten colours
    assert first["grpo"] != first["dr_grpo"] and first["group_std"] != first["batch_std"]
    assert len({data.marker(a) for a in ARMS}) == len(ARMS)


def test_two_figures_of_a_study_draw_an_arm_in_one_colour(tmp_path):
    data = write_folder(tmp_path, {a: seeds_at(range(6), [0.4, 0.5]) for a in ("grpo", "dr_grpo")}, "reward/accuracy")
    fig, (ax1, ax2) = plt.subplots(1, 2)
    F.panel(ax1, data, {"dr_grpo": data.by("arm")["dr_grpo"]}, "reward/accuracy", "acc", "only dr_grpo")
    F.panel(ax2, data, data.by("arm"), "reward/accuracy", "acc", "both")
    c1 = {ln.get_label().split(" (")[0]: ln.get_color() for ln in ax1.get_lines() if not ln.get_label().startswith("_")}
    c2 = {ln.get_label().split(" (")[0]: ln.get_color() for ln in ax2.get_lines() if not ln.get_label().startswith("_")}
    assert c1["dr_grpo"] == c2["dr_grpo"] == F.arm_palette(["grpo", "dr_grpo"])["dr_grpo"]
    assert c2["grpo"] != c2["dr_grpo"]
    plt.close(fig)


def test_colours_do_not_depend_on_the_process(tmp_path):
    write_folder(tmp_path, {a: seeds_at([0, 1], [0.5]) for a in ARMS}, "x")
    code = f"from harness.experiment.figures import StudyData; d = StudyData({str(tmp_path)!r}); print([d.color(a) for a in {ARMS!r}])"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1


def test_the_palette_by_hand():
    assert F.arm_palette(["a", "b", "a"]) == {"a": "#1f77b4", "b": "#ff7f0e"}
    eleven = F.arm_palette([f"arm{i}" for i in range(11)])
    assert len(set(eleven.values())) == 11  # past ten: tab20's colours, still distinct


# ---------------------------------------------------------------- 4. subtitles from what is drawn
def drawn_subtitle(data, draw) -> str:
    fig, ax = plt.subplots()
    draw(ax)
    text = F.suptitle(fig, data, "what")
    plt.close(fig)
    return text.split("\n", 1)[1]


@pytest.mark.parametrize(
    "seeds, steps, says, never",
    [
        ([0.4, 0.5, 0.6], range(8), "n=3 seeds as thin lines, their mean bold", "t-interval"),
        (SPREAD, range(8), "mean as a line, band: 95% t-interval over seeds", "thin lines"),
        ([0.4], range(8), "n=1 seed: a line, no interval", "t-interval"),
        (SPREAD, [0, 20], "n=5 seeds at 2 steps: points, bar: 95% t-interval over seeds", "line"),
    ],
)
def test_the_subtitle_says_what_the_curve_drew(tmp_path, seeds, steps, says, never):
    data = write_folder(tmp_path, {"grpo": seeds_at(steps, seeds)}, "reward/accuracy")
    text = drawn_subtitle(data, lambda ax: F.panel(ax, data, data.by("arm"), "reward/accuracy", "acc", "t"))
    assert says in text and never not in text


def test_a_figure_without_recorded_drawing_says_only_the_seeds(tmp_path):
    data = write_folder(tmp_path, {"grpo": seeds_at([0, 1], [0.4, 0.5])}, "x")
    text = drawn_subtitle(data, lambda ax: ax.bar([0], [1.0]))
    assert text == "n=2 seeds"  # no claim of thin lines or a t-band under a bar chart


def test_the_paired_panel_and_panels_that_differ(tmp_path):
    data = write_folder(tmp_path, {a: seeds_at([0, 1], [0.4, 0.5]) for a in ("a", "b")}, "x")
    fig, (left, right) = plt.subplots(1, 2)
    paired_panel(left, data, {"a": F.final([0.1, 0.2, 0.15])}, "t", "a − b")
    F.probe_points(right, [{"mean": 0.1, "half": 0.05}], ["a"], ["C0"], "y", "t")
    text = F.suptitle(fig, data, "what").split("\n", 1)[1].replace("\n", " ")
    assert text.startswith("left: hollow: each seed's difference; filled with caps: their mean, 95% t-interval")
    assert " | right: points: mean over the probe's batches, bar: 95% t-interval over batches" in text
    plt.close(fig)


# ---------------------------------------------------------------- 5. axes that show the compared gap
def gap_share(ax, gap: float) -> float:
    lo, hi = ax.get_ylim()
    return gap / (hi - lo)


def test_gap_limits_by_hand():
    # values 0.02 .. 0.08 and 0: span 0.08, 12% margin = 0.0096 each side
    assert F.gap_limits([0.02, 0.05, 0.08]) == pytest.approx((-0.0096, 0.0896))
    assert F.gap_limits([0.5, 0.55], zero=False) == pytest.approx((0.5 - 0.006, 0.55 + 0.006))
    assert F.gap_limits([float("nan")], zero=False) is None


def test_a_before_after_pass_at_1_shows_its_gap(tmp_path):
    """Two evals 0.50 -> 0.547 on a fraction panel: the +0.047 fills more than 20% of the axis (not 0-0.55)."""
    data = write_folder(tmp_path, {"grpo": [{0: 0.5, 20: 0.547}]}, "eval/pass_at_1")
    fig, ax = plt.subplots()
    F.panel(ax, data, data.by("arm"), "eval/pass_at_1", "pass@1", "t", fraction=True)
    assert gap_share(ax, 0.047) > 0.2
    plt.close(fig)


def test_a_paired_rise_shows_its_gap(tmp_path):
    data = write_folder(tmp_path, {"grpo": [{0: 0.5, 20: 0.547}]}, "eval/pass_at_1")
    rise = {"from_step": 0, "to_step": 20, "prompts": 512, "delta_pass_at_1": 0.047, "ci95": [0.027, 0.067]}
    (data.run_dir(data.cells[0]) / "summary.json").write_text(json.dumps({"paired_rise": rise}))
    fig, ax = plt.subplots()
    ax.set_ylim(0, 1)  # a fixed 0-1 axis is replaced, not kept
    F.rise_panel(ax, data, data.by("arm"))
    assert gap_share(ax, 0.047) > 0.2 and ax.get_ylim()[0] <= 0 < 0.067 <= ax.get_ylim()[1]
    plt.close(fig)


def test_arm_minus_arm_shows_its_gap(tmp_path):
    data = write_folder(
        tmp_path, {"a": seeds_at(range(6), [0.547] * 4), "b": seeds_at(range(6), [0.5] * 4)}, "eval/pass_at_1"
    )
    fig, (ax1, ax2) = plt.subplots(1, 2)
    ax1.set_ylim(-1, 1)
    ax2.set_ylim(-1, 1)
    F.paired_difference_panel(ax1, data, data.by("arm"), ["a"], "b", "eval/pass_at_1", "a − b", "t", "missing")
    paired_panel(ax2, data, {"a": F.final([0.04, 0.05, 0.051])}, "t", "a − b")
    assert gap_share(ax1, 0.047) > 0.2 and gap_share(ax2, 0.047) > 0.2
    plt.close(fig)


# ---------------------------------------------------------------- 6. the demo's learning.png
def write_demo(d):
    """The demo's folder as its cpu scale writes it: one grpo seed, 20 steps, evals at 0 and 20 on 512
    prompts (eval_prompts/), the paired rise by the trainer's own function, no probe."""
    from harness.train.eval.evaluate import paired_rise, save_prompt_scores

    rng = np.random.default_rng(7)
    data = write_folder(d, {"grpo": [{}]}, "x", name="demo")
    cells = json.loads((d / "cells.json").read_text())
    cells[0]["axes"] = {"objective.preset": "grpo", "seed": 1}
    (d / "cells.json").write_text(json.dumps(cells))
    (d / "study.json").write_text(
        json.dumps({"name": "demo", "scale": "cpu", "axes": ["objective.preset", "seed"], "seeds": [1]})
    )
    run = data.run_dir(data.cells[0])
    p0 = rng.beta(2.0, 2.0, 512)
    s0, s1 = rng.binomial(8, p0) / 8, rng.binomial(8, np.clip(p0 + 0.047, 0, 1)) / 8
    save_prompt_scores(run, 0, s0.tolist())
    save_prompt_scores(run, 20, s1.tolist())
    recs = [{"step": s, "reward/accuracy": 0.45 + 0.004 * s} for s in range(20)]
    recs[0]["eval/pass_at_1"] = float(s0.mean())
    recs.append({"step": 20, "eval/pass_at_1": float(s1.mean())})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (run / "summary.json").write_text(json.dumps({"paired_rise": paired_rise(run)}))
    return float(s1.mean() - s0.mean())


def test_the_demo_learning_figure(tmp_path, monkeypatch):
    gap = write_demo(tmp_path)
    figs = {}
    monkeypatch.setenv("HARNESS_STUDY_DIR", str(tmp_path))
    monkeypatch.setenv("HARNESS_FIGURES_DIR", str(tmp_path / "figures"))
    monkeypatch.setattr(F, "save", lambda fig, data, name: figs.setdefault(name, fig))
    runpy.run_path(str(REPO / "analysis" / "demo.py"))
    fig = figs["learning"]
    rise, evals, train = fig.axes
    title = fig._suptitle.get_text()
    assert "step 0 vs the end" in title and "n=1 seed" in title and "(no interval)" not in title
    flat = title.replace("\n", " ")
    assert "left: rise: one point per seed, bar: bootstrap 95% interval over prompts" in flat
    assert "middle: n=1 seed at 2 steps: points, no interval" in flat
    assert not joined_lines(evals) and not [c for c in evals.collections if isinstance(c, PolyCollection)]
    assert errorbar_y(rise)  # the rise has its interval
    assert gap_share(evals, gap) > 0.2 and gap_share(rise, gap) > 0.2
    assert joined_lines(train)  # 20 training steps stay a curve
    for f in figs.values():
        plt.close(f)
