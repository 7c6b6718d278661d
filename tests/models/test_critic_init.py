"""model.critic_init: PPO's critic started from a reward model (its transformer and score head): its value of
the state before response token t is the reward model's score of the prompt and the response up to t; the
config refuses it without a critic, from a folder that is not a reward model, or with another vocabulary."""

from __future__ import annotations

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.models.registry import build_model
from harness.models.value import ValueModel, load_critic_init
from harness.train.core.components import COMPONENTS
from tests.tasks.reward_models import tiny_reward_model

SMOKE = "experiments/runs/smoke.yaml"


@pytest.fixture(scope="module")
def rm_folder(tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("critic") / "rm", seed=3)


def test_the_critic_starts_as_the_reward_model(rm_folder):
    policy, _ = build_model("tiny-dense", seed=0)
    rm = load_critic_init(str(rm_folder)).eval()
    critic = ValueModel(policy, rm).eval()
    prompt, response = [1, 40, 41, 42], torch.tensor([[50, 51, 52, 53]])
    values = critic([prompt], response, torch.ones(1, 4), pad_id=0)  # (1, 4)
    ids = prompt + response[0].tolist()
    with torch.no_grad():
        want = [float(rm(input_ids=torch.tensor([ids[: len(prompt) + t]])).logits[0, 0]) for t in range(4)]
    assert torch.allclose(values[0].detach(), torch.tensor(want), atol=1e-5)
    assert not torch.equal(critic.head.weight, torch.zeros_like(critic.head.weight))


def test_a_ppo_run_builds_its_critic_from_the_reward_model(rm_folder):
    cfg = load_config(SMOKE, ["objective.preset=ppo", f"model.critic_init={rm_folder}"])
    policy, _ = build_model("tiny-dense", seed=0)
    critic, _lr = COMPONENTS["values"][1](cfg, policy)
    assert torch.equal(critic.head.weight, load_critic_init(str(rm_folder)).score.weight)
    plain, _ = COMPONENTS["values"][1](load_config(SMOKE, ["objective.preset=ppo"]), policy)
    assert torch.equal(plain.head.weight, torch.zeros_like(plain.head.weight))  # without it: as before


def test_critic_init_is_refused_where_it_cannot_apply(rm_folder, tmp_path):
    with pytest.raises(ConfigError, match=r"model.critic_init=.* initialises PPO's critic"):
        load_config(SMOKE, [f"model.critic_init={rm_folder}"])  # grpo: no critic
    with pytest.raises(ConfigError, match=r"model.critic_init=.* is not a reward model: .* has 2 labels"):
        load_config(
            SMOKE, ["objective.preset=ppo", f"model.critic_init={tiny_reward_model(tmp_path / 'two', num_labels=2)}"]
        )
    with pytest.raises(ConfigError, match=r"has vocab_size=100, the policy .* 49152"):
        load_config(SMOKE, ["objective.preset=ppo", "model.name=smollm2-135m-random", f"model.critic_init={rm_folder}"])
