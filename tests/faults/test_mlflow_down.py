"""MLflow unreachable or going away mid-run: training goes on, metrics wait on disk
(mlflow_pending.jsonl) and reach MLflow when it is back or on the next run of the same
command; the end of the run says what is still pending; a down server costs seconds.

Unreachable: MLFLOW_TRACKING_URI=http://127.0.0.1:<closed port> (real). Back again: the rerun
points at the store itself (sqlite, the same store a server would serve). Going away mid-run:
MlflowClient.log_batch raises ConnectionError for two steps (a server cannot be stopped and
restarted in a few seconds here; test_mlflow_server_restart does it with a real server, slow)."""

from __future__ import annotations

import json
import socket
import time

import pytest
from faults_helpers import TINY, assert_complete, file_steps, mlflow_run, tiny

from harness.cli import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_server_then_next_run_sends_everything(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    down = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", down)
    for key in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"):
        monkeypatch.delenv(key, raising=False)  # the harness's short defaults apply
    args = ["train", "experiments/runs/smoke.yaml", *TINY, "--out", str(run)]
    t0 = time.perf_counter()
    assert main(args) == 0
    wall = time.perf_counter() - t0
    out = capsys.readouterr().out
    assert f"WARNING: MLflow ({down}) is unreachable" in out, out
    assert "4 steps (0-3), 3 artifacts, the run status FINISHED still pending" in out, out
    assert file_steps(run) == [0, 1, 2, 3]  # training went on
    pending = [json.loads(x) for x in (run / "mlflow_pending.jsonl").read_text().splitlines()]
    assert sorted(e["record"]["step"] for e in pending if e["kind"] == "step") == [0, 1, 2, 3]
    assert wall < 120, f"a down server cost {wall:.0f} s"  # MLflow's own defaults: ~4 minutes a call

    uri = f"sqlite:///{tmp_path}/mlflow.db"  # MLflow is back
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "sent 4 pending steps and the status FINISHED" in out, out
    assert not (run / "mlflow_pending.jsonl").exists()
    assert_complete(uri, run)
    client, run_id = mlflow_run(uri, run)
    assert sorted(a.path for a in client.list_artifacts(run_id)) == ["config.yaml", "samples.jsonl", "summary.json"]
    assert client.get_run(run_id).data.params["train.steps"] == "3"


def test_server_goes_away_mid_run_and_returns(tmp_path, mlflow_uri, monkeypatch, capsys):
    from mlflow.tracking import MlflowClient

    from harness.train import train

    monkeypatch.setenv("HARNESS_MLFLOW_RETRY_SECONDS", "0")  # try again at every flush
    real = MlflowClient.log_batch

    def log_batch(self, run_id, metrics=(), *a, **k):
        if metrics and metrics[0].step in (1, 2):
            raise ConnectionError("Connection refused (the server went away)")
        return real(self, run_id, metrics, *a, **k)

    calls = {"n": 0}
    with monkeypatch.context() as m:
        m.setattr(MlflowClient, "log_batch", log_batch)
        # back from step 3's flush on: the patch is lifted when step 3's checkpoint is written
        import harness.train.rl.step as loop

        real_collect = loop.collect

        def collect(*a, **k):
            calls["n"] += 1
            if calls["n"] == 3:  # step 2's rollout
                m.setattr(MlflowClient, "log_batch", real)
            return real_collect(*a, **k)

        m.setattr(loop, "collect", collect)
        train(tiny(), tmp_path / "run")
    out = capsys.readouterr().out
    assert "is unreachable (ConnectionError" in out and "reachable: sent" in out, out
    assert "still pending" not in out
    assert not (tmp_path / "run" / "mlflow_pending.jsonl").exists()
    assert_complete(mlflow_uri, tmp_path / "run")


def test_pending_steps_already_in_mlflow_are_not_sent_twice(tmp_path, mlflow_uri, capsys):
    """A crash after sending the pending steps but before clearing the file: the next send skips them."""
    from harness.train import train

    run = tmp_path / "run"
    train(tiny(), run)
    lines = [
        json.dumps({"kind": "step", "record": json.loads(x)}) for x in (run / "metrics.jsonl").read_text().splitlines()
    ]
    (run / "mlflow_pending.jsonl").write_text("\n".join(lines) + "\n" + '{"kind": "st')  # and a torn last line
    train(tiny(), run)
    assert not (run / "mlflow_pending.jsonl").exists()
    assert_complete(mlflow_uri, run)


@pytest.mark.slow
def test_mlflow_server_stops_answering_mid_run(tmp_path):
    """A real `mlflow server` stops answering mid-run (SIGSTOP to its process group: a hung host or a
    network partition) and comes back (SIGCONT) while a real `harness train` runs: every step
    reaches MLflow exactly once by the end of the run, nothing stays pending."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import urllib.request
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    port = _closed_port()
    uri = f"http://127.0.0.1:{port}"
    store = f"sqlite:///{tmp_path}/server.db"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            store,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 900  # minutes on a loaded 2-core machine
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"{uri}/health", timeout=2)
                break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("mlflow server did not start")
        env = {
            **os.environ,
            "MLFLOW_TRACKING_URI": uri,
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1",
            "HARNESS_MLFLOW_RETRY_SECONDS": "3",
            "MLFLOW_HTTP_REQUEST_TIMEOUT": "2",
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
        }
        run = tmp_path / "run"
        cmd = [
            sys.executable,
            "-m",
            "harness.cli",
            "train",
            "experiments/runs/smoke.yaml",
            *TINY,
            "train.steps=60",
            "--out",
            str(run),
        ]
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = []
        for line in proc.stdout:
            out.append(line)
            m = re.match(r"\[harness\] step\s+(\d+)", line)
            if m and int(m.group(1)) == 2:
                os.killpg(server.pid, signal.SIGSTOP)
            if m and int(m.group(1)) == 30:
                os.killpg(server.pid, signal.SIGCONT)
        text = "".join(out)
        assert proc.wait(timeout=600) == 0, text
        assert "is unreachable" in text and "reachable: sent" in text, text
        assert "still pending" not in text and not (run / "mlflow_pending.jsonl").exists(), text
        assert_complete(store, run, 60)
    finally:
        os.killpg(server.pid, signal.SIGCONT)
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
