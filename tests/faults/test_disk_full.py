"""The disk fills up during a checkpoint write: the run stops with an error that says so, the
partial write is removed, the previous checkpoint stays intact, and a rerun resumes from it.

Simulated: torch.save (the trainer state, written after the weights) writes half of its file
and then raises OSError(errno.ENOSPC), as a write to a full disk does. Filling a real disk
is not possible here."""

from __future__ import annotations

import errno
import os

import pytest
import torch
from faults_helpers import BACKGROUND, TINY, assert_complete, file_steps, mlflow_status, tiny

from harness.cli import main
from harness.faults import CheckpointWriteError
from harness.train.core.rundir import verify


def _full_disk_on_call(monkeypatch, nth: int):
    real, calls = torch.save, {"n": 0}

    def save(obj, path, *a, **k):
        calls["n"] += 1
        if calls["n"] == nth:
            real(obj, path, *a, **k)
            data = open(path, "rb").read()
            open(path, "wb").write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(obj, path, *a, **k)

    monkeypatch.setattr(torch, "save", save)


@pytest.mark.parametrize("background", [False, True], ids=["sync", "background"])
def test_disk_full_during_checkpoint(background, tmp_path, mlflow_uri, monkeypatch, capsys):
    """train.checkpoint_background: the write's error is raised at the loop's next wait for the writer (the
    final checkpoint's here); the same checkpoints and records are left."""
    from harness.train import train

    run = tmp_path / "run"
    cfg = tiny(*([BACKGROUND] if background else []))
    with monkeypatch.context() as m:
        _full_disk_on_call(m, 3)  # step 2's checkpoint
        with pytest.raises(CheckpointWriteError) as e:
            train(cfg, run)
    msg = str(e.value)
    assert "No space left on device" in msg and "step_000002" in msg and "step_000001 is intact" in msg, msg
    ckpts = run / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir() if p.name != "latest") == ["step_000000", "step_000001"]
    assert verify(ckpts / "step_000001") is None and (ckpts / "latest").read_text() == "step_000001"
    assert file_steps(run) == [0, 1]
    train(cfg, run)  # space freed: the rerun resumes from step_000001
    assert_complete(mlflow_uri, run)


def test_disk_full_cli_message(tmp_path, mlflow_uri, monkeypatch, capsys):
    run = tmp_path / "run"
    _full_disk_on_call(monkeypatch, 2)
    assert main(["train", "experiments/runs/smoke.yaml", *TINY, "--out", str(run)]) == 1
    err = capsys.readouterr().err
    assert "CheckpointWriteError" in err and "No space left on device" in err and "Traceback" not in err, err
    assert mlflow_status(mlflow_uri, run) == "FAILED"
