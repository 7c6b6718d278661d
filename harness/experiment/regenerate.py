"""A study's summary.csv and figures, regenerated from its run folders or from MLflow alone.

    harness figures STUDY [--scale S]                         from results/<study>/<scale>/ (the run folders)
    harness figures STUDY [--scale S] --from-mlflow [--out DIR]   from the tracking store (MLFLOW_TRACKING_URI,
                                                              else sqlite:///results/mlflow.db): no run folder read

Either way DIR gets summary.csv and figures/ (analysis/<study>.py when it exists, else the
generic figures), made by the same code (harness/experiment/summary.py, render.py). From MLflow, the inputs are
first rebuilt in DIR/inputs/ (harness/experiment/from_mlflow.py: cells.json, study.json, probe.json,
runs/<cell>/metrics.jsonl, summary.json, eval.json, config.yaml, groups.jsonl), where they can
be inspected. Default DIR: results/<study>/<scale> from the folders (what Snakemake writes),
results/<study>/<scale>/from_mlflow from MLflow. Nothing is logged back to MLflow.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.experiment import load_study, study_dir
from harness.experiment.from_mlflow import rebuild_study_dir
from harness.experiment.render import make_figures
from harness.experiment.summary import write_csv

REPO = Path(__file__).resolve().parents[2]


def notebook_for(name: str) -> Path | None:
    """analysis/<study>.py of this checkout, if the study has one."""
    path = REPO / "analysis" / f"{name}.py"
    return path if path.exists() else None


def regenerate(
    study_name: str,
    scale: str | None = None,
    from_mlflow: bool = False,
    out: str | os.PathLike | None = None,
    uri: str | None = None,
) -> dict[str, Path]:
    """summary.csv and figures/ of a study into `out`; returns their paths (and the inputs folder)."""
    study = load_study(study_name, scale)
    if from_mlflow:
        out = Path(out) if out else study_dir(study) / "from_mlflow"
        src = rebuild_study_dir(study.experiment, out / "inputs", uri)
    else:
        src = study_dir(study)
        out = Path(out) if out else src
    notebook = notebook_for(study.name)
    csv = write_csv(src, out / "summary.csv")
    figures = make_figures(src, out / "figures", str(notebook) if notebook else None, log_mlflow=False)
    return {"inputs": src, "summary": csv, "figures": figures}
