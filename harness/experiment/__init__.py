"""The experiment layer: studies (ablation grids in experiments/*.yaml), their cells, the files a
study writes, Optuna tuning, summaries and figures. Commands: `harness grid | tune | summarize |
probe | figures | fit | verdict | mlflow-sync` (cli.py); the Snakefile drives a study's jobs.

    schema.py           the study file's schema (pydantic): every key and value checked, unknown keys rejected
    study.py            Study, Axis, Cell, StudyError: the data the layer passes around
    hypotheses.py       `hypotheses:`: a study's preregistered claims, checked against its arms, metrics and steps
    metric_keys.py      the metric keys a hypothesis may name (docs/objective.md, "DPO" and "Metrics")
    load.py             find a study file, read it through the schema, parse its axes, load_study()
    keys.py             dotted run-config keys: checked against RunConfig, applied to a mapping
    ids.py              cell ids (`preset=dapo__group_size=8__seed=1`)
    expand.py           grid expansion: axes -> cells, each with a validated RunConfig
    files.py            results/<study>/<scale>/: configs/<cell>.yaml, cells.json, study.json, `grid --list`
    tune.py             Optuna search over run-config knobs (`harness tune`)
    results.py          reading a results folder (cells.json, jsonl files)
    summary.py          summary.csv: one row per cell
    stats.py            the 95% t-interval
    generic_figures.py  figures of a study without an analysis notebook
    render.py           a study's figures (notebook or generic), renamed into place, logged to MLflow
    regenerate.py       summary.csv + figures from run folders or from MLflow alone (`harness figures`)
    study_runs.py       the study in MLflow: its experiment, its parent run, its cells nested under it, their results
    from_mlflow.py      a study's results folder rebuilt from its MLflow experiment alone
    verdict/            `harness verdict`: each hypothesis judged from the cells (paired t / TOST, Holm), the
                        preregistration checked against git and the cells' start times, `--plan`'s seeds
    fit/                `harness fit`: R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) per run and arm (docs/fit.md)
    figures/            shared pieces of the analysis notebooks (analysis/<study>.py)
    cli.py              the commands above, wired into harness/cli.py
"""

from harness.experiment.files import cells_index, describe, study_dir, write_configs
from harness.experiment.load import find_study, load_study, parse_study
from harness.experiment.study import SCALES, Cell, Study, StudyError

__all__ = [
    "SCALES",
    "Cell",
    "Study",
    "StudyError",
    "cells_index",
    "describe",
    "find_study",
    "load_study",
    "parse_study",
    "study_dir",
    "write_configs",
]
