"""The default MLflow store: sqlite under results/, created once, in WAL mode.

MLflow 3's default store is sqlite; many processes creating a fresh store at once collide,
so creation happens under a file lock and switches the journal to WAL (concurrent readers
with one writer at a time; writers wait instead of failing). On a cluster, set
MLFLOW_TRACKING_URI to a tracking server instead: never put sqlite on NFS.
"""

from __future__ import annotations

import fcntl
import os
import random
import sqlite3
import time
from pathlib import Path

DEFAULT_DB = "results/mlflow.db"
LOCK_ERRORS = ("database is locked", "database table is locked")
lock_retries = 0  # retries done by retry_locked in this process (reported by the concurrency benchmark)
DEFAULT_ARTIFACTS = "results/mlartifacts"


def default_tracking_uri() -> str:
    """MLFLOW_TRACKING_URI if set, else sqlite:///<cwd>/results/mlflow.db."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return "sqlite:///" + str(Path(DEFAULT_DB).resolve())


def artifact_root(uri: str) -> str | None:
    """Artifact location for new experiments with the embedded store (None: the server decides)."""
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///") :]).parent.joinpath("mlartifacts").resolve().as_uri()
    return None


def ensure_store(uri: str) -> None:
    """Create the sqlite store (schema + WAL) exactly once, safely across processes."""
    if not uri.startswith("sqlite:///"):
        return
    db = Path(uri[len("sqlite:///") :])
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(str(db) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            fresh = not db.exists() or db.stat().st_size == 0
            if fresh:
                from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

                SqlAlchemyStore(uri, artifact_root(uri))  # creates the schema
            con = sqlite3.connect(db)
            try:
                if con.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    con.execute("PRAGMA journal_mode=WAL")
            finally:
                con.close()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def retry_locked(fn, *args, attempts: int = 12, base_delay: float = 0.05, max_delay: float = 10.0, **kwargs):
    """fn(*args, **kwargs), retried with jittered exponential backoff while sqlite says it is locked.

    Why: MLflow's sqlite write transactions read first (the run's state) and then write. Under
    WAL a writer whose read snapshot went stale because another process committed meanwhile
    gets SQLITE_BUSY at once, whatever the busy timeout: "database is locked". Measured with 8
    concurrent writers (benchmarks/mlflow_concurrency.py): 16 such errors and 200 lost points
    without this retry. The failed transaction was rolled back, and a repeated log_batch of the
    same Metric objects (same timestamp) is de-duplicated by MLflow's primary key, so repeating
    the call logs every point exactly once. A tracking server needs none of this: its client
    already retries HTTP 503 (the server's answer to the same lock).
    """
    for attempt in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # MlflowException or sqlalchemy OperationalError, depending on the path
            if attempt == attempts - 1 or not any(s in str(err) for s in LOCK_ERRORS):
                raise
            global lock_retries
            lock_retries += 1
            time.sleep(min(max_delay, base_delay * 2**attempt) * (0.5 + random.random()))


def client_for(uri: str | None = None):
    """(an MlflowClient on the store at `uri`, created if need be; the uri: MLFLOW_TRACKING_URI or results/'s)."""
    from mlflow.tracking import (
        MlflowClient,  # late: mlflow takes seconds to import, and only the commands that log need it
    )

    uri = uri or default_tracking_uri()
    ensure_store(uri)
    return MlflowClient(uri), uri
