"""A run killed while it holds a lock never makes the next run wait. The project's cross-process locks are
fcntl.flock on an open file (the MLflow sqlite store's creation, tracking/store.py; the warm-start cache's
build, train/run/warmstart.py; the SmolLM2 conversion, models/smollm2.py): the kernel drops a flock when the
holder's last descriptor closes, and a process killed with SIGKILL closes them all. Each test has a child take
the lock exactly as the code does (same path), checks that it is held, kills the child with SIGKILL, and then
the code must get through within a deadline (a thread, so a regression fails instead of hanging)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

DEADLINE_S = 30
HOLD = "import fcntl, sys, time\nf = open(sys.argv[1], 'w')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(600)\n"


def _held(path: Path) -> bool:
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def kill_a_holder_of(lock: Path) -> None:
    """A child takes `lock` (flock LOCK_EX) and is killed with SIGKILL while holding it."""
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        assert _held(lock)  # the lock is taken: the code below would wait on a live holder
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=DEADLINE_S)


def returns_within(fn) -> None:
    out: dict = {}

    def call():
        try:
            fn()
        except BaseException as err:  # noqa: BLE001 -- handed back to the test
            out["err"] = err

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(DEADLINE_S)
    if t.is_alive():
        pytest.fail(f"still waiting on a killed run's lock after {DEADLINE_S} s")
    if "err" in out:
        raise out["err"]


def test_the_mlflow_store_lock_of_a_killed_run_does_not_block(tmp_path):
    from harness.tracking.store import ensure_store

    db = tmp_path / "mlflow.db"
    sqlite3.connect(db).execute("create table t (x)").connection.close()  # an existing store: no schema build
    kill_a_holder_of(Path(str(db) + ".lock"))
    returns_within(lambda: ensure_store(f"sqlite:///{db}"))
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_warm_start_lock_of_a_killed_run_does_not_block(tmp_path, monkeypatch):
    import harness.train.run.warmstart as ws
    from harness.config import load_config

    cfg = load_config("experiments/runs/smoke.yaml", ["tracking.mlflow=false", f"warm_start.cache_dir={tmp_path}/ws"])
    built = []

    def fake_sft(cfg, folder: Path) -> None:  # the build the lock guards, without training
        folder.mkdir(parents=True)
        (folder / "warmstart.json").write_text(json.dumps({}))
        built.append(folder)

    monkeypatch.setattr(ws, "sft", fake_sft)
    monkeypatch.setattr(ws, "stale_warm_starts", lambda cfg: [])
    folder = ws.warm_start_folder(cfg)
    folder.parent.mkdir(parents=True, exist_ok=True)
    kill_a_holder_of(Path(str(folder) + ".lock"))
    returns_within(lambda: ws.ensure_warm_start(cfg))
    assert built == [folder]
