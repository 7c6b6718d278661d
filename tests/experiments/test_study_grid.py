"""Grid expansion (product, zip, exclude, seeds, stable ids) and validation errors that name the key."""

from __future__ import annotations

import re

import pytest
import yaml

from harness.experiment import StudyError, load_study, parse_study
from harness.experiment.expand import expand
from harness.experiment.ids import format_value, short_names

BASE = {
    "task": {"name": "arithmetic"},
    "train": {"steps": 2, "prompts_per_step": 4, "group_size": 4},
    "eval": {"num_prompts": 4, "n_samples": 2, "ks": [1, 2]},
    "objective": {"preset": "grpo"},
}


def cells(raw: dict, scale: str | None = None, validate: bool = True):
    study = parse_study({"base": BASE, **raw}, name="t", scale=scale)
    return study, expand(study, validate=validate)


def test_product_seeds_and_ids():
    study, cs = cells({"grid": {"objective.preset": ["grpo", "dapo"], "train.group_size": [4, 8]}, "seeds": [1, 2]})
    assert len(cs) == 8
    assert [c.id for c in cs[:3]] == [
        "preset=grpo__group_size=4__seed=1",
        "preset=grpo__group_size=4__seed=2",
        "preset=grpo__group_size=8__seed=1",
    ]
    c = cs[-1]
    assert c.id == "preset=dapo__group_size=8__seed=2"
    assert c.config.objective.algorithm == "dapo" and c.config.train.group_size == 8 and c.config.seed == 2
    assert c.config.tracking.experiment == "t/smoke" and c.config.tracking.run_name == c.id
    assert c.config.tracking.tags["objective.preset"] == "dapo" and c.config.tracking.tags["seed"] == "2"
    assert c.tags["variant"] == "preset=dapo__group_size=8"
    assert len({c.id for c in cs}) == len(cs)


def test_ids_are_stable_across_loads():
    raw = {"grid": {"train.lr": [1e-4, 3e-4]}, "seeds": [0, 1]}
    assert [c.id for c in cells(raw)[1]] == [c.id for c in cells(raw)[1]]
    assert cells(raw)[1][0].id == "lr=0.0001__seed=0"


def test_zip_varies_keys_together_with_arm_label():
    raw = {
        "zip": [{"arm": ["grpo", "gspo"], "objective.preset": ["grpo", "gspo"], "train.mini_batches": [2, 4]}],
        "grid": {"rollout.router_noise": [0.0, 0.5]},
        "seeds": [3],
        "base": {**BASE, "model": {"name": "tiny-moe"}},
    }  # router noise is refused on a dense model
    study, cs = cells(raw)
    assert [c.id for c in cs] == [
        "arm=grpo__router_noise=0.0__seed=3",
        "arm=grpo__router_noise=0.5__seed=3",
        "arm=gspo__router_noise=0.0__seed=3",
        "arm=gspo__router_noise=0.5__seed=3",
    ]
    gspo = cs[2].config
    assert gspo.objective.ratio == "sequence" and gspo.train.mini_batches == 4
    assert cs[0].config.train.mini_batches == 2
    assert cs[2].tags["arm"] == "gspo" and cs[2].tags["train.mini_batches"] == "4"
    assert study.axis_names() == ["arm", "rollout.router_noise", "seed"]


def test_arm_overrides_set_the_arms_config_without_touching_the_other_arms():
    zip_ = [{"arm": ["grpo", "tis"], "objective.preset": ["grpo", "grpo"], "objective.kl_coef": [0.0, 0.01]}]
    _, before = cells({"zip": zip_})
    extra = {"tis": {"objective.rollout_is": "token_truncate", "objective.rollout_is_clip_max": 2.0}}
    study, after = cells({"zip": zip_, "arm_overrides": extra})
    assert [c.id for c in after] == [c.id for c in before] == ["arm=grpo__seed=0", "arm=tis__seed=0"]
    assert after[0].config_yaml() == before[0].config_yaml()  # the other arm: the same file, tags included
    assert after[0].overrides == before[0].overrides and after[0].tags == before[0].tags
    tis = after[1]
    assert tis.config.objective.rollout_is == "token_truncate" and tis.config.objective.rollout_is_clip_max == 2.0
    assert before[1].config.objective.rollout_is == "none"
    assert "objective.rollout_is" not in tis.tags and "objective.rollout_is" not in tis.axes  # not an axis
    assert tis.overrides["objective.rollout_is"] == "token_truncate"  # listed (harness grid --list)
    assert study.axis_names() == ["arm", "seed"]


