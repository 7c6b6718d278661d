"""ReMax's greedy rollout in the step's collection (harness/train/core/collect.py): with `baseline: remax`
each prompt gets one more response at temperature 0, scored like the sampled ones, carried on the
Episode (through dynamic-sampling style group selection and concatenation) and never trained on;
other baselines draw nothing more."""

from __future__ import annotations

import pytest
import torch

from harness.config import load_config
from harness.rollout.base import RolloutBatch
from harness.tasks import make_task
from harness.train.core.collect import collect

SMOKE = "experiments/runs/smoke.yaml"


class _Backend:
    """Answers every prompt with `Answer: 0` when sampling at temperature > 0 and with the right answer
    greedily; records each call's (group size, temperature)."""

    def __init__(self, answers: dict):
        self.calls, self.answers = [], answers

    def generate(self, prompts, group_size, params):
        self.calls.append((len(prompts), group_size, params.temperature))
        B = len(prompts) * group_size
        texts = [
            f"Answer: {self.answers[tuple(p)] if params.temperature == 0 else 0}"
            for p in prompts
            for _ in range(group_size)
        ]
        return RolloutBatch(
            prompt_ids=[p for p in prompts for _ in range(group_size)],
            response_ids=torch.ones(B, 3, dtype=torch.long),
            response_mask=torch.ones(B, 3),
            sampler_logp=torch.zeros(B, 3),
            truncated=torch.zeros(B, dtype=torch.bool),
            texts=texts,
        )


@pytest.mark.parametrize("preset, greedy", [("remax", True), ("grpo", False)])
def test_the_greedy_rollout_is_drawn_scored_and_carried(preset, greedy):
    cfg = load_config(
        SMOKE, [f"objective.preset={preset}", "train.prompts_per_step=3", "train.group_size=2", "train.mini_batches=1"]
    )
    task = make_task("arithmetic")
    renders = {}

    def render(p):
        renders[p.uid] = [len(renders) + 5]
        return renders[p.uid]

    answers = {}
    for p in task.problems(3, seed=0):
        answers[(len(answers) + 5,)] = p.answer
    backend = _Backend(answers)
    ep, _ = collect(task, backend, render, cfg, step=0)
    assert backend.calls[0] == (3, 2, cfg.rollout.temperature)
    if not greedy:
        assert len(backend.calls) == 1 and ep.greedy_rewards is None
        return
    assert backend.calls[1] == (3, 1, 0.0)  # one response per prompt, at temperature 0
    assert ep.greedy_rewards.tolist() == [1.0, 1.0, 1.0]  # scored by the task: every greedy answer is right
    assert ep.rewards.tolist() == [0.0] * 6 and len(ep.rollout.texts) == 6  # the trained rows: the sampled ones
    kept = ep.select_groups(torch.tensor([True, False, True]))
    assert kept.greedy_rewards.tolist() == [1.0, 1.0]
    assert type(ep).concat([kept, kept]).greedy_rewards.tolist() == [1.0] * 4
