"""A study in MLflow: one parent run per study with its cells nested under it, the study's own
files on the parent, and each cell's results as metrics.

    experiment <study>/<scale>      model-training kind, saved view (harness/tracking/experiment.py)
      <study>-summary               tags kind=study, study, scale; artifacts cells.json, study.json,
                                    probe.json, summary.csv, figures/; description = figures/summary.md
        <cell> ...                  the training runs (mlflow.parentRunId = the study run); tags study,
                                    scale, cell, variant, one per axis; params = the resolved config (+ `arm`);
                                    metrics per step; artifacts config.yaml, summary.json, samples.jsonl,
                                    eval.json, groups.jsonl; metrics result/* = the cell's summary.csv row

When each piece is written: `open_study` at the start of a Snakemake run (onstart), `nest_run`
when a cell's run is created (harness/tracking/runs.py, by harness/tracking/mlflow_tracker.py), `record_cells` by the summary
rule, `log_study_outputs` by the figures rule; `sync` does all of it for a finished results folder
(`harness mlflow-sync`, the migration of runs logged before this layout).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from harness.atomic import atomic_write_text
from harness.experiment.results import load_index
from harness.experiment.summary import cell_row
from harness.tracking.experiment import NOTE_TAG, RESULT_PREFIX, ensure_experiment
from harness.tracking.runs import PARENT_TAG, find_study_run, run_id_of
from harness.tracking.store import client_for, retry_locked

STUDY_ID_FILE = "mlflow_study_run_id"
CELL_FILES = ("eval.json", "groups.jsonl")  # cell files the trainer does not log itself
STUDY_FILES = ("cells.json", "study.json", "probe.json", "summary.csv")


def note(study: dict) -> str:
    axes = ", ".join(a for a in study.get("axes", []) if a != "seed") or "none"
    return (
        f"Study `{study.get('name')}` at scale `{study.get('scale')}` ({study.get('study_file') or 'experiments/'}). "
        f"Axes: {axes}; seeds {study.get('seeds')}. One run per cell, nested under `{study.get('name')}-summary` "
        "(figures, summary.csv, cells.json). Results of a cell: metrics `result/*` (its summary.csv row)."
    )


def ensure_study_run(client, exp_id: str, study: dict, id_file: Path | None = None) -> str:
    """The study run's id: from id_file, else found by its tags, else created; written to id_file."""
    if id_file is not None and id_file.exists():
        run_id = id_file.read_text().strip()
        try:
            retry_locked(client.get_run, run_id)
            return run_id
        except Exception:  # a run of another store (MLFLOW_TRACKING_URI changed, a copied folder): find or make one
            pass
    found = find_study_run(client, exp_id, study.get("name", ""), study.get("scale", ""))
    run_id = (
        found.info.run_id
        if found
        else retry_locked(
            client.create_run,
            exp_id,
            run_name=f"{study.get('name')}-summary",
            tags={"kind": "study", "study": study.get("name", ""), "scale": study.get("scale", "")},
        ).info.run_id
    )
    if id_file is not None:
        atomic_write_text(id_file, run_id)
    return run_id


def open_study(study_dir: str | os.PathLike, uri: str | None = None) -> str:
    """Experiment (kind, saved view, description) and study run of a results folder, with its
    cells.json and study.json attached; returns the study run's id. Idempotent."""
    d = Path(study_dir)
    study, _ = load_index(d)
    client, uri = client_for(uri)
    exp_id = ensure_experiment(client, study["experiment"], uri, axes=study.get("axes", []), note=note(study))
    run_id = ensure_study_run(client, exp_id, study, d / STUDY_ID_FILE)
    if NOTE_TAG not in retry_locked(client.get_run, run_id).data.tags:  # later: figures/summary.md
        retry_locked(client.set_tag, run_id, NOTE_TAG, note(study))
    for name in ("cells.json", "study.json"):
        retry_locked(client.log_artifact, run_id, str(d / name))
    return run_id


def result_metrics(row: dict, step: int) -> list:
    """A cell's summary.csv row as metrics result/<column> (finite numbers only, axes left out)."""
    from mlflow.entities import Metric  # late: mlflow takes seconds to import

    now = int(time.time() * 1000)
    out = []
    for key, v in row.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            continue
        out.append(Metric(RESULT_PREFIX + key, float(v), now, step))
    return out


def record_cells(study_dir: str | os.PathLike, uri: str | None = None) -> int:
    """After the study's evals: each cell's run gets eval.json and groups.jsonl, the `arm` axis as a
    param, its summary.csv row as result/* metrics, and its study run as parent. Returns how many."""
    from mlflow.entities import Param  # late: mlflow takes seconds to import

    d = Path(study_dir)
    study, cells = load_index(d)
    todo = [(c, run_id_of(c["run_dir"])) for c in cells]
    todo = [(c, run_id) for c, run_id in todo if run_id]
    if not todo:
        return 0
    client, uri = client_for(uri)
    parent = open_study(d, uri)
    for cell, run_id in todo:
        for name in CELL_FILES:
            if (Path(cell["run_dir"]) / name).exists():
                retry_locked(client.log_artifact, run_id, str(Path(cell["run_dir"]) / name))
        row = {k: v for k, v in cell_row(cell).items() if k not in cell["axes"]}
        have = retry_locked(client.get_run, run_id).data.params
        params = [Param(k, str(cell["tags"].get(k, v))) for k, v in cell["axes"].items() if k not in have]
        metrics = result_metrics(row, int(row.get("steps") or 0))
        retry_locked(client.log_batch, run_id, metrics=metrics, params=params)
        retry_locked(client.set_tag, run_id, PARENT_TAG, parent)
    return len(todo)


def log_study_outputs(study_dir: str | os.PathLike, paths: list[Path], uri: str | None = None) -> str | None:
    """The figures folder and the study's files (summary.csv, probe.json, ...) on the study run;
    figures/summary.md becomes the run's description. Returns the run id (None without an experiment)."""
    d = Path(study_dir)
    study, _ = load_index(d)
    if not study.get("experiment"):
        return None
    client, uri = client_for(uri)
    run_id = open_study(d, uri)
    for p in paths:
        if p.is_dir():
            retry_locked(client.log_artifacts, run_id, str(p), "figures")
            if (p / "summary.md").exists():
                retry_locked(client.set_tag, run_id, NOTE_TAG, (p / "summary.md").read_text()[:60000])
        elif p.exists():
            retry_locked(client.log_artifact, run_id, str(p))
    retry_locked(client.set_terminated, run_id)
    return run_id


def sync(study_dir: str | os.PathLike, uri: str | None = None) -> dict:
    """Bring a finished results folder's MLflow experiment up to this layout (the migration):
    kind and view, study run with the study's files and figures, cells nested with their results."""
    d = Path(study_dir)
    n = record_cells(d, uri)
    paths = [d / "figures"] + [d / name for name in STUDY_FILES]
    run_id = log_study_outputs(d, [p for p in paths if p.exists()], uri)
    return {"study_dir": str(d), "cells": n, "study_run": run_id}


def study_dirs(results: str | os.PathLike = "results") -> list[Path]:
    """Every results/<study>/<scale> folder that holds a cells.json."""
    return sorted(p.parent for p in Path(results).glob("*/*/cells.json"))
