"""A PPO run killed mid-way resumes with its value model (a component: harness/train/core/components.py)
and that model's optimizer restored exactly: the resumed run logs the numbers of an uninterrupted one.
The same for PRIME's implicit reward model and λ-GRPO's learned λ (docs/objective.md, "PRIME" and "λ-GRPO")."""

from __future__ import annotations

import json

import pytest
import torch


def _metrics(run) -> list[dict]:
    return [
        {k: v for k, v in json.loads(line).items() if not k.startswith("perf/")}
        for line in (run / "metrics.jsonl").read_text().splitlines()
    ]


@pytest.mark.parametrize(
    "preset, component, metric",
    [("ppo", "critic", "value/"), ("prime", "prm", "prm/"), ("lambda_grpo", "lambda", "agg/lambda")],
)
def test_killed_mid_way_resumes_the_component_and_its_optimizer(
    preset, component, metric, tmp_path, fast_config, train_killed_at_update
):
    from harness.train import train

    cfg = fast_config(
        f"objective.preset={preset}",
        "train.steps=4",
        "train.checkpoint_every=2",
        "train.mini_batches=2",
        "train.threads=1",
    )
    clean = tmp_path / "clean"
    train(cfg, clean)

    run = tmp_path / "killed"
    train_killed_at_update(cfg, run)  # in step 3's update: step_000001 on disk, step 2 in memory
    assert [r["step"] for r in _metrics(run)] == [0, 1]
    state = torch.load(run / "checkpoints" / "step_000001" / "trainer_state.pt", weights_only=False)
    assert set(state[component]) and state[f"{component}_optimizer"]["state"]  # its weights and Adam moments

    train(cfg, run)  # resumes at step 2 from step_000001
    resumed, uninterrupted = _metrics(run), _metrics(clean)
    assert [r["step"] for r in resumed] == [0, 1, 2, 3, 4]
    assert any(k.startswith(metric) for k in resumed[2])
    assert resumed == uninterrupted
