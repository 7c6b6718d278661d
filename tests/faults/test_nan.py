"""NaN or inf in a reward or a loss: train.nan_policy=stop ends the run naming the step and the
tensor, before any update with it, its checkpoints intact; skip_step skips that step's update.
The NaN is injected (into the rollout's rewards, or the loss the objective returns): a real
run that diverges on purpose in seconds is not reproducible here."""

from __future__ import annotations

import pytest
import torch
from faults_helpers import TINY, file_steps, mlflow_status, mlflow_steps, tiny
from safetensors.torch import load_file

from harness.cli import main
from harness.config import ConfigError, load_config
from harness.faults import NonFiniteError
from harness.train.core.rundir import verify


def test_nan_policy_is_validated():
    with pytest.raises(ConfigError) as e:
        load_config("experiments/runs/smoke.yaml", ["train.nan_policy=ignore"])
    msg = str(e.value)
    assert "train.nan_policy" in msg and "ignore" in msg and "'stop' or 'skip_step'" in msg, msg
    assert load_config("experiments/runs/smoke.yaml", []).train.nan_policy == "stop"


def _nan_reward_at(monkeypatch, step: int):
    import harness.train.rl.step as loop

    real, calls = loop.collect, {"n": 0}

    def collect(*a, **k):
        ep, coll = real(*a, **k)
        calls["n"] += 1
        if calls["n"] == step + 1:
            ep.rewards[5] = float("nan")
        return ep, coll

    monkeypatch.setattr(loop, "collect", collect)


def _bad_loss_at(monkeypatch, step: int, value: float):
    import harness.train.core.forward as forward

    real, calls = forward.objective_loss, {"n": 0}

    def objective_loss(*a, **k):
        loss, metrics = real(*a, **k)
        calls["n"] += 1
        return (loss + value if calls["n"] == step + 1 else loss), metrics

    monkeypatch.setattr(forward, "objective_loss", objective_loss)


def test_nan_reward_stops_naming_step_and_tensor(tmp_path, mlflow_uri, monkeypatch):
    from harness.train import train

    run = tmp_path / "run"
    _nan_reward_at(monkeypatch, 1)
    with pytest.raises(NonFiniteError) as e:
        train(tiny(), run)
    msg = str(e.value)
    assert msg.startswith("step 1: reward has 1 NaN and 0 inf of 8 values (first at index 5)"), msg
    assert "step_000000 (before this step) is intact" in msg, msg
    assert verify(run / "checkpoints" / "step_000000") is None
    assert [p.name for p in (run / "checkpoints").glob("step_*")] == ["step_000000"]
    assert file_steps(run) == [0]
    assert mlflow_status(mlflow_uri, run) == "FAILED"


def test_inf_loss_stop_via_cli(tmp_path, mlflow_uri, monkeypatch, capsys):
    run = tmp_path / "run"
    _bad_loss_at(monkeypatch, 2, float("inf"))
    assert main(["train", "experiments/runs/smoke.yaml", *TINY, "--out", str(run)]) == 1
    err = capsys.readouterr().err
    assert "NonFiniteError: step 2: loss/policy is inf (epoch 0, mini-batch 0" in err and "Traceback" not in err, err
    assert "train.nan_policy=skip_step" in err
    assert file_steps(run) == [0, 1]


def test_skip_step_skips_the_update_and_goes_on(tmp_path, mlflow_uri, monkeypatch, capsys):
    import json

    from harness.train import train

    run = tmp_path / "run"
    _bad_loss_at(monkeypatch, 1, float("nan"))
    train(tiny("train.nan_policy=skip_step", "train.steps=2"), run)
    assert "WARNING: step 1: loss/policy is nan" in capsys.readouterr().out
    recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert recs[1]["nonfinite/skipped"] == 1.0 and "loss/policy is nan" in recs[1]["nonfinite/what"]
    assert "nonfinite/skipped" not in recs[0]
    # the weights after step 1 are those after step 0: the non-finite update was never applied
    w0 = load_file(next((run / "checkpoints" / "step_000001").glob("*.safetensors")))
    w1 = load_file(next((run / "checkpoints" / "step_000002").glob("*.safetensors")))
    assert all(torch.equal(w0[k], w1[k]) for k in w0)
    assert file_steps(run) == [0, 1, 2] and mlflow_status(mlflow_uri, run) == "FINISHED"


def test_skip_step_nan_reward(tmp_path, mlflow_uri, monkeypatch):
    from harness.train import train

    run = tmp_path / "run"
    _nan_reward_at(monkeypatch, 0)
    train(tiny("train.nan_policy=skip_step"), run)
    assert file_steps(run) == [0, 1, 2, 3] and mlflow_steps(mlflow_uri, run) == [0, 1, 2, 3]
    assert mlflow_steps(mlflow_uri, run, "nonfinite/skipped") == [0]  # the NaN reward/mean itself is not logged
    assert mlflow_status(mlflow_uri, run) == "FINISHED"
