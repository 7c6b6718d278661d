"""The interval every summary and figure of the experiment layer uses."""

from __future__ import annotations

import math


def t_interval(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of the 95% t-interval (0 with one value)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, 0.0
    from scipy.stats import t

    sd = math.sqrt(sum((x - m) ** 2 for x in values) / (n - 1))
    return m, float(t.ppf(0.975, n - 1)) * sd / math.sqrt(n)


def prediction_interval(values: list[float]) -> tuple[float, float] | None:
    """95% prediction interval of one more draw (another seed, another machine's rounding):
    mean +- t_{n-1} * sd * sqrt(1 + 1/n); None with fewer than 2 values."""
    n = len(values)
    if n < 2:
        return None
    m, half = t_interval(values)
    half_pred = half * math.sqrt(n) * math.sqrt(1 + 1 / n)  # t * sd * sqrt(1 + 1/n)
    return m - half_pred, m + half_pred