@pytest.mark.parametrize(
    "extra, needle",
    [
        ({"nope": {"train.lr": 1e-4}}, "arm_overrides.nope: not an arm"),
        ({"b": {"objective.preset": "dapo"}}, "arm_overrides.b.objective.preset: an axis"),
        ({"b": {"train.steps": 3}}, "arm_overrides.b.train.steps: scales.smoke overrides it too"),
        ({"b": {"objective.bogus": 1}}, "arm_overrides.b.objective.bogus"),
        ({"c": {"train.lr": 1e-4}, "d": {"train.lr": 1e-4}}, "arms ['c', 'd'] set the same values"),  # one arm
    ],
)
def test_arm_overrides_errors_name_the_key(extra, needle):
    raw = {
        "zip": [{"arm": ["a", "b", "c", "d"], "objective.preset": ["grpo", "dapo", "grpo", "grpo"]}],
        "arm_overrides": extra,
        "scales": {"smoke": {"train.steps": 1}},
    }
    with pytest.raises(StudyError) as err:
        cells(raw, validate=False)
    assert needle in str(err.value)


def test_zip_without_label_lists_every_key():
    _, cs = cells({"zip": [{"objective.eps_low": [0.2, 0.1], "objective.eps_high": [0.2, 0.28]}]})
    assert [c.id for c in cs] == ["eps_low=0.2__eps_high=0.2__seed=0", "eps_low=0.1__eps_high=0.28__seed=0"]


def test_exclude_drops_matching_cells_by_dotted_or_short_key():
    raw = {
        "grid": {"objective.preset": ["grpo", "dapo"], "train.group_size": [4, 8]},
        "seeds": [1, 2],
        "exclude": [{"objective.preset": "dapo", "group_size": 4}, {"seed": 2, "preset": "grpo"}],
    }
    _, cs = cells(raw)
    assert sorted(c.id for c in cs) == sorted(
        [
            "preset=grpo__group_size=4__seed=1",
            "preset=grpo__group_size=8__seed=1",
            "preset=dapo__group_size=8__seed=1",
            "preset=dapo__group_size=8__seed=2",
        ]
    )


def test_scale_overrides_and_scale_seeds():
    raw = {
        "grid": {"objective.preset": ["grpo"]},
        "seeds": [1, 2, 3],
        "scales": {"smoke": {"train.steps": 1, "seeds": [7]}, "cpu": {"train": {"steps": 9}}},
    }
    _, smoke = cells(raw, "smoke")
    assert [c.id for c in smoke] == ["preset=grpo__seed=7"] and smoke[0].config.train.steps == 1
    _, cpu = cells(raw, "cpu")
    assert len(cpu) == 3 and cpu[0].config.train.steps == 9
    assert cpu[0].config.train.group_size == 4  # a section mapping merges, it does not replace the section


def test_value_formatting_is_path_safe():
    assert format_value({"easy": 1, "hard": 3}) == "easy-1_hard-3"
    assert format_value("a/b c") == "a-b-c"
    assert format_value(None) == "none" and format_value(True) == "true" and format_value(3e-4) == "0.0003"
    assert short_names(["train.lr", "warm_start.lr", "objective.preset"]) == {
        "train.lr": "train.lr",
        "warm_start.lr": "warm_start.lr",
        "objective.preset": "preset",
    }
    _, cs = cells({"grid": {"task.difficulty_mix": [{"easy": 1}, {"easy": 1, "hard": 1}]}})
    assert [c.id for c in cs] == ["difficulty_mix=easy-1__seed=0", "difficulty_mix=easy-1_hard-1__seed=0"]


