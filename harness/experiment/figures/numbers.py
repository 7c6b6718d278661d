"""Per-arm numbers and the sentences the notebooks print about them: the final or tail value over
seeds with its 95% t-interval, a verdict on a difference, markdown tables."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.experiment.figures.curves import seed_series
from harness.experiment.figures.style import _finite
from harness.experiment.stats import t_interval

if TYPE_CHECKING:
    from harness.experiment.figures.data import StudyData


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

    def ci(self, empty: str = "n/a") -> str:
        """'+0.05 [+0.02, +0.08] (n=3)': the mean with its 95% t-interval over seeds (`empty` without data)."""
        if self.n == 0:
            return empty
        if self.n == 1:
            return f"{self.mean:+.3g} (n=1 seed, no interval)"
        return f"{self.mean:+.3g} [{self.mean - self.half:+.3g}, {self.mean + self.half:+.3g}] (n={self.n})"

    @property
    def excludes_zero(self) -> bool:
        return self.n > 1 and (self.mean - self.half > 0 or self.mean + self.half < 0)


def final(per_seed: list[float]) -> Final:
    vals = [v for v in per_seed if _finite(v)]
    if not vals:
        return Final(float("nan"), float("nan"), 0, [])
    m, h = t_interval(vals)
    return Final(m, h, len(vals), vals)


def tail_of(series: list[dict[int, float]], frac: float = 0.25) -> Final:
    """Per series: the mean over the last `frac` of its steps (at least one); then mean and 95%
    t-interval over the series (seeds)."""
    vals = []
    for s in series:
        steps = sorted(s)
        tail = steps[-max(1, int(round(len(steps) * frac))) :]
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


def last_of(series: list[dict[int, float]]) -> Final:
    """Per series: its value at its last step; then mean and 95% t-interval over the series (seeds)."""
    return final([s[max(s)] for s in series])


def last_value(data: StudyData, cells: list[dict], key: str) -> Final:
    """Per seed: the value at its last logged step with `key` (eval metrics: the final policy)."""
    return last_of(seed_series(data, cells, key))


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


def no_signal_lines(data: StudyData, groups: dict[str, list[dict]]) -> list[str]:
    """Summary lines naming the arms whose every training group was all-equal at every step
    (groups/zero_var_frac = 1): no advantage, no gradient, so they cannot differ by their objective."""
    dead = [
        lab
        for lab, cells in groups.items()
        if tail_of(seed_series(data, cells, "groups/zero_var_frac"), 1.0).mean == 1.0
    ]
    if not dead:
        return []
    return [
        "",
        f"No signal: every training group was all-equal (all wrong or all right) at every step for "
        f"{', '.join(dead)}: zero advantages and zero policy gradient, so these runs cannot differ through "
        "their objective (a stronger warm start or easier prompts are needed).",
    ]


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)
