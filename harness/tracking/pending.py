"""MLflow that may be unreachable: training never waits on it and never loses a step.

`make_tracker` wraps the MLflow tracker in a PendingTracker. Whatever cannot be sent (steps,
artifacts, the final status) is appended to RUN_DIR/mlflow_pending.jsonl (fsynced, one JSON
object a line) and training goes on. The tracker tries again at the next flush (at most once
every HARNESS_MLFLOW_RETRY_SECONDS, default 30), at the end of the run, and on the next
`harness train` of the same directory (also after the run finished: the rerun only syncs).
Sending is idempotent: steps already in the store are skipped (MlflowTracker.last_step), so a
crash between sending and clearing the file duplicates nothing. The end of a run says what is
still pending.

A down server must cost seconds, not MLflow's default ~4 minutes of HTTP retries per call:
`short_http_defaults` sets MLFLOW_HTTP_REQUEST_MAX_RETRIES=2, ..._BACKOFF_FACTOR=1 and
..._TIMEOUT=10 unless the user set them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from harness.jsonl import read_jsonl
from harness.tracking.base import NoOpTracker, Tracker
from harness.tracking.mlflow_tracker import MlflowTracker
from harness.tracking.store import default_tracking_uri

PENDING = "mlflow_pending.jsonl"
RETRY_ENV = "HARNESS_MLFLOW_RETRY_SECONDS"
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
}


def short_http_defaults() -> None:
    """MLflow's HTTP retries and timeout, short unless set by the user (read by MLflow per request)."""
    for key, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)


def _read(path: Path) -> list[dict]:
    return read_jsonl(path)


