"""Knobs the chosen trainer or objective would ignore are refused when the user changed them
from their default (a one-line warning where a shared base config carries them: the RL
`train` knobs of smoke.yaml under objective.preset=dpo). Shipped configs and studies load."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from harness.config import ConfigError, dump_config, load_config
from harness.experiment import SCALES, StudyError, load_study, parse_study
from harness.experiment.expand import expand

SMOKE = "experiments/runs/smoke.yaml"
DPO = "experiments/runs/dpo.yaml"


def _err(path, overrides) -> str:
    with pytest.raises(ConfigError) as e:
        load_config(path, overrides)
    return str(e.value)


@pytest.mark.parametrize(
    "path, overrides, needles",
    [
        # a dpo: section with an RL preset
        (SMOKE, ["dpo.epochs=3"], ["dpo.epochs=3", "objective.preset=dpo"]),
        (DPO, ["objective.preset=grpo"], ["dpo.rounds", "dpo.num_prompts"]),
        # value-model knobs without the critic baseline
        (SMOKE, ["train.critic_lr=0.01"], ["train.critic_lr", "critic"]),
        (SMOKE, ["objective.vf_coef=0.5"], ["objective.vf_coef", "critic"]),
        (SMOKE, ["objective.lam=0.9"], ["objective.lam"]),
        (SMOKE, ["objective.value_clip=null"], ["objective.value_clip"]),
        # DPO knobs with an RL preset
        (SMOKE, ["objective.dpo_beta=0.2"], ["objective.dpo_beta"]),
        (SMOKE, ["objective.dpo_sft_coef=1.0"], ["objective.dpo_sft_coef"]),
        # RL objective knobs with the dpo preset
        (DPO, ["objective.eps_high=0.3"], ["objective.eps_high", "dpo"]),
        (DPO, ["objective.kl_coef=0.1"], ["objective.kl_coef", "dpo_beta"]),
        (DPO, ["objective.baseline=leave_one_out"], ["objective.baseline"]),
        # norm_constant with an aggregation that does not use it
        (SMOKE, ["objective.norm_constant=64"], ["objective.norm_constant", "seq_mean_token_sum_norm"]),
        # knobs of switched-off features
        (SMOKE, ["train.max_refill_rounds=8"], ["train.max_refill_rounds", "dynamic_sampling"]),
        (SMOKE, ["objective.overlong_penalty=0.5"], ["objective.overlong_penalty", "overlong_buffer"]),
        (
            SMOKE,
            ["objective.preset=gpg", "train.mini_batches=1", "objective.eps_high=0.3"],
            ["objective.eps_high", "clip"],
        ),
    ],
)
def test_ignored_knobs_are_errors(path, overrides, needles):
    msg = _err(path, overrides)
    for n in needles:
        assert n in msg, msg


@pytest.mark.parametrize(
    "path, overrides",
    [
        (SMOKE, ["objective.preset=ppo", "train.critic_lr=0.01", "objective.vf_coef=0.5", "objective.lam=0.9"]),
        (SMOKE, ["objective.preset=dr_grpo", "objective.norm_constant=100"]),
        (SMOKE, ["objective.preset=dr_grpo"]),
        (SMOKE, ["objective.preset=dapo", "train.max_refill_rounds=8", "objective.overlong_penalty=0.5"]),
        (DPO, ["objective.dpo_beta=0.2", "objective.dpo_loss_type=ipo"]),
        (SMOKE, ["objective.preset=rloo", "objective.kl_coef=0.0"]),  # the preset's own k1/reward values are not "set"
    ],
)
def test_used_knobs_load(path, overrides):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config(path, overrides)


def test_rl_train_knobs_of_a_base_config_under_dpo_warn_in_one_line():
    with pytest.warns(UserWarning) as rec:
        cfg = load_config(SMOKE, ["objective.preset=dpo"])
    assert cfg.objective.algorithm == "dpo"
    msgs = [str(w.message) for w in rec if "DPO trainer" in str(w.message)]
    assert len(msgs) == 1 and "\n" not in msgs[0]
    for key in ("train.steps", "train.prompts_per_step", "train.mini_batches"):
        assert key in msgs[0]
    assert "train.lr" not in msgs[0]  # used by the DPO trainer


def test_resolved_configs_round_trip_silently(tmp_path):
    """A run directory's config.yaml (every knob explicit) loads again without errors or warnings."""
    for path, ov in (
        (DPO, []),
        (SMOKE, ["objective.preset=ppo"]),
        (SMOKE, ["objective.preset=dr_grpo"]),
        (SMOKE, ["objective.preset=dapo"]),
        (SMOKE, ["objective.preset=cispo"]),
    ):
        p = tmp_path / "config.yaml"
        p.write_text(dump_config(load_config(path, ov)))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert load_config(p) == load_config(path, ov)


@pytest.mark.parametrize("path", sorted(str(p) for p in Path("experiments/runs").glob("*.yaml")))
def test_shipped_run_configs_load_without_warnings(path, tmp_path):
    from tests.experiments.recipes import sample_overrides  # the dataset recipes read the user's files: the sample here

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config(path, sample_overrides(Path(path).name, tmp_path))


@pytest.mark.parametrize("name", sorted(p.stem for p in Path("experiments").glob("*.yaml")))
def test_shipped_studies_load_at_every_scale(name):
    from harness.config import read_yaml
    from harness.experiment.study import DECLARED_SCALES

    declared = read_yaml(f"experiments/{name}.yaml", "study").get("scales") or {}
    for scale in SCALES:
        if scale in DECLARED_SCALES and scale not in declared:  # e.g. dataset: only where the study defines it
            with pytest.raises(StudyError, match=f"has no scales.{scale} section"):
                load_study(name, scale)
            continue
        assert load_study(name, scale).cells


def test_the_check_runs_per_cell_of_a_study():
    raw = {"base": {"train": {"critic_lr": 0.01}}, "grid": {"objective.preset": ["ppo", "grpo"]}}
    with pytest.raises(StudyError) as e:
        expand(parse_study(raw, name="t"))
    assert "preset=grpo" in str(e.value) and "train.critic_lr" in str(e.value)


@pytest.mark.parametrize(
    "knob, message",
    [
        (
            "objective.simko_tau=0.5",
            "objective.simko_tau=0.5 is read only with objective.simko_top_k > 0, and "
            "objective.simko_top_k=0: drop the knob",
        ),
        (
            "objective.div_low=0.1",
            "objective.div_low=0.1 is read only with objective.clip in ['dppo_kl', 'dppo_tv'], "
            "and objective.clip='ppo': drop the knob",
        ),
        (
            "objective.passk_k=2",
            "objective.passk_k=2 is read only with objective.baseline='passk', and "
            "objective.baseline='group_mean': drop the knob",
        ),
        (
            "objective.prm_lr=0.001",
            "objective.prm_lr=0.001 is read only with objective.baseline='prime', and "
            "objective.baseline='group_mean': drop the knob",
        ),
    ],
)
def test_zoo_knob_without_its_mode_names_the_knob_that_governs_it(knob, message):
    """The error names the knob, when it is read, and the governing knob's value now (not unrelated ones)."""
    with pytest.raises(ConfigError) as err:
        load_config(None, ["objective.preset=grpo", knob])
    assert message in str(err.value)