def test_colliding_ids_are_rejected():
    with pytest.raises(StudyError, match="same id"):
        cells({"grid": {"tracking.tags.note": ["a/b", "a-b"]}}, validate=False)


@pytest.mark.parametrize(
    "raw, needle",
    [
        ({"gird": {"objective.preset": ["grpo"]}}, "gird"),
        ({"grid": {"objective.epsilon_high": [0.2]}}, "objective.epsilon_high"),
        ({"grid": {"trian.lr": [0.1]}}, "trian.lr"),
        ({"grid": {"train.lr.value": [0.1]}}, "train.lr.value"),
        ({"grid": {"objective.preset": "grpo"}}, "grid.objective.preset"),
        ({"grid": {"objective.preset": ["grpo", "grpo"]}}, "grid.objective.preset"),
        ({"zip": [{"objective.preset": ["grpo", "dapo"], "train.lr": [0.1]}]}, "zip[0]"),
        ({"zip": [{"arm": ["a", "b"], "objective.bogus": [1, 2]}]}, "objective.bogus"),
        ({"grid": {"objective.preset": ["grpo"]}, "exclude": [{"train.lr": 0.1}]}, "exclude[0].train.lr"),
        ({"grid": {"objective.preset": ["grpo"]}, "exclude": [{"objective.preset": "dapo"}]}, "exclude[0]"),
        ({"seeds": [1, "two"]}, "seeds"),
        ({"scale": "tpu"}, "scale"),
        ({"scales": {"tpu": {"train.steps": 1}}}, "scales.tpu"),
        ({"scales": {"smoke": {"train.stepz": 1}}}, "train.stepz"),
        ({"grid": {"train.steps": [1, 2]}, "scales": {"smoke": {"train.steps": 1}}}, "scales.smoke"),
        ({"grid": {"seed": [1, 2]}}, "seed"),
    ],
)
def test_structural_errors_name_the_key(raw, needle):
    with pytest.raises(StudyError) as err:
        cells(raw, validate=False)
    assert needle in str(err.value)


@pytest.mark.parametrize(
    "grid, needles",
    [
        ({"train.group_size": [4, "eight"]}, ["train.group_size", "group_size=eight"]),  # wrong type
        ({"objective.preset": ["grpo", "nonsense"]}, ["objective.preset", "preset=nonsense"]),  # unknown preset
        ({"train.lr": [1e-4, -1.0]}, ["train.lr", "lr=-1.0"]),  # out of range
        ({"objective.agg": ["token_mean", "token_sum"]}, ["objective", "agg=token_sum"]),  # not an allowed value
        ({"train.mini_batches": [1, 3]}, ["train.mini_batches", "mini_batches=3"]),  # cross-field rule
    ],
)
def test_every_cell_is_validated_before_any_job(grid, needles):
    with pytest.raises(StudyError) as err:
        cells({"grid": grid})
    for n in needles:
        assert n in str(err.value)


@pytest.mark.parametrize(
    "name",
    [
        "demo",
        "length_bias",
        "difficulty_bias",
        "moe_stability",
        "tune_demo",
        "dpo_displacement",
        "clip_higher",
        "passk",
    ],
)
@pytest.mark.parametrize("scale", ["smoke", "cpu", "gpu"])
def test_shipped_studies_validate_at_every_scale(name, scale):
    study = load_study(name, scale)
    assert study.cells and len({c.id for c in study.cells}) == len(study.cells)
    assert all(c.config.tracking.experiment == f"{name}/{scale}" for c in study.cells)


