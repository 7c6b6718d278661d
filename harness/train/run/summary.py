"""The end of a finished run: summary.json (first and last eval, wall time, paired rise) and its MLflow artifacts.

    summary = finish(cfg, trainer, run, tracker, wall_seconds, task_info)  # the dict written to summary.json

Called by the run shell (shell.py) once the last step's checkpoint is written; every trainer's summary holds
the same keys (run_summary), then its own (Trainer.summary).
"""

from __future__ import annotations

from harness.config import RunConfig
from harness.jsonl import read_jsonl
from harness.train.core.rundir import RunDir
from harness.train.core.trainer import Trainer
from harness.train.eval.evaluate import paired_rise


def finish(cfg: RunConfig, trainer: Trainer, run: RunDir, tracker, wall_seconds: float, task_info) -> dict:
    """summary.json written (the shell's summary and the trainer's own), the run's files logged as artifacts,
    the MLflow run FINISHED; returns the summary."""
    summary = {**run_summary(cfg, trainer, run, wall_seconds, task_info), **trainer.summary()}
    run.write_summary(summary)
    for name in ["config.yaml", "summary.json", "samples.jsonl", *trainer.artifacts()]:
        if (run.root / name).exists():
            tracker.log_artifact(str(run.root / name))
    tracker.finish("FINISHED")
    return summary


def run_summary(cfg: RunConfig, trainer: Trainer, run: RunDir, wall_seconds: float, task_info) -> dict:
    """What every trainer's summary holds, read from metrics.jsonl; task_info: a dataset task's prompts dropped
    and pass-rate buckets (None or {} for none)."""
    records = read_jsonl(run.metrics_path)
    evals = [r for r in records if "eval/pass_at_1" in r]
    first, last = (evals[0], evals[-1]) if evals else ({}, {})
    return {
        "algorithm": cfg.objective.algorithm,
        "trainer": cfg.trainer,
        "steps": trainer.final_step,
        "wall_seconds": wall_seconds,
        "initial_eval": {k: v for k, v in first.items() if k.startswith("eval/")},
        "final_eval": {k: v for k, v in last.items() if k.startswith("eval/")},
        "tags": cfg.tracking.tags,
        "mean_step_seconds": (sum(r.get("perf/step_seconds", 0.0) for r in records) / max(1, len(records) - 1)),
        "paired_rise": paired_rise(run.root),  # first -> last eval, bootstrap 95% interval over prompts
        **({"task": task_info} if task_info else {}),
    }
