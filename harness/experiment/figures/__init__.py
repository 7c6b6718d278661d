"""Shared pieces of the analysis notebooks (analysis/<study>.py): load a study's results
folder, curves over seeds with a 95% t-interval, consistent arm colours, saving figures,
and the markdown summary the notebooks print.

    from harness.experiment import figures as F
    data = F.StudyData.from_env("length_bias")        # HARNESS_STUDY_DIR (set by `harness summarize`)
    for arm, cells in data.by("objective.preset").items():
        F.plot_curve(ax, F.curve(data, cells, "length/incorrect"), arm, data.color(arm))

Reads only the run-directory contract (cells.json, study.json, runs/<cell>/metrics.jsonl,
groups.jsonl, eval.json, config.yaml), like harness/experiment/summary.py.

    style.py             conventions (x axis, markers, how many seeds are drawn one by one), setup()
    data.py              StudyData: the results folder, per-cell files, colours per arm
    palette.py           one colour and marker per arm from the study's arm list (tab10), in every figure
    ranges.py            the range a quantity can take (pass@k in [0, 1], ...) and intervals clipped to it
    gap.py               y-limits that fit a difference's values, intervals and 0 (not a fixed 0-1)
    encoding.py          what each panel drew, recorded by the drawing code; the subtitle says it
    curves.py            curves over seeds, paired differences and their panel, the one-metric panel
    numbers.py           per-arm final / tail values with intervals, verdict sentences, tables
    output.py            where figures and summary.md go
    learning.py          the paired rise of held-out pass@1 per arm and seed
    paired.py            arms against a reference arm, paired by seed: differences, intervals, panel
    probe.py             probe.json: loading, points with intervals, verdicts
    length_probe.py      the length-bias probe's figure and lines (docs/studies.md (a))
    difficulty_probe.py  the difficulty-bias probe's figure and lines (docs/studies.md (b))

Conventions of every figure: x = training step (policy iterations); with up to
SEED_LINES_MAX (3) seeds every seed is a thin line and their mean a bold one (a t-interval
from 2-3 seeds is wider than the data and says little); with more seeds, the mean with the
shaded 95% t-interval, clipped to the range the quantity can take (ranges.metric_range: a
fraction stays in [0, 1]); with one seed, the line alone and "n=1 seed" in the legend (the paired
rise of pass@1 has its bootstrap 95% interval over prompts: rise_panel). A series with fewer than POINTS_BELOW (4)
steps is drawn as points with error bars, nothing joining them. A panel whose point is a difference
fits its y-limits to the values, intervals and 0. An arm has one colour in every figure of a study
(palette.py), and a figure's subtitle is what its panels drew (encoding.suptitle). At a step where some
seeds have no value (no correct response that step, say) the mean and interval use the seeds
that do.
"""

from harness.experiment.figures.curves import (
    Curve,
    combine,
    curve,
    integer_steps,
    legend,
    note,
    paired_difference,
    paired_difference_panel,
    paired_series,
    panel,
    plot_curve,
    plot_points,
    plot_seeds,
    seed_series,
)
from harness.experiment.figures.data import StudyData
from harness.experiment.figures.difficulty_probe import difficulty_probe_figure, difficulty_probe_lines
from harness.experiment.figures.encoding import described, record, suptitle
from harness.experiment.figures.gap import drawn_y, fit_gap, gap_limits
from harness.experiment.figures.learning import paired_rises, rise_lines, rise_panel
from harness.experiment.figures.length_probe import length_probe_figure, length_probe_lines
from harness.experiment.figures.numbers import (
    Final,
    eval_json_value,
    final,
    last_of,
    last_value,
    markdown_table,
    no_signal_lines,
    tail_mean,
    tail_of,
    verdict,
)
from harness.experiment.figures.output import figures_dir, save, write_summary
from harness.experiment.figures.palette import arm_palette
from harness.experiment.figures.probe import load_probe, probe_points, probe_verdict
from harness.experiment.figures.ranges import clip_interval, clipped_yerr, difference_range, metric_range
from harness.experiment.figures.style import MARKERS, POINTS_BELOW, SEED_LINES_MAX, X_STEP, seeds_label, setup

__all__ = [
    "Curve",
    "Final",
    "MARKERS",
    "POINTS_BELOW",
    "SEED_LINES_MAX",
    "StudyData",
    "X_STEP",
    "arm_palette",
    "clip_interval",
    "clipped_yerr",
    "combine",
    "curve",
    "described",
    "difference_range",
    "difficulty_probe_figure",
    "difficulty_probe_lines",
    "drawn_y",
    "eval_json_value",
    "figures_dir",
    "final",
    "fit_gap",
    "gap_limits",
    "integer_steps",
    "last_of",
    "last_value",
    "legend",
    "length_probe_figure",
    "length_probe_lines",
    "load_probe",
    "markdown_table",
    "metric_range",
    "no_signal_lines",
    "note",
    "paired_difference",
    "paired_difference_panel",
    "paired_rises",
    "paired_series",
    "panel",
    "plot_curve",
    "plot_points",
    "plot_seeds",
    "probe_points",
    "probe_verdict",
    "record",
    "rise_lines",
    "rise_panel",
    "save",
    "seed_series",
    "seeds_label",
    "setup",
    "suptitle",
    "tail_mean",
    "tail_of",
    "verdict",
    "write_summary",
]