def test_shipped_study_shapes():
    assert len(load_study("length_bias", "cpu").seeds) >= 3
    moe = load_study("moe_stability", "cpu")
    corrections = {"grpo_tis", "grpo_mis", "icepop", "grpo_opsm"}  # the rollout-correction arms
    assert {c.axes["arm"] for c in moe.cells} == {"grpo", "grpo_r3", "gspo"} | corrections  # the probe has five
    assert set(moe.probe["arms"]) == {"grpo", "grpo_r3", "gspo", "cispo", "grpo_tis"}
    by_arm = {c.axes["arm"]: c.config.objective for c in moe.cells}
    assert (by_arm["grpo_tis"].rollout_is, by_arm["grpo_tis"].rollout_is_clip_max) == ("token_truncate", 2.0)
    assert (by_arm["grpo_mis"].rollout_is, by_arm["grpo_mis"].rollout_is_clip_max) == ("sequence_mask", 2.0)
    assert (by_arm["icepop"].rollout_is_clip_min, by_arm["icepop"].rollout_is_clip_max) == (0.5, 5.0)
    assert by_arm["grpo_opsm"].off_policy_mask_threshold == 0.1 and by_arm["grpo"].rollout_is == "none"
    assert all(by_arm[a].kl_coef == 0.0 and by_arm[a].ratio == "token" for a in corrections)
    assert all(c.config.train.mini_batches >= 4 and c.config.model.name == "tiny-moe" for c in moe.cells)
    assert {c.config.rollout.router_noise for c in moe.cells} == {0.5}  # the probe sweeps 0 / 0.5 / 1
    assert moe.probe["router_noise"] == [0.0, 0.5, 1.0]
    assert all(c.config.rollout.dtype == "bfloat16" and c.config.model.dtype == "float32" for c in moe.cells)
    diff = load_study("difficulty_bias", "cpu")
    assert {c.config.objective.scale for c in diff.cells} == {"group_std", "none", "batch_std"}
    assert all(c.config.train.group_size == 16 for c in diff.cells)
    lb = load_study("length_bias", "cpu")
    assert len(lb.seeds) == 5  # the report's 5 seeds
    # countdown sampled hot (where grpo learns in 20 steps; experiments/length_bias.yaml), evaluated the same way
    assert all(
        c.config.task.name == "countdown" and c.config.rollout.temperature == 1.4 and c.config.eval.temperature == 1.4
        for c in lb.cells
    )
    assert {c.axes["arm"]: c.config.objective.agg for c in lb.cells} == {
        "grpo": "seq_mean_token_mean",
        "grpo_token_mean": "token_mean",
        "dr_grpo": "seq_mean_token_sum_norm",
    }
    assert all(c.config.objective.kl_coef == 0.0 for c in lb.cells)
    gpu = load_study("length_bias", "gpu").cells[0].config
    assert gpu.rollout.backend == "vllm" and gpu.model.name == "smollm2-135m"


REPORTED_ARMS = {  # the zip each report ran (analysis/reports/<study>.md), verbatim
    "moe_stability": {
        "arm": ["grpo", "grpo_r3", "gspo"],
        "objective.preset": ["grpo", "grpo", "gspo"],
        "objective.routing_replay": [False, True, False],
    },
    "dpo_displacement": {"arm": ["dpo", "rpo"], "objective.dpo_sft_coef": [0.0, 1.0]},
}


@pytest.mark.parametrize("name", sorted(REPORTED_ARMS))
@pytest.mark.parametrize("scale", ["smoke", "cpu", "gpu"])
def test_arms_added_to_a_reported_study_leave_its_cells_unchanged(name, scale):
    """The study as its report ran it (its arms alone, no arm_overrides) gives the same config files,
    tags included, as the study with the arms added since: the reproduction holds, nothing retrains."""
    from harness.experiment.load import find_study

    path = find_study(name)
    raw = yaml.safe_load(path.read_text())
    reported = {**raw, "zip": [REPORTED_ARMS[name]]}  # a column added to the zip would tag every cell
    reported.pop("arm_overrides", None)
    now = {c.id: c.config_yaml() for c in load_study(name, scale).cells}
    then = load_study(reported, scale, path=path).cells
    assert then and all(now[c.id] == c.config_yaml() for c in then)
    assert len(now) > len(then)  # the added arms are there


