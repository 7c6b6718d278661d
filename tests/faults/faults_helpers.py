"""Helpers of the fault tests (imported as faults_helpers: a unique module name, unlike conftest).

Fault tests: a real tiny model (no warm start), real MLflow on a sqlite store in tmp_path.
Faults are injected where they cannot happen on demand here (a kill at a chosen line, a full
disk, a NaN); each test's docstring says how."""

from __future__ import annotations

import json
from pathlib import Path

from harness.config import load_config

SMOKE = "experiments/runs/smoke.yaml"
# 2-3 s a run on one thread: 4 prompts x 2 samples x 8 tokens, a checkpoint every step
TINY = [
    "warm_start.enabled=false",
    "train.steps=3",
    "train.prompts_per_step=4",
    "train.group_size=2",
    "train.mini_batches=1",
    "rollout.max_new_tokens=8",
    "eval.num_prompts=2",
    "eval.n_samples=1",
    "eval.ks=[1]",
    "eval.every=0",
    "train.checkpoint_every=1",
    "train.samples_to_log=1",
    "tracking.experiment=faults",
]

BACKGROUND = "train.checkpoint_background=true"  # the checkpoint written in a thread (ckpt_writer.py)


class Killed(BaseException):
    """Stands for SIGKILL at a chosen line: nothing after it runs in the trainer's own code."""


def tiny(*overrides: str):
    return load_config(SMOKE, [*TINY, *overrides])


def file_steps(run: Path) -> list[int]:
    """Steps of metrics.jsonl, every line (a torn or duplicated line shows up here)."""
    return [json.loads(line)["step"] for line in (Path(run) / "metrics.jsonl").read_text().splitlines()]


def mlflow_run(uri: str, run: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    return client, (Path(run) / "mlflow_run_id").read_text().strip()


def mlflow_steps(uri: str, run: Path, key: str = "perf/elapsed_seconds") -> list[int]:
    """Every logged point of `key` (a duplicated step shows up twice)."""
    client, run_id = mlflow_run(uri, run)
    return sorted(m.step for m in client.get_metric_history(run_id, key))


def mlflow_status(uri: str, run: Path) -> str:
    client, run_id = mlflow_run(uri, run)
    return client.get_run(run_id).info.status


def assert_complete(uri: str, run: Path, steps: int = 3) -> None:
    """Every step 0..steps exactly once in metrics.jsonl and in MLflow, the run FINISHED."""
    assert file_steps(run) == list(range(steps + 1))
    assert mlflow_steps(uri, run) == list(range(steps + 1))
    assert mlflow_steps(uri, run, "reward/mean") == list(range(steps))
    assert mlflow_status(uri, run) == "FINISHED"
    assert (Path(run) / "summary.json").exists()
