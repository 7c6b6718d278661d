"""A study's own reward model (`reward_model:`): trained first by `harness train-rm` (the Snakefile's rule
reward_model), named `@reward_model` in the cells' task.rewards; the cells validate before it exists, and a
study without the section, a missing pairs file or a bad option is refused naming the key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from study_helpers import REPO, clean_env, job_counts, snakemake_cmd

import harness.experiment.expand as expand_module
from harness.config import ConfigError, build_config
from harness.experiment import StudyError, parse_study
from harness.experiment.expand import expand

DATA = "experiments/data/kl_leash"
TASK = {
    "name": "dataset",
    "data": {"train": f"{DATA}/train.jsonl", "eval": f"{DATA}/eval.jsonl", "solution_key": "solution"},
    "rewards": [
        {"model": "@reward_model", "name": "rm"},
        {"verifier": "regex", "name": "answer", "weight": 0, "options": {"pattern": "^Answer: (-?\\d+)$"}},
    ],
    "correct": "answer",
}
BASE = {
    "task": TASK,
    "train": {"steps": 2, "prompts_per_step": 4, "group_size": 4},
    "eval": {"num_prompts": 4, "n_samples": 2, "ks": [1, 2]},
    "objective": {"preset": "grpo"},
}
RM = {"pairs": f"{DATA}/rm_pairs.jsonl", "steps": 20, "batch_size": 8}


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)  # the data and pairs paths are relative to the repository root


def cells(raw: dict, scale: str = "smoke", results: str = "results"):
    study = parse_study({"base": BASE, **raw}, name="t", scale=scale, results=results)
    return study, expand(study)


def test_cells_name_the_folder_the_study_trains_and_validate_before_it_exists(tmp_path):
    study, cs = cells({"reward_model": RM, "grid": {"objective.kl_coef": [0.0, 0.1]}}, results=str(tmp_path))
    folder = tmp_path / "t" / "smoke" / "reward_model"
    assert study.reward_model == RM and study.reward_model_dir == folder and not folder.exists()
    assert [c.config.task.rewards[0].model for c in cs] == [str(folder)] * 2
    assert cs[0].config.task.rewards[1].model is None


def test_the_exemption_is_the_cells_argument_not_the_process_state(tmp_path, monkeypatch):
    """The folder the study trains is passed to its cells' validation (build_config's reward_models_to_build):
    a config validated meanwhile, in the same process, that names the folder is refused, and so is one
    validated after the expansion."""
    folder = tmp_path / "t" / "smoke" / "reward_model"
    named = {**BASE, "task": {**TASK, "rewards": [{"model": str(folder), "name": "rm"}, TASK["rewards"][1]]}}
    refused = r"task.rewards\[0\].model=.* is not a reward model"
    built = []

    def build_meanwhile(data, *args, **kwargs):
        with pytest.raises(ConfigError, match=refused):
            build_config(named)
        built.append(build_config(data, *args, **kwargs))
        return built[-1]

    monkeypatch.setattr(expand_module, "build_config", build_meanwhile)
    cells({"reward_model": RM, "grid": {"objective.kl_coef": [0.0, 0.1]}}, results=str(tmp_path))
    assert len(built) == 2 and not folder.exists()
    with pytest.raises(ConfigError, match=refused):
        build_config(named)
    assert build_config(named, reward_models_to_build=[folder]).task.rewards[0].model == str(folder)


def test_a_scale_overrides_the_options():
    study, _ = cells({"reward_model": RM, "scales": {"smoke": {"reward_model": {"steps": 3}}}})
    assert study.reward_model == {**RM, "steps": 3}


def test_reward_model_without_the_section_is_refused():
    with pytest.raises(StudyError, match="@reward_model: .* no `reward_model:` section"):
        cells({})


def test_a_missing_pairs_file_or_bad_option_is_refused():
    with pytest.raises(StudyError, match=r"reward_model.pairs='nope.jsonl': no such file"):
        cells({"reward_model": {**RM, "pairs": "nope.jsonl"}})
    with pytest.raises(StudyError, match="reward_model.pairs: missing"):
        cells({"reward_model": {"steps": 3}})
    with pytest.raises(StudyError, match="reward_model.stepz"):
        cells({"reward_model": {**RM, "stepz": 3}})
    with pytest.raises(StudyError, match="reward_model.steps"):
        cells({"reward_model": {**RM, "steps": 0}})


def test_an_existing_folder_that_is_not_a_reward_model_is_still_refused(tmp_path):
    """The exemption covers a folder not written yet (absent, or the empty folder Snakemake makes for the
    job's output), not a wrong one."""
    folder = tmp_path / "t" / "smoke" / "reward_model"
    folder.mkdir(parents=True)
    cells({"reward_model": RM}, results=str(tmp_path))  # empty: still to be written
    (folder / "config.json").write_text("{}")
    with pytest.raises(StudyError, match=r"task.rewards\[0\].model=.* is not a reward model"):
        cells({"reward_model": RM}, results=str(tmp_path))


def test_dry_run_trains_the_reward_model_before_the_cells(tmp_path):
    """`snakemake -n` of the kl_leash study at the smoke scale: one reward_model job, which every train job
    waits for (run from the repository root: its data paths are relative to it; results go to tmp_path)."""
    cmd = snakemake_cmd(REPO, "-n", "-p", "--config", "study=kl_leash", "scale=smoke", f"results={tmp_path}")
    out = subprocess.run(cmd, cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout + out.stderr
    counts = job_counts(text)
    assert counts["reward_model"] == 1 and counts["train"] == 6 and counts["warmstart"] == 2, counts
    folder = Path(tmp_path) / "kl_leash" / "smoke" / "reward_model"
    assert f"train-rm --out {folder}" in text and "--pairs experiments/data/kl_leash/rm_pairs.jsonl" in text
    configs = sorted((Path(tmp_path) / "kl_leash" / "smoke" / "configs").glob("*.yaml"))
    assert len(configs) == 6 and all(str(folder) in c.read_text() for c in configs)
