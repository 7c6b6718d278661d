"""Reading and tagging one run of the tracking store by its run folder (the trainer writes the
run's MLflow id to <run_dir>/mlflow_run_id). Every call goes through retry_locked."""
from __future__ import annotations

from pathlib import Path

from harness.tracking.store import default_tracking_uri, retry_locked

RUN_ID_FILE = "mlflow_run_id"


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
