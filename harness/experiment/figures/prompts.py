"""A run's saved per-prompt scores (RUN/eval_prompts/step_N.json, written by every eval:
harness/train/eval/evaluate.py) and the bootstrap 95% interval over prompts of one eval's pass@1:
the interval one seed has (a t-interval over seeds needs two)."""

from __future__ import annotations

import json
from pathlib import Path

PROMPT_SCORES = "eval_prompts"  # evaluate.EVAL_PROMPTS: RUN/eval_prompts/step_N.json, {"step", "pass_at_1": [P]}


def prompt_scores(run_dir: Path) -> dict[int, list[float]]:
    """step -> the per-prompt pass@1 (P,) of the eval at that step, for every eval the run saved."""
    out = {}
    for f in sorted((Path(run_dir) / PROMPT_SCORES).glob("step_*.json")):
        rec = json.loads(f.read_text())
        out[int(rec.get("step", f.stem.split("_")[1]))] = [float(x) for x in rec["pass_at_1"]]
    return out


def bootstrap_interval(scores: list[float], n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean over prompts (Efron & Tibshirani 1993, ch. 13):
    resample the P scores with replacement n_boot times, the 2.5% and 97.5% quantiles of the
    resampled means. All P scores equal: that value at both ends."""
    if min(scores) == max(scores):
        return float(scores[0]), float(scores[0])
    from scipy.stats import bootstrap

    res = bootstrap((scores,), _mean, n_resamples=n_boot, method="percentile", random_state=seed, vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _mean(x, axis=-1):
    return x.mean(axis=axis)
