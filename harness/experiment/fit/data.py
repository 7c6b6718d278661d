"""A run's eval curve against its cumulative training compute, read from its folder.

The trainer logs per step (metrics.jsonl) what each compute axis needs:
    generated_tokens  perf/rollout_tokens_per_s x perf/rollout_seconds: the response tokens of the
                      step's batch (under dynamic sampling, groups the filter dropped are not counted)
    trained_tokens    perf/train_tokens_per_s x perf/update_seconds: those tokens x train.inner_epochs
    flops             6 N x trained tokens + 2 N x generated tokens, N = the model's parameters
                      (--params, else the model of config.yaml built on the meta device): the forward+backward of training
                      and the forward of sampling, prompts, attention and the reference's forwards left out
    wall_seconds      the steps' own seconds (perf/step_seconds less perf/eval_seconds): evals and
                      checkpoint writes are no training compute
    steps             optimizer steps
The eval logged in the record of step s ran before step s trained: its compute is the sum over steps < s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.experiment.fit.params import model_params
from harness.experiment.results import read_jsonl
from harness.experiment.study import StudyError

COMPUTE_AXES = ("generated_tokens", "trained_tokens", "flops", "wall_seconds", "steps")
UNITS = {
    "generated_tokens": "generated tokens",
    "trained_tokens": "trained tokens",
    "flops": "FLOPs (6N x trained + 2N x generated tokens)",
    "wall_seconds": "training wall seconds",
    "steps": "optimizer steps",
}
PER_PROMPT_METRIC = "eval/pass_at_1"  # the one metric saved per prompt (DIR/eval_prompts/step_N.json)


class NoCompute(ValueError):
    """A run whose records cannot give the compute axis asked for (the reason: its message)."""


@dataclass
class RunCurve:
    """One run's evals: steps, cumulative compute, the metric, and (P,) per-prompt scores per eval or None."""

    steps: np.ndarray
    compute: np.ndarray
    y: np.ndarray
    prompts: np.ndarray | None = None  # (evals, P)
    notes: list[str] = field(default_factory=list)


def _product(rec: dict, rate: str, seconds: str) -> float | None:
    if rate in rec and seconds in rec:
        return float(round(float(rec[rate]) * float(rec[seconds])))  # integer counts: undo the rate's rounding
    return None


def _tokens(rec: dict, kind: str) -> float | None:
    if kind == "generated":
        return _product(rec, "perf/rollout_tokens_per_s", "perf/rollout_seconds")
    return _product(rec, "perf/train_tokens_per_s", "perf/update_seconds")


def step_compute(rec: dict, axis: str, params: float | None) -> float | None:
    """The compute one training record's step spent on `axis` (None: not in the record)."""
    if axis == "steps":
        return 1.0
    if axis == "wall_seconds":
        t = rec.get("perf/step_seconds")
        return None if t is None else float(t) - float(rec.get("perf/eval_seconds", 0.0))
    if axis in ("generated_tokens", "trained_tokens"):
        return _tokens(rec, axis.split("_")[0])
    gen, trained = _tokens(rec, "generated"), _tokens(rec, "trained")
    if gen is None or trained is None or params is None:
        return None
    return 6.0 * params * trained + 2.0 * params * gen


def _model_params(run: Path, params: float | None) -> float | None:
    """--params, else the run's model built from its config.yaml on the meta device."""
    return params if params is not None else model_params(run)


def _per_prompt(run: Path, steps: list[int]) -> np.ndarray | None:
    rows = []
    for s in steps:
        f = run / "eval_prompts" / f"step_{s:06d}.json"
        if not f.is_file():
            return None
        rows.append(json.loads(f.read_text())["pass_at_1"])
    if len({len(r) for r in rows}) != 1:
        return None
    return np.asarray(rows, dtype=float)


def read_curve(run: str | Path, metric: str, axis: str, params: float | None = None) -> RunCurve:
    """The run's evals of `metric` against cumulative `axis` compute; NoCompute when the records lack it."""
    if axis not in COMPUTE_AXES:
        raise StudyError(f"--compute {axis!r} is not one of {list(COMPUTE_AXES)}")
    run = Path(run)
    records = read_jsonl(run / "metrics.jsonl")
    n_params = _model_params(run, params) if axis == "flops" else None
    if axis == "flops" and n_params is None:
        raise NoCompute("flops need the model's parameter count: config.yaml does not give it; pass --params N")
    cum, steps, compute, y = 0.0, [], [], []
    for rec in sorted(records, key=lambda r: r.get("step", 0)):
        if metric in rec:
            steps.append(int(rec["step"]))
            compute.append(cum)
            y.append(float(rec[metric]))
        if "reward/mean" in rec or "perf/update_seconds" in rec:  # a training step (the final record has none)
            c = step_compute(rec, axis, n_params)
            if c is None:
                raise NoCompute(f"step {rec.get('step')} of metrics.jsonl does not log what {axis} needs")
            cum += c
    prompts = _per_prompt(run, steps) if metric == PER_PROMPT_METRIC and steps else None
    return RunCurve(np.asarray(steps), np.asarray(compute), np.asarray(y), prompts)


def pass_at_1_curves(data) -> dict[str, RunCurve | None]:
    """Each cell of a study's figures data (harness.experiment.figures.StudyData): its held-out pass@1 evals
    against cumulative generated tokens, as the fitter reads them; None for a run without two evals yet."""
    out: dict[str, RunCurve | None] = {}
    for cell in data.cells:
        try:
            c = read_curve(data.run_dir(cell), PER_PROMPT_METRIC, "generated_tokens")
        except (OSError, ValueError):
            c = None
        out[cell["id"]] = c if c is not None and len(c.y) > 1 else None
    return out


def logged_eval_metrics(runs: list[str | Path]) -> set[str]:
    """The eval/* keys the runs' metrics.jsonl hold (the runs whose records cannot be read are skipped)."""
    keys: set[str] = set()
    for run in runs:
        try:
            records = read_jsonl(Path(run) / "metrics.jsonl")
        except (OSError, ValueError):
            continue
        keys.update(k for rec in records for k in rec if str(k).startswith("eval/"))
    return keys
