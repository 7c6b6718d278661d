"""task.reward_combine (GDPO), baseline remax and dpo_shift_lambda in the run config: bad values and
contradictions refused before a model loads, one line naming the key, the value and what is allowed;
and the combination applied where the completions are scored (harness/train/core/collect.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective import ObjectiveConfig
from harness.tasks import make_task
from harness.train.core.collect import score

SMOKE = "experiments/runs/smoke.yaml"
DPO = "experiments/runs/dpo.yaml"


@pytest.mark.parametrize(
    "path, overrides, needles",
    [
        (SMOKE, ["task.reward_combine=normalize_sum"], ["reward_combine", "normalize_then_sum"]),
        (
            SMOKE,
            [
                "task.reward_combine=normalize_then_sum",
                "train.group_size=1",
                "objective.baseline=batch_mean",
                "objective.scale=none",
            ],
            ["task.reward_combine='normalize_then_sum'", "train.group_size=1", ">= 2"],
        ),
        (
            SMOKE,
            ["task.reward_combine=normalize_then_sum", "objective.preset=remax"],
            ["objective.baseline='remax'", "sum_then_normalize"],
        ),
        (DPO, ["objective.dpo_shift_lambda=1.5"], ["dpo_shift_lambda", "1.5"]),
        (DPO, ["objective.dpo_loss_type=ipo", "objective.dpo_shift_lambda=0.5"], ["dpo_shift_lambda", "sigmoid"]),
    ],
)
def test_refused_before_a_model_loads(path, overrides, needles):
    with pytest.raises(ConfigError) as e:
        load_config(path, overrides)
    msg = str(e.value)
    assert "\n" not in msg.strip() and all(n in msg for n in needles), msg


def test_accepted():
    cfg = load_config(SMOKE, ["objective.preset=remax", "train.group_size=1"])
    assert cfg.objective.baseline == "remax" and cfg.task.reward_combine == "sum_then_normalize"
    cfg = load_config(SMOKE, ["task.reward_combine=normalize_then_sum"])
    assert cfg.task.reward_combine == "normalize_then_sum"
    assert load_config(DPO, ["objective.dpo_shift_lambda=0.75"]).objective.dpo_shift_lambda == 0.75


def test_score_combines_a_generated_tasks_correct_and_format_rewards():
    task = make_task("arithmetic", format_weight=0.5)
    problems = task.problems(1, seed=0)
    right = f"Answer: {problems[0].answer}"
    texts = [right, "no number here", "Answer: -123456", right]
    rollout = SimpleNamespace(
        texts=texts, truncated=torch.zeros(4, dtype=torch.bool), lengths=torch.full((4,), 5.0), extras={}
    )
    obj = ObjectiveConfig()
    summed = score(task, problems, rollout, 4, obj, 64)
    assert [s.terms[1][1] for s in summed.scores] == [0.5] * 4
    assert summed.rewards.tolist() == [1.5, 0.0, 0.5, 1.5]  # correct + 0.5 format
    gdpo = score(task, problems, rollout, 4, obj, 64, "normalize_then_sum")
    # correct [1, 0, 0, 1]: mean 0.5, sample std 1/sqrt(3); format [1, 0, 1, 1]: mean 0.75, std 0.5
    c, f = 0.5 * 3**0.5, [0.25 / 0.5, -0.75 / 0.5, 0.25 / 0.5, 0.25 / 0.5]
    want = [c + 0.5 * f[0], -c + 0.5 * f[1], -c + 0.5 * f[2], c + 0.5 * f[3]]
    assert gdpo.rewards.tolist() == pytest.approx(want, abs=1e-5)
    assert [s.total for s in gdpo.scores] == [1.5, 0.0, 0.5, 1.5]  # each reward still logged as it was
