"""The default MLflow store: sqlite under results/, created once, in WAL mode.

MLflow 3's default store is sqlite; many processes creating a fresh store at once collide,
so creation happens under a file lock and switches the journal to WAL (concurrent readers
with one writer at a time; writers wait instead of failing). On a cluster, set
MLFLOW_TRACKING_URI to a tracking server instead: never put sqlite on NFS.
"""
from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path

DEFAULT_DB = "results/mlflow.db"
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
        return Path(uri[len("sqlite:///"):]).parent.joinpath("mlartifacts").resolve().as_uri()
    return None


def ensure_store(uri: str) -> None:
    """Create the sqlite store (schema + WAL) exactly once, safely across processes."""
    if not uri.startswith("sqlite:///"):
        return
    db = Path(uri[len("sqlite:///"):])
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
