"""Iterative GRPO's reference reset in the trainer (objective.ref_update_every, the KL term's `reset_reference`
hook): pi_ref takes the policy's weights after every n-th step and not before, the moved reference is saved in
the checkpoint (pi_0's is rebuilt on resume), and a run killed after a reset resumes to the steps of one never
stopped."""

from __future__ import annotations

import torch

from tests.train.test_entropy_controls_train import _metrics  # metrics.jsonl without timings

RESET = ["objective.kl_coef=0.04", "objective.ref_update_every=2"]


def test_the_reference_moves_on_its_schedule_and_resumes_exactly(tmp_path, fast_config, train_killed_at_update):
    from harness.train import train

    steps = ["train.steps=4", "train.checkpoint_every=2", "train.threads=1"]
    cfg = fast_config(*RESET, *steps)
    clean, fixed = tmp_path / "clean", tmp_path / "fixed"
    train(cfg, clean)
    train(fast_config(*RESET[:1], *steps), fixed)  # the same run with pi_ref = pi_0 throughout
    moved, kept = _metrics(clean), _metrics(fixed)
    assert moved[:2] == kept[:2]  # the same steps until the first reset (after step 1)
    # step 2's reference is the policy after step 1, which step 2 starts from: its KL to pi_ref is smaller
    assert moved[2]["kl/ref"] < kept[2]["kl/ref"]

    run = tmp_path / "killed"
    train_killed_at_update(cfg, run)  # in step 3's update: step_000001 (after the reset) on disk
    state = torch.load(run / "checkpoints" / "step_000001" / "trainer_state.pt", weights_only=False)
    assert state["ref"] is not None  # reset after step 1: the moved reference is checkpointed
    train(cfg, run)
    assert _metrics(run) == moved


def test_no_reference_is_saved_before_it_moves(tmp_path, fast_config):
    from harness.train import train

    cfg = fast_config("objective.kl_coef=0.04", "train.steps=2", "train.checkpoint_every=1", "train.threads=1")
    train(cfg, tmp_path / "run")
    state = torch.load(next((tmp_path / "run" / "checkpoints").glob("*/trainer_state.pt")), weights_only=False)
    assert state["ref"] is None  # pi_ref is pi_0 throughout: rebuilt from the initial policy on resume
