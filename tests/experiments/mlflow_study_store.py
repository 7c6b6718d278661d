"""A small study's MLflow store without training: the study run (open_study) and one finished run per cell,
as the Snakefile's rules leave them (tags study, scale, cell, variant; the axes as params; a result/* metric;
nested under the study run). Two variants x two seeds of experiment toy/smoke."""

from __future__ import annotations

import json
from pathlib import Path

from harness.experiment.study_runs import open_study
from harness.tracking.runs import PARENT_TAG
from harness.tracking.store import client_for

EXPERIMENT = "toy/smoke"
AXES = ["objective.preset", "seed"]
PRESETS = ("grpo", "dr_grpo")
SEEDS = (1, 2)


def study_cells(d: Path) -> list[dict]:
    """cells.json's entries: one per preset x seed, variant = preset=<name>."""
    cells = []
    for preset in PRESETS:
        for s in SEEDS:
            cid = f"preset={preset}__seed={s}"
            tags = {"study": "toy", "scale": "smoke", "cell": cid, "variant": f"preset={preset}"}
            axes = {"objective.preset": preset, "seed": s}
            cells.append({"id": cid, "variant": tags["variant"], "seed": s, "axes": axes, "run_dir": str(d / cid)})
            cells[-1]["tags"] = tags
    return cells


def write_study_store(root: Path) -> tuple[str, dict[str, dict]]:
    """The store's uri and run id -> its cell, under root (mlflow.db, results/toy/smoke/)."""
    from mlflow.entities import Metric, Param

    d = root / "results" / "toy" / "smoke"
    d.mkdir(parents=True)
    cells = study_cells(d / "runs")
    (d / "cells.json").write_text(json.dumps(cells))
    study = {"name": "toy", "scale": "smoke", "experiment": EXPERIMENT, "axes": AXES, "seeds": list(SEEDS)}
    (d / "study.json").write_text(json.dumps(study))
    client, uri = client_for(f"sqlite:///{root}/mlflow.db")
    parent = open_study(d, uri)
    exp_id = client.get_experiment_by_name(EXPERIMENT).experiment_id
    runs = {}
    for i, cell in enumerate(cells):
        run_id = client.create_run(exp_id, run_name=cell["id"], tags={**cell["tags"], PARENT_TAG: parent}).info.run_id
        params = [Param(k, str(v)) for k, v in cell["axes"].items()]
        client.log_batch(run_id, metrics=[Metric("result/final_pass_at_1", 0.5 + 0.1 * i, 1, 2)], params=params)
        client.set_terminated(run_id)
        runs[run_id] = cell
    return uri, runs
