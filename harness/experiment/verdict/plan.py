"""How many seeds a confirmatory run needs: from a pilot's cells, the seed-to-seed sd of each hypothesis's
paired difference, and the smallest n with 80% power to detect an effect of size sesoi at the hypothesis's
alpha; under Holm the worst case alpha / k (k the family's size).

    directional (greater, less): power = P(T'_{n-1, delta} > t_{1-a, n-1}), T' noncentral t with
                 delta = sesoi sqrt(n) / sd
    two-sided:   power = P(T' > t_{1-a/2}) + P(T' < -t_{1-a/2})
    equivalent:  TOST at a true difference of 0 (the value): power = 2 P(T'_{n-1, delta} > t_{1-a}) - 1
                 (the two one-sided tests rejecting together, each with se at its expected value; a close
                 approximation checked against simulation in the tests)
"""

from __future__ import annotations

import math

from scipy import stats

from harness.experiment.verdict import paired
from harness.experiment.verdict.values import contrast_values

POWER = 0.8
MAX_SEEDS = 1000


def power(n: int, sd: float, sesoi: float, alpha: float, direction: str) -> float:
    """The power of the paired t-test (TOST for equivalent) over n seeds."""
    df = n - 1
    delta = sesoi * math.sqrt(n) / sd
    if direction == paired.TWO_SIDED:
        q = stats.t.ppf(1 - alpha / 2, df)
        return float(stats.nct.sf(q, df, delta) + stats.nct.cdf(-q, df, delta))
    q = stats.t.ppf(1 - alpha, df)
    one = float(stats.nct.sf(q, df, delta))
    return max(0.0, 2 * one - 1) if direction == paired.EQUIVALENT else one


def seeds_needed(sd: float, sesoi: float, alpha: float, direction: str, target: float = POWER) -> int | None:
    """The smallest n >= 2 whose power reaches `target`; None beyond MAX_SEEDS."""
    if sd == 0:
        return 2
    for n in range(2, MAX_SEEDS + 1):
        if power(n, sd, sesoi, alpha, direction) >= target:
            return n
    return None


def plan(hypotheses: list, correction: str, cells: list[dict]) -> list[dict]:
    """One row per hypothesis: pilot seeds, sd of the paired difference, the alpha planned for, seeds needed."""
    k = len(hypotheses)
    rows = []
    for h in hypotheses:
        values = contrast_values(h, cells)
        d = list(values["differences"].values())
        a = h.alpha / k if correction == "holm" else h.alpha
        row = {"name": h.name, "direction": h.direction, "sesoi": h.sesoi, "alpha": h.alpha, "alpha_planned": a}
        row.update(pilot_seeds=len(d), missing=values["missing"], sd=None, seeds=None)
        if len(d) < 2:
            row["reason"] = f"{len(d)} paired seed(s) in the pilot; an sd needs at least 2"
        else:
            m = sum(d) / len(d)
            row["sd"] = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1))
            row["seeds"] = seeds_needed(row["sd"], h.sesoi, a, h.direction)
            row["reason"] = "" if row["seeds"] else f"more than {MAX_SEEDS} seeds"
        rows.append(row)
    return rows