def _write(path: Path, entries: list[dict], mode: str) -> None:
    with open(path, mode) as f:
        for e in entries:
            f.write(json.dumps(e, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


class PendingTracker(Tracker):
    """A tracker (made by `connect`) whose failures are buffered on disk instead of raised.

    new_attempt: a training attempt starts (the final status of an earlier attempt that is still
    pending is dropped); False for a sync of a finished run."""

    def __init__(self, run_dir: str | Path, connect: Callable[[], Tracker], where: str, new_attempt: bool = True):
        self.path = Path(run_dir) / PENDING
        self.where = where
        self._connect = connect
        self.inner: Tracker | None = None
        self._ok = True  # no failure since the last successful call
        self._retry_at = 0.0
        self._warned = False
        self.retry_seconds = float(os.environ.get(RETRY_ENV, "30"))
        if new_attempt:
            kept = [e for e in _read(self.path) if e.get("kind") != "status"]
            if self.path.exists():
                _write(self.path, kept, "w")
        self._available(force=True)

    @property
    def run_id(self) -> str | None:  # type: ignore[override]
        return self.inner.run_id if self.inner is not None else None

    def last_step(self) -> int:
        return self.inner.last_step() if self.inner is not None else -1

    # ---------------------------------------------------------------- Tracker
    def log_steps(self, records: list[dict]) -> None:
        if self._available():
            try:
                self.inner.log_steps(records)
                return
            except Exception as err:  # noqa: BLE001 -- any failure to send: keep it on disk
                self._fail(err)
        last = self.last_step()
        _write(self.path, [{"kind": "step", "record": r} for r in records if int(r["step"]) > last], "a")

    def log_artifact(self, path: str, artifact_path: str | None = None) -> None:
        if self._available():
            try:
                self.inner.log_artifact(path, artifact_path)
                return
            except Exception as err:  # noqa: BLE001
                self._fail(err)
        _write(
            self.path, [{"kind": "artifact", "path": str(Path(path).resolve()), "artifact_path": artifact_path}], "a"
        )

    def finish(self, status: str = "FINISHED") -> None:
        if self._available(force=True):
            try:
                self.inner.finish(status)
                self.report()
                return
            except Exception as err:  # noqa: BLE001
                self._fail(err)
        _write(self.path, [{"kind": "status", "status": status}], "a")
        self.report()

    # ---------------------------------------------------------------- buffering
    def pending(self) -> dict:
        """What is waiting in the file: {'steps': [...], 'artifacts': n, 'status': str | None}."""
        entries = _read(self.path)
        statuses = [e["status"] for e in entries if e.get("kind") == "status"]
        return {
            "steps": sorted({int(e["record"]["step"]) for e in entries if e.get("kind") == "step"}),
            "artifacts": sum(1 for e in entries if e.get("kind") == "artifact"),
            "status": statuses[-1] if statuses else None,
        }

    def report(self) -> None:
        """Print what is still pending (nothing when all of it reached MLflow)."""
        p = self.pending()
        if not (p["steps"] or p["artifacts"] or p["status"]):
            return
        parts = []
        if p["steps"]:
            parts.append(f"{len(p['steps'])} steps ({_ranges(p['steps'])})")
        if p["artifacts"]:
            parts.append(f"{p['artifacts']} artifacts")
        if p["status"]:
            parts.append(f"the run status {p['status']}")
        print(
            f"[harness] MLflow ({self.where}) is unreachable: {', '.join(parts)} still pending in {self.path}; "
            "they are sent when the same `harness train` command is rerun with MLflow reachable",
            flush=True,
        )

    def _available(self, force: bool = False) -> bool:
        """Connected, and everything pending sent; tries (again) unless a recent try failed."""
        if not self._ok and not force and time.monotonic() < self._retry_at:
            return False
        if self.inner is None:
            try:
                self.inner = self._connect()
            except Exception as err:  # noqa: BLE001
                self._fail(err)
                return False
        return self._drain()

    def _drain(self) -> bool:
        entries = _read(self.path)
        if entries:
            steps = sorted((e["record"] for e in entries if e.get("kind") == "step"), key=lambda r: int(r["step"]))
            statuses = [e["status"] for e in entries if e.get("kind") == "status"]
            try:
                self.inner.log_steps(steps)
                for e in entries:
                    if e.get("kind") == "artifact" and Path(e["path"]).is_file():
                        self.inner.log_artifact(e["path"], e.get("artifact_path"))
                if statuses:
                    self.inner.finish(statuses[-1])
            except Exception as err:  # noqa: BLE001
                self._fail(err)
                return False
            self.path.unlink()
            print(
                f"[harness] MLflow ({self.where}) reachable: sent {len(steps)} pending steps"
                f"{' and the status ' + statuses[-1] if statuses else ''}",
                flush=True,
            )
        if not self._ok:
            self._ok, self._warned = True, False
        return True

    def _fail(self, err: Exception) -> None:
        self._ok = False
        self._retry_at = time.monotonic() + self.retry_seconds
        if not self._warned:
            self._warned = True
            msg = " ".join(str(err).split())[:200]
            print(
                f"[harness] WARNING: MLflow ({self.where}) is unreachable ({type(err).__name__}: {msg}); training "
                f"goes on, metrics wait in {self.path} and are sent when it is back (tried again at most every "
                f"{self.retry_seconds:g} s)",
                flush=True,
            )


def _ranges(steps: list[int]) -> str:
    out, start = [], steps[0]
    for a, b in zip(steps, steps[1:] + [None]):
        if b != a + 1:
            out.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return ", ".join(out)


def make_tracker(cfg, run_dir: str | Path, new_attempt: bool = True, hub: dict | None = None) -> Tracker:
    """The run's tracker: MLflow behind a PendingTracker, or a NoOpTracker with tracking.mlflow=false.
    hub: the Hub snapshots the run loads (harness/train/run/hub_record.py), logged as params hub.*."""
    if not cfg.tracking.mlflow:
        return NoOpTracker()
    short_http_defaults()
    uri = default_tracking_uri()
    t = cfg.tracking
    return PendingTracker(
        run_dir,
        lambda: MlflowTracker(
            run_dir,
            t.experiment,
            {**cfg.to_dict(), **({"hub": hub} if hub else {})},
            t.tags,
            t.run_name,
            uri=uri,
            mark_running=new_attempt,
        ),
        uri,
        new_attempt,
    )


def sync_pending(cfg, run_dir: str | Path) -> None:
    """Send what a finished run left pending (the rerun of a finished run does only this)."""
    if cfg.tracking.mlflow and (Path(run_dir) / PENDING).exists():
        make_tracker(cfg, run_dir, new_attempt=False).report()
