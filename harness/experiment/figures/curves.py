"""Curves over seeds: a metric vs step per arm, its mean and 95% t-interval (or each seed drawn),
the panel that draws one metric for every arm, and the panel of arms minus a reference, paired by seed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.experiment.figures.encoding import record
from harness.experiment.figures.gap import drawn_y, fit_gap
from harness.experiment.figures.ranges import clip_interval, clipped_yerr, difference_range, metric_range
from harness.experiment.figures.style import POINTS_BELOW, SEED_LINES_MAX, X_STEP, _finite, seeds_label
from harness.experiment.stats import t_interval

if TYPE_CHECKING:
    from harness.experiment.figures.data import StudyData


@dataclass
class Curve:
    steps: list[int] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    lo: list[float] = field(default_factory=list)
    hi: list[float] = field(default_factory=list)
    n: int = 0  # seeds with at least one value
    series: list[dict[int, float]] = field(default_factory=list)  # each seed's {step: value}
    interval: str = ""  # what [lo, hi] is ('95% t-interval over seeds'); '' when no interval

    def __bool__(self) -> bool:
        return bool(self.steps)


def seed_series(data: StudyData, cells: list[dict], key: str, window: int = 1) -> list[dict[int, float]]:
    """One {step: value} per cell (seed) with a finite value of `key`; window > 1: the max over
    the last `window` logged values (spikes stay visible after averaging over seeds)."""
    out = []
    for c in cells:
        s = {int(r["step"]): float(r[key]) for r in data.metrics(c) if _finite(r.get(key))}
        if s and window > 1:
            steps = sorted(s)
            s = {st: max(s[x] for x in steps[max(0, i - window + 1) : i + 1]) for i, st in enumerate(steps)}
        if s:
            out.append(s)
    return out


def combine(series: list[dict[int, float]]) -> Curve:
    """Mean and 95% t-interval over the series at each step (over the series that have the step)."""
    cur = Curve(n=len(series), series=list(series), interval="95% t-interval over seeds" if len(series) > 1 else "")
    for st in sorted(set().union(*series)) if series else []:
        vals = [s[st] for s in series if st in s]
        m, h = t_interval(vals)
        cur.steps.append(st)
        cur.mean.append(m)
        cur.lo.append(m - h)
        cur.hi.append(m + h)
    return cur


def curve(data: StudyData, cells: list[dict], key: str, window: int = 1) -> Curve:
    """combine over the cells' seed_series (one seed: no interval; a run's per-prompt eval scores are
    not read, since a study rebuilt from MLflow has none and its figures must come out the same)."""
    return combine(seed_series(data, cells, key, window))


def paired_series(data: StudyData, cells_a: list[dict], cells_b: list[dict], key: str) -> list[dict[int, float]]:
    """a - b per seed, {step: difference}, cells matched by seed (same warm start, prompts and eval set)."""
    sb = {c.get("seed"): c for c in cells_b}
    out = []
    for c in cells_a:
        if c.get("seed") not in sb:
            continue
        a = {st: v for s in seed_series(data, [c], key) for st, v in s.items()}
        b = {st: v for s in seed_series(data, [sb[c.get("seed")]], key) for st, v in s.items()}
        d = {st: a[st] - b[st] for st in a if st in b}
        if d:
            out.append(d)
    return out


def paired_difference(data: StudyData, cells_a: list[dict], cells_b: list[dict], key: str) -> Curve:
    """Curve of a - b, paired by seed (see paired_series)."""
    return combine(paired_series(data, cells_a, cells_b, key))


def paired_difference_panel(
    ax,
    data: StudyData,
    groups: dict[str, list[dict]],
    arms: list[str],
    ref: str,
    key: str,
    ylabel: str,
    title: str,
    missing: str,
    styles: dict[str, tuple[str, str]] | None = None,
    bounds: tuple[float, float] | None = None,
) -> bool:
    """`key` of each of `arms` minus `ref` over steps, paired by seed (paired_difference), one curve
    per arm in its colour and marker (or styles[arm] = (colour, marker)), and a line at 0; bands
    clipped to the range of a difference of two values in `bounds` (default: metric_range of the key);
    y-limits fitted to what is drawn and 0 (gap.fit_gap), not the quantity's whole range; the note
    `missing` instead when `ref`, or any of `arms`, is not in `groups` (label -> cells), or `arms` is empty."""
    if not arms or ref not in groups or any(a not in groups for a in arms):
        note(ax, missing)
        return False
    rng = difference_range(metric_range(key, bounds))
    for arm in arms:
        color, marker = (styles or {}).get(arm) or (data.color(arm), data.marker(arm))
        cur = paired_difference(data, groups[arm], groups[ref], key)
        plot_curve(ax, cur, f"{arm} − {ref}", color, marker=marker, bounds=rng)
    fit_gap(ax, drawn_y(ax))
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel(X_STEP)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    integer_steps(ax)
    return True


def plot_curve(
    ax,
    cur: Curve,
    label: str,
    color: str,
    style: str = "-",
    marker: str = "o",
    marker_below: int = 30,
    band: bool = True,
    bounds: tuple[float, float] | None = None,
    **kw,
) -> None:
    """The mean line; with band: each seed as a thin line when there are 2..SEED_LINES_MAX seeds,
    else the shaded interval (cur.interval), clipped to `bounds` (the range the quantity can take).
    label gets '(n=.. seed(s))'. Markers only on short curves (< marker_below steps). Fewer than
    POINTS_BELOW steps: points with error bars instead (plot_points). What is drawn is recorded on
    the panel (encoding.record) for the subtitle."""
    if not cur:
        return
    rng = metric_range(None, bounds)
    if len(cur.steps) < POINTS_BELOW:
        plot_points(ax, cur, label, color, marker, band, rng, **kw)
        return
    few = 1 < cur.n <= SEED_LINES_MAX
    ax.plot(
        cur.steps,
        cur.mean,
        style,
        color=color,
        marker=marker if len(cur.steps) < marker_below else None,
        ms=5,
        mfc="none",
        mew=1.3,
        lw=2.2 if few and band else 1.5,
        label=f"{label} ({seeds_label(cur.n)}{', mean bold' if few and band else ''})",
        **kw,
    )  # hollow markers
    if few and band:
        for s in cur.series:
            st = sorted(s)
            ax.plot(st, [s[x] for x in st], style, color=color, lw=0.8, alpha=0.45)
        record(ax, f"{seeds_label(cur.n)} as thin lines, their mean bold")
    elif band and cur.interval:
        lo, hi = clip_interval(cur.lo, cur.hi, rng)
        ax.fill_between(cur.steps, lo, hi, color=color, alpha=0.18, lw=0)
        mean = "a line" if cur.n == 1 else "their mean as a line"
        record(ax, f"{seeds_label(cur.n)}: {mean}, band: {cur.interval}")
    else:
        record(ax, f"{seeds_label(cur.n)}: {'a line' if cur.n == 1 else 'their mean as a line'}, no interval")


def plot_points(ax, cur: Curve, label: str, color: str, marker: str, band: bool, rng: tuple[float, float], **kw):
    """A series of few steps (< POINTS_BELOW): one point per step, nothing joining them (a line
    between two evals draws values nobody measured); with 2..SEED_LINES_MAX seeds each seed's value
    as a small hollow point and the mean as a large one, else the mean with its interval
    (cur.interval, clipped to rng) as an error bar."""
    few = 1 < cur.n <= SEED_LINES_MAX
    bars = band and bool(cur.interval) and not few
    yerr = clipped_yerr(cur.mean, cur.lo, cur.hi, rng) if bars else None
    kw.pop("linestyle", None)
    ax.errorbar(
        cur.steps,
        cur.mean,
        yerr=yerr,
        fmt=marker,
        linestyle="none",
        color=color,
        capsize=4,
        ms=7,
        mfc="none",
        mew=1.6,
        label=f"{label} ({seeds_label(cur.n)})",
        **kw,
    )
    if few and band:
        for s in cur.series:
            ax.plot(sorted(s), [s[x] for x in sorted(s)], marker, linestyle="none", color=color, ms=4, alpha=0.5)
    evals = f"{seeds_label(cur.n)} at {len(cur.steps)} step{'s' if len(cur.steps) != 1 else ''}"
    if bars:
        record(ax, f"{evals}: points, bar: {cur.interval}")
    elif few and band:
        record(ax, f"{evals}: small points each seed, large their mean")
    else:
        record(ax, f"{evals}: points, no interval")


def plot_seeds(ax, data: StudyData, cells: list[dict], key: str, label: str, color: str) -> bool:
    """Every seed's raw series as a thin line (spikes are not averaged away); one legend entry."""
    series = seed_series(data, cells, key)
    for i, s in enumerate(series):
        steps = sorted(s)
        ax.plot(
            steps,
            [s[x] for x in steps],
            "-",
            color=color,
            lw=0.9,
            alpha=0.8,
            marker=data.marker(label) if len(steps) < 30 else None,
            ms=3,
            label=f"{label} ({seeds_label(len(series))}, each drawn)" if i == 0 else None,
        )
    return bool(series)


