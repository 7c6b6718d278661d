"""One iteration's data: sample prompts, generate G responses each, score them; and the held-out
prompts every eval of a run draws (`eval_problems`). Every prompt draw and every sampling seed of a
run comes from here (`step_seed` and the salts below), so a resumed run redraws the same ones.

What the data side does besides is the active modes' (objective/batching.py): a shaping term added to each
reward (DAPO's overlong punishment), a filter of each round's groups whose dropped groups new prompts refill
until the batch holds N (DAPO's dynamic sampling, arXiv 2503.14476 §3.2: at most `train.max_refill_rounds`
extra rounds), a filter of the final groups, not refilled (ScaleRL's zero-variance filter), a pool that
retires solved prompts (ScaleRL's no-positive-resampling, prompt_pool.py) and ReMax's greedy answer.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from harness.objective import dynamic_sampling_keep, inputs_needed
from harness.objective.batching import group_keep, refill_keep, refills, reward_shaping
from harness.objective.reward_combine import combine as combine_rewards
from harness.rollout.base import RolloutBackend, SamplingParams
from harness.rollout.turns import roll_out
from harness.tasks.base import Task
from harness.train.core.episode import Episode
from harness.train.core.prompt_pool import MAX_REDRAWS, PromptPool

EVAL_SEED_OFFSET = 7_777  # eval.seed + this seeds the held-out prompts (the same at every eval of a run)
SAMPLING_SALT = 100  # step_seed salt of a step's sampling, + the refill round (the round alone salts its prompts)
POOL_SALT = 10_000  # step_seed salt of the draws that top a step up past retired prompts (no_positive_resampling)


def step_seed(seed: int, step: int, salt: int = 0) -> int:
    """Deterministic per-step seed: a resumed run redraws exactly the same prompts and samples."""
    return (seed * 1_000_003 + step * 9_176 + salt * 7_919) % (2**31 - 1)


def score(
    task: Task, problems, rollout, group_size: int, objective, max_new_tokens: int, combine: str = "sum_then_normalize"
) -> Episode:
    """The task's verdict on every row, plus the active modes' shaping (DAPO's overlong punishment, docs/objective.md,
    "Batch-level knobs") when `objective` is given; objective=None scores the task reward alone (evals: evaluate.py).
    combine: task.reward_combine, how the task's rewards make the one reward (objective/reward_combine.py)."""
    rows = [p for p in problems for _ in range(group_size)]
    train = {"train": True} if objective is not None else {}  # a training batch: running reward normalisers learn
    scores = task.score_batch(rows, rollout.texts, rollout.truncated.tolist(), **train)  # a dataset task: in workers
    base = torch.tensor([s.total for s in scores], dtype=torch.float32)
    env = rollout.extras.get("env_reward")  # a multi-turn environment's own final reward, where it gave one
    if env is not None:
        base = torch.where(torch.isfinite(env), env, base)
    if objective is not None and combine != "sum_then_normalize":
        base = combine_rewards(combine, base, *reward_terms(scores), group_size, objective)
    if objective is not None:
        shaping = reward_shaping(objective, rollout.lengths, max_new_tokens, base)
    else:
        shaping = torch.zeros_like(base)
    return Episode(list(problems), rollout, scores, base + shaping, shaping, group_size)


def draw(task: Task, n: int, cfg, step: int, rnd: int, pool: PromptPool | None = None) -> list:
    """The n training prompts of round `rnd` of `step`; with a pool (objective.no_positive_resampling) the retired
    ones dropped and the draw topped up from further seeded draws (fewer than n when those run out too)."""
    problems = task.problems(n, seed=step_seed(cfg.seed, step, rnd), split="train")
    if pool is None:
        return problems
    kept = [p for p in problems if pool.allowed(p)]
    for extra in range(1, MAX_REDRAWS + 1):
        if len(kept) >= n:
            break
        seed = step_seed(cfg.seed, step, POOL_SALT + MAX_REDRAWS * rnd + extra)
        kept += [p for p in task.problems(n, seed=seed, split="train") if pool.allowed(p)]
    return kept[:n] or problems  # every prompt drawn is retired: the draw as it was (pool/retired says so)


def final_groups(ep: Episode, objective, group_size: int) -> tuple[Episode, dict]:
    """The groups the step trains on, once sampling is done: those every active group filter keeps
    (objective.zero_variance_filter: not all equal), not refilled; none kept: the batch as it is (its advantages
    all 0). Its metrics: the filters', and groups/kept after them; ep itself and {} when no mode filters."""
    keep, metrics = group_keep(objective, ep.rewards, ep.correct, group_size)
    if keep is None:
        return ep, {}
    kept = ep.select_groups(keep) if keep.any() else ep
    return kept, {**metrics, "groups/kept": float(len(kept.problems))}


