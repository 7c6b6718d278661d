"""Periodic eval on a held-out split: unbiased pass@k (Chen et al. 2021, arXiv 2107.03374),
overall and per difficulty bucket, plus lengths of correct and incorrect answers.

Common random numbers: every eval of every run draws its samples with the same seed
(`eval.seed`) on the same prompts, so a change of pass@1 between two evals (or two cells)
reflects the policies more than a fresh draw of sampling noise (with 64 prompts x 8
samples, redrawn samples alone move pass@1 by about +-0.02 at p ~ 0.1).
"""
from __future__ import annotations

from collections import defaultdict

import torch

from harness.objective import pass_at_k
from harness.rollout.base import RolloutBackend, SamplingParams
from harness.tasks.base import Problem, Task
from harness.train.collect import score, step_seed
from harness.train.metrics import rollout_metrics


def is_eval_step(cfg, step: int, is_last: bool) -> bool:
    """Eval at step 0, every `eval.every` steps, and on the final record."""
    return is_last or step == 0 or bool(cfg.eval.every and step % cfg.eval.every == 0)


def evaluate(task: Task, backend: RolloutBackend, render, problems: list[Problem], cfg, step: int) -> dict[str, float]:
    ev = cfg.eval
    params = SamplingParams(max_new_tokens=cfg.rollout.max_new_tokens, temperature=ev.temperature,
                            top_p=cfg.rollout.top_p, seed=step_seed(cfg.eval.seed, 0, 10_000))  # same draws at every eval
    rollout = backend.generate([render(p) for p in problems], ev.n_samples, params)
    ep = score(task, problems, rollout, ev.n_samples, cfg.objective, cfg.rollout.max_new_tokens)
    correct = ep.correct.view(len(problems), ev.n_samples).sum(-1).tolist()  # c per prompt
    out: dict[str, float] = {}
    buckets: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(problems):
        buckets[p.difficulty].append(i)
    for k in ev.ks:
        per_prompt = torch.tensor([pass_at_k(ev.n_samples, c, k) for c in correct])
        out[f"eval/pass_at_{k}"] = float(per_prompt.mean())
        for name, idx in sorted(buckets.items()):
            out[f"eval/pass_at_{k}/{name}"] = float(per_prompt[idx].mean())
    rm = rollout_metrics(ep, prefix="eval/")
    for key in ("eval/length/mean", "eval/length/correct", "eval/length/incorrect", "eval/length/truncated_frac",
                "eval/reward/mean"):
        out[key] = rm[key]
    return out
