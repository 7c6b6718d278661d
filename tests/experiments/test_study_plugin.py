"""A grid over a researcher's own variant (tests/plugins/my_variants.py, one file in the project folder,
named by one YAML line) through Snakemake: the Snakefile's process imports it to expand the cells, and
every cell's `harness train` / `harness eval` -- a process of its own -- imports it again from its config."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from study_helpers import REPO, job_counts, run, snakemake_cmd

STUDY = {
    "base": {
        "model": {"name": "tiny-dense"},
        "task": {"name": "arithmetic"},
        "objective": {"plugins": ["my_variants"], "preset": "median_tanh"},
    },
    "grid": {"objective.tanh_width": [0.1, 0.3]},
    "seeds": [0],
    "scale": "smoke",
    "scales": {
        "smoke": {
            "warm_start.steps": 20,
            "train.steps": 2,
            "train.prompts_per_step": 4,
            "train.group_size": 4,
            "train.threads": 1,
            "rollout.max_new_tokens": 24,
            "eval.num_prompts": 8,
            "eval.n_samples": 2,
            "eval.ks": [1, 2],
            "eval.every": 2,
            "final_eval": {"n_samples": 2},
        }
    },
}


def _project(tmp_path):
    """The researcher's folder: their plugin file and their study; Snakemake runs in it (-d)."""
    shutil.copy(REPO / "tests" / "plugins" / "my_variants.py", tmp_path / "my_variants.py")
    (tmp_path / "tanh.yaml").write_text(yaml.safe_dump(STUDY, sort_keys=False))
    return tmp_path, ["--config", f"study={tmp_path / 'tanh.yaml'}"]


def test_dry_run_expands_the_plugin_grid(tmp_path):
    wd, args = _project(tmp_path)
    r = run(snakemake_cmd(wd, "-n", "--quiet", "rules", *args), REPO)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert job_counts(r.stdout + r.stderr) == {
        "warmstart": 1,
        "train": 2,
        "eval": 2,
        "summary": 1,
        "fit": 1,
        "figures": 1,
        "all": 1,
        "total": 9,
    }
    configs = sorted((wd / "results" / "tanh" / "smoke" / "configs").glob("*.yaml"))
    assert [yaml.safe_load(c.read_text())["objective"]["tanh_width"] for c in configs] == [0.1, 0.3]


@pytest.mark.slow
def test_the_plugin_grid_trains_and_evaluates(tmp_path):
    wd, args = _project(tmp_path)
    r = run(snakemake_cmd(wd, "--cores", "2", *args), REPO, timeout=1500)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    out = wd / "results" / "tanh" / "smoke"
    for width in (0.1, 0.3):
        cell = out / "runs" / f"tanh_width={width}__seed=0"
        summary = json.loads((cell / "summary.json").read_text())
        assert (summary["algorithm"], summary["steps"]) == ("median_tanh", 2)
        assert yaml.safe_load((cell / "config.yaml").read_text())["objective"]["tanh_width"] == width
        assert (cell / "eval.json").exists()
    rows = (out / "summary.csv").read_text().splitlines()
    assert "objective.tanh_width" in rows[0] and all(",complete," in row for row in rows[1:]) and len(rows) == 3