def test_seed_figure_study_shapes():
    """The arms of the three figure studies differ in one key each (docs/studies.md (d)-(f))."""
    dpo = load_study("dpo_displacement", "cpu")
    assert {
        c.axes["arm"]: (c.config.objective.dpo_sft_coef, c.config.objective.dpo_shift_lambda) for c in dpo.cells
    } == {
        "dpo": (0.0, 1.0),
        "rpo": (1.0, 1.0),
        "dpo_shift": (0.0, 0.75),  # DPO-Shift (report: "DPO-Shift")
    }
    assert all(c.config.dpo.rounds == 1 and c.config.objective.algorithm == "dpo" for c in dpo.cells)  # fixed pairs
    clip = load_study("clip_higher", "cpu")
    assert {c.axes["arm"]: (c.config.objective.eps_low, c.config.objective.eps_high) for c in clip.cells} == {
        "clip_higher": (0.2, 0.28),
        "symmetric": (0.2, 0.2),
    }
    assert all(c.config.objective.algorithm == "dapo" and c.config.train.inner_epochs == 4 for c in clip.cells)
    pk = load_study("passk", "cpu")
    assert pk.final_eval == {"n_samples": 64, "num_prompts": 256, "vs_initial": True}
    assert len(pk.seeds) == 3


@pytest.mark.parametrize(
    "final_eval, needle",
    [
        (
            {"n_sample": 8},
            "unknown key 'scales.smoke.final_eval.n_sample' (did you mean 'n_samples'?); "
            "allowed keys here: ['n_samples', 'num_prompts', 'vs_initial']",
        ),
        ({"n_samples": 0}, "'scales.smoke.final_eval.n_samples': Input should be greater than or equal to 1 (got 0)"),
        ({"num_prompts": "all"}, "'scales.smoke.final_eval.num_prompts': Input should be a valid integer (got 'all')"),
        ({"vs_initial": "yes"}, "'scales.smoke.final_eval.vs_initial': Input should be a valid boolean (got 'yes')"),
    ],
)
def test_final_eval_errors_name_the_key(final_eval, needle):
    with pytest.raises(StudyError, match=re.escape(needle)):
        cells({"grid": {"train.lr": [1e-4]}, "scales": {"smoke": {"final_eval": final_eval}}})


def test_final_eval_flags():
    from harness.experiment.files import final_eval_flags

    assert final_eval_flags({}) == ""
    assert final_eval_flags({"n_samples": 8}) == "--n-samples 8"
    assert (
        final_eval_flags({"n_samples": 64, "num_prompts": 256, "vs_initial": True})
        == "--n-samples 64 --num-prompts 256 --vs-initial"
    )
    assert final_eval_flags({"vs_initial": False}) == ""


def test_cli_grid_list(capsys):
    from harness.cli import main

    assert main(["grid", "length_bias", "--scale", "smoke", "--list"]) == 0
    out = capsys.readouterr().out
    assert "3 cells" in out and "arm=dr_grpo__seed=1" in out and "objective.preset=dr_grpo" in out


def test_cli_grid_error_exit_code(tmp_path, capsys):
    from harness.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("base: {}\ngrid: {train.group_size: [4, eight]}\n")
    assert main(["grid", str(bad)]) == 2
    assert "train.group_size" in capsys.readouterr().err


def test_write_configs_only_rewrites_changed_files(tmp_path):
    import time

    from harness.experiment import write_configs

    study = load_study("demo", "smoke")
    p = write_configs(study, tmp_path)[0]
    old = p.stat().st_mtime_ns
    time.sleep(0.01)
    write_configs(load_study("demo", "smoke"), tmp_path)
    assert p.stat().st_mtime_ns == old
    from harness.config import load_config

    assert load_config(p).tracking.run_name == study.cells[0].id
