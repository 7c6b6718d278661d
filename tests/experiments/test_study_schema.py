"""The study file's schema (harness/experiment/schema.py): good files parse, every bad key or
value is an error naming the key, the value and what is allowed, before any model loads."""

from pathlib import Path

import pytest
import yaml

from harness.experiment import StudyError, load_study
from harness.experiment.schema import TOP_LEVEL_KEYS, ScaleSection, StudyFile, validate_study_file

STUDIES = sorted(Path("experiments").glob("*.yaml"))
LR = {"train.lr": {"type": "float", "low": 1e-5, "high": 1e-3, "log": True}}


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_every_committed_study_parses(path):
    spec = validate_study_file(yaml.safe_load(path.read_text()), str(path))
    assert isinstance(spec, StudyFile)


def test_a_file_with_every_key_parses():
    raw = {
        "name": "everything",
        "description": "all keys",
        "base": {"train": {"steps": 2}},
        "grid": {"objective.preset": ["grpo", "dapo"]},
        "zip": [{"arm": ["a", "b"], "train.lr": [1e-4, 1e-4], "train.mini_batches": [1, 2]}],
        "arm_overrides": {"b": {"objective.kl_coef": 0.0}},
        "seeds": [1, 2],
        "exclude": [{"preset": "dapo", "arm": "b"}],
        "scale": "smoke",
        "scales": {
            "smoke": {
                "train.steps": 1,
                "seeds": [3],
                "final_eval": {"n_samples": 2},
                "probe": {"batches": 1, "router_noise": [0, 0.5]},
                "reward_model": {"steps": 1},
            },
            "cpu": None,
        },
        "probe": {
            "arms": {"x": {"objective.kl_coef": 0.0}},
            "batches": 2,
            "probe_prompts": 4,
            "probe_samples": 2,
            "prompts_per_batch": 2,
        },
        "final_eval": {"n_samples": 4},
        "reward_model": {"pairs": "pairs.jsonl", "base": "tiny-dense", "steps": 3, "lr": 1e-4, "batch_size": 4},
        "tune": {
            "metric": "eval/pass_at_1",
            "direction": "minimize",
            "trials": 3,
            "timeout_s": 60,
            "sampler": {"name": "tpe", "seed": 0, "n_startup_trials": 2},
            "pruner": {"name": "median", "n_warmup_steps": 1},
            "space": {
                **LR,
                "train.group_size": {"type": "int", "low": 2, "high": 8, "step": 2},
                "objective.preset": {"type": "categorical", "choices": ["grpo", "dapo"]},
            },
        },
        "hypotheses": [
            {
                "name": "rise",
                "metric": "eval/pass_at_1",
                "at": {"eval_step": 2},
                "contrast": "a - b",
                "direction": "equivalent",
                "sesoi": 0.02,
                "alpha": 0.1,
                "value": 0,
            }
        ],
        "correction": "none",
    }
    spec = validate_study_file(raw)
    assert set(TOP_LEVEL_KEYS) == set(raw)  # the test covers every key the schema has
    assert set(ScaleSection.model_fields) == {
        "seeds",
        "final_eval",
        "probe",
        "reward_model",
    }  # the keys a scale may set besides run-config keys
    assert spec.tune.space["train.group_size"].step == 2 and spec.scales["cpu"] is None
    assert spec.hypotheses[0].at == {"eval_step": 2} and spec.correction == "none"


def test_top_level_final_eval_is_merged_with_the_scales(tmp_path):
    raw = {
        "base": {"train": {"steps": 1}},
        "final_eval": {"n_samples": 4},
        "scales": {"cpu": {"final_eval": {"n_samples": 8}}},
    }
    assert load_study(raw, "smoke", validate=False).final_eval == {"n_samples": 4}
    assert load_study(raw, "cpu", validate=False).final_eval == {"n_samples": 8}


