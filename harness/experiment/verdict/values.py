"""A hypothesis's numbers, read from the cells' own files: each arm's value per seed, and the paired
differences over the seeds where every arm of the contrast has one. A cell without its value is listed
with the reason, never dropped in silence.

    final         eval.json[metric], else summary.json's final_eval[metric]
    paired_rise   summary.json's paired_rise.delta_pass_at_1
    {eval_step}   metrics.jsonl: the record of that step's metric
    {steps}       metrics.jsonl: the mean of the metric over the training records of steps a..b (all of them)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from harness.experiment.hypotheses import arm_names, parse_contrast
from harness.experiment.results import read_jsonl


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _final(run: Path, metric: str) -> tuple[float | None, str]:
    for value in (
        _json(run / "eval.json").get(metric),
        (_json(run / "summary.json").get("final_eval") or {}).get(metric),
    ):
        if _finite(value):
            return float(value), ""
    return None, f"no {metric} in eval.json or summary.json's final_eval"


def _paired_rise(run: Path) -> tuple[float | None, str]:
    value = (_json(run / "summary.json").get("paired_rise") or {}).get("delta_pass_at_1")
    return (float(value), "") if _finite(value) else (None, "no paired_rise.delta_pass_at_1 in summary.json")


def _eval_step(run: Path, metric: str, step: int) -> tuple[float | None, str]:
    for r in read_jsonl(run / "metrics.jsonl") if (run / "metrics.jsonl").exists() else []:
        if r.get("step") == step and _finite(r.get(metric)):
            return float(r[metric]), ""
    return None, f"no {metric} at step {step} in metrics.jsonl"


def _window(run: Path, metric: str, a: int, b: int) -> tuple[float | None, str]:
    records = read_jsonl(run / "metrics.jsonl") if (run / "metrics.jsonl").exists() else []
    found = {
        r["step"]: r[metric] for r in records if isinstance(r.get("step"), int) and a <= r["step"] <= b and metric in r
    }
    values = [v for v in found.values() if _finite(v)]
    if len(values) < b - a + 1:
        return None, f"{metric} at {len(values)} of the {b - a + 1} steps {a}..{b} in metrics.jsonl (finite values)"
    return sum(values) / len(values), ""


def cell_value(run: Path, metric: str, at) -> tuple[float | None, str]:
    """(value, '') or (None, why not) of one cell's run folder."""
    if not run.is_dir():
        return None, "no run folder (the cell has not run)"
    if at == "final":
        return _final(run, metric)
    if at == "paired_rise":
        return _paired_rise(run)
    if "eval_step" in at:
        return _eval_step(run, metric, at["eval_step"])
    return _window(run, metric, *at["steps"])


def contrast_values(h, cells: list[dict]) -> dict:
    """{arms: {arm: {seed: value | None}}, differences: {seed: d}, missing: [why], seeds: [...]} of hypothesis h
    over the cells of a results folder (cells.json, rebased). d = armA - armB (or armA alone), per seed."""
    names = arm_names(sorted({c.get("variant", "") for c in cells}))
    arms = [a for a in parse_contrast(h.contrast) if a is not None]
    out: dict = {"arms": {}, "differences": {}, "missing": []}
    for arm in arms:
        if arm not in names:
            out["missing"].append(f"arm {arm}: no cells in the results folder")
            out["arms"][arm] = {}
            continue
        out["arms"][arm] = {}
        for c in (c for c in cells if c.get("variant") == names[arm]):
            value, why = cell_value(Path(c["run_dir"]), h.metric, h.at)
            out["arms"][arm][c["seed"]] = value
            if value is None:
                out["missing"].append(f"{c['id']}: {why}")
    seeds = sorted({s for per in out["arms"].values() for s in per})
    for s in seeds:
        have = [out["arms"][a].get(s) for a in arms]
        if all(v is not None for v in have):
            out["differences"][s] = have[0] - (have[1] if len(have) == 2 else 0.0)
        elif any(v is not None for v in have):
            out["missing"].append(
                f"seed {s}: only {', '.join(a for a, v in zip(arms, have) if v is not None)} has a value"
            )
    out["seeds"] = seeds
    return out
