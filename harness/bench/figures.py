"""Per-step timings -> the benchmark's figures (means over the steps after the warm-up: protocol.py).

A step record (one per policy iteration, the same keys for both trainers):
    step      0-based iteration
    rollout_s generation of the N*G completions
    score_s   verifier rewards + reference log-probs + advantages
    update_s  forward/backward + optimizer step (+ weight sync to the rollout engine, less its check)
    log_s     the rest of the step: metrics, logging (ours: minus the step-0 eval, see eval_s)
    eval_s    ours only: the initial eval folded into step 0 (0 elsewhere)
    ckpt_s    checkpoint written after the step (None where not measured)
    step_s    rollout_s + score_s + update_s + log_s + eval_s (checkpoint and weight-sync check excluded)
    verify_s  ours on vLLM: the weight-sync check (verify_sync: after syncs 1-3 and every 10th), 0 elsewhere;
              a correctness check on a schedule, timed apart like the checkpoint
    tokens    completion tokens generated in the step (EOS included)
"""

from __future__ import annotations

import math

from harness.bench.protocol import STEADY_TOL, steady_start

TIMES = ("rollout_s", "score_s", "update_s", "log_s", "ckpt_s", "step_s")


def ours_steps(records: list[dict]) -> list[dict]:
    """Step records from our DIR/metrics.jsonl records (perf/* keys of harness/train/rl/step.py).

    perf/checkpoint_seconds of record k is the checkpoint written after step k-1."""
    train = sorted((r for r in records if "perf/rollout_seconds" in r), key=lambda r: r["step"])
    ckpt_after = {r["step"] - 1: r["perf/checkpoint_seconds"] for r in train if r.get("perf/checkpoint_seconds")}
    out = []
    for r in train:
        verify = r.get("perf/verify_seconds", 0.0)  # the weight-sync check (vLLM, on its schedule): out of the step
        rollout, score, update = r["perf/rollout_seconds"], r["perf/score_seconds"], r["perf/update_seconds"] - verify
        step, ev = r["perf/step_seconds"] - verify, r.get("perf/eval_seconds", 0.0)
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
                "verify_s": verify,
                "perf": {k: v for k, v in r.items() if k.startswith("perf/")},  # every timing the run logged
                "tokens": round(r["perf/rollout_tokens_per_s"] * rollout),  # a count: the rate x time, rounded
                "reward": r.get("reward/mean"),
            }
        )
    return out


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(vals) / len(vals) if vals else None


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def summarize_steps(steps: list[dict], warmup: int = 1, warmup_max: int | None = None, tol: float = STEADY_TOL) -> dict:
    """Means over the measured steps: those after the warm-up that the steadiness rule of protocol.py ends (at
    least `warmup` steps, at most `warmup_max`; the default, warmup=1, leaves step 0 out). The first
    step is reported as step0_s; with no step past the warm-up the means are the last step's own and
    `warmup_only` is True. Throughputs are totals over totals: rollout_tok_s = tokens / rollout time,
    train_tok_s = tokens / update time, tok_s = tokens / step time (end to end)."""
    if not steps:
        raise ValueError("no training step was recorded")
    steps = sorted(steps, key=lambda s: s["step"])
    start, steady = steady_start(
        [s["step_s"] for s in steps], warmup, warmup if warmup_max is None else warmup_max, tol
    )
    measured = steps[start:] if start >= warmup else []
    out: dict = {
        "measured_steps": len(measured or steps[-1:]),
        "warmup_only": not measured,
        "warmup_steps": start if measured else len(steps),
        "steady": steady if measured else False,
        "step0_s": steps[0]["step_s"],
        "step0_eval_s": steps[0].get("eval_s", 0.0),
    }
    measured = measured or steps[-1:]
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