def legend(axes, **kw) -> None:
    """A legend on the panel, or on the LAST of a list of panels, that has labelled artists (no
    empty box on an empty panel)."""
    for ax in reversed(list(axes) if isinstance(axes, (list, tuple)) or hasattr(axes, "flat") else [axes]):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(**kw)
            return


def integer_steps(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def note(ax, text: str) -> None:
    """A grey message in the middle of an empty panel (a metric the runs did not log, say)."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="0.35", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def positive(cur: Curve) -> Curve:
    """The curve's steps with a mean > 0 (what a log axis can draw), the band's lower edge floored at
    a tenth of the mean."""
    keep = [i for i, m in enumerate(cur.mean) if m > 0]
    return Curve(
        [cur.steps[i] for i in keep],
        [cur.mean[i] for i in keep],
        [max(cur.lo[i], cur.mean[i] / 10) for i in keep],
        [cur.hi[i] for i in keep],
        cur.n,
        cur.series,
        cur.interval,
    )


def panel(
    ax,
    data: StudyData,
    groups: dict[str, list[dict]],
    key: str,
    ylabel: str,
    title: str,
    window: int = 1,
    logy: bool = False,
    fraction: bool = False,
    empty: str | None = None,
    bounds: tuple[float, float] | None = None,
    styles: dict[str, str] | None = None,
) -> bool:
    """One metric vs step, one curve per group (label -> cells). A note when no cell has a finite
    value (`empty`, or a generic one). fraction: a y range inside [0, 1] that starts at 0. bounds: the
    range the quantity can take (a correlation's [-1, 1]); the bands are clipped to it (fraction: [0, 1];
    neither: ranges.metric_range of the key). When every curve has fewer than POINTS_BELOW steps (points,
    not lines) the y-limits fit the points and their intervals (gap.fit_gap), whatever `fraction` says.
    styles: a line style per label (default solid)."""
    curves = {lab: curve(data, cells, key, window) for lab, cells in groups.items()}
    if not any(curves.values()):
        logged = any(key in r for cells in groups.values() for c in cells for r in data.metrics(c))
        note(ax, empty or (f"'{key}' is NaN at every logged step" if logged else f"'{key}' not logged by these runs"))
        ax.set_title(title)
        return False
    if logy:
        curves = {lab: positive(cur) for lab, cur in curves.items()}
        if not any(curves.values()):
            note(ax, empty or f"'{key}' is 0 at every logged step (nothing to draw on a log axis)")
            ax.set_title(title)
            return False
    band = metric_range(key, bounds or ((0.0, 1.0) if fraction else None))
    for lab, cur in curves.items():
        style = (styles or {}).get(lab, "-")
        plot_curve(ax, cur, lab, data.color(lab), style=style, marker=data.marker(lab), bounds=band)
    if logy:
        ax.set_yscale("log")
    points = not logy and all(len(cur.steps) < POINTS_BELOW for cur in curves.values() if cur)
    if points:  # points only (before vs after): the axis shows their gap; a tick at each step drawn
        fit_gap(ax, drawn_y(ax), zero=False)
    elif fraction:
        top = min(max(ax.get_ylim()[1], 0.05), 1.02)
        ax.set_ylim(-0.02 * top, top)
    ax.set_xlabel(X_STEP)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if points:
        ax.set_xticks(sorted({st for cur in curves.values() for st in cur.steps}))
    else:
        integer_steps(ax)
    return True
