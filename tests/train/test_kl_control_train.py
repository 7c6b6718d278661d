"""PPO's adaptive KL controller in the trainer (objective.kl_target): each step's penalty is weighed by the beta
the previous steps' measured KLs left (verl's rule, tests/objective/test_objective_kl_control.py), beta is saved
in the checkpoint and a resumed run takes the same steps as one never stopped."""

from __future__ import annotations

import pytest
import torch

from tests.train.test_entropy_controls_train import _metrics  # metrics.jsonl without timings

ADAPTIVE = [
    "objective.preset=ppo",  # the critic's path: the KL is spread over the tokens' rewards (GAE)
    "objective.kl_target=0.01",
    "objective.kl_horizon=64",  # short, so that beta visibly moves in a few steps
]


def test_adaptive_kl_follows_the_rule_and_resumes_exactly(tmp_path, fast_config, train_killed_at_update):
    from harness.train import train

    cfg = fast_config(*ADAPTIVE, "train.steps=4", "train.checkpoint_every=2", "train.threads=1")
    obj, rows = cfg.objective, cfg.train.prompts_per_step * cfg.train.group_size
    clean = tmp_path / "clean"
    train(cfg, clean)
    recs = [r for r in _metrics(clean) if "kl/coef" in r]
    assert [r["step"] for r in recs] == [0, 1, 2, 3]
    assert recs[0]["kl/coef"] == obj.kl_coef  # kl_coef is the starting beta
    for before, after in zip(recs, recs[1:]):  # beta_{t+1} = beta_t (1 + clip(KL_t / target - 1, +-0.2) B / horizon)
        error = min(max(before["kl/reward"] / obj.kl_target - 1, -0.2), 0.2)
        assert after["kl/coef"] == pytest.approx(before["kl/coef"] * (1 + error * rows / obj.kl_horizon), rel=1e-6)
    assert recs[-1]["kl/coef"] != obj.kl_coef  # it moved

    run = tmp_path / "killed"
    train_killed_at_update(cfg, run)  # in step 3's update: step_000001 on disk, step 2 in memory
    state = torch.load(run / "checkpoints" / "step_000001" / "trainer_state.pt", weights_only=False)
    assert state["kl_control"]["value"] == pytest.approx(recs[2]["kl/coef"], rel=1e-12)  # after steps 0 and 1
    train(cfg, run)  # resumes at step 2 from step_000001, beta with it
    assert _metrics(run) == _metrics(clean)


@pytest.mark.slow
def test_two_processes_steer_beta_as_one(tmp_path, fast_overrides):
    """Each process scores the whole batch (its forwards gathered), so each measures the same KL_t and moves the
    same beta: a 2-process run logs the 1-process run's beta and KL at every step."""
    from harness.config import load_config
    from harness.train import train
    from tests.train.test_data_parallel import RUN, SMOKE, _records, _two_process_run

    overrides = [*fast_overrides, *ADAPTIVE, *RUN]
    train(load_config(SMOKE, overrides), tmp_path / "one")
    _two_process_run(SMOKE, overrides, tmp_path / "ddp", "ddp")
    one, two = ([r for r in _records(tmp_path / run) if "kl/coef" in r] for run in ("one", "ddp"))
    assert [r["step"] for r in two] == [r["step"] for r in one] == [0, 1]
    assert [r["kl/coef"] for r in two] == pytest.approx([r["kl/coef"] for r in one], rel=1e-6)
    assert [r["kl/reward"] for r in two] == pytest.approx([r["kl/reward"] for r in one], rel=1e-5, abs=1e-7)
