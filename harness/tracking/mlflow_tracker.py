"""MLflow logging through MlflowClient (no global active run).

One run per training run directory: the run id is stored in DIR/mlflow_run_id, so a
resumed run appends to the same MLflow run. Params = the resolved config flattened to
dotted keys; tags = tracking.tags (the grid axes of a cell); metrics by step, one
log_batch per step (a step is all-or-nothing in the store).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from harness import machine
from harness.atomic import atomic_write_text
from harness.tracking.base import Tracker
from harness.tracking.experiment import ensure_experiment
from harness.tracking.runs import RUN_ID_FILE, nest_run, run_id_of
from harness.tracking.store import default_tracking_uri, ensure_store, retry_locked

SENTINEL = "perf/elapsed_seconds"  # in every record (train steps and the final eval): its history says which steps are in the store


def flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = str(v)[:6000]
    return out


def machine_tags() -> dict[str, str]:
    """MLflow tags naming the machine and code of this attempt (harness/machine.py)."""
    d = machine.describe()
    return {
        "machine": machine.one_line(d),
        "machine.cpu": str(d["cpu"]),
        "machine.cpu_capability": str(d["cpu_capability"]),
        "machine.torch": str(d["torch"]),
        "machine.blas": str(d["blas"]),
        "machine.kernel_path": machine.kernel_path_digest(),
        "code.commit": machine.git_commit() or "unknown",
    }


class MlflowTracker(Tracker):
    def __init__(
        self,
        run_dir: Path,
        experiment: str,
        config: dict,
        tags: dict[str, str],
        run_name: str | None = None,
        uri: str | None = None,
        mark_running: bool = True,
    ):
        import mlflow
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.tracking import MlflowClient

        self._Metric, self._Param, self._RunTag = Metric, Param, RunTag
        self.uri = uri or default_tracking_uri()
        ensure_store(self.uri)
        mlflow.set_tracking_uri(self.uri)
        self.client = MlflowClient(self.uri)
        exp_id = ensure_experiment(self.client, experiment, self.uri)  # a model-training experiment
        run_id = run_id_of(run_dir)
        if run_id:
            if mark_running:  # a resumed attempt (not a sync of a finished run's pending records)
                retry_locked(self.client.update_run, run_id, status="RUNNING")
        else:
            run = retry_locked(
                self.client.create_run,
                exp_id,
                run_name=run_name or Path(run_dir).name,
                tags={**tags, "run_dir": str(Path(run_dir).resolve())},
            )
            run_id = run.info.run_id
            atomic_write_text(
                Path(run_dir) / RUN_ID_FILE, run_id
            )  # right away: a crash from here on resumes this run, never a new one
            nest_run(self.client, exp_id, run_id, tags)  # under its study's run (harness/experiment/study_runs.py)
        self._log_params(run_id, flatten(config))
        # the machine of this attempt (run.json lists every attempt's): tags, since a resumed run may move
        retry_locked(self.client.log_batch, run_id, tags=[self._RunTag(k, v) for k, v in machine_tags().items()])
        self.run_id = run_id
        self._last = max((m.step for m in retry_locked(self.client.get_metric_history, run_id, SENTINEL)), default=-1)

    def _log_params(self, run_id: str, params: dict[str, str]) -> None:
        """The config as params, on resume too (a crash may have come before them). MLflow refuses to change a
        param: a key the run already has keeps its first value (a run resumes with another value only of keys
        that change how it runs, not what it computes: train.nproc, train.checkpoint_background; DIR/config.yaml holds
        the latest attempt's config)."""
        have = retry_locked(self.client.get_run, run_id).data.params
        new = [self._Param(k, v) for k, v in params.items() if k not in have]
        for i in range(0, len(new), 100):
            retry_locked(self.client.log_batch, run_id, params=new[i : i + 100])

    def last_step(self) -> int:
        return self._last

    def log_steps(self, records: list[dict]) -> None:
        now = int(time.time() * 1000)
        for rec in records:
            step = int(rec["step"])
            if step <= self._last:
                continue  # already in the store (a resumed run re-flushing its checkpoint's records)
            metrics = [
                self._Metric(k, float(v), now, step)
                for k, v in rec.items()
                if k != "step" and isinstance(v, (int, float)) and math.isfinite(float(v))
            ]
            retry_locked(self.client.log_batch, self.run_id, metrics=metrics)
            self._last = step

    def log_artifact(self, path: str, artifact_path: str | None = None) -> None:
        retry_locked(self.client.log_artifact, self.run_id, path, artifact_path)

    def finish(self, status: str = "FINISHED") -> None:
        retry_locked(self.client.set_terminated, self.run_id, status=status)
