"""Shared pieces of the analysis notebooks (analysis/<study>.py): load a study's results
folder, curves over seeds with a 95% t-interval, consistent arm colours, saving figures,
and the markdown summary the notebooks print.

    from harness.figures import StudyData, curve, plot_curve, save
    data = StudyData.from_env("length_bias")          # HARNESS_STUDY_DIR (set by `harness summarize`)
    for arm, cells in data.by("objective.preset").items():
        plot_curve(ax, curve(data, cells, "length/incorrect"), arm, data.color(arm))

Reads only the run-directory contract (cells.json, study.json, runs/<cell>/metrics.jsonl,
groups.jsonl, eval.json, config.yaml), like harness/summarize.py, whose t_interval and
jsonl reader it reuses.

Conventions of every figure: x = training step (policy iterations); with up to
SEED_LINES_MAX (3) seeds every seed is a thin line and their mean a bold one (a t-interval
from 2-3 seeds is wider than the data and says little); with more seeds, the mean with the
shaded 95% t-interval, clipped to the range the quantity can take (a fraction stays in
[0, 1]); with one seed, the line alone and "n=1 seed" in the legend. At a step where some seeds have no value (no correct response that step,
say) the mean and interval use the seeds that do.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness.summarize import load_index, read_jsonl, t_interval

X_STEP = "training step (policy iterations)"
MARKERS = "osD^vP*Xph"


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


class StudyData:
    """A study's results folder: cells (cells.json), study.json, and each cell's run files (cached)."""

    def __init__(self, study_dir: str | os.PathLike):
        self.dir = Path(study_dir)
        self.study, self.cells = load_index(self.dir)
        self.name = self.study.get("name") or self.dir.parent.name
        self.scale = self.study.get("scale") or self.dir.name
        self._cache: dict[tuple[str, str], object] = {}
        self._colors: dict[str, str] = {}

    @classmethod
    def from_env(cls, name: str) -> "StudyData":
        """HARNESS_STUDY_DIR (set by `harness summarize --notebook`), else <results>/<name>/<scale> for
        the first scale folder that exists (cpu, smoke, gpu); <results> is HARNESS_RESULTS (set by
        `make notebooks`, whose kernels start in analysis/) or ./results."""
        env = os.environ.get("HARNESS_STUDY_DIR")
        if env:
            return cls(env)
        for scale in ("cpu", "smoke", "gpu"):
            d = Path(os.environ.get("HARNESS_RESULTS") or "results") / name / scale
            if (d / "cells.json").exists():
                return cls(d)
        raise FileNotFoundError(f"no results for study {name!r}: set HARNESS_STUDY_DIR to a results folder "
                                f"(results/{name}/<scale>) or run `snakemake --config study={name}`")

    # ------------------------------------------------------------------ per cell files
    def run_dir(self, cell: dict) -> Path:
        """runs/<cell> of this folder (cells.json's run_dir is relative to where Snakemake ran)."""
        here = self.dir / "runs" / cell["id"]
        return here if here.exists() else Path(cell["run_dir"])

    def _load(self, cell: dict, what: str, fn):
        key = (cell["id"], what)
        if key not in self._cache:
            self._cache[key] = fn(self.run_dir(cell))
        return self._cache[key]

    def metrics(self, cell: dict) -> list[dict]:
        return self._load(cell, "metrics", lambda d: read_jsonl(d / "metrics.jsonl"))

    def groups(self, cell: dict) -> list[dict]:
        """groups.jsonl: one record per prompt group and step (harness/train/diagnostics/group_stats.py)."""
        return self._load(cell, "groups", lambda d: read_jsonl(d / "groups.jsonl"))

    def final_eval(self, cell: dict) -> dict:
        """eval.json (`harness eval`: held-out pass@k of the final checkpoint), {} when absent."""
        return self._load(cell, "eval", lambda d: json.loads((d / "eval.json").read_text())
                          if (d / "eval.json").exists() else {})

    def config(self, cell: dict) -> dict:
        def read(d: Path) -> dict:
            p = d / "config.yaml"
            if not p.exists():
                p = Path(cell.get("config", ""))
            return yaml.safe_load(p.read_text()) if p.is_file() else {}

        return self._load(cell, "config", read)

    def has_metric(self, key: str) -> bool:
        return any(_finite(r.get(key)) for c in self.cells for r in self.metrics(c))

    # ------------------------------------------------------------------ grouping
    def by(self, *axes: str, cells: list[dict] | None = None) -> dict[str, list[dict]]:
        """label -> cells, label = the axis values joined (the seeds of one arm share a label);
        labels in the order of cells.json (the study file's order)."""
        out: dict[str, list[dict]] = {}
        for c in cells if cells is not None else self.cells:
            out.setdefault(" / ".join(str(c["axes"].get(a)) for a in axes), []).append(c)
        return out

    def values(self, axis: str) -> list:
        """The distinct values of an axis, in cells.json order."""
        seen = []
        for c in self.cells:
            v = c["axes"].get(axis)
            if v not in seen:
                seen.append(v)
        return seen

    def color(self, label: str) -> str:
        """A fixed colour per label (first come, first served), so an arm has one colour in every figure."""
        if label not in self._colors:
            self._colors[label] = f"C{len(self._colors) % 10}"
        return self._colors[label]

    def marker(self, label: str) -> str:
        """A fixed marker per label (with its colour), so overlapping lines stay apart."""
        return MARKERS[int(self.color(label)[1:]) % len(MARKERS)]

    @property
    def n_seeds(self) -> int:
        return len(self.study.get("seeds") or {c.get("seed") for c in self.cells})

    def title(self, what: str, note: str | None = None) -> str:
        """'<study> (<scale>): what' and a second line saying how seeds are drawn (or `note`)."""
        n = self.n_seeds
        if note is None:
            note = ("n=1 seed (no interval)" if n == 1 else
                    f"n={n} seeds: each a thin line, their mean bold" if n <= SEED_LINES_MAX else
                    f"mean of n={n} seeds, shaded = 95% t-interval")
        return f"{self.name} ({self.scale}): {what}\n{note}"


# ---------------------------------------------------------------------- curves over seeds
@dataclass
class Curve:
    steps: list[int] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    lo: list[float] = field(default_factory=list)
    hi: list[float] = field(default_factory=list)
    n: int = 0  # seeds with at least one value
    series: list[dict[int, float]] = field(default_factory=list)  # each seed's {step: value}

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
            s = {st: max(s[x] for x in steps[max(0, i - window + 1):i + 1]) for i, st in enumerate(steps)}
        if s:
            out.append(s)
    return out


def combine(series: list[dict[int, float]]) -> Curve:
    """Mean and 95% t-interval over the series at each step (over the series that have the step)."""
    cur = Curve(n=len(series), series=list(series))
    for st in sorted(set().union(*series)) if series else []:
        vals = [s[st] for s in series if st in s]
        m, h = t_interval(vals)
        cur.steps.append(st)
        cur.mean.append(m)
        cur.lo.append(m - h)
        cur.hi.append(m + h)
    return cur


def curve(data: StudyData, cells: list[dict], key: str, window: int = 1) -> Curve:
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


def seeds_label(n: int) -> str:
    return "n=1 seed" if n == 1 else f"n={n} seeds"


SEED_LINES_MAX = 3  # up to this many seeds: each seed drawn thin, the mean bold, no t-band


def plot_curve(ax, cur: Curve, label: str, color: str, style: str = "-", marker: str = "o", marker_below: int = 30,
               band: bool = True, bounds: tuple[float, float] | None = None, **kw) -> None:
    """The mean line; with band: each seed as a thin line when there are 2..SEED_LINES_MAX seeds,
    else the shaded 95% interval, clipped to `bounds` (the range the quantity can take). label
    gets '(n=.. seed(s))'. Markers only on short curves (< marker_below steps)."""
    if not cur:
        return
    few = 1 < cur.n <= SEED_LINES_MAX
    ax.plot(cur.steps, cur.mean, style, color=color, marker=marker if len(cur.steps) < marker_below else None, ms=5,
            mfc="none", mew=1.3, lw=2.2 if few and band else 1.5,
            label=f"{label} ({seeds_label(cur.n)}{', mean bold' if few and band else ''})", **kw)  # hollow markers
    if not band or cur.n < 2:
        return
    if few:
        for s in cur.series:
            st = sorted(s)
            ax.plot(st, [s[x] for x in st], style, color=color, lw=0.8, alpha=0.45)
        return
    lo, hi = cur.lo, cur.hi
    if bounds is not None:
        lo = [max(v, bounds[0]) for v in lo]
        hi = [min(v, bounds[1]) for v in hi]
    ax.fill_between(cur.steps, lo, hi, color=color, alpha=0.18, lw=0)


def plot_seeds(ax, data: StudyData, cells: list[dict], key: str, label: str, color: str) -> bool:
    """Every seed's raw series as a thin line (spikes are not averaged away); one legend entry."""
    series = seed_series(data, cells, key)
    for i, s in enumerate(series):
        steps = sorted(s)
        ax.plot(steps, [s[x] for x in steps], "-", color=color, lw=0.9, alpha=0.8,
                marker=data.marker(label) if len(steps) < 30 else None, ms=3,
                label=f"{label} ({seeds_label(len(series))}, each drawn)" if i == 0 else None)
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


# ---------------------------------------------------------------------- per-arm numbers
@dataclass
class Final:
    mean: float
    half: float  # 95% t-interval half-width (0 with one seed)
    n: int
    per_seed: list[float]

    def fmt(self, digits: int = 3) -> str:
        if self.n == 0 or not math.isfinite(self.mean):
            return "n/a"
        if self.n == 1:
            return f"{self.mean:.{digits}g} (n=1 seed)"
        return f"{self.mean:.{digits}g} ± {self.half:.2g} (n={self.n})"

    @property
    def excludes_zero(self) -> bool:
        return self.n > 1 and (self.mean - self.half > 0 or self.mean + self.half < 0)


def final(per_seed: list[float]) -> Final:
    vals = [v for v in per_seed if _finite(v)]
    if not vals:
        return Final(float("nan"), float("nan"), 0, [])
    m, h = t_interval(vals)
    return Final(m, h, len(vals), vals)


def tail_of(series: list[dict[int, float]], frac: float = 0.25) -> "Final":
    """Per series: the mean over the last `frac` of its steps (at least one); then mean and 95%
    t-interval over the series (seeds)."""
    vals = []
    for s in series:
        steps = sorted(s)
        tail = steps[-max(1, int(round(len(steps) * frac))):]
        vals.append(sum(s[st] for st in tail) / len(tail))
    return final(vals)


def tail_mean(data: StudyData, cells: list[dict], key: str, frac: float = 0.25) -> Final:
    """tail_of the seeds' series of `key`: train metrics are one batch per step, so the mean
    over the last quarter of steps is less noisy than the last value."""
    return tail_of(seed_series(data, cells, key), frac)


def verdict(f: Final, effect: str, unit: str = "") -> str:
    """One honest sentence about a difference f (a - b): appears / does not appear / cannot tell."""
    u = f" {unit}" if unit else ""
    if f.n == 0:
        return f"{effect}: no data."
    if f.n == 1:
        return f"{effect}: {f.mean:+.3g}{u} (n=1 seed: no interval, no claim either way)."
    rng = f"{f.mean:+.3g}{u}, 95% CI [{f.mean - f.half:+.3g}, {f.mean + f.half:+.3g}] over n={f.n} seeds"
    if f.excludes_zero:
        return f"{effect}: {rng}: the interval excludes 0, the difference APPEARS (sign as shown)."
    return f"{effect}: {rng}: the interval includes 0, the difference does NOT appear at this scale."


def last_value(data: StudyData, cells: list[dict], key: str) -> Final:
    """Per seed: the value at its last logged step with `key` (eval metrics: the final policy)."""
    return final([s[max(s)] for s in seed_series(data, cells, key)])


def eval_json_value(data: StudyData, cells: list[dict], key: str) -> Final:
    """Per seed: `key` of eval.json (the final checkpoint's held-out eval, more samples than the
    in-loop eval); falls back to the last in-loop value when eval.json lacks it."""
    vals = []
    for c in cells:
        ev = data.final_eval(c)
        if _finite(ev.get(key)):
            vals.append(float(ev[key]))
        else:
            s = seed_series(data, [c], key)
            if s:
                vals.append(s[0][max(s[0])])
    return final(vals)


def panel(ax, data: StudyData, groups: dict[str, list[dict]], key: str, ylabel: str, title: str,
          window: int = 1, logy: bool = False, fraction: bool = False, empty: str | None = None) -> bool:
    """One metric vs step, one curve per group (label -> cells). A note when no cell has a finite
    value (`empty`, or a generic one). fraction: a y range inside [0, 1] that starts at 0."""
    curves = {lab: curve(data, cells, key, window) for lab, cells in groups.items()}
    if not any(curves.values()):
        logged = any(key in r for cells in groups.values() for c in cells for r in data.metrics(c))
        note(ax, empty or (f"'{key}' is NaN at every logged step" if logged else f"'{key}' not logged by these runs"))
        ax.set_title(title)
        return False
    if logy:  # log axes: only positive values; the band's lower edge is floored at a tenth of the mean
        for lab, cur in curves.items():
            keep = [i for i, m in enumerate(cur.mean) if m > 0]
            curves[lab] = Curve([cur.steps[i] for i in keep], [cur.mean[i] for i in keep],
                                [max(cur.lo[i], cur.mean[i] / 10) for i in keep], [cur.hi[i] for i in keep], cur.n)
        if not any(curves.values()):
            note(ax, empty or f"'{key}' is 0 at every logged step (nothing to draw on a log axis)")
            ax.set_title(title)
            return False
    for lab, cur in curves.items():
        plot_curve(ax, cur, lab, data.color(lab), marker=data.marker(lab), bounds=(0.0, 1.0) if fraction else None)
    if logy:
        ax.set_yscale("log")
    if fraction:
        top = min(max(ax.get_ylim()[1], 0.05), 1.02)
        ax.set_ylim(-0.02 * top, top)
    ax.set_xlabel(X_STEP)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    integer_steps(ax)
    return True


def no_signal_lines(data: StudyData, groups: dict[str, list[dict]]) -> list[str]:
    """Summary lines naming the arms whose every training group was all-equal at every step
    (groups/zero_var_frac = 1): no advantage, no gradient, so they cannot differ by their objective."""
    dead = [lab for lab, cells in groups.items() if tail_of(seed_series(data, cells, "groups/zero_var_frac"), 1.0).mean == 1.0]
    if not dead:
        return []
    return ["", f"No signal: every training group was all-equal (all wrong or all right) at every step for "
            f"{', '.join(dead)}: zero advantages and zero policy gradient, so these runs cannot differ through "
            "their objective (a stronger warm start or easier prompts are needed)."]


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------- output
def figures_dir(data: StudyData) -> Path:
    """HARNESS_FIGURES_DIR (set by `harness summarize`), else <study dir>/figures."""
    d = Path(os.environ.get("HARNESS_FIGURES_DIR") or data.dir / "figures")
    d.mkdir(parents=True, exist_ok=True)
    return d


def save(fig, data: StudyData, name: str) -> Path:
    """Write <figures dir>/<name>.png and close the figure."""
    path = figures_dir(data) / f"{name}.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    print(f"[figure] {path}")
    return path


def write_summary(data: StudyData, text: str) -> Path:
    """Print the markdown summary and keep it beside the figures (summary.md)."""
    print(text)
    path = figures_dir(data) / "summary.md"
    path.write_text(text + "\n")
    return path


def setup() -> None:
    import matplotlib

    if not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"axes.grid": True, "grid.alpha": 0.3, "axes.titlesize": 10, "axes.labelsize": 9,
                         "legend.fontsize": 7, "xtick.labelsize": 8, "ytick.labelsize": 8,
                         "figure.titlesize": 11})


