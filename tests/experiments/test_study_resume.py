"""End to end (slow): a grid killed mid-run resumes without retraining finished cells and
without duplicated MLflow runs or metric steps; then the report and a tuning study run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from study_helpers import REPO, clean_env, run, snakemake_cmd

pytestmark = pytest.mark.slow

STUDY = {
    "description": "resume test: 3 cells, several checkpoints each",
    "base": str(REPO / "experiments" / "runs" / "smoke.yaml"),
    "grid": {"objective.preset": ["grpo", "dr_grpo", "dapo"]},
    "seeds": [1],
    "scale": "smoke",
    "scales": {
        "smoke": {
            "warm_start.steps": 20,
            "train.steps": 6,
            "train.prompts_per_step": 4,
            "train.group_size": 4,
            "train.checkpoint_every": 2,
            "train.threads": 1,
            "eval.num_prompts": 8,
            "eval.n_samples": 2,
            "eval.ks": [1, 2],
            "eval.every": 2,
            "final_eval": {"n_samples": 2},
        }
    },
}


def _summaries(out: Path) -> dict[str, float]:
    return {p.parent.name: p.stat().st_mtime_ns for p in out.glob("runs/*/summary.json")}


def _evaluated(out: Path) -> set[str]:
    """Cells whose eval job has started: Snakemake has recorded their train job as complete.
    (A cell whose summary.json exists but whose train job Snakemake had not yet closed when
    it was killed is 'incomplete' to Snakemake: it removes the output and the trainer resumes
    from the final checkpoint, rewriting summary.json without training a step.)"""
    return (
        {p.parent.name for p in out.glob("runs/*/eval.json")}
        | {p.name[: -len(".log")] for p in (out / "logs" / "eval").glob("*.log")}
        if out.exists()
        else set()
    )


def test_kill_and_resume(tmp_path):
    study = tmp_path / "resume.yaml"
    study.write_text(yaml.safe_dump(STUDY, sort_keys=False))
    wd = tmp_path / "work"
    wd.mkdir()
    out = wd / "results" / "resume" / "smoke"
    args = ["--cores", "2", "--config", f"study={study}"]

    # 1. start the grid, kill the whole process group (a hard crash) once a cell is complete
    log = open(tmp_path / "first.log", "w")
    proc = subprocess.Popen(
        snakemake_cmd(wd, *args),
        cwd=REPO,
        env=clean_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.time() + 900
    while time.time() < deadline and proc.poll() is None:
        done = _evaluated(out)
        mid = [p for p in out.glob("runs/*/checkpoints/latest") if p.parent.parent.name not in done]
        if done and (mid or len(done) >= 2):
            break
        time.sleep(1)
    assert proc.poll() is None, (
        "the grid finished before it could be killed: " + (tmp_path / "first.log").read_text()[-2000:]
    )
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    evaluated = _evaluated(out)
    finished = {c: t for c, t in _summaries(out).items() if c in evaluated}
    assert finished and len(finished) < 3, finished

    # 2. a killed Snakemake leaves its lock: unlock, rerun the same command
    r = run(snakemake_cmd(wd, "--unlock", *args), REPO)
    assert r.returncode == 0, r.stderr[-2000:]
    r = run(snakemake_cmd(wd, *args), REPO, timeout=1500)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]

    after = _summaries(out)
    assert len(after) == 3
    for cell, mtime in finished.items():
        assert after[cell] == mtime, f"{cell} was retrained"
    assert (out / "summary.csv").exists() and list((out / "figures").glob("*.png"))
    # the fit step: evals at steps 0, 2, 4 and 6 carry no fit; refused in the table, not a failed job
    fit = (out / "fit.csv").read_text()
    assert "refused" in fit and "too few points: 3 eval(s) after the first" in fit and (out / "fit.png").exists()

    # 3. MLflow: one run per cell, every step once, the same steps as metrics.jsonl
    from mlflow.tracking import MlflowClient

    client = MlflowClient("sqlite:///" + str(wd / "results" / "mlflow.db"))
    exp = client.get_experiment_by_name("resume/smoke")
    runs = [r for r in client.search_runs([exp.experiment_id]) if "cell" in r.data.tags]
    assert sorted(r.data.tags["cell"] for r in runs) == sorted(after)
    for r_ in runs:
        assert r_.info.status == "FINISHED"
        run_dir = out / "runs" / r_.data.tags["cell"]
        records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
        for key in ("perf/step_seconds", "eval/pass_at_1"):
            steps = [m.step for m in client.get_metric_history(r_.info.run_id, key)]
            assert len(steps) == len(set(steps)), f"{key} duplicated in {run_dir.name}: {steps}"
            assert sorted(steps) == sorted(x["step"] for x in records if key in x), key

    # 4. rerunning a finished grid does nothing
    r = run(snakemake_cmd(wd, "-n", *args), REPO)
    assert "Nothing to be done" in r.stdout + r.stderr

    # 5. the HTML report builds
    r = run(snakemake_cmd(wd, "--report", str(wd / "report.html"), *args), REPO)
    assert r.returncode == 0 and (wd / "report.html").stat().st_size > 10_000, (r.stdout + r.stderr)[-3000:]


def test_tune_smoke(tmp_path):
    r = run(
        [
            str(Path(os.sys.executable).with_name("harness")),
            "tune",
            str(REPO / "experiments" / "tune_demo.yaml"),
            "--scale",
            "smoke",
            "--trials",
            "2",
        ],
        tmp_path,
        timeout=1500,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    best = json.loads((tmp_path / "results" / "tune_demo" / "smoke" / "best.json").read_text())
    assert len(best["trials"]) == 2 and "best_params" in best
    from mlflow.tracking import MlflowClient

    client = MlflowClient("sqlite:///" + str(tmp_path / "results" / "mlflow.db"))
    exp = client.get_experiment_by_name("tune_demo/smoke")
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.data.tags["trial"] for r in runs) == ["0", "1"]
    assert all("param.train.lr" in r.data.tags and r.data.tags.get("optuna.state") for r in runs)
