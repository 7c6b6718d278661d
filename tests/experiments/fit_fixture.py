"""A fake study folder for the fitter's tests, written the way a study's runs write theirs (no training):
cells.json and study.json (harness/experiment/files.py), and per cell runs/<cell>/ with metrics.jsonl
(a training record per step: reward/mean and the perf/* keys the compute axes read; the eval rides on
the record of the step it precedes; the final record holds only the final eval), eval_prompts/step_N.json
(per-prompt pass@1) and summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.experiment.fit.sigmoid import curve

TOKENS_PER_STEP = 1000.0


def write_run(run: Path, steps: int, eval_steps: list[int], prompts: np.ndarray, extra: dict | None = None) -> None:
    """prompts: (len(eval_steps), P) per-prompt pass@1, one row per eval step (the last: the final record)."""
    run.mkdir(parents=True)
    (run / "eval_prompts").mkdir()
    recs = []
    for step in range(steps + 1):
        rec: dict = {"step": step}
        if step in eval_steps:
            i = eval_steps.index(step)
            rec["eval/pass_at_1"] = float(prompts[i].mean())
            rec["perf/eval_seconds"] = 0.5
            (run / "eval_prompts" / f"step_{step:06d}.json").write_text(
                json.dumps({"step": step, "pass_at_1": prompts[i].tolist()})
            )
        if step < steps:
            rec.update(
                {
                    "reward/mean": 0.5,
                    "perf/rollout_tokens_per_s": TOKENS_PER_STEP / 2.0,
                    "perf/rollout_seconds": 2.0,
                    "perf/train_tokens_per_s": TOKENS_PER_STEP,
                    "perf/update_seconds": 1.0,
                    "perf/step_seconds": 3.0 + rec.get("perf/eval_seconds", 0.0),
                    **(extra or {}),
                }
            )
        recs.append(rec)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (run / "summary.json").write_text(json.dumps({"steps": steps, "model_params": 1000}))


def synthetic_prompts(rng, eval_steps, truth: dict, n_prompts: int, noise: float) -> np.ndarray:
    """Per-prompt scores around the true curve of cumulative generated tokens (step x TOKENS_PER_STEP)."""
    c = np.asarray(eval_steps, float) * TOKENS_PER_STEP
    mean = curve(c, truth["r0"], truth["a"], truth["b"], truth["c_mid"])
    offsets = rng.normal(0, noise, n_prompts)
    offsets -= offsets.mean()
    out = mean[:, None] + offsets[None, :] + rng.normal(0, noise, (len(c), n_prompts))
    out[0] = mean[0] + offsets  # the shared warm start: the same step-0 eval for every seed
    return out


def write_study(d: Path, arms: dict[str, dict], seeds=(1, 2, 3), steps=64, eval_steps=None, n_prompts=32, noise=0.05):
    """arms: arm -> truth {r0, a, b, c_mid}, or the string 'flat'."""
    rng = np.random.default_rng(0)
    eval_steps = eval_steps or [0, 1, 2, 4, 8, 16, 32, 64]
    cells = []
    for arm, truth in arms.items():
        for seed in seeds:
            cid = f"arm={arm}__seed={seed}"
            if truth == "flat":
                prompts = np.full((len(eval_steps), n_prompts), 0.3)
            else:
                prompts = synthetic_prompts(rng, eval_steps, truth, n_prompts, noise)
            write_run(d / "runs" / cid, steps, eval_steps, prompts)
            cells.append(
                {"id": cid, "variant": f"arm={arm}", "axes": {"arm": arm, "seed": seed}, "seed": seed, "tags": {}}
            )
            cells[-1]["run_dir"] = str(d / "runs" / cid)
    (d / "cells.json").write_text(json.dumps(cells))
    (d / "study.json").write_text(
        json.dumps({"name": "toy", "scale": "smoke", "experiment": "toy/smoke", "axes": ["arm", "seed"]})
    )
    return d
