"""Kill a run mid-way, rerun the same command: no lost or duplicated steps (file and MLflow),
and the resumed run reproduces the uninterrupted one (seeded CPU runs are deterministic)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cmd(out, fast_overrides):
    args = [a for a in fast_overrides if not a.startswith("tracking.")]
    return [
        sys.executable,
        "-m",
        "harness.cli",
        "train",
        "experiments/runs/smoke.yaml",
        *args,
        "train.steps=6",
        "train.checkpoint_every=2",
        "tracking.experiment=resume-test",
        "--out",
        str(out),
    ]


def _steps(run):
    return [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_kill_and_resume(tmp_path, fast_overrides):
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db", "PYTHONUNBUFFERED": "1"}
    subprocess.run(
        _cmd(tmp_path / "warm", fast_overrides)[:-2] + ["train.steps=1", "--out", str(tmp_path / "warm")],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )  # builds the warm start outside the timed part
    run = tmp_path / "killed"
    proc = subprocess.Popen(
        _cmd(run, fast_overrides), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 300
    while time.time() < deadline:
        metrics = run / "metrics.jsonl"
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 4:  # flushed after checkpoint 3
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _steps(run) == [0, 1, 2, 3], "the kill should land between checkpoints 3 and 5"

    subprocess.run(_cmd(run, fast_overrides), cwd=ROOT, env=env, check=True, capture_output=True)
    assert _steps(run) == list(range(7))
    assert (run / "summary.json").exists()

    from mlflow.tracking import MlflowClient

    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    run_id = (run / "mlflow_run_id").read_text().strip()
    for key in ("perf/elapsed_seconds", "reward/mean"):
        steps = sorted(m.step for m in client.get_metric_history(run_id, key))
        expected = list(range(7)) if key == "perf/elapsed_seconds" else list(range(6))
        assert steps == expected, (key, steps)
    assert client.get_run(run_id).info.status == "FINISHED"
    exp = client.get_experiment_by_name("resume-test")
    assert len(client.search_runs([exp.experiment_id], filter_string=f"tags.run_dir = '{run.resolve()}'")) == 1

    # the same command uninterrupted gives the same numbers
    clean = tmp_path / "clean"
    subprocess.run(_cmd(clean, fast_overrides), cwd=ROOT, env=env, check=True, capture_output=True)
    a = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (clean / "metrics.jsonl").read_text().splitlines()]
    for ra, rb in zip(a, b):
        for key in ("reward/mean", "loss/policy", "eval/pass_at_1"):
            if key in ra:
                assert abs(ra[key] - rb[key]) < 1e-6, (ra["step"], key, ra[key], rb[key])
    # groups.jsonl (one record per prompt group and step) takes the same crash-safe path
    ga = [json.loads(x) for x in (run / "groups.jsonl").read_text().splitlines()]
    gb = [json.loads(x) for x in (clean / "groups.jsonl").read_text().splitlines()]
    assert [(g["step"], g["group"]) for g in ga] == [(s, i) for s in range(6) for i in range(8)]
    assert [(g["step"], g["group"], g["k"]) for g in ga] == [(g["step"], g["group"], g["k"]) for g in gb]