# ---------------------------------------------------------------------- mechanism probe (probe.json)
def load_probe(data: StudyData) -> dict | None:
    """<study dir>/probe.json written by `harness probe` (harness/probes/), or None."""
    path = data.dir / "probe.json"
    return json.loads(path.read_text()) if path.exists() else None


def probe_points(ax, entries: list[dict], labels: list[str], colors: list[str], ylabel: str, title: str,
                 zero: bool = True) -> None:
    """One point per entry (mean over the probe's batches) with its 95% t-interval as an error
    bar; entries: dicts with mean / half (harness.probes.engine.paired or arm_mean)."""
    xs = list(range(len(entries)))
    for x, e, c in zip(xs, entries, colors):
        half = e.get("half")
        ax.errorbar([x], [e["mean"]], yerr=[[half], [half]] if half is not None and math.isfinite(half) else None,
                    fmt="o", color=c, capsize=5, ms=7, mfc="none", mew=1.6)
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


# ---------------------------------------------------------------------- regime and learning
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
        verdict = "learns (interval above 0)" if lo > 0 else ("falls (interval below 0)" if hi < 0 else "interval includes 0")
        lines.append(f"- {label}, seed {r['seed']}: held-out pass@1 rise {r['delta_pass_at_1']:+.3f} "
                     f"[{lo:+.3f}, {hi:+.3f}] (steps {r['from_step']} -> {r['to_step']}, {r['prompts']} prompts): {verdict}")
    return lines or [f"- {label}: no paired rise recorded (fewer than two evals)"]


