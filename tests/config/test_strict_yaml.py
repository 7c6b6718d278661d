"""Run configs, overrides and study files are read strictly, with one clean message each:
duplicate keys, empty files, non-UTF-8 bytes and YAML syntax errors name the file (and line);
a boolean is never taken for a number."""

from __future__ import annotations

import pytest

from harness.config import ConfigError, load_config
from harness.experiment import StudyError, load_study

SMOKE = "experiments/runs/smoke.yaml"


def _write(tmp_path, text: str, name: str = "run.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_duplicate_key_in_a_run_config_names_key_and_line(tmp_path):
    p = _write(tmp_path, "train:\n  steps: 3\n  lr: 1.0e-4\n  steps: 5\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert str(p) in msg and "'steps'" in msg and "line 4" in msg and "duplicate" in msg


def test_duplicate_section_at_top_level(tmp_path):
    p = _write(tmp_path, "train: {steps: 3}\neval: {every: 0}\ntrain: {lr: 0.1}\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert "duplicate key 'train'" in str(e.value) and "line 3" in str(e.value)


def test_duplicate_key_in_a_study_file_and_its_base(tmp_path):
    study = _write(tmp_path, "base: {train: {steps: 2}}\ngrid:\n  train.lr: [0.1]\n  train.lr: [0.2]\n", "s.yaml")
    with pytest.raises(StudyError) as e:
        load_study(str(study))
    assert "'train.lr'" in str(e.value) and "line 4" in str(e.value) and str(study) in str(e.value)
    _write(tmp_path, "eval:\n  every: 0\n  every: 1\n", "base.yaml")
    study2 = _write(tmp_path, "base: base.yaml\nseeds: [0]\n", "s2.yaml")
    with pytest.raises(StudyError) as e:
        load_study(str(study2))
    assert "'every'" in str(e.value) and "base.yaml" in str(e.value)


def test_yaml_merge_keys_are_not_duplicates(tmp_path):
    p = _write(tmp_path, "x: &d {steps: 3, lr: 0.1}\n")  # anchors parse; the unknown key is the error
    with pytest.raises(ConfigError, match="unknown key 'x'"):
        load_config(p)
    p = _write(tmp_path, "train:\n  <<: {steps: 3, lr: 0.1}\n  steps: 4\n")
    cfg = load_config(p)
    assert cfg.train.steps == 4 and cfg.train.lr == 0.1


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_empty_config_file_is_an_error(tmp_path, text):
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(p) in str(e.value) and "empty" in str(e.value)


def test_non_utf8_config_file(tmp_path):
    p = tmp_path / "latin1.yaml"
    p.write_bytes("train:\n  steps: 3  # \xe9t\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(p) in str(e.value) and "UTF-8" in str(e.value)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    p = _write(tmp_path, "train:\n  steps: [3\neval: {}\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(p) in str(e.value) and "line" in str(e.value) and "YAML" in str(e.value)


def test_config_path_that_is_a_folder(tmp_path):
    with pytest.raises(ConfigError, match="not a file|does not exist"):
        load_config(tmp_path)


@pytest.mark.parametrize("override", ["train.steps=[", "train.steps={a: 1", "task.options={a: 1, a: 2}", "=3"])
def test_override_that_does_not_parse(override):
    with pytest.raises(ConfigError) as e:
        load_config(SMOKE, [override])
    assert override in str(e.value)


@pytest.mark.parametrize(
    "override, key",
    [
        ("train.steps=true", "train.steps"),  # int
        ("train.lr=true", "train.lr"),  # float
        ("train.micro_batch_size=true", "train.micro_batch_size"),  # int | None
        ("train.betas=[true, 0.9]", "train.betas"),  # tuple of floats
        ("eval.ks=[1, true]", "eval.ks"),  # list of ints
        ("task.difficulty_mix={easy: true}", "task.difficulty_mix"),  # dict of floats
        ("seed=false", "seed"),  # top level
        ("objective.overlong_buffer=true", "objective.overlong_buffer"),  # objective knobs (int)
        ("objective.eps_high=true", "objective.eps_high"),  # objective knobs (float)
    ],
)
def test_booleans_are_not_numbers(override, key):
    with pytest.raises(ConfigError) as e:
        load_config(SMOKE, [override])
    msg = str(e.value)
    assert key in msg and ("bool" in msg.lower()), msg


def test_numbers_and_booleans_still_load():
    cfg = load_config(
        SMOKE,
        [
            "train.lr=1e-4",
            "warm_start.enabled=false",
            "objective.dynamic_sampling=true",
            "objective.preset=dapo",
            "train.steps=3",
            "train.betas=[0.9, 0.95]",
        ],
    )
    assert cfg.train.lr == 1e-4 and cfg.train.betas == (0.9, 0.95) and cfg.objective.dynamic_sampling
