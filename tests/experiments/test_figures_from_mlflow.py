"""End to end: a study's figures and summary regenerate from MLflow alone, the run folders deleted.

The demo study at smoke scale (one GRPO cell, the difficulty probe, analysis/demo.py; a 10-step warm
start) runs through
Snakemake into a sqlite store in tmp_path; then results/demo/ is deleted and
`harness figures demo --scale smoke --from-mlflow` rebuilds the inputs from the store. The rebuilt
inputs, summary.csv, summary.md and the PNGs must equal what the run folders gave. The slow test
does the same for a 2 x 2 grid (generic figures, two variants of two seeds)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml
from study_helpers import PY, REPO, run, snakemake_cmd

CELL_FILES = ("summary.json", "eval.json", "config.yaml")


def _finite(records: list[dict]) -> list[dict]:
    """What MLflow keeps of metrics.jsonl: finite numbers (NaN steps are not logged), as floats."""
    return [{k: float(v) for k, v in r.items() if isinstance(v, (int, float)) and math.isfinite(v)} for r in records]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _files(folder: Path) -> dict[str, bytes]:
    """The figures folder's files (not Snakemake's .snakemake_timestamp marker)."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if not p.name.startswith(".")}


def _snapshot(out: Path) -> dict:
    """Everything the figures are made from and everything they are, from the run folders."""
    snap = {
        "csv": (out / "summary.csv").read_text(),
        "figures": _files(out / "figures"),
        "probe": json.loads((out / "probe.json").read_text()) if (out / "probe.json").exists() else None,
        "cells": {},
    }
    for run_dir in (out / "runs").iterdir():
        snap["cells"][run_dir.name] = {
            "metrics": _finite(_jsonl(run_dir / "metrics.jsonl")),
            "groups": _jsonl(run_dir / "groups.jsonl"),
            **{name: (run_dir / name).read_text() for name in CELL_FILES},
        }
    return snap


def _regenerate_and_compare(wd: Path, study: str, out: Path) -> Path:
    before = _snapshot(out)
    assert before["cells"] and any(r.get("entropy") for c in before["cells"].values() for r in c["metrics"])
    shutil.rmtree(out.parent)  # results/<study>/: run folders, cells.json, summary.csv, figures: all gone
    regen = wd / "regen"
    r = run(
        [str(PY.with_name("harness")), "figures", study, "--scale", "smoke", "--from-mlflow", "--out", str(regen)],
        wd,
        timeout=900,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    inputs = regen / "inputs"
    assert sorted(p.name for p in (inputs / "runs").iterdir()) == sorted(before["cells"])
    for cell, files in before["cells"].items():
        run_dir = inputs / "runs" / cell
        assert _jsonl(run_dir / "metrics.jsonl") == files["metrics"], cell
        assert _jsonl(run_dir / "groups.jsonl") == files["groups"], cell
        for name in CELL_FILES:
            assert (run_dir / name).read_text() == files[name], (cell, name)
    if before["probe"] is not None:
        assert json.loads((inputs / "probe.json").read_text()) == before["probe"]
    assert (regen / "summary.csv").read_text() == before["csv"]
    after = _files(regen / "figures")
    assert sorted(after) == sorted(before["figures"])
    for name, data in before["figures"].items():
        assert after[name] == data, f"{name} differs"
    return inputs


def _check_layout(wd: Path, experiment: str, n_cells: int) -> None:
    """Model-training experiment with the saved view; cells nested under the study run with results."""
    from mlflow.tracking import MlflowClient

    from harness.tracking.experiment import KIND_TAG, MODEL_TRAINING, VIEW_TAG

    client = MlflowClient("sqlite:///" + str(wd / "results" / "mlflow.db"))
    exp = client.get_experiment_by_name(experiment)
    assert exp.tags[KIND_TAG] == MODEL_TRAINING
    view = json.loads(exp.tags[VIEW_TAG])
    assert "params.`objective.preset`" in view["selectedColumns"]
    assert view["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": "variant"}]
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("kind") == "study"]
    cells = [r for r in runs if "cell" in r.data.tags]
    assert len(parents) == 1 and len(cells) == n_cells
    arts = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert {"cells.json", "study.json", "summary.csv", "figures"} <= arts
    for c in cells:
        assert c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert "result/final_pass_at_1" in c.data.metrics and "result/wall_seconds" in c.data.metrics


def _small_demo(tmp_path: Path) -> Path:
    """experiments/demo.yaml at smoke scale with a 10-step warm start (the file is still named demo:
    the study runs analysis/demo.py and the demo's probe)."""
    study = yaml.safe_load((REPO / "experiments" / "demo.yaml").read_text())
    study["base"] = str(REPO / "experiments" / "runs" / "smoke.yaml")
    study["scales"]["smoke"]["warm_start.steps"] = 10
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def test_demo_figures_from_mlflow_alone(tmp_path):
    study = _small_demo(tmp_path)
    wd = tmp_path / "work"
    wd.mkdir()
    r = run(snakemake_cmd(wd, "--cores", "2", "--config", f"study={study}", "scale=smoke"), REPO, timeout=3600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    out = wd / "results" / "demo" / "smoke"
    summary = json.loads(next((out / "runs").glob("*/summary.json")).read_text())
    _check_layout(wd, "demo/smoke", 1)
    inputs = _regenerate_and_compare(wd, str(study), out)
    assert json.loads((inputs / "study.json").read_text())["name"] == "demo"
    from mlflow.tracking import MlflowClient

    client = MlflowClient("sqlite:///" + str(wd / "results" / "mlflow.db"))
    cell = next(
        r
        for r in client.search_runs([client.get_experiment_by_name("demo/smoke").experiment_id])
        if "cell" in r.data.tags
    )
    assert cell.data.metrics["result/paired_rise_pass_at_1"] == summary["paired_rise"]["delta_pass_at_1"]


GRID = {
    "description": "figures from MLflow: two presets x two seeds",
    "base": str(REPO / "experiments" / "runs" / "smoke.yaml"),
    "grid": {"objective.preset": ["grpo", "dr_grpo"]},
    "seeds": [1, 2],
    "scale": "smoke",
    "scales": {
        "smoke": {
            "warm_start.steps": 20,
            "rollout.temperature": 1.0,
            "eval.temperature": 1.0,
            "train.steps": 2,
            "train.prompts_per_step": 4,
            "train.group_size": 4,
            "train.mini_batches": 1,
            "train.checkpoint_every": 1,
            "train.threads": 1,
            "eval.num_prompts": 8,
            "eval.n_samples": 2,
            "eval.ks": [1, 2],
            "eval.every": 1,
            "final_eval": {"n_samples": 2},
        }
    },
}


@pytest.mark.slow
def test_grid_figures_from_mlflow_alone(tmp_path):
    study = tmp_path / "regrid.yaml"
    study.write_text(yaml.safe_dump(GRID, sort_keys=False))
    wd = tmp_path / "work"
    wd.mkdir()
    r = run(snakemake_cmd(wd, "--cores", "2", "--config", f"study={study}"), REPO, timeout=3600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    _check_layout(wd, "regrid/smoke", 4)
    # the study is found by its path: the CLI takes the YAML the grid came from
    out = wd / "results" / "regrid" / "smoke"
    before = _snapshot(out)
    shutil.rmtree(out.parent)
    regen = wd / "regen"
    r = run(
        [str(PY.with_name("harness")), "figures", str(study), "--from-mlflow", "--out", str(regen)], wd, timeout=900
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert (regen / "summary.csv").read_text() == before["csv"]
    assert _files(regen / "figures") == before["figures"]