def reward_terms(scores) -> tuple[torch.Tensor, torch.Tensor]:
    """(values (B, K), weights (K,)) of the rewards each RewardBreakdown's total sums (its `terms`)."""
    if not scores or not scores[0].terms:
        raise ValueError("task.reward_combine=normalize_then_sum: this task does not name the rewards its total sums")
    values = torch.tensor([[v for _, _, v in s.terms] for s in scores], dtype=torch.float64)
    return values, torch.tensor([w for _, w, _ in scores[0].terms], dtype=torch.float64)


def greedy_rewards(task: Task, backend: RolloutBackend, prompts, problems, params: SamplingParams, objective):
    """(N,) the reward of one greedy (temperature 0) response per prompt, scored as the sampled ones are (the
    task's rewards and the objective's overlong shaping): ReMax's baseline (arXiv 2310.10505), never trained on."""
    rollout = roll_out(backend, problems, prompts, 1, replace(params, temperature=0.0))
    return score(task, problems, rollout, 1, objective, params.max_new_tokens).rewards


def score_round(task: Task, backend: RolloutBackend, problems, rollout, prompts, params: SamplingParams, cfg):
    """One round's Episode: its rollout's rewards (task.reward_combine), and ReMax's greedy rewards where the
    objective's baseline reads them (inputs_needed(obj).greedy_rewards)."""
    obj = cfg.objective
    ep = score(task, problems, rollout, cfg.train.group_size, obj, cfg.rollout.max_new_tokens, cfg.task.reward_combine)
    if inputs_needed(obj).greedy_rewards:
        ep.greedy_rewards = greedy_rewards(task, backend, prompts, problems, params, obj)
    return ep


def collect(
    task: Task, backend: RolloutBackend, render, cfg, step: int, pool: PromptPool | None = None
) -> tuple[Episode, dict]:
    """render: Problem -> prompt token ids. Returns the episode (N groups) and collection metrics.
    pool: objective.no_positive_resampling's running pass rates (prompt_pool.py), updated with every round."""
    N, G = cfg.train.prompts_per_step, cfg.train.group_size
    obj = cfg.objective
    parts, have, first_zero_frac, rounds = [], 0, None, 0
    refill = refills(obj)  # objective.dynamic_sampling: dropped groups are refilled by further rounds
    max_rounds = 1 + (cfg.train.max_refill_rounds if refill else 0)
    for rnd in range(max_rounds):
        want = N - have
        problems = draw(task, want if rnd == 0 else max(want, N // 2), cfg, step, rnd, pool)
        params = SamplingParams(
            max_new_tokens=cfg.rollout.max_new_tokens,
            temperature=cfg.rollout.temperature,
            top_p=cfg.rollout.top_p,
            stop=tuple(cfg.rollout.stop),
            seed=step_seed(cfg.seed, step, SAMPLING_SALT + rnd),
        )
        prompts = [render(p) for p in problems]
        rollout = roll_out(backend, problems, prompts, G, params)  # multi-turn: harness/rollout/turns.py
        ep = scored = score_round(task, backend, problems, rollout, prompts, params, cfg)
        if pool is not None:
            pool.record(ep.problems, ep.correct, G)
        if first_zero_frac is None:  # groups/zero_std_frac: all-equal rewards (as the objective sees them)
            first_zero_frac = 1.0 - dynamic_sampling_keep(ep.rewards, G).float().mean().item()
        rounds = rnd
        if refill:
            ep = ep.select_groups(refill_keep(obj, ep.rewards, ep.correct, G))
            if len(ep.problems) > want:
                ep = ep.select_groups(torch.arange(len(ep.problems)) < want)
        parts.append(ep)
        have += len(ep.problems)
        if have >= N:
            break
    if have == 0:  # every group was uninformative in every round: train on the last round, unfiltered
        parts, have = [scored], len(scored.problems)
    ep, metrics = (
        Episode.concat(parts),
        {
            "groups/zero_std_frac": first_zero_frac,
            "groups/refill_rounds": float(rounds),
            "groups/kept": float(have),
        },
    )
    ep, filtered = final_groups(ep, obj, G)
    metrics.update(filtered)
    return ep, {**metrics, **(pool.metrics() if pool is not None else {})}


def eval_problems(task: Task, cfg) -> list:
    """The held-out prompts of every eval of a run: eval.num_prompts of the task's eval split, seeded by
    eval.seed (the run shell, `harness eval` and the probes draw them here)."""
    return task.problems(cfg.eval.num_prompts, seed=cfg.eval.seed + EVAL_SEED_OFFSET, split="eval")
