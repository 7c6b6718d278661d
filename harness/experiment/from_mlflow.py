"""A study read back from MLflow alone: the run-folder contract rebuilt from the tracking store.

    rebuild_study_dir("demo/smoke", "out/inputs")
        out/inputs/cells.json, study.json, probe.json              (the study run's artifacts)
        out/inputs/runs/<cell>/metrics.jsonl                        (the run's metric histories, one object a step)
        out/inputs/runs/<cell>/summary.json, eval.json, config.yaml, groups.jsonl, samples.jsonl   (its artifacts)

harness/experiment/summary.py and the analysis notebooks then read that folder as they read a Snakemake
results folder, so figures and summary.csv come out the same (harness/experiment/regenerate.py).
What MLflow cannot give back: metric values that were not finite (NaN steps are not logged,
so a key is absent from that step's record, which every reader already treats as "no value"),
and checkpoints / eval_prompts/ (never logged; no figure reads them).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from harness.experiment.files import cells_index
from harness.experiment.load import load_study
from harness.tracking.experiment import RESULT_PREFIX
from harness.tracking.store import client_for, retry_locked

RUN_FILES = ("summary.json", "eval.json", "config.yaml", "groups.jsonl", "samples.jsonl")
STUDY_FILES = ("cells.json", "study.json", "probe.json")
STATUS_RANK = {"FINISHED": 0, "RUNNING": 1, "KILLED": 2, "FAILED": 3}


def experiment_id(client, name: str) -> str:
    exp = retry_locked(client.get_experiment_by_name, name)
    if exp is None:
        known = sorted(e.name for e in retry_locked(client.search_experiments))
        raise FileNotFoundError(f"no MLflow experiment {name!r} at {client.tracking_uri}; experiments: {known}")
    return exp.experiment_id


def all_runs(client, exp_id: str) -> list:
    """Every active run of the experiment (paged)."""
    runs, token = [], None
    while True:
        page = retry_locked(client.search_runs, [exp_id], max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def cell_runs(runs: list) -> dict:
    """cell id -> its training run. A cell with several runs (an attempt cleared and restarted) is
    its finished one, else its newest."""
    best: dict = {}
    for r in runs:
        cid = r.data.tags.get("cell")
        if cid is None or r.data.tags.get("kind") == "study":
            continue
        key = (STATUS_RANK.get(r.info.status, 4), -(r.info.start_time or 0))
        if cid not in best or key < best[cid][0]:
            best[cid] = (key, r)
    return {cid: r for cid, (_, r) in best.items()}


def study_run(runs: list, name: str, scale: str):
    """The study's parent run (tags kind=study, study, scale), the newest if several."""
    found = [
        r
        for r in runs
        if r.data.tags.get("kind") == "study" and r.data.tags.get("study") == name and r.data.tags.get("scale") == scale
    ]
    return max(found, key=lambda r: r.info.start_time or 0, default=None)


def metric_records(client, run) -> list[dict]:
    """The run's metrics.jsonl: one object per step holding every metric logged at that step (the
    last value logged if a step was logged twice); the study's result/* metrics left out."""
    by_step: dict[int, dict[str, tuple[int, float]]] = {}
    for key in sorted(run.data.metrics):
        if key.startswith(RESULT_PREFIX):
            continue
        for m in retry_locked(client.get_metric_history, run.info.run_id, key):
            cur = by_step.setdefault(int(m.step), {}).get(key)
            if cur is None or m.timestamp >= cur[0]:
                by_step[int(m.step)][key] = (m.timestamp, m.value)
    return [{"step": step, **{k: v for k, (_, v) in sorted(vals.items())}} for step, vals in sorted(by_step.items())]


def download(client, run_id: str, names: tuple[str, ...], dest: Path) -> list[str]:
    """The run's top-level artifacts among `names`, copied into dest; returns the names found."""
    have = {a.path for a in retry_locked(client.list_artifacts, run_id)}
    got = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if name in have:
                local = retry_locked(client.download_artifacts, run_id, name, tmp)
                shutil.copyfile(local, dest / name)
                got.append(name)
    return got


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def study_index(client, srun, name: str, scale: str, out: Path) -> tuple[dict, list[dict]]:
    """study.json and cells.json: the study run's copies, else the study file's expansion."""
    if srun is not None:
        download(client, srun.info.run_id, STUDY_FILES, out)
    if not (out / "cells.json").exists() or not (out / "study.json").exists():
        study = load_study(name, scale)
        (out / "cells.json").write_text(json.dumps(cells_index(study, "results"), indent=1, default=str) + "\n")
        (out / "study.json").write_text(
            json.dumps(
                {
                    "name": study.name,
                    "scale": study.scale,
                    "experiment": study.experiment,
                    "axes": study.axis_names(),
                    "seeds": study.seeds,
                    "final_eval": study.final_eval,
                    "study_file": str(study.path or ""),
                },
                indent=1,
            )
            + "\n"
        )
    return json.loads((out / "study.json").read_text()), json.loads((out / "cells.json").read_text())


def rebuild_study_dir(experiment: str, out: str | os.PathLike, uri: str | None = None) -> Path:
    """Write the run-folder contract of the experiment `<study>/<scale>` into `out` (replaced).
    Each cell's run_dir in cells.json points into out/runs/."""
    client, uri = client_for(uri)
    name, _, scale = experiment.rpartition("/")
    out = Path(out)
    shutil.rmtree(out, ignore_errors=True)
    (out / "runs").mkdir(parents=True)
    runs = all_runs(client, experiment_id(client, experiment))
    study, cells = study_index(client, study_run(runs, name, scale), name, scale, out)
    by_cell = cell_runs(runs)
    for c in cells:
        run_dir = out / "runs" / c["id"]
        c["run_dir"], c["config"] = str(run_dir.resolve()), str((run_dir / "config.yaml").resolve())
        run = by_cell.get(c["id"])
        if run is None:
            continue  # never logged: a missing cell, as a missing run folder is
        run_dir.mkdir()
        write_jsonl(run_dir / "metrics.jsonl", metric_records(client, run))
        download(client, run.info.run_id, RUN_FILES, run_dir)
    (out / "cells.json").write_text(json.dumps(cells, indent=1, default=str) + "\n")
    return out
