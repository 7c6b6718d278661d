"""The statistics of one hypothesis over its per-seed differences d_1..d_n (paired by seed), and the
family's Holm adjustment.

    m = mean(d), s = sd(d) (n - 1 in the denominator), se = s / sqrt(n), df = n - 1, t = (m - value) / se
    greater:    p = P(T_df >= t)
    less:       p = P(T_df <= t)
    two-sided:  p = 2 P(T_df >= |t|); interval m +- t_{1-alpha/2} se (the 1 - alpha interval)
    equivalent: TOST against value +- sesoi: p_low = P(T_df >= (m - value + sesoi) / se),
                p_high = P(T_df <= (m - value - sesoi) / se), p = max(p_low, p_high)
    interval (all but two-sided): m +- t_{1-alpha} se, the 1 - 2 alpha interval, whose ends are the two
                one-sided (1 - alpha) bounds
    Holm:       p_(1) <= ... <= p_(k): adj_(i) = max_{j <= i} min(1, (k - j + 1) p_(j))
"""

from __future__ import annotations

import math

from scipy import stats

GREATER, LESS, TWO_SIDED, EQUIVALENT = "greater", "less", "two-sided", "equivalent"


def summary(d: list[float]) -> tuple[float, float, int]:
    """(mean, se, df) of the differences; n >= 2."""
    n = len(d)
    m = sum(d) / n
    s = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1))
    return m, s / math.sqrt(n), n - 1


def _t(x: float, se: float) -> float:
    """x / se, +-inf (or nan at 0) when the differences do not vary."""
    if se > 0:
        return x / se
    return math.copysign(math.inf, x) if x else math.nan


def test(d: list[float], direction: str, sesoi: float, alpha: float, value: float = 0.0) -> dict:
    """The test of one hypothesis: {estimate, se, df, t, p, interval: [lo, hi], level}."""
    m, se, df = summary(d)
    level = 1 - alpha if direction == TWO_SIDED else 1 - 2 * alpha
    q = float(stats.t.ppf(1 - alpha / 2 if direction == TWO_SIDED else 1 - alpha, df))
    out = {"estimate": m, "se": se, "df": df, "t": _t(m - value, se), "interval": [m - q * se, m + q * se]}
    out["level"] = level
    if direction == GREATER:
        out["p"] = float(stats.t.sf(out["t"], df))
    elif direction == LESS:
        out["p"] = float(stats.t.cdf(out["t"], df))
    elif direction == TWO_SIDED:
        out["p"] = float(min(1.0, 2 * stats.t.sf(abs(out["t"]), df)))
    else:
        p_low = float(stats.t.sf(_t(m - value + sesoi, se), df))  # H0: effect <= -sesoi
        p_high = float(stats.t.cdf(_t(m - value - sesoi, se), df))  # H0: effect >= +sesoi
        out.update(p=max(p_low, p_high), p_low=p_low, p_high=p_high)
    out["p"] = 1.0 if math.isnan(out["p"]) else out["p"]
    return out


def holm(ps: list[float | None]) -> list[float]:
    """Holm's step-down adjustment over the family; a missing p counts as 1 (the family keeps its size)."""
    k = len(ps)
    full = [1.0 if p is None else p for p in ps]
    order = sorted(range(k), key=lambda i: full[i])
    adj, running = [0.0] * k, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * full[i]))
        adj[i] = running
    return adj


def ruled_out(direction: str, interval: list, sesoi: float, value: float = 0.0) -> bool:
    """Do the data exclude the claimed effect? greater: the upper one-sided (1 - alpha) bound lies below
    value + sesoi; less: the lower bound above value - sesoi; two-sided: the (1 - alpha) interval inside
    (value - sesoi, value + sesoi); equivalent: the (1 - 2 alpha) interval wholly outside [value - sesoi,
    value + sesoi]."""
    lo, hi = interval
    if direction == GREATER:
        return hi < value + sesoi
    if direction == LESS:
        return lo > value - sesoi
    if direction == TWO_SIDED:
        return value - sesoi < lo and hi < value + sesoi
    return lo > value + sesoi or hi < value - sesoi
