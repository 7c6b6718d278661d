"""Run-config validation: bad input fails before any model loads, naming the dotted key."""

import pytest

from harness.config import ConfigError, build_config, dump_config, load_config

SMOKE = "experiments/runs/smoke.yaml"


def test_smoke_config_loads_with_grpo():
    cfg = load_config(SMOKE)
    assert cfg.objective.algorithm == "grpo"
    assert cfg.objective.agg == "seq_mean_token_mean"


def test_unknown_key_names_dotted_path_and_allowed_keys():
    with pytest.raises(ConfigError) as e:
        load_config(SMOKE, ["train.stepz=3"])
    msg = str(e.value)
    assert "train.stepz" in msg and "steps" in msg and "group_size" in msg


def test_unknown_top_level_section():
    with pytest.raises(ConfigError, match="'trainer'"):
        build_config({"trainer": {}})


def test_wrong_type_names_key():
    with pytest.raises(ConfigError, match="train.group_size"):
        load_config(SMOKE, ["train.group_size=eight"])


def test_unknown_objective_knob_names_it():
    with pytest.raises(ConfigError, match="eps_hihg"):
        load_config(SMOKE, ["objective.eps_hihg=0.3"])


def test_unknown_preset_lists_presets():
    with pytest.raises(ConfigError) as e:
        load_config(SMOKE, ["objective.preset=grpoo"])
    assert "objective.preset" in str(e.value) and "dapo" in str(e.value)


def test_rloo_with_group_size_one_is_impossible():
    with pytest.raises(ConfigError, match="train.group_size"):
        load_config(SMOKE, ["objective.preset=rloo", "train.group_size=1"])


def test_unknown_task_and_model_names():
    with pytest.raises(ConfigError, match="task.name"):
        load_config(SMOKE, ["task.name=chess"])
    with pytest.raises(ConfigError, match="model.name"):
        load_config(SMOKE, ["model.name=gpt-17"])


def test_minibatch_must_divide_batch():
    with pytest.raises(ConfigError, match="train.mini_batches"):
        load_config(SMOKE, ["train.mini_batches=5"])  # 96 x 8 = 768 rows


def test_preset_then_override_and_dr_grpo_constant():
    cfg = load_config(SMOKE, ["objective.preset=dapo", "objective.eps_high=0.3"])
    assert cfg.objective.algorithm == "dapo" and cfg.objective.eps_high == 0.3 and cfg.objective.agg == "token_mean"
    dr = load_config(SMOKE, ["objective.preset=dr_grpo", "rollout.max_new_tokens=40"])
    assert dr.objective.norm_constant == 40.0  # the Dr.GRPO constant = max generation length


def test_resolved_config_round_trips(tmp_path):
    cfg = load_config(SMOKE, ["objective.preset=cispo", "train.steps=3"])
    path = tmp_path / "config.yaml"
    path.write_text(dump_config(cfg))
    again = load_config(path)
    assert again == cfg


def test_off_policy_updates_without_a_ratio_warn():
    """GPG (ratio none) with several optimizer steps per batch updates on stale samples with no
    importance correction: allowed, but said; on-policy (1 mini-batch, 1 epoch) is silent."""
    with pytest.warns(UserWarning, match=r"objective.ratio=none .*mini_batches=4"):
        load_config(SMOKE, ["objective.preset=gpg", "train.mini_batches=4"])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config(SMOKE, ["objective.preset=gpg", "train.mini_batches=1", "train.inner_epochs=1"])
        load_config(SMOKE, ["objective.preset=grpo", "train.mini_batches=4"])
