"""Optuna search over any knobs of a run config: `harness tune experiments/tune_demo.yaml`.

A tune file is a study (harness/experiment/load.py: `base`, `scale`, `scales`, `seeds`) with a
`tune:` section, checked by harness/experiment/schema.py (TuneSection); a study file with a
`tune:` section works too (its grid is ignored: the search starts from the study's first cell,
i.e. base + scale overrides + first seed).

    tune:
      metric: eval/pass_at_1        # an eval metric the trainer logs at eval steps
      direction: maximize           # or minimize
      trials: 4                     # total wanted; a rerun adds only the missing ones
      sampler: {name: tpe, seed: 0} # tpe | random
      pruner: {name: median, n_startup_trials: 2, n_warmup_steps: 0}   # median | none
      space:                        # dotted run-config key -> distribution
        train.lr: {type: float, low: 5.0e-5, high: 1.0e-3, log: true}
        objective.eps_high: {type: float, low: 0.2, high: 0.4}
        train.group_size: {type: int, low: 4, high: 8, step: 4}
        objective.preset: {type: categorical, choices: [grpo, dapo]}

Each trial is a `harness train` subprocess writing results/<name>/<scale>/trials/trial_NNNN/.
Intermediate values for pruning come from its metrics.jsonl as it grows (the trainer flushes
at every checkpoint, so set train.checkpoint_every to eval.every): each record holding the
metric is reported at its step, and a pruned trial's process is interrupted. Storage is
sqlite under results/<name>/<scale>/optuna.db (rerunning resumes the study). Every trial is
an MLflow run of experiment `<name>/<scale>` (the trainer logs it), tagged with the trial
number, its parameters (`param.<key>`) and, at the end, its Optuna state and value.
Fixed grids belong to Snakemake (a GridSampler with 2 workers ran a duplicate trial here).
"""

from __future__ import annotations

import copy
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_text
from harness.config import ConfigError, build_config, dump_config, read_yaml
from harness.experiment.expand import expand
from harness.experiment.keys import apply_override
from harness.experiment.load import find_study, parse_study
from harness.experiment.results import read_jsonl
from harness.experiment.schema import Pruner, Sampler
from harness.experiment.study import StudyError
from harness.tracking import default_tracking_uri, ensure_store
from harness.tracking.runs import tag_run_dir


def suggest(trial, key: str, spec: dict) -> Any:
    t = spec["type"]
    if t == "float":
        return trial.suggest_float(key, float(spec["low"]), float(spec["high"]), log=spec["log"], step=spec.get("step"))
    if t == "int":
        return trial.suggest_int(key, int(spec["low"]), int(spec["high"]), log=spec["log"], step=spec.get("step", 1))
    return trial.suggest_categorical(key, spec["choices"])


class TuneSpec:
    """A loaded, validated tune file: base cell data, search space and Optuna settings."""

    def __init__(self, source: str, scale: str | None = None):
        path = find_study(source)
        raw = read_yaml(path, "tune file", StudyError)
        if not isinstance(raw, dict) or not isinstance(raw.get("tune"), dict):
            raise StudyError(f"{path}: no `tune:` section (see harness/experiment/tune.py for its keys)")
        study_raw = {k: v for k, v in raw.items() if k not in ("grid", "zip", "exclude")}
        self.study = parse_study(study_raw, path=path, scale=scale)  # validates the file, tune: included
        tune = self.study.tune  # schema.TuneSection
        cell = expand(self.study, validate=True)[0]
        self.base = copy.deepcopy(cell.data)
        self.name, self.scale = self.study.name, self.study.scale
        self.metric, self.direction, self.trials, self.timeout_s = (
            tune.metric,
            tune.direction,
            tune.trials,
            tune.timeout_s,
        )
        self.sampler = (tune.sampler or Sampler()).model_dump()  # name, seed and the Optuna options
        self.pruner = (tune.pruner or Pruner()).model_dump()
        self.space = {
            k: d.model_dump(exclude_none=True) for k, d in tune.space.items()
        }  # dotted key -> {type, low, ...}
        # every corner of the space must be a valid run config before any trial runs
        for key, spec in self.space.items():
            values = spec["choices"] if spec["type"] == "categorical" else [spec["low"], spec["high"]]
            for v in values:
                self.trial_config({key: v}, trial_number=-1)

    def trial_config(self, params: dict, trial_number: int):
        data = copy.deepcopy(self.base)
        for k, v in params.items():
            apply_override(data, k, v)
        tags = {
            **data["tracking"]["tags"],
            "trial": str(trial_number),
            "tune": self.name,
            **{f"param.{k}": str(v) for k, v in params.items()},
        }
        tags.pop("cell", None)
        tags.pop("variant", None)
        data["tracking"] = {**data["tracking"], "run_name": f"trial_{trial_number:04d}", "tags": tags}
        try:
            return build_config(data)
        except ConfigError as err:
            raise StudyError(f"tune {self.name}: parameters {params}: {err}") from None


def _study_dir(spec: TuneSpec, results: str) -> Path:
    return Path(results) / spec.name / spec.scale


def _make_sampler(spec: TuneSpec):
    import optuna

    seed = spec.sampler["seed"]
    if spec.sampler["name"] == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    kw = {k: v for k, v in spec.sampler.items() if k not in ("name", "seed")}
    return optuna.samplers.TPESampler(seed=seed, **kw)


def _make_pruner(spec: TuneSpec):
    import optuna

    if spec.pruner["name"] == "none":
        return optuna.pruners.NopPruner()
    kw = {k: v for k, v in spec.pruner.items() if k != "name"}
    return optuna.pruners.MedianPruner(**kw)


