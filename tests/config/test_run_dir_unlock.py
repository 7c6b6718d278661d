"""A run that fails before its first completed step does not lock its run directory: the
corrected config is accepted there (the failed attempt's leftovers are cleared); a directory
with a completed step still refuses a different config."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.config import ConfigError, load_config

SMOKE = "experiments/runs/smoke.yaml"
BASE = ["tracking.mlflow=false", "train.steps=2"]


class Reached(Exception):
    """Raised in place of building the policy: the run got past the run-directory checks."""


@pytest.fixture
def failing_policy(monkeypatch):
    import harness.train.run.setup as run_setup

    def fail(cfg, device):
        raise Reached(cfg.train.lr)

    monkeypatch.setattr(run_setup, "initial_policy", fail)


def test_changed_config_is_accepted_after_a_failure_before_the_first_step(tmp_path, failing_policy):
    from harness.train import train

    out = tmp_path / "run"
    with pytest.raises(Reached):
        train(load_config(SMOKE, [*BASE, "train.lr=1e-4"]), out)
    assert (out / "config.yaml").exists()
    # leftovers of the failed attempt that belong to its config
    (out / "mlflow_run_id").write_text("abc")
    (out / "pairs.jsonl").write_text("{}\n")
    (out / "eval_prompts").mkdir()
    (out / "eval_prompts" / "step_000000.json").write_text("{}")
    with pytest.raises(Reached) as e:
        train(load_config(SMOKE, [*BASE, "train.lr=2e-4"]), out)
    assert e.value.args == (2e-4,)
    assert "lr: 0.0002" in (out / "config.yaml").read_text()
    assert not (out / "mlflow_run_id").exists() and not (out / "pairs.jsonl").exists()
    assert not (out / "eval_prompts").exists()


def test_the_cli_accepts_the_corrected_config(tmp_path, failing_policy, capsys):
    out = tmp_path / "run"
    with pytest.raises(Reached):
        main(["train", SMOKE, *BASE, "train.lr=1e-4", "--out", str(out)])
    with pytest.raises(Reached):
        main(["train", SMOKE, *BASE, "train.lr=3e-4", "--out", str(out)])
    assert "no completed step" in capsys.readouterr().out


def test_a_run_with_a_completed_step_keeps_its_config(tmp_path, failing_policy):
    from harness.train import train

    out = tmp_path / "run"
    with pytest.raises(Reached):
        train(load_config(SMOKE, [*BASE, "train.lr=1e-4"]), out)
    (out / "checkpoints" / "step_000001").mkdir(parents=True)
    (out / "checkpoints" / "latest").write_text("step_000001")
    with pytest.raises(ConfigError, match="different config"):
        train(load_config(SMOKE, [*BASE, "train.lr=2e-4"]), out)
    with pytest.raises(Reached):  # the same config resumes
        train(load_config(SMOKE, [*BASE, "train.lr=1e-4"]), out)
