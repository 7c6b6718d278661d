"""A scripted task and rollout backend for direct tests of collect(), score() and evaluate():
no model, no sampling. Each problem's `meta["plan"]` says what its G samples are:
a list of (correct, length) pairs, in order. Shapes: N prompts, G samples, B = N*G, T = the
longest response of the batch."""

from __future__ import annotations

import random

import torch

from harness.rollout.base import RolloutBackend, RolloutBatch, SamplingParams
from harness.tasks.base import Problem, RewardBreakdown, Task


def problem(uid: str, plan: list[tuple[bool, int]], difficulty: str = "easy") -> Problem:
    return Problem(uid=uid, prompt=uid, answer="right", difficulty=difficulty, meta={"plan": plan})


class ScriptedTask(Task):
    """problems() hands out the scripted rounds in order (one list per call, cut to n);
    score(): correct iff the text is 'right', format 1 always, total = correct + 0.1 * format."""

    name = "scripted"
    difficulties = ("easy", "hard")

    def __init__(self, rounds: list[list[Problem]]):
        self.rounds = list(rounds)
        self.calls: list[tuple[int, int, str]] = []

    def problems(self, n: int, seed: int, split: str = "train") -> list[Problem]:
        self.calls.append((n, seed, split))
        return self.rounds.pop(0)[:n]

    def demonstration(self, problem: Problem, rng: random.Random) -> str:  # pragma: no cover - unused
        return "right"

    def score(self, problem: Problem, completion: str, truncated: bool) -> RewardBreakdown:
        ok = completion == "right" and not truncated
        return RewardBreakdown(total=float(ok) + 0.1, correct=ok, format=1.0, parsed=completion)


class ScriptedBackend(RolloutBackend):
    """generate(): prompt ids are indices into `self.problems` (see `render`); sample j of a
    prompt follows its plan's j-th (correct, length); a sample of max_new_tokens is truncated."""

    def __init__(self):
        self.problems: list[Problem] = []

    def render(self, p: Problem) -> list[int]:
        self.problems.append(p)
        return [len(self.problems) - 1]

    def generate(self, prompts: list[list[int]], group_size: int, params: SamplingParams) -> RolloutBatch:
        rows = [self.problems[ids[0]].meta["plan"][j] for ids in prompts for j in range(group_size)]
        T = max(n for _, n in rows)
        mask = torch.zeros(len(rows), T)
        for i, (_, n) in enumerate(rows):
            mask[i, :n] = 1.0
        return RolloutBatch(
            prompt_ids=[ids for ids in prompts for _ in range(group_size)],
            response_ids=(torch.arange(T).repeat(len(rows), 1) + 3) * mask.long(),
            response_mask=mask,
            sampler_logp=-mask.clone(),
            truncated=torch.tensor([n >= params.max_new_tokens for _, n in rows]),
            texts=["right" if ok else "wrong" for ok, _ in rows],
            extras={"routing": torch.arange(len(rows) * T).view(len(rows), T, 1, 1)},
        )
