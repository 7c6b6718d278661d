"""A run killed during rollout, update, checkpoint write, metrics flush or MLflow flush, then
rerun with the same config, finishes with every step exactly once in metrics.jsonl and in MLflow; with the
checkpoint written in a thread too (train.checkpoint_background: a kill in the writer reaches the loop at its
next wait for the writer, as the whole process would have died there).

The kill is `Killed` (a BaseException) raised at the chosen line, standing for SIGKILL there:
the trainer's code after that line never runs (its `except BaseException` only marks the MLflow
run KILLED, which the rerun overwrites). Real SIGKILLs at random moments, in a subprocess:
test_kill_random.py (slow) and benchmarks/faults.py."""

from __future__ import annotations

import pytest
import torch
from faults_helpers import BACKGROUND, Killed, assert_complete, file_steps, tiny


def _kill_on_call(monkeypatch, owner, name: str, nth: int, partial_write: bool = False):
    """Replace owner.name by a wrapper whose nth call (1-based) raises Killed (after writing half
    of the file first, for torch.save with partial_write)."""
    real = getattr(owner, name)
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == nth:
            if partial_write:
                real(*args, **kwargs)
                path = args[1]
                data = open(path, "rb").read()
                open(path, "wb").write(data[: len(data) // 2])
            raise Killed(f"{name} call {nth}")
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


def _mlflow_log_batch(monkeypatch, kill_step: int):
    from mlflow.tracking import MlflowClient

    real = MlflowClient.log_batch

    def log_batch(self, run_id, metrics=(), *args, **kwargs):
        if metrics and metrics[0].step == kill_step:
            raise Killed(f"MLflow log_batch of step {kill_step}")
        return real(self, run_id, metrics, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", log_batch)


PHASES = ["rollout", "update", "checkpoint_write", "metrics_flush", "mlflow_flush"]


@pytest.mark.parametrize("background", [False, True], ids=["sync", "background"])  # train.checkpoint_background
@pytest.mark.parametrize("phase", PHASES)
def test_killed_then_rerun_has_every_step_once(phase, background, tmp_path, mlflow_uri, monkeypatch):
    import harness.train.rl.step as loop
    from harness.train import train
    from harness.train.core.rundir import RunDir

    run = tmp_path / "run"
    cfg = tiny(*([BACKGROUND] if background else []))
    with monkeypatch.context() as m:
        if phase == "rollout":
            _kill_on_call(m, loop, "collect", 3)  # step 2's rollout
        elif phase == "update":
            _kill_on_call(m, loop, "policy_update", 2)  # step 1's update
        elif phase == "checkpoint_write":
            _kill_on_call(m, torch, "save", 2, partial_write=True)  # step 1's trainer_state.pt, half written
        elif phase == "metrics_flush":
            _kill_on_call(m, RunDir, "flush", 2)  # checkpoint step_000001 on disk, its metrics not yet flushed
        else:
            _mlflow_log_batch(m, kill_step=1)  # metrics.jsonl has step 1, MLflow not yet
        with pytest.raises(Killed):
            train(cfg, run)
    logged = file_steps(run) if (run / "metrics.jsonl").exists() else []
    assert logged == list(range(len(logged))) and len(logged) <= 3  # a prefix, no torn line read as a step
    train(cfg, run)
    assert_complete(mlflow_uri, run)
    assert not [p for p in (run / "checkpoints").iterdir() if p.name.startswith(".")]  # no partial write left behind
