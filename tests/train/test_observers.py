"""The step's observers (harness/train/rl/observers.py) measure and change nothing: with train.observers=false
the trainer takes the same steps, bit for bit, and without their records.

Both sides run RLTrainer.step on the tiny models' own initial weights (no warm start), from the same seeds,
with every observer due at every step: the gradient-share probe (one extra forward and backward), the group
records and EOS shares, the rollout/train mismatch fed by pi_old's forward, and on the MoE the routing
old -> new after the update. A reward that varies within a group (the digits of a response, mod 3) gives
every step a gradient."""

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.rollout import make_backend
from harness.train.core.components import Trained, adamw
from harness.train.core.rundir import GROUP_RECORDS, RunDir
from harness.train.core.trainer import RunContext
from harness.train.rl.step import RLTrainer
from harness.train.run.task_setup import build_task
from harness.train.run.warmstart import initial_policy
from tests.train.test_reference_loop import _digit_reward

BASE = [
    "warm_start.enabled=false",
    "tracking.mlflow=false",
    "task.difficulty_mix={easy: 1}",
    "train.prompts_per_step=4",
    "train.group_size=4",
    "train.lr=1e-3",
    "train.grad_share_every=1",
    "rollout.max_new_tokens=16",
    "rollout.temperature=1.2",
]
# two mini-batches: pi_old from its own forward (the mismatch fed there); one: the update's first forward is pi_old's
DENSE = ["train.mini_batches=2", "train.old_logp=recompute"]
MOE = ["model.name=tiny-moe", "train.mini_batches=1", "train.old_logp=recompute"]
OBSERVED = ("mismatch/k3_kl", "groups/zero_var_frac", "grad/share_extreme", GROUP_RECORDS)


def _steps(overrides: list[str], tmp_path, steps: int = 2) -> tuple[list[torch.Tensor], list[dict]]:
    """(the policy's parameters after `steps` RLTrainer steps, each step's record)."""
    cfg = load_config("experiments/runs/smoke.yaml", overrides)
    torch.manual_seed(cfg.seed)
    task = build_task(cfg)
    task.score = _digit_reward
    policy, tok, render = initial_policy(cfg, torch.device("cpu"))
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    tr = cfg.train
    trained = Trained("policy", policy, adamw(policy, tr.lr, tr.betas, tr.weight_decay))
    backend = make_backend(cfg.rollout, policy, tok)
    ctx = RunContext(cfg, RunDir(tmp_path), torch.device("cpu"), task, tok, render, pad_id, backend, trained)
    trainer = RLTrainer(cfg)
    trainer.prepare(ctx)
    recs = []
    for step in range(steps):
        rec: dict = {"step": step}
        trainer.step(ctx, step, rec)
        recs.append(rec)
    return [p.detach().clone() for p in policy.parameters()], recs


@pytest.mark.parametrize("model", [DENSE, MOE], ids=["dense-two-mini-batches", "moe-single-pass"])
def test_the_same_steps_without_the_observers(model, tmp_path):
    on, recs_on = _steps([*BASE, *model], tmp_path / "on")
    off, recs_off = _steps([*BASE, *model, "train.observers=false"], tmp_path / "off")
    for rec in recs_on:  # they did run, every one of them
        assert all(key in rec for key in OBSERVED), sorted(set(OBSERVED) - set(rec))
        assert rec["grad/share_extreme"] == rec["grad/share_extreme"]  # not NaN: both halves had rows
    if "tiny-moe" in model[0]:
        assert all("router/disagree_old_new" in rec for rec in recs_on)
    for rec in recs_off:
        assert not any(key in rec for key in (*OBSERVED, "router/disagree_old_new"))
    assert recs_on[0]["grad/norm"] > 0  # the steps moved the weights
    for a, b in zip(on, off, strict=True):
        assert torch.equal(a, b)
    same = ("reward/mean", "loss/policy", "grad/norm", "clip/frac", "entropy")
    for rec_on, rec_off in zip(recs_on, recs_off, strict=True):
        assert {k: rec_on[k] for k in same} == {k: rec_off[k] for k in same}


def test_the_comparison_sees_a_changed_step(tmp_path):
    """The equality above can fail: a learning rate one part in a thousand off gives other weights."""
    on, _ = _steps([*BASE, *DENSE], tmp_path / "a", steps=1)
    other, _ = _steps([*BASE, *DENSE, "train.lr=1.001e-3"], tmp_path / "b", steps=1)
    assert not all(torch.equal(a, b) for a, b in zip(on, other, strict=True))


def test_observers_is_a_strict_boolean():
    with pytest.raises(ConfigError, match="train.observers"):
        load_config("experiments/runs/smoke.yaml", [*BASE, "train.observers=maybe"])