def _read_metric(path: Path, metric: str) -> list[tuple[int, float]]:
    return [
        (int(r["step"]), float(r[metric]))
        for r in read_jsonl(path)
        if metric in r and r[metric] is not None and math.isfinite(float(r[metric]))
    ]


def _tag_mlflow(run_dir: Path, tags: dict[str, str], value: float | None, metric: str) -> None:
    if value is not None:
        tags = {**tags, f"optuna.{metric}": str(value)}
    tag_run_dir(run_dir, tags)


def run_trial(trial, spec: TuneSpec, out: Path, poll_s: float = 2.0) -> float:
    import optuna

    params = {key: suggest(trial, key, s) for key, s in spec.space.items()}
    cfg = spec.trial_config(params, trial.number)
    run_dir = out / "trials" / f"trial_{trial.number:04d}"
    cfg_path = out / "trials" / f"trial_{trial.number:04d}.yaml"
    atomic_write_text(cfg_path, dump_config(cfg), only_if_changed=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    threads = cfg.train.threads or 1
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    cmd = [sys.executable, "-m", "harness.cli", "train", str(cfg_path), "--out", str(run_dir)]
    print(f"[tune] trial {trial.number}: {params}", flush=True)
    with open(out / "trials" / f"trial_{trial.number:04d}.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        reported: set[int] = set()
        pruned = False
        while True:
            done = proc.poll() is not None
            for step, value in _read_metric(run_dir / "metrics.jsonl", spec.metric):
                if step in reported:
                    continue
                reported.add(step)
                trial.report(value, step)
                if trial.should_prune():
                    pruned = True
                    break
            if pruned or done:
                break
            time.sleep(poll_s)
        if pruned and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # the trainer marks its MLflow run KILLED
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    series = _read_metric(run_dir / "metrics.jsonl", spec.metric)
    if pruned:
        _tag_mlflow(run_dir, {"optuna.state": "PRUNED"}, series[-1][1] if series else None, spec.metric)
        print(f"[tune] trial {trial.number} pruned at step {max(reported) if reported else '?'}", flush=True)
        raise optuna.TrialPruned()
    if proc.returncode != 0 or not (run_dir / "summary.json").exists():
        _tag_mlflow(run_dir, {"optuna.state": "FAIL"}, None, spec.metric)
        raise RuntimeError(
            f"trial {trial.number}: `harness train` exited {proc.returncode}; "
            f"see {out / 'trials' / f'trial_{trial.number:04d}.log'}"
        )
    if not series:
        raise RuntimeError(f"trial {trial.number}: no {spec.metric} in {run_dir / 'metrics.jsonl'}")
    value = series[-1][1]  # the final eval (the trainer evaluates at the last step)
    _tag_mlflow(run_dir, {"optuna.state": "COMPLETE"}, value, spec.metric)
    print(f"[tune] trial {trial.number}: {spec.metric} = {value:.4f}", flush=True)
    return value


def _write_best(study, spec: TuneSpec, out: Path) -> dict:
    """best.json: every trial (state, value, params, last step) and the best one; printed as a table."""
    import optuna  # heavy: only `harness tune` loads Optuna

    rows = [
        {
            "number": t.number,
            "state": t.state.name,
            "value": t.value,
            "params": t.params,
            "last_step": max(t.intermediate_values) if t.intermediate_values else None,
        }
        for t in study.trials
    ]
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    best = {"metric": spec.metric, "direction": spec.direction, "trials": rows}
    if complete:
        best.update(
            {"best_trial": study.best_trial.number, "best_value": study.best_value, "best_params": study.best_params}
        )
    atomic_write_text(out / "best.json", json.dumps(best, indent=2, default=str) + "\n")
    print("\n[tune] trials:")
    for r in rows:
        v = "" if r["value"] is None else f"{r['value']:.4f}"
        print(f"  #{r['number']:<3} {r['state']:<9} {v:>8}  {r['params']}")
    if complete:
        print(f"[tune] best: trial {best['best_trial']} {spec.metric}={best['best_value']:.4f} {best['best_params']}")
    print(f"[tune] wrote {out / 'best.json'}")
    return best


def run_tune(
    source: str, scale: str | None = None, trials: int | None = None, jobs: int = 1, results: str = "results"
) -> dict:
    import optuna
    from optuna.storages import RDBStorage, RetryFailedTrialCallback

    spec = TuneSpec(source, scale)
    out = _study_dir(spec, results)
    out.mkdir(parents=True, exist_ok=True)
    ensure_store(default_tracking_uri())
    # heartbeat: a trial whose process died (crash, kill) is marked FAIL and retried on the next run
    storage = RDBStorage(
        f"sqlite:///{(out / 'optuna.db').resolve()}",
        heartbeat_interval=30,
        grace_period=90,
        failed_trial_callback=RetryFailedTrialCallback(max_retry=1),
    )
    study = optuna.create_study(
        study_name=f"{spec.name}-{spec.scale}",
        storage=storage,
        load_if_exists=True,
        direction=spec.direction,
        sampler=_make_sampler(spec),
        pruner=_make_pruner(spec),
    )
    wanted = trials or spec.trials
    finished = [
        t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    ]
    todo = max(0, wanted - len(finished))
    print(
        f"[tune] {spec.name} ({spec.scale}): {len(finished)} trials done, running {todo} more; "
        f"storage {out / 'optuna.db'}; MLflow experiment '{spec.study.experiment}'",
        flush=True,
    )
    if todo:
        study.optimize(
            lambda t: run_trial(t, spec, out), n_trials=todo, n_jobs=jobs, timeout=spec.timeout_s, catch=(RuntimeError,)
        )
    best = _write_best(study, spec, out)
    return best
