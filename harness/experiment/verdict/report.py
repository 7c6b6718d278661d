"""The verdict's tables: markdown (printed, and verdict.md) and the JSON beside it (verdict.json)."""

from __future__ import annotations

import json
import math


def _num(v, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def _at(at) -> str:
    if isinstance(at, dict):
        key, v = next(iter(at.items()))
        return f"{key} {v[0]}..{v[1]}" if key == "steps" else f"{key} {v}"
    return str(at)


def _interval(r: dict) -> str:
    if "interval" not in r:
        return "-"
    lo, hi = r["interval"]
    return f"[{_num(lo)}, {_num(hi)}] ({r['level']:.0%})"


def verdict_markdown(study: str, scale: str, rows: list[dict], prereg: dict, correction: str) -> str:
    kind = "CONFIRMATORY" if prereg["confirmatory"] else "EXPLORATORY"
    lines = [
        f"# Verdict: {study} ({scale})",
        "",
        f"**{kind}**: {prereg['reason']}.",
        "",
        f"Study file blob {prereg['blob'] or '-'}; hypotheses since commit {prereg['since'] or '-'} "
        f"({prereg['since_time'] or '-'}); first cell started {prereg['first_start'] or '-'}. "
        f"Correction: {correction} over {len(rows)} hypotheses.",
        "",
        "| hypothesis | metric | at | contrast | direction | sesoi | seeds | estimate | interval | p | adjusted p "
        "| verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | `{r['metric']}` | {_at(r['at'])} | {r['contrast']} | {r['direction']} | {r['sesoi']} "
            f"| {r['n']} | {_num(r.get('estimate'))} | {_interval(r)} | {_num(r.get('p'), 3)} "
            f"| {_num(r['p_adjusted'], 3)} | **{r['word']}** |"
        )
    lines += ["", "## Per seed", ""]
    for r in rows:
        lines.append(f"- **{r['name']}** ({r['word']}: {r['reason']})")
        for arm, per in r["per_seed"].items():
            lines.append(f"  - {arm}: " + (", ".join(f"seed {s}: {_num(v)}" for s, v in per.items()) or "no cells"))
        diffs = ", ".join(f"seed {s}: {_num(v)}" for s, v in r["differences"].items())
        lines.append(f"  - difference: {diffs or 'none'}")
        lines += [f"  - missing: {m}" for m in r["missing"]]
    return "\n".join(lines) + "\n"


def plan_markdown(study: str, pilot: str, rows: list[dict], correction: str) -> str:
    k = len(rows)
    lines = [
        f"# Seeds needed: {study}, from the pilot {pilot}",
        "",
        "80% power to detect an effect of size sesoi (equivalence: TOST at a true difference of 0)"
        + (f"; Holm: planned at alpha / {k}, its worst case." if correction == "holm" else "."),
        "",
        "| hypothesis | direction | sesoi | alpha planned | pilot seeds | sd of the paired difference | seeds needed |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        need = str(r["seeds"]) if r["seeds"] else r["reason"]
        lines.append(
            f"| {r['name']} | {r['direction']} | {r['sesoi']} | {_num(r['alpha_planned'], 3)} | {r['pilot_seeds']} "
            f"| {_num(r['sd'])} | {need} |"
        )
    lines += [f"- {r['name']}: missing {m}" for r in rows for m in r["missing"]]
    return "\n".join(lines) + "\n"


def to_json(payload: dict) -> str:
    """JSON with non-finite numbers as null (the interval of differences that do not vary, an open end)."""

    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(payload), indent=1) + "\n"