@pytest.mark.parametrize(
    "raw, needles",
    [
        # unknown keys: named, with what is allowed there (and the nearest name)
        ({"gird": {"objective.preset": ["grpo"]}}, ["unknown key 'gird'", "did you mean 'grid'", "'scales'"]),
        ({"probe": {"batchez": 2}}, ["unknown key 'probe.batchez'", "'batches'", "'probe_prompts'"]),
        ({"final_eval": {"samples": 2}}, ["unknown key 'final_eval.samples'", "'n_samples'"]),
        (
            {"tune": {"space": {"train.lr": {"type": "float", "low": 1, "high": 2, "lo": 0}}}},
            ["unknown key 'tune.space.train.lr.lo'", "did you mean 'low'", "'high'"],
        ),
        ({"tune": {"metrik": "x", "space": LR}}, ["unknown key 'tune.metrik'", "'metric'"]),
        # dotted run-config keys, wherever they appear
        (
            {"scales": {"smoke": {"train.stepz": 1}}},
            ["scales.smoke", "'train.stepz' is not a run-config key", "'steps'"],
        ),
        ({"probe": {"arms": {"a": {"objective.bogus": 1}}}}, ["probe.arms.a.objective.bogus", "'kl_coef'"]),
        ({"tune": {"space": {"train.lrr": {"type": "float", "low": 0, "high": 1}}}}, ["tune.space.train.lrr", "'lr'"]),
        ({"zip": [{"arm": ["a"], "objective.bogus": [1]}]}, ["zip[0]", "'objective.bogus' is not a run-config key"]),
        # values: the key, the value given, what is allowed
        ({"scale": "tpu"}, ["'scale'", "'smoke', 'cpu', 'gpu' or 'dataset'", "'tpu'"]),
        ({"scales": {"tpu": {"train.steps": 1}}}, ["'scales.tpu'", "'smoke', 'cpu', 'gpu' or 'dataset'"]),
        ({"seeds": [1, True]}, ["'seeds'", "integers", "True"]),
        ({"seeds": [1, 1]}, ["'seeds'", "value 1 is listed twice"]),
        ({"scales": {"cpu": {"seeds": ["one"]}}}, ["'scales.cpu.seeds'", "integers", "'one'"]),
        ({"name": "bad name!"}, ["'name'", "letters, digits", "'bad name!'"]),
        ({"base": 3}, ["'base'", "run-config mapping or a path", "(got 3)"]),
        ({"grid": {"objective.preset": "grpo"}}, ["'grid.objective.preset'", "non-empty list", "'grpo'"]),
        ({"grid": {"seed": [1, 2]}}, ["'grid'", "seeds:"]),
        ({"zip": [{"arm": ["a", "a"], "train.lr": [0.1, 0.2]}]}, ["'zip[0]'", "arm: value 'a' is listed twice"]),
        ({"zip": [{"train.lr": [0.1, 0.1], "train.steps": [1, 1]}]}, ["'zip[0]'", "listed twice"]),
        ({"zip": [{"train.lr": [0.1, 0.2], "train.steps": [1]}]}, ["'zip[0]'", "equal lengths"]),
        ({"exclude": [{}]}, ["'exclude[0]'", "at least 1 item"]),
        ({"probe": {"batches": 0}}, ["'probe.batches'", "greater than or equal to 1", "(got 0)"]),
        ({"scales": {"cpu": {"probe": {"batches": True}}}}, ["'scales.cpu.probe.batches'", "valid integer", "True"]),
        ({"probe": {"router_noise": [-0.5]}}, ["'probe.router_noise[0]'", "greater than or equal to 0"]),
        ({"final_eval": {"n_samples": "many"}}, ["'final_eval.n_samples'", "valid integer", "'many'"]),
        (
            {"tune": {"space": {"train.lr": {"type": "float", "low": 1, "high": 0}}}},
            ["'tune.space.train.lr'", "low=1 must be < high=0"],
        ),
        (
            {"tune": {"space": {"train.lr": {"type": "float", "low": 0, "high": 1, "log": True}}}},
            ["'tune.space.train.lr'", "log=true needs low > 0"],
        ),
        (
            {"tune": {"space": {"train.steps": {"type": "int", "low": 1.5, "high": 4}}}},
            ["'tune.space.train.steps.low'", "valid integer", "1.5"],
        ),
        (
            {"tune": {"space": {"train.lr": {"type": "gaussian"}}}},
            ["'tune.space.train.lr'", "float | int | categorical"],
        ),
        (
            {"tune": {"space": {"objective.preset": {"type": "categorical", "choices": []}}}},
            ["'tune.space.objective.preset.choices'", "non-empty list"],
        ),
        ({"tune": {"space": {}}}, ["'tune.space'", "at least 1 item"]),
        ({"tune": {"trials": 0, "space": LR}}, ["'tune.trials'", "greater than or equal to 1", "(got 0)"]),
        ({"tune": {"direction": "up", "space": LR}}, ["'tune.direction'", "'maximize' or 'minimize'", "'up'"]),
        (
            {"tune": {"sampler": {"name": "cmaes"}, "space": LR}},
            ["'tune.sampler.name'", "'tpe' or 'random'", "'cmaes'"],
        ),
        (
            {"tune": {"sampler": {"name": "random", "n_startup_trials": 2}, "space": LR}},
            ["'tune.sampler'", "['n_startup_trials']", "RandomSampler"],
        ),
        (
            {"tune": {"pruner": {"name": "median", "n_startup": 2}, "space": LR}},
            ["'tune.pruner'", "['n_startup']", "'n_startup_trials'"],
        ),
        (
            {"tune": {"pruner": {"name": "none", "n_warmup_steps": 2}, "space": LR}},
            ["'tune.pruner'", "takes no options"],
        ),
    ],
)
def test_bad_files_name_the_key_the_value_and_what_is_allowed(raw, needles):
    with pytest.raises(StudyError) as err:
        validate_study_file(raw, "bad.yaml")
    msg = str(err.value)
    assert msg.startswith("bad.yaml"), msg
    for n in needles:
        assert n in msg, (n, msg)


def test_every_error_of_a_file_is_listed():
    with pytest.raises(StudyError) as err:
        validate_study_file({"scale": "tpu", "seeds": [1, 1], "gird": {}}, "bad.yaml")
    assert "3 errors" in str(err.value)


def test_the_error_comes_before_any_model_or_run_config(tmp_path, monkeypatch, capsys):
    import harness.experiment.expand
    import harness.models.registry
    from harness.cli import main

    def boom(*a, **k):
        raise AssertionError("a model or run config was built")

    monkeypatch.setattr(harness.models.registry, "build_model", boom)
    monkeypatch.setattr(harness.experiment.expand, "build_config", boom)  # where the grid builds its cells
    study = tmp_path / "s.yaml"
    study.write_text("base: {train: {steps: 2}}\ngrid:\n  objective.preset: [grpo]\nprobe: {batches: 0}\n")
    assert main(["grid", str(study)]) == 2
    err = capsys.readouterr().err
    assert "'probe.batches'" in err and "(got 0)" in err and str(study) in err
