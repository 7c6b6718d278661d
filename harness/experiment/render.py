"""A study's figures: its analysis notebook (analysis/<study>.py, jupytext percent format) run as a
script, or the generic figures; written to a temp folder renamed into place, then logged to the
study-level MLflow run with summary.csv, probe.json, cells.json and study.json.

The notebook runs with
    HARNESS_STUDY_DIR   the results folder (cells.json, summary.csv, runs/)
    HARNESS_FIGURES_DIR where to write PNG/PDF files
    HARNESS_STUDY, HARNESS_SCALE, HARNESS_EXPERIMENT (the MLflow experiment), MLFLOW_TRACKING_URI
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.atomic import atomic_folder
from harness.experiment.generic_figures import generic_figures
from harness.experiment.results import load_index
from harness.experiment.study_runs import log_study_outputs, record_cells
from harness.tracking import default_tracking_uri


def run_notebook(notebook: str | os.PathLike, study_dir: Path, figures_dir: Path) -> None:
    """Run a jupytext percent notebook as a script with the HARNESS_* variables set."""
    study, _ = load_index(study_dir)
    env = {
        **os.environ,
        "HARNESS_STUDY_DIR": str(Path(study_dir).resolve()),
        "HARNESS_FIGURES_DIR": str(figures_dir.resolve()),
        "HARNESS_STUDY": study.get("name", ""),
        "HARNESS_SCALE": study.get("scale", ""),
        "HARNESS_EXPERIMENT": study.get("experiment", ""),
        "MLFLOW_TRACKING_URI": default_tracking_uri(),
        "MPLBACKEND": "Agg",
    }
    subprocess.run([sys.executable, str(notebook)], env=env, check=True)


def make_figures(
    study_dir: str | os.PathLike, out: str | os.PathLike, notebook: str | None = None, log_mlflow: bool = True
) -> Path:
    """Draw the figures into `out` (replaced whole, atomically); log them to MLflow unless told not to."""
    study_dir, out = Path(study_dir), Path(out)
    with atomic_folder(out) as tmp:
        if notebook:
            run_notebook(notebook, study_dir, tmp)
        else:
            generic_figures(study_dir, tmp)
    if log_mlflow:
        files = ("summary.csv", "probe.json", "cells.json", "study.json")
        log_study_artifacts(study_dir, [out] + [study_dir / f for f in files])
    return out


def log_study_artifacts(study_dir: Path, paths: list[Path]) -> str | None:
    """Log figures and the study's files to its study-level MLflow run, the parent of its cells
    (harness/experiment/study_runs.py)."""
    return log_study_outputs(study_dir, paths)


def log_cell_evals(study_dir: str | os.PathLike) -> int:
    """Attach each cell's eval.json and groups.jsonl to the cell's MLflow run, with its summary row
    as result/* metrics, nested under the study run (harness/experiment/study_runs.py)."""
    return record_cells(study_dir)
