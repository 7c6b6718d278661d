"""The config key `trainer:` (rl | dpo) picks the run shell's step; the preset sets it."""

from __future__ import annotations

import pytest
import yaml

from harness.config import ConfigError, dump_config, load_config


def test_presets_set_the_trainer():
    assert load_config("experiments/runs/smoke.yaml").trainer == "rl"
    assert load_config("experiments/runs/smoke.yaml", ["objective.preset=ppo"]).trainer == "rl"
    assert load_config("experiments/runs/dpo.yaml").trainer == "dpo"
    assert load_config("experiments/runs/smoke.yaml", ["trainer=rl"]).trainer == "rl"


def test_a_trainer_that_cannot_run_the_objective_is_an_error():
    with pytest.raises(ConfigError) as err:
        load_config("experiments/runs/smoke.yaml", ["trainer=dpo"])
    msg = str(err.value)
    assert "trainer='dpo'" in msg and "objective.preset='grpo'" in msg and "['rl', 'dpo']" in msg
    with pytest.raises(ConfigError, match="trainer='rl' cannot run objective.preset='dpo'"):
        load_config("experiments/runs/dpo.yaml", ["trainer=rl"])


def test_an_unknown_trainer_names_the_key_and_the_allowed_values():
    with pytest.raises(ConfigError) as err:
        load_config("experiments/runs/smoke.yaml", ["trainer=ppo"])
    assert "'trainer'" in str(err.value) and "'rl' or 'dpo'" in str(err.value) and "'ppo'" in str(err.value)


def test_a_resolved_config_records_the_trainer_and_an_older_one_without_it_still_resumes(tmp_path):
    from harness.train.core.rundir import RunDir
    from harness.train.run.setup import check_same_config

    cfg = load_config("experiments/runs/smoke.yaml")
    assert yaml.safe_load(dump_config(cfg))["trainer"] == "rl"
    run = RunDir(tmp_path / "run")
    old = cfg.to_dict()
    del old["trainer"]  # written before the key existed
    run.config_path.write_text(yaml.safe_dump(old))
    (run.metrics_path).write_text('{"step": 0}\n')  # a completed step: a different config is refused
    check_same_config(run, cfg)  # no error: same run
