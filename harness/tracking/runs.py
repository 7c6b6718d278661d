"""Reading and tagging one run of the tracking store by its run folder (the trainer writes the
run's MLflow id to <run_dir>/mlflow_run_id), and nesting a cell's run under its study's run (the
study layout: harness/experiment/study_runs.py). Every call goes through retry_locked."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.tracking.store import default_tracking_uri, retry_locked

RUN_ID_FILE = "mlflow_run_id"
PARENT_TAG = "mlflow.parentRunId"


def run_id_of(run_dir: str | Path) -> str | None:
    """The MLflow run id the trainer recorded in run_dir, or None (tracking off, or not started)."""
    id_file = Path(run_dir) / RUN_ID_FILE
    return id_file.read_text().strip() if id_file.exists() else None


def _client(uri: str | None):
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri or default_tracking_uri())


def tag_run_dir(run_dir: str | Path, tags: dict[str, str], uri: str | None = None) -> bool:
    """Set `tags` on the MLflow run of run_dir; False when the folder has no run id."""
    run_id = run_id_of(run_dir)
    if run_id is None:
        return False
    client = _client(uri)
    for k, v in tags.items():
        retry_locked(client.set_tag, run_id, k, v)
    return True


def metric_steps(run_dir: str | Path, key: str, uri: str | None = None) -> list[int]:
    """The steps at which the MLflow run of run_dir logged `key` ([] without a run id)."""
    run_id = run_id_of(run_dir)
    if run_id is None:
        return []
    return [m.step for m in retry_locked(_client(uri).get_metric_history, run_id, key)]


def find_study_run(client, exp_id: str, name: str, scale: str):
    """The study's parent run (tags kind=study, study, scale), newest first; None if there is none."""
    runs = retry_locked(client.search_runs, [exp_id], "tags.kind = 'study'", order_by=["attributes.start_time DESC"])
    return next((r for r in runs if r.data.tags.get("study") == name and r.data.tags.get("scale") == scale), None)


def nest_run(client, exp_id: str, run_id: str, tags: dict) -> str | None:
    """Put a cell's run under its study's run (by the cell's study/scale tags) if that run exists.
    Only the UI's layout depends on it: a failure is printed, never raised (the summary rule nests again)."""
    if "study" not in tags or "cell" not in tags:
        return None
    try:
        parent = find_study_run(client, exp_id, tags["study"], tags.get("scale", ""))
        if parent is None:
            return None
        retry_locked(client.set_tag, run_id, PARENT_TAG, parent.info.run_id)
        return parent.info.run_id
    except Exception as err:  # noqa: BLE001 - cosmetic
        print(f"[harness] MLflow: run {run_id} not nested under its study run: {err}", file=sys.stderr)
        return None
