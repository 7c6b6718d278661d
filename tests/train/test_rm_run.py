"""A run with a reward model mixed with a verifier, end to end (tiny policy, tiny random reward model,
seconds): reward/<name> logged each step, the hacking/* probe, the running normaliser's statistics and
the probe's history in the checkpoint, and a resumed run scoring as the uninterrupted one."""

from __future__ import annotations

import json

import pytest
import torch

from harness.config import load_config
from harness.jsonl import read_jsonl
from harness.train import train
from tests.tasks.reward_models import tiny_reward_model

SAMPLE = "results/data/gsm8k_sample"


def config(tmp_path, rm, *overrides):
    from harness.tasks.sample_data import write_samples

    write_samples("results/data")
    data = {"train": f"{SAMPLE}/train.jsonl", "eval": f"{SAMPLE}/test.jsonl", "prompt_key": "question"}
    data.update(max_train_rows=32, max_eval_rows=4)
    return load_config(
        "experiments/runs/smoke.yaml",
        [
            "task.name=dataset",
            f"task.data={json.dumps(data)}",
            f"task.rewards=[gsm8k, {{model: {rm}, name: rm, weight: 0.5, normalize: running, micro_batch_size: 3}}]",
            "task.reward_workers=0",
            "task.hacking_window=3",
            "warm_start.enabled=false",
            "train.steps=3",
            "train.prompts_per_step=2",
            "train.group_size=2",
            "train.mini_batches=1",
            "train.checkpoint_every=1",
            "train.threads=1",
            "rollout.max_new_tokens=12",
            "eval.num_prompts=2",
            "eval.n_samples=1",
            "eval.ks=[1]",
            "eval.every=0",
            "tracking.mlflow=false",
            *overrides,
        ],
    )


def test_a_run_with_a_reward_model_logs_it_and_the_probe(tmp_path):
    rm = tiny_reward_model(tmp_path / "rm")
    cfg = config(tmp_path, rm)
    train(cfg, tmp_path / "run")
    steps = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "reward/mean" in r]
    assert len(steps) == 3
    keys = {"reward/rm", "reward/gsm8k", "hacking/proxy", "hacking/verified", "hacking/corr", "hacking/gap_trend"}
    assert all(keys <= set(r) for r in steps)
    for r in steps:  # reward/* are float32 means, hacking/* float64
        assert r["hacking/proxy"] == pytest.approx(r["reward/rm"], rel=1e-6)
        assert r["hacking/verified"] == pytest.approx(r["reward/accuracy"])
    state = torch.load(tmp_path / "run" / "checkpoints" / "step_000002" / "trainer_state.pt", weights_only=False)
    assert state["reward_norm"]["rm"]["count"] == 3 * 2 * 2  # every training row of 3 steps, no eval row
    assert state["hacking"]["proxies"] == [r["hacking/proxy"] for r in steps[-3:]]  # the window's history


@pytest.mark.slow
def test_a_resumed_run_normalises_as_the_uninterrupted_one(tmp_path, train_killed_at_update):
    """Killed in step 2's update (step 1 on disk), then resumed: the running normaliser's statistics and the
    probe's window come back from the checkpoint, so the rewards are the uninterrupted run's."""
    cfg = config(tmp_path, tiny_reward_model(tmp_path / "rm"))
    train(cfg, tmp_path / "run")
    steps = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "reward/mean" in r]
    train_killed_at_update(cfg, tmp_path / "again", call=3)
    train(cfg, tmp_path / "again")
    again = [r for r in read_jsonl(tmp_path / "again" / "metrics.jsonl") if "reward/mean" in r]
    for k in ("reward/mean", "reward/rm", "hacking/gap_trend"):
        assert [r[k] for r in again] == [r[k] for r in steps], k
