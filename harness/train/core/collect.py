"""One iteration's data: sample prompts, generate G responses each, score them; and the held-out
prompts every eval of a run draws (`eval_problems`). Every prompt draw and every sampling seed of a
run comes from here (`step_seed` and the salts below), so a resumed run redraws the same ones.

Dynamic sampling (DAPO, arXiv 2503.14476 §3.2): groups whose rewards are all equal carry
no signal under a group baseline; they are dropped and new prompts are sampled until the
batch holds N informative groups (at most `max_refill_rounds` extra rounds).
"""

from __future__ import annotations

import torch

from harness.objective import dynamic_sampling_keep, overlong_penalty
from harness.rollout.base import RolloutBackend, SamplingParams
from harness.tasks.base import Task
from harness.train.core.episode import Episode

EVAL_SEED_OFFSET = 7_777  # eval.seed + this seeds the held-out prompts (the same at every eval of a run)
SAMPLING_SALT = 100  # step_seed salt of a step's sampling, + the refill round (the round alone salts its prompts)


def step_seed(seed: int, step: int, salt: int = 0) -> int:
    """Deterministic per-step seed: a resumed run redraws exactly the same prompts and samples."""
    return (seed * 1_000_003 + step * 9_176 + salt * 7_919) % (2**31 - 1)


def score(task: Task, problems, rollout, group_size: int, objective, max_new_tokens: int) -> Episode:
    """The task's verdict on every row, plus the objective's overlong shaping (docs/objective.md §6)
    when `objective` is given; objective=None scores the task reward alone (evals: evaluate.py)."""
    rows = [p for p in problems for _ in range(group_size)]
    train = {"train": True} if objective is not None else {}  # a training batch: running reward normalisers learn
    scores = task.score_batch(rows, rollout.texts, rollout.truncated.tolist(), **train)  # a dataset task: in workers
    base = torch.tensor([s.total for s in scores], dtype=torch.float32)
    if objective is not None and objective.overlong_buffer > 0:
        shaping = overlong_penalty(
            rollout.lengths, max_new_tokens, objective.overlong_buffer, objective.overlong_penalty
        )
    else:
        shaping = torch.zeros_like(base)
    return Episode(list(problems), rollout, scores, base + shaping, shaping, group_size)


def collect(task: Task, backend: RolloutBackend, render, cfg, step: int) -> tuple[Episode, dict]:
    """render: Problem -> prompt token ids. Returns the episode (N groups) and collection metrics."""
    N, G = cfg.train.prompts_per_step, cfg.train.group_size
    obj = cfg.objective
    parts, have, first_zero_frac, rounds = [], 0, None, 0
    max_rounds = 1 + (cfg.train.max_refill_rounds if obj.dynamic_sampling else 0)
    for rnd in range(max_rounds):
        want = N - have
        problems = task.problems(
            want if rnd == 0 else max(want, N // 2), seed=step_seed(cfg.seed, step, rnd), split="train"
        )
        params = SamplingParams(
            max_new_tokens=cfg.rollout.max_new_tokens,
            temperature=cfg.rollout.temperature,
            top_p=cfg.rollout.top_p,
            stop=tuple(cfg.rollout.stop),
            seed=step_seed(cfg.seed, step, SAMPLING_SALT + rnd),
        )
        rollout = backend.generate([render(p) for p in problems], G, params)
        ep = score(task, problems, rollout, G, obj, cfg.rollout.max_new_tokens)
        if first_zero_frac is None:  # groups/zero_std_frac: all-equal rewards (as the objective sees them)
            first_zero_frac = 1.0 - dynamic_sampling_keep(ep.rewards, G).float().mean().item()
        rounds = rnd
        if obj.dynamic_sampling:  # on accuracy, 0 < #correct < G (DAPO Eq. 11), not on the shaped reward
            ep = ep.select_groups(dynamic_sampling_keep(ep.correct.float(), G))
            if len(ep.problems) > want:
                ep = ep.select_groups(torch.arange(len(ep.problems)) < want)
        parts.append(ep)
        have += len(ep.problems)
        if have >= N:
            break
    if have == 0:  # every group was uninformative in every round: train on nothing-informative first round
        ep = score(task, problems, rollout, G, obj, cfg.rollout.max_new_tokens)
        parts, have = [ep], len(ep.problems)
    return Episode.concat(parts), {
        "groups/zero_std_frac": first_zero_frac,
        "groups/refill_rounds": float(rounds),
        "groups/kept": float(have),
    }


def eval_problems(task: Task, cfg) -> list:
    """The held-out prompts of every eval of a run: eval.num_prompts of the task's eval split, seeded by
    eval.seed (the run shell, `harness eval` and the probes draw them here)."""
    return task.problems(cfg.eval.num_prompts, seed=cfg.eval.seed + EVAL_SEED_OFFSET, split="eval")