def rise_panel(ax, data: StudyData, groups: dict[str, list[dict]]) -> None:
    """Paired rise of held-out pass@1 per arm and seed, each with its bootstrap 95% interval."""
    x, labels = 0, []
    for lab, cells in groups.items():
        rs = paired_rises(data, cells)
        for j, r in enumerate(rs):
            xx = x + (j - (len(rs) - 1) / 2) * 0.15
            ax.errorbar([xx], [r["delta_pass_at_1"]], yerr=[[r["delta_pass_at_1"] - r["ci95"][0]],
                                                            [r["ci95"][1] - r["delta_pass_at_1"]]],
                        fmt=data.marker(lab), color=data.color(lab), capsize=3, mfc="none")
        labels.append(f"{lab}\n({len(rs)} seed{'' if len(rs) == 1 else 's'})")
        x += 1
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel("paired rise of held-out pass@1\n(first -> last eval; bootstrap 95% CI)")
    ax.set_title("does each arm learn? one point per seed")


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
    probe_points(axs[0], [ch[("eval/length/incorrect", a)] for a in arms], arms, colors,
                 "change of mean length, wrong answers (tokens)", "after one update: WRONG answers")
    probe_points(axs[1], [ch[("eval/length/correct", a)] for a in arms], arms, colors,
                 "change of mean length, right answers (tokens)", "after one update: RIGHT answers")
    xs = range(len(arms))
    axs[2].bar([x - 0.18 for x in xs], [st[("agg/eos_share_incorrect", a)]["mean"] for a in arms], 0.36,
               color=colors, alpha=0.45, label="end tokens of wrong answers")
    axs[2].bar([x + 0.18 for x in xs], [st[("agg/eos_share_correct", a)]["mean"] for a in arms], 0.36,
               color=colors, alpha=1.0, hatch="//", label="end tokens of right answers")
    axs[2].set_xticks(list(xs), arms, rotation=12)
    axs[2].set_ylabel("share of the update's gradient weight (0-1)")
    axs[2].set_title("where the aggregation puts the end tokens' weight")
    axs[2].legend()
    fig.suptitle(data.title("length-bias probe: one update per aggregation from the same policy and batch",
                            f"{probe['settings']['batches']} batches, the same sampling seed for every arm; "
                            "error bars: 95% t-interval over batches"))
    return fig


