"""One word per hypothesis of a study's family, from its cells (values.py) and its tests (paired.py).

CONFIRMED       directional or two-sided: the test rejects at the (Holm-)adjusted p < alpha
EQUIVALENT      equivalent: TOST rejects at the adjusted p < alpha
NOT CONFIRMED   the data rule the claimed effect out (paired.ruled_out)
INCONCLUSIVE    neither; or fewer than 2 paired seeds (with the reason)
"""

from __future__ import annotations

from harness.experiment.verdict import paired
from harness.experiment.verdict.values import contrast_values

CONFIRMED, EQUIVALENT, NOT_CONFIRMED, INCONCLUSIVE = "CONFIRMED", "EQUIVALENT", "NOT CONFIRMED", "INCONCLUSIVE"
MIN_SEEDS = 2


def _row(h, values: dict) -> dict:
    d = [values["differences"][s] for s in sorted(values["differences"])]
    row = {
        "name": h.name,
        "metric": h.metric,
        "at": h.at,
        "contrast": h.contrast,
        "direction": h.direction,
        "sesoi": h.sesoi,
        "alpha": h.alpha,
        "value": h.value,
        "per_seed": values["arms"],
        "differences": values["differences"],
        "missing": values["missing"],
        "n": len(d),
    }
    if len(d) >= MIN_SEEDS:
        row.update(paired.test(d, h.direction, h.sesoi, h.alpha, h.value))
    return row


def word(row: dict) -> tuple[str, str]:
    """(word, reason) of a row holding its adjusted p."""
    if row["n"] < MIN_SEEDS:
        return INCONCLUSIVE, f"{row['n']} paired seed(s); at least {MIN_SEEDS} are needed"
    rejects = row["p_adjusted"] < row["alpha"]
    if rejects:
        if row["direction"] == paired.EQUIVALENT:
            return EQUIVALENT, f"TOST rejects at adjusted p {row['p_adjusted']:.3g} < {row['alpha']}"
        small = paired.ruled_out(row["direction"], row["interval"], row["sesoi"], row["value"])
        note = "; the effect is smaller than the sesoi" if small else ""
        return CONFIRMED, f"adjusted p {row['p_adjusted']:.3g} < {row['alpha']}{note}"
    if paired.ruled_out(row["direction"], row["interval"], row["sesoi"], row["value"]):
        return NOT_CONFIRMED, f"the {row['level']:.0%} interval excludes the claimed effect (sesoi {row['sesoi']})"
    return INCONCLUSIVE, f"adjusted p {row['p_adjusted']:.3g} >= {row['alpha']} and the interval holds effects >= sesoi"


def judge(hypotheses: list, correction: str, cells: list[dict]) -> list[dict]:
    """One row per hypothesis: its values, test, adjusted p (Holm over the whole family, or none) and word."""
    rows = [_row(h, contrast_values(h, cells)) for h in hypotheses]
    ps = [r.get("p") for r in rows]
    adjusted = paired.holm(ps) if correction == "holm" else [1.0 if p is None else p for p in ps]
    for r, adj in zip(rows, adjusted):
        r["p_adjusted"] = adj
        r["word"], r["reason"] = word(r)
    return rows
