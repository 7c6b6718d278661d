"""Arms against a reference arm, paired by seed: one number per cell (its peak over steps, its mean
over steps, its final eval, its paired rise of pass@1, its count of spikes), the difference
arm − reference per seed the two share (the same warm start, prompts and eval set), and the mean of
those differences with its 95% t-interval over the seeds; drawn as one point per seed and the mean
with its interval."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.experiment.figures.curves import note, seed_series
from harness.experiment.figures.encoding import record
from harness.experiment.figures.gap import fit_gap
from harness.experiment.figures.learning import paired_rises
from harness.experiment.figures.numbers import Final, final
from harness.experiment.figures.ranges import clipped_yerr, metric_range
from harness.experiment.figures.style import _finite

if TYPE_CHECKING:
    from harness.experiment.figures.data import StudyData

CellValue = Callable[["StudyData", dict], float]


def _steps(data: StudyData, cell: dict, key: str) -> list[float]:
    series = seed_series(data, [cell], key)
    return list(series[0].values()) if series else []


def peak(key: str) -> CellValue:
    """The cell's largest value of `key` over its steps (nan when never logged)."""
    return lambda data, cell: max(_steps(data, cell, key), default=float("nan"))


def step_mean(key: str) -> CellValue:
    """The cell's mean of `key` over all its steps (nan when never logged)."""

    def value(data: StudyData, cell: dict) -> float:
        xs = _steps(data, cell, key)
        return sum(xs) / len(xs) if xs else float("nan")

    return value


def count_over(key: str, threshold: float) -> CellValue:
    """How many of the cell's steps have `key` above `threshold` (nan when never logged)."""

    def value(data: StudyData, cell: dict) -> float:
        xs = _steps(data, cell, key)
        return float(sum(x > threshold for x in xs)) if xs else float("nan")

    return value


def eval_value(key: str) -> CellValue:
    """`key` of the cell's eval.json (the final checkpoint's held-out eval; nan when absent)."""
    return lambda data, cell: float(data.final_eval(cell).get(key, float("nan")))


def rise(data: StudyData, cell: dict) -> float:
    """The cell's paired rise of held-out pass@1 (summary.json: first -> last in-loop eval)."""
    rs = paired_rises(data, [cell])
    return float(rs[0]["delta_pass_at_1"]) if rs else float("nan")


def by_seed(data: StudyData, cells: list[dict], value: CellValue) -> dict:
    """seed -> the cell's value, for the cells with a finite one."""
    out = {}
    for c in cells:
        v = value(data, c)
        if _finite(v):
            out[c.get("seed", c["axes"].get("seed"))] = float(v)
    return out


def paired(data: StudyData, cells: list[dict], ref: list[dict], value: CellValue, log10: bool = False) -> Final:
    """Per seed both arms have: value(arm) − value(ref) (log10: log10 of their ratio, both > 0);
    mean and 95% t-interval over those seeds, per_seed in seed order."""
    a, b = by_seed(data, cells, value), by_seed(data, ref, value)
    seeds = sorted(set(a) & set(b), key=str)
    if log10:
        return final([math.log10(a[s] / b[s]) for s in seeds if a[s] > 0 and b[s] > 0])
    return final([a[s] - b[s] for s in seeds])


def per_seed_text(f: Final, digits: int = 3) -> str:
    """'+0.01 / -0.02 / +0.03': the per-seed values of a Final, in seed order ('n/a' when none)."""
    return " / ".join(f"{v:+.{digits}g}" for v in f.per_seed) or "n/a"


def paired_panel(
    ax, data: StudyData, diffs: dict[str, Final], title: str, ylabel: str, bounds: tuple[float, float] | None = None
) -> None:
    """One column per arm: each seed's difference (hollow marker) and their mean with its 95%
    t-interval (filled, with caps), clipped to `bounds` (the range the difference can take: a count
    of S steps differs by at most S); a line at 0 (no difference); y-limits fitted to the values,
    the intervals and 0 (gap.fit_gap)."""
    rng = metric_range(None, bounds)
    ys = []
    for x, (arm, f) in enumerate(diffs.items()):
        color, marker = data.color(arm), data.marker(arm)
        n = len(f.per_seed)
        ax.plot(
            [x - 0.12 + 0.24 * j / max(1, n - 1) for j in range(n)], f.per_seed, marker, color=color, mfc="none", ms=5
        )
        ys += f.per_seed
        if f.n > 1 and math.isfinite(f.half):
            yerr = clipped_yerr([f.mean], [f.mean - f.half], [f.mean + f.half], rng)
            ax.errorbar([x + 0.25], [f.mean], yerr=yerr, fmt=marker, color=color, capsize=4)
            ys += [f.mean - yerr[0][0], f.mean + yerr[1][0]]
            record(ax, "hollow: each seed's difference; filled with caps: their mean, 95% t-interval over seeds")
        elif n:
            record(ax, "hollow: each seed's difference (one seed: no interval)")
    if not any(f.n for f in diffs.values()):
        note(ax, "no seed has this number in both arms (not logged, or 0 where a ratio is taken)")
    fit_gap(ax, ys)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(diffs)), [f"{a}\n(n={f.n})" for a, f in diffs.items()], fontsize=8)
    ax.set_xlim(-0.6, len(diffs) - 0.4)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
