"""Difficulty buckets from the initial policy's pass rate on each prompt (task.data.difficulty_by_pass_rate).

A dataset without a difficulty field can still be studied for GRPO's difficulty bias (docs/studies.md
(b)): every train and eval prompt is sampled `samples` times by the policy the run starts from (at
rollout.temperature, rollout.max_new_tokens, rollout.stop), p = correct / samples, and the prompt's
bucket is the interval of `edges` that p falls in: with two edges hard (p < e1), medium, easy
(p >= e2); otherwise p0.00-0.25, p0.25-0.75, ... (MLflow-safe names). The rates are measured ONCE
and cached beside the warm start's step-0 eval (WARM_START_FOLDER/pass_rates/<key>.json, the same
folder key: model, task, data files' sha256, SFT settings), keyed also by the sampling settings,
the prompt suffix, the dtype and the thread count, so every seed and arm of a study shares them.
Sampling uses a fixed seed (not the run's), so the buckets are the same for every run seed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from harness.atomic import atomic_write_text
from harness.rollout.base import SamplingParams
from harness.train.run.warmstart import warm_start_folder

CACHE_DIR = "pass_rates"
CHUNK = 64  # prompts per generate call
SEED = 20_251


def bucket_names(edges: list[float]) -> list[str]:
    if len(edges) == 2:
        return ["hard", "medium", "easy"]
    bounds = [0.0, *edges, 1.0]
    return [f"p{lo:.2f}-{hi:.2f}" for lo, hi in zip(bounds, bounds[1:])]


def bucket_of(p: float, edges: list[float]) -> str:
    """The bucket of pass rate p: the number of edges <= p indexes bucket_names(edges)."""
    return bucket_names(edges)[sum(p >= e for e in edges)]


def cache_path(cfg) -> Path:
    spec = cfg.task.data.difficulty_by_pass_rate
    key = {
        "samples": spec.samples,
        "rollout": {
            k: v for k, v in cfg.rollout.model_dump().items() if k not in ("max_prompt_tokens", "overlong_prompts")
        },
        "prompt_suffix": cfg.model.prompt_suffix,
        "dtype": cfg.model.dtype,
        "threads": torch.get_num_threads(),
        "warm_start": cfg.uses_warm_start(),
    }
    digest = hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return warm_start_folder(cfg) / CACHE_DIR / f"{digest}.json"


def measure(cfg, task, render, backend) -> dict[str, float]:
    """uid -> pass rate of the initial policy, over every train and eval prompt of the task."""
    spec = cfg.task.data.difficulty_by_pass_rate
    problems = task.rows("train") + task.rows("eval")
    rates: dict[str, float] = {}
    for start in range(0, len(problems), CHUNK):
        part = problems[start : start + CHUNK]
        params = SamplingParams(
            max_new_tokens=cfg.rollout.max_new_tokens,
            temperature=cfg.rollout.temperature,
            top_p=cfg.rollout.top_p,
            stop=tuple(cfg.rollout.stop),
            seed=SEED + start,
        )
        out = backend.generate([render(p) for p in part], spec.samples, params)
        rows = [p for p in part for _ in range(spec.samples)]
        scores = task.score_batch(rows, out.texts, out.truncated.tolist())
        for i, p in enumerate(part):
            rates[p.uid] = sum(s.correct for s in scores[i * spec.samples : (i + 1) * spec.samples]) / spec.samples
        print(
            f"[harness] pass rates of the initial policy: {min(start + CHUNK, len(problems))}/{len(problems)} "
            f"prompts x {spec.samples}",
            flush=True,
        )
    return rates


def label_by_pass_rate(cfg, task, render, policy_for_rates) -> dict:
    """Relabel the task's problems by pass-rate bucket (measured or cached); -> bucket counts per split
    and the mean pass rate."""
    spec = cfg.task.data.difficulty_by_pass_rate
    path = cache_path(cfg)
    rates = None
    try:
        rates = json.loads(path.read_text())["rates"]
    except (OSError, ValueError, KeyError):
        pass
    uids = [p.uid for s in ("train", "eval") for p in task.rows(s)]
    if rates is None or any(u not in rates for u in uids):
        if policy_for_rates is None:
            raise RuntimeError(f"pass rates of the initial policy are not cached at {path}: train the run first")
        backend = policy_for_rates()
        try:
            rates = {**(rates or {}), **measure(cfg, task, render, backend)}
        finally:
            backend.close()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"rates": rates}))
        print(f"[harness] pass rates cached in {path}", flush=True)
    else:
        print(f"[harness] pass rates of the initial policy: cached in {path}", flush=True)
    task.relabel({u: bucket_of(rates[u], spec.edges) for u in uids})
    mean = sum(rates[u] for u in uids) / len(uids)
    counts = task.bucket_counts()
    print(
        f"[harness] difficulty buckets by pass rate (edges {spec.edges}, mean pass rate {mean:.3f}): {counts}",
        flush=True,
    )
    return {"counts": counts, "mean_pass_rate": mean, "cache": str(path)}
