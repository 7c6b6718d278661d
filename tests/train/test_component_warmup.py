"""train.component_warmup_steps: the first N steps train only the components (PRIME's reward model,
PPO's critic); the policy takes no step there and learns from step N on (docs/objective.md, "PRIME")."""

import json

import pytest
import torch
from safetensors.torch import load_file

from harness.config import ConfigError, load_config
from harness.train import train
from harness.train.run.warmstart import ensure_warm_start


def _records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_prime_warmup_steps_the_reward_model_and_not_the_policy(fast_config, tmp_path, monkeypatch):
    monkeypatch.setattr("harness.train.core.rundir.KEEP_CHECKPOINTS", 5)  # keep step_000000 (after the warm-up)
    cfg = fast_config(
        "objective.preset=prime", "train.steps=2", "train.component_warmup_steps=1", "train.checkpoint_every=1"
    )
    before = load_file(str(ensure_warm_start(cfg) / "model.safetensors"))
    train(cfg, tmp_path / "run")
    ckpt = tmp_path / "run" / "checkpoints"
    after1 = load_file(str(ckpt / "step_000000" / "model.safetensors"))  # after step 0, the warm-up
    after2 = load_file(str(ckpt / "step_000001" / "model.safetensors"))  # after step 1, a policy step
    assert all(torch.equal(before[k], after1[k]) for k in before), "the policy moved during the warm-up step"
    assert sum(not torch.equal(before[k], after2[k]) for k in before) >= len(before) // 2, "no policy step after it"
    prm = torch.load(ckpt / "step_000000" / "trainer_state.pt", weights_only=False)["prm"]
    assert sum(not torch.equal(before[k], prm["lm." + k]) for k in before) >= len(before) // 2, "the PRM took no step"
    recs = _records(tmp_path / "run")
    assert [r["train/policy_updated"] for r in recs if "train/policy_updated" in r] == [0.0, 1.0]
    assert recs[0]["grad/norm"] > 0  # measured during the warm-up, then dropped


def test_without_warmup_no_policy_updated_metric(fast_config, tmp_path):
    """The metric appears only when the knob is set: runs without it log what they logged before."""
    cfg = fast_config("objective.preset=prime", "train.steps=1")
    train(cfg, tmp_path / "run")
    assert "train/policy_updated" not in _records(tmp_path / "run")[0]


@pytest.mark.parametrize(
    "overrides, says",
    [
        (["objective.preset=grpo", "train.component_warmup_steps=2"], "trains no component to warm up"),
        (["objective.preset=prime", "train.steps=3", "train.component_warmup_steps=3"], "allowed: 0 to 2"),
        (["objective.preset=ppo", "train.component_warmup_steps=-1"], "component_warmup_steps"),
    ],
)
def test_bad_warmup_is_refused_naming_the_key(overrides, says):
    with pytest.raises(ConfigError) as err:
        load_config("experiments/runs/smoke.yaml", overrides)
    assert says in str(err.value) and "component_warmup_steps" in str(err.value)


def test_a_critic_warms_up_too():
    cfg = load_config("experiments/runs/smoke.yaml", ["objective.preset=ppo", "train.component_warmup_steps=2"])
    assert cfg.train.component_warmup_steps == 2
