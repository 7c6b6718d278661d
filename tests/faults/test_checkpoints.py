"""Checkpoint faults on rerun: a corrupt or missing latest checkpoint falls back to the one
before it (kept on disk for this) and says so; a lost `checkpoints/latest` marker still resumes
from the intact checkpoint (never a silent restart at step 0); a directory whose checkpoints
all fail to load, or that holds logged steps but no checkpoint, stops with a message.
The corruption is done by hand on the files a real run wrote."""

from __future__ import annotations

import shutil

import pytest
from faults_helpers import TINY, Killed, assert_complete, file_steps, tiny

from harness.cli import main
from harness.faults import NoReadableCheckpoint, OrphanMetrics

STEPS = "train.steps=4"


def _killed_after_step(run, monkeypatch, step: int):
    """A run killed during the rollout of step+1 (checkpoints ..step on disk)."""
    import harness.train.rl.step as loop
    from harness.train import train

    real, calls = loop.collect, {"n": 0}

    def collect(*a, **k):
        calls["n"] += 1
        if calls["n"] == step + 2:
            raise Killed
        return real(*a, **k)

    with monkeypatch.context() as m:
        m.setattr(loop, "collect", collect)
        with pytest.raises(Killed):
            train(tiny(STEPS), run)


def test_two_checkpoints_are_kept(tmp_path, mlflow_uri, monkeypatch):
    run = tmp_path / "run"
    _killed_after_step(run, monkeypatch, 2)
    assert sorted(p.name for p in (run / "checkpoints").glob("step_*")) == ["step_000001", "step_000002"]
    assert (run / "checkpoints" / "latest").read_text() == "step_000002"


@pytest.mark.parametrize("damage", ["truncated_weights", "corrupt_state", "missing_state", "deleted"])
def test_bad_latest_checkpoint_falls_back_to_the_previous(damage, tmp_path, mlflow_uri, monkeypatch, capsys):
    from harness.train import train

    run = tmp_path / "run"
    _killed_after_step(run, monkeypatch, 2)
    latest = run / "checkpoints" / "step_000002"
    if damage == "truncated_weights":
        (w,) = latest.glob("*.safetensors")
        w.write_bytes(w.read_bytes()[:1000])
    elif damage == "corrupt_state":
        data = bytearray((latest / "trainer_state.pt").read_bytes())
        data[len(data) // 2] ^= 0xFF  # same size, one flipped byte: only the checksum sees it
        (latest / "trainer_state.pt").write_bytes(bytes(data))
    elif damage == "missing_state":
        (latest / "trainer_state.pt").unlink()
    else:
        shutil.rmtree(latest)
    capsys.readouterr()
    train(tiny(STEPS), run)
    out = capsys.readouterr().out
    assert "resuming" in out and "from step_000001" in out, out
    if damage != "deleted":
        assert "step_000002 is unreadable" in out and "falling back to step_000001" in out, out
        assert (run / "checkpoints" / "unreadable_step_000002").is_dir()  # kept for inspection
    assert_complete(mlflow_uri, run, 4)


def test_lost_latest_marker_resumes_from_the_intact_checkpoint(tmp_path, mlflow_uri, monkeypatch, capsys):
    from harness.train import train

    run = tmp_path / "run"
    _killed_after_step(run, monkeypatch, 1)
    (run / "checkpoints" / "latest").unlink()
    capsys.readouterr()
    train(tiny(STEPS), run)
    out = capsys.readouterr().out
    assert "latest is missing" in out and "resuming" in out and "at step 2 from step_000001" in out, out
    assert "step    0" not in out and "step    1" not in out  # steps 0 and 1 were not redone
    assert_complete(mlflow_uri, run, 4)


def test_all_checkpoints_unreadable_stops_with_a_message(tmp_path, mlflow_uri, monkeypatch, capsys):
    run = tmp_path / "run"
    _killed_after_step(run, monkeypatch, 2)
    for ckpt in (run / "checkpoints").glob("step_*"):
        (ckpt / "trainer_state.pt").write_bytes(b"garbage")
    from harness.train import train

    with pytest.raises(NoReadableCheckpoint):
        train(tiny(STEPS), run)
    assert file_steps(run) == [0, 1, 2]  # nothing restarted over the logged steps
    capsys.readouterr()
    args = ["train", "experiments/runs/smoke.yaml", *tiny_args(), "--out", str(run)]
    assert main(args) == 1
    err = capsys.readouterr().err
    # the rerun finds them set aside by the first attempt: still no restart, and it says why
    assert "unreadable checkpoints set aside: unreadable_step_000001, unreadable_step_000002" in err, err
    assert "refusing to restart" in err and "Traceback" not in err, err
    assert file_steps(run) == [0, 1, 2]


def test_logged_steps_without_checkpoints_refuse_to_restart(tmp_path, mlflow_uri, monkeypatch):
    run = tmp_path / "run"
    _killed_after_step(run, monkeypatch, 1)
    shutil.rmtree(run / "checkpoints")
    from harness.train import train

    with pytest.raises(OrphanMetrics, match="refusing to restart at step 0"):
        train(tiny(STEPS), run)
    assert file_steps(run) == [0, 1]


def test_torn_last_line_of_metrics(tmp_path, mlflow_uri, monkeypatch):
    """A kill in the middle of appending to metrics.jsonl leaves a torn last line (written here
    by hand after a kill); the rerun drops it and logs every step once."""
    from harness.train import train

    run = tmp_path / "run"
    _killed_after_step(run, monkeypatch, 1)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 2, "reward/me')
    train(tiny(STEPS), run)
    assert_complete(mlflow_uri, run, 4)


def test_torn_line_before_any_checkpoint(tmp_path, mlflow_uri, monkeypatch):
    """A torn line and no checkpoint (the first flush was cut): the run starts at step 0 and the
    torn fragment does not hide the steps appended after it."""
    from harness.train import train

    run = tmp_path / "run"
    _killed_after_step(run, monkeypatch, -1)  # killed in step 0's rollout
    (run / "metrics.jsonl").write_text('{"step": 0, "rew')
    train(tiny(STEPS), run)
    assert_complete(mlflow_uri, run, 4)


def tiny_args() -> list[str]:
    return [*TINY, STEPS]
