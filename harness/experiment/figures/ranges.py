"""The range a plotted quantity can take, and intervals clipped to it: a band or error bar that
leaves that range shows values the quantity never has (a pass@1 below 0, a correlation above 1).

    metric_range("eval/pass_at_1")            # (0, 1): pass@k, accuracies, fractions, shares, rates
    metric_range("kl/corr_reward_length")     # (-1, 1): correlations
    metric_range("length/incorrect")          # (0, inf): lengths, counts, tokens, seconds, entropies
    metric_range("loss", bounds=(-3, 5))      # the caller's range wins
"""

from __future__ import annotations

import math
import re

UNIT = (0.0, 1.0)
CORRELATION = (-1.0, 1.0)
NON_NEGATIVE = (0.0, math.inf)
UNBOUNDED = (-math.inf, math.inf)

# (range, pattern of the last part of a metric's key that gives it): the first match wins; 'corr' is a
# correlation, not the 'corr' of '(in)correct' ('length/correct' is a length)
KEY_RANGES: tuple[tuple[tuple[float, float], str], ...] = (
    (CORRELATION, r"corr(?!ect)"),
    (UNIT, r"pass_at|accuracy|frac|share|rate"),
    (NON_NEGATIVE, r"length|count|tokens|seconds|entropy|steps_over"),
)


def metric_range(key: str | None, bounds: tuple[float, float] | None = None) -> tuple[float, float]:
    """`bounds` when given, else the range KEY_RANGES gives the key's last part (after the last '/'
    but one: 'eval/pass_at_1/hard' reads 'pass_at_1/hard'), else unbounded."""
    if bounds is not None:
        return (float(bounds[0]), float(bounds[1]))
    tail = "/".join((key or "").lower().split("/")[-2:])
    for rng, pattern in KEY_RANGES:
        if re.search(pattern, tail):
            return rng
    return UNBOUNDED


def difference_range(rng: tuple[float, float]) -> tuple[float, float]:
    """The range of a - b when a and b both lie in rng = (lo, hi): (lo - hi, hi - lo)."""
    return (rng[0] - rng[1], rng[1] - rng[0])


def clip_interval(lo: list[float], hi: list[float], rng: tuple[float, float]) -> tuple[list[float], list[float]]:
    """Each lower edge raised to rng[0] and each upper edge lowered to rng[1]."""
    return [max(v, rng[0]) for v in lo], [min(v, rng[1]) for v in hi]


def clipped_yerr(
    mean: list[float], lo: list[float], hi: list[float], rng: tuple[float, float]
) -> tuple[list[float], list[float]]:
    """The (below, above) error-bar lengths of matplotlib's yerr for the interval [lo, hi] clipped to
    rng, measured from `mean` (never negative)."""
    clo, chi = clip_interval(lo, hi, rng)
    return [max(0.0, m - v) for m, v in zip(mean, clo)], [max(0.0, v - m) for m, v in zip(mean, chi)]
