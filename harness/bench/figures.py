"""Per-step timings -> the benchmark's figures (means over the steps after the warm-up step).

A step record (one per policy iteration, the same keys for both trainers):
    step      0-based iteration
    rollout_s generation of the N*G completions
    score_s   verifier rewards + reference log-probs + advantages
    update_s  forward/backward + optimizer step (+ weight sync to the rollout engine)
    log_s     the rest of the step: metrics, logging (ours: minus the step-0 eval, see eval_s)
    eval_s    ours only: the initial eval folded into step 0 (0 elsewhere)
    ckpt_s    checkpoint written after the step (None where not measured)
    step_s    rollout_s + score_s + update_s + log_s + eval_s (checkpoint excluded)
    tokens    completion tokens generated in the step (EOS included)
"""

from __future__ import annotations

import math

TIMES = ("rollout_s", "score_s", "update_s", "log_s", "ckpt_s", "step_s")


def ours_steps(records: list[dict]) -> list[dict]:
    """Step records from our DIR/metrics.jsonl records (perf/* keys of harness/train/rl/step.py).

    perf/checkpoint_seconds of record k is the checkpoint written after step k-1."""
    train = sorted((r for r in records if "perf/rollout_seconds" in r), key=lambda r: r["step"])
    ckpt_after = {r["step"] - 1: r["perf/checkpoint_seconds"] for r in train if r.get("perf/checkpoint_seconds")}
    out = []
    for r in train:
        rollout, score, update = r["perf/rollout_seconds"], r["perf/score_seconds"], r["perf/update_seconds"]
        step, ev = r["perf/step_seconds"], r.get("perf/eval_seconds", 0.0)
        out.append(
            {
                "step": r["step"],
                "rollout_s": rollout,
                "score_s": score,
                "update_s": update,
                "log_s": max(step - rollout - score - update - ev, 0.0),
                "eval_s": ev,
                "ckpt_s": ckpt_after.get(r["step"]),
                "step_s": step,
                "tokens": r["perf/rollout_tokens_per_s"] * rollout,
                "reward": r.get("reward/mean"),
            }
        )
    return out


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(vals) / len(vals) if vals else None


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def summarize_steps(steps: list[dict]) -> dict:
    """Means over steps >= 1 (step 0 = warm-up, reported as step0_s); with a single step the
    means are step 0's own and `warmup_only` is True. Throughputs are totals over totals:
    rollout_tok_s = tokens / rollout time, train_tok_s = tokens / update time,
    tok_s = tokens / step time (end to end)."""
    if not steps:
        raise ValueError("no training step was recorded")
    first = steps[0]
    measured = [s for s in steps if s["step"] >= 1] or steps[:1]
    out: dict = {
        "measured_steps": len(measured),
        "warmup_only": measured[0]["step"] == 0,
        "step0_s": first["step_s"],
        "step0_eval_s": first.get("eval_s", 0.0),
    }
    for key in TIMES:
        out[key] = _mean(s[key] for s in measured)
    if out["ckpt_s"] is None:  # checkpoint after the last step only: take what was measured
        out["ckpt_s"] = _mean(s["ckpt_s"] for s in steps)
    tokens = sum(s["tokens"] for s in measured)
    out["tokens_per_step"] = tokens / len(measured)
    out["rollout_tok_s"] = _ratio(tokens, sum(s["rollout_s"] for s in measured))
    out["train_tok_s"] = _ratio(tokens, sum(s["update_s"] for s in measured))
    out["tok_s"] = _ratio(tokens, sum(s["step_s"] for s in measured))
    return out