def length_probe_lines(probe: dict) -> list[str]:
    """Markdown lines of the length-bias probe: the policy before, then each paired verdict."""
    S, st = probe["summary"], probe["settings"]
    lines = [f"## Probe: one update per arm ({st['batches']} batches, {st['probe_prompts']} held-out prompts x "
             f"{st['probe_samples']}, {probe['wall_seconds']:.0f} s)", "",
             f"Before the update: pass@1 {S['base']['eval/pass_at_1']:.3f}, length of right / wrong answers "
             f"{S['base']['eval/length/correct']:.2f} / {S['base']['eval/length/incorrect']:.2f} tokens.", ""]
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
        lines += ["", "The probe's training batches (what the mechanism needs; harness/probes/regime.py): " + "; ".join(
            f"{e['key'].split('/', 1)[1]} {e['mean']:.3f} ± {e['half']:.2g}" for e in S["regime"])]
    return lines


def difficulty_probe_figure(data: StudyData, probe: dict):
    """The difficulty-bias probe (harness/probes/difficulty.py): per arm the gradient-norm share
    of the extreme groups at the batch; the paired differences (group_std minus the others) of
    that share and of the advantage-mass share; the change of held-out pass@1 per bucket."""
    import matplotlib.pyplot as plt

    S, arms = probe["summary"], probe["arms"]
    st = {(e["key"], e["a"]): e for e in S["stats"]}
    ch = {(e["key"], e["a"]): e for e in S["change"]}
    fig, axs = plt.subplots(1, 3, figsize=(19, 4.3), layout="constrained", width_ratios=[1, 1, 1.3])
    probe_points(axs[0], [st[("grad/share_extreme", a)] for a in arms], arms, [data.color(a) for a in arms],
                 "||g_extreme|| / (||g_extreme|| + ||g_rest||)", "gradient-norm share of extreme groups, per arm",
                 zero=False)
    sp = S["stat_pairs"]
    probe_points(axs[1], sp, [f"{e['key'].split('/')[0]} share:\n{e['a']} − {e['b']}" for e in sp],
                 ["tab:purple" if e["key"].startswith("grad") else "tab:gray" for e in sp],
                 "paired difference of the share (same batch)", f"{arms[0]} minus the others, paired by batch")
    buckets = ["easy", "medium", "hard"]
    for j, a in enumerate(arms):
        es = [ch[(f"eval/pass_at_1/{b}", a)] for b in buckets]
        xs = [i + (j - (len(arms) - 1) / 2) * 0.2 for i in range(len(buckets))]
        axs[2].errorbar(xs, [e["mean"] for e in es], yerr=[[e["half"] for e in es], [e["half"] for e in es]],
                        fmt=data.marker(a), color=data.color(a), capsize=4, mfc="none", label=a)
    axs[2].axhline(0, color="k", lw=0.8)
    axs[2].set_xticks(range(len(buckets)), buckets)
    axs[2].set_xlabel("difficulty bucket of the held-out prompts")
    axs[2].set_ylabel("change of held-out pass@1 after one update")
    axs[2].set_title("which prompts one update serves, per arm")
    axs[2].legend()
    fig.suptitle(data.title("difficulty-bias probe: one update per advantage scale from the same policy and batch",
                            f"{probe['settings']['batches']} batches; error bars: 95% t-interval over batches"))
    return fig


def difficulty_probe_lines(probe: dict) -> list[str]:
    """Markdown lines of the difficulty-bias probe: per-arm shares, then each paired verdict."""
    S, st = probe["summary"], probe["settings"]
    lines = [f"## Probe: one update per arm ({st['batches']} batches, {st['probe_prompts']} held-out prompts x "
             f"{st['probe_samples']}, {probe['wall_seconds']:.0f} s)", ""]
    for e in S["stats"]:
        if math.isfinite(e["mean"]):
            lines.append(f"- {e['key']} ({e['a']}, at the batch): {e['mean']:.4g} ± {e['half']:.2g}")
    for e in S["stat_pairs"] + S["pairs"]:
        lines.append("- " + probe_verdict(e, f"{e['key']}, {e['a']} − {e['b']}"))
    return lines
