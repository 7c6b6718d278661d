"""SIGTERM / SIGINT (a SLURM time limit or preemption, Ctrl-C): the run stops at the end of the
current step, writes a checkpoint and every finished step's metrics (file and MLflow), marks
the MLflow run KILLED and exits 128 + signal (143, 130); a second signal aborts at once; the
rerun finishes with every step once. Real signals: sent to this process (in-process runs, fast)
or to a real `harness train` subprocess (test_sigterm_subprocess, slow)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from faults_helpers import TINY, assert_complete, file_steps, mlflow_status, mlflow_steps, tiny

from harness.faults import StoppedBySignal

ROOT = Path(__file__).resolve().parents[2]


def _signal_in_rollout(monkeypatch, step: int, signals: list[int]):
    import harness.train.rl.step as loop

    real, calls = loop.collect, {"n": 0}

    def collect(*a, **k):
        calls["n"] += 1
        if calls["n"] == step + 1:
            for sig in signals:
                os.kill(os.getpid(), sig)
        return real(*a, **k)

    monkeypatch.setattr(loop, "collect", collect)


def test_sigint_stops_at_the_end_of_the_step(tmp_path, mlflow_uri, monkeypatch, capsys):
    from harness.train import train

    run, cfg = tmp_path / "run", tiny("train.checkpoint_every=5")  # no checkpoint due at step 1
    before = signal.getsignal(signal.SIGINT)
    with monkeypatch.context() as m:
        _signal_in_rollout(m, 1, [signal.SIGINT])
        with pytest.raises(StoppedBySignal) as e:
            train(cfg, run)
    assert e.value.exit_code == 130 and "after step 1" in str(e.value) and "step_000001" in str(e.value)
    assert "SIGINT received: stopping at the end of this step" in capsys.readouterr().out
    assert (run / "checkpoints" / "latest").read_text() == "step_000001"
    assert file_steps(run) == [0, 1] and mlflow_steps(mlflow_uri, run) == [0, 1]
    assert mlflow_status(mlflow_uri, run) == "KILLED"
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored
    train(cfg, run)
    assert_complete(mlflow_uri, run)


def test_second_signal_aborts_at_once(tmp_path, mlflow_uri, monkeypatch):
    from harness.train import train

    run, cfg = tmp_path / "run", tiny()
    with monkeypatch.context() as m:
        _signal_in_rollout(m, 1, [signal.SIGTERM, signal.SIGTERM])
        with pytest.raises(StoppedBySignal, match="second signal") as e:
            train(cfg, run)
    assert e.value.exit_code == 143
    assert file_steps(run) == [0]  # step 1 was cut short: its work is redone on resume
    assert mlflow_status(mlflow_uri, run) == "KILLED"
    train(cfg, run)
    assert_complete(mlflow_uri, run)


@pytest.mark.slow
def test_sigterm_subprocess(tmp_path):
    """The issue's case: SIGTERM after step N is printed; every printed step is on disk and in MLflow."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "train",
        "experiments/runs/smoke.yaml",
        *TINY,
        "train.steps=60",
        "train.checkpoint_every=25",
        "--out",
        str(run),
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    printed, out = [], []
    for line in proc.stdout:
        out.append(line)
        if m := re.match(r"\[harness\] step\s+(\d+)", line):
            printed.append(int(m.group(1)))
            if int(m.group(1)) == 3:
                proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=300)
    text = "".join(out)
    assert rc == 143, text
    assert "StoppedBySignal: stopped by SIGTERM after step" in text and "Traceback" not in text, text
    assert printed and file_steps(run) == printed == list(range(len(printed)))
    assert mlflow_steps(uri, run) == printed and mlflow_status(uri, run) == "KILLED"
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"resuming {run} at step {printed[-1] + 1}" in done.stdout
    assert_complete(uri, run, 60)
