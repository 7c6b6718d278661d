"""The entropy controls in the trainer (docs/objective.md, "Entropy controls"): the adaptive entropy coefficient
moves once per optimizer step, is saved in the checkpoint and survives a resume exactly; the covariance modes and
the top-entropy mask log their shares."""

from __future__ import annotations

import json

import pytest
import torch

ADAPTIVE = [
    "objective.use_adaptive_entropy=true",
    "objective.entropy_coef=0.01",
    "objective.entropy_coef_delta=0.005",
    "objective.entropy_target=50.0",  # above any entropy of the tiny model: the coefficient rises every step
    "objective.entropy_coef_max=0.5",
    "train.mini_batches=2",
]


def _metrics(run) -> list[dict]:
    return [
        {k: v for k, v in json.loads(line).items() if not k.startswith("perf/")}
        for line in (run / "metrics.jsonl").read_text().splitlines()
    ]


def test_adaptive_entropy_moves_per_optimizer_step_and_resumes_exactly(tmp_path, fast_config, train_killed_at_update):
    from harness.train import train

    cfg = fast_config(*ADAPTIVE, "train.steps=4", "train.checkpoint_every=2", "train.threads=1")
    clean = tmp_path / "clean"
    train(cfg, clean)
    coefs = [r["entropy/coef"] for r in _metrics(clean) if "entropy/coef" in r]
    # two optimizer steps a step, each +0.005 from 0.01
    assert coefs == pytest.approx([0.02, 0.03, 0.04, 0.05])

    run = tmp_path / "killed"
    train_killed_at_update(cfg, run)  # in step 3's update: step_000001 on disk, step 2 in memory
    state = torch.load(run / "checkpoints" / "step_000001" / "trainer_state.pt", weights_only=False)
    saved = state["entropy_control"]  # after the first two steps' four optimizer steps
    assert saved["coef"] == pytest.approx(0.03) and 0.0 < saved["last_entropy"] <= 50.0
    train(cfg, run)  # resumes at step 2 from step_000001, the coefficient with it
    assert _metrics(run) == _metrics(clean)


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["objective.preset=clip_cov", "objective.clip_cov_ratio=0.05", "objective.clip_cov_lb=0.0"], "clip_cov/frac"),
        (["objective.preset=kl_cov"], "kl_cov/frac"),
        (["objective.top_entropy_quantile=0.3"], "entropy/kept_frac"),
    ],
)
def test_the_entropy_controls_log_their_shares(overrides, key, tmp_path, fast_config):
    from harness.train import train

    train(fast_config(*overrides, "train.steps=1"), tmp_path / "run")
    values = [r[key] for r in _metrics(tmp_path / "run") if key in r]
    assert len(values) == 1 and 0.0 < values[0] <= 1.0, values
