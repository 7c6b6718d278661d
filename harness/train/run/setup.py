"""What every trainer (RL loop, DPO) does before its first step: open the run directory
(refusing a different config, returning the summary of a finished run) and build the task,
the initial policy and its prompt renderer; and where a rerun resumes (resume_point)."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from harness import device_defaults, machine, parallel
from harness.atomic import atomic_write_text
from harness.config import ConfigError, RunConfig, build_config, dump_config
from harness.faults import NoReadableCheckpoint, OrphanMetrics
from harness.rollout import make_backend
from harness.threads import start_governor
from harness.train.core.policy_module import matmul_precision, prepare_policy
from harness.train.core.rundir import RunDir, verify
from harness.train.run.hub_record import hub_record
from harness.train.run.task_setup import build_task, prepare_task
from harness.train.run.warmstart import initial_policy

# `train` keys a run may resume with another value of: they change how it runs, not what it computes
RESUMABLE_WITH_OTHER = ("nproc", "parallel", "checkpoint_background")


def check_same_config(run: RunDir, cfg: RunConfig) -> None:
    """Refuse a config other than the one recorded in the run directory once a step of it is
    complete; before that (an attempt that failed early, e.g. on a bad pairs file or out of
    memory), the failed attempt's files are cleared and the new config takes the directory."""
    if not run.config_path.exists():
        return
    new = cfg.to_dict()
    try:
        old = yaml.safe_load(run.config_path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError):
        old = None
    if isinstance(old, dict):
        old.setdefault("trainer", new.get("trainer"))  # recorded before the key existed: the preset's, as now
        old = _with_new_defaults(old)  # keys added to the config since the run began: their defaults, as now
        for d in (old, new):  # how many processes, how they hold the models and whether the checkpoint is
            if isinstance(d.get("train"), dict):  # written in a thread are not part of what a run computes
                d["train"] = {k: v for k, v in d["train"].items() if k not in RESUMABLE_WITH_OTHER}
        diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    else:
        diff = ["<unreadable config.yaml>"]
    if not diff:
        return
    if run.has_completed_step():
        raise ConfigError(
            f"{run.root} already holds a run with a different config (sections {diff} differ); "
            "use another --out, or the same config to resume"
        )
    removed = run.clear_attempt()
    print(
        f"[harness] {run.root}: an earlier attempt with another config (sections {diff} differ) has no completed "
        f"step; starting afresh with this config (removed {', '.join(removed)})",
        flush=True,
    )


def _with_new_defaults(old: dict) -> dict:
    """A recorded config with every key added to the config model since it was written at its default
    (so a run recorded before a new key existed resumes); the recorded dict itself if it no longer loads."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return build_config(old).to_dict()
    except ConfigError:
        return old


def open_run(cfg: RunConfig, out_dir: str | Path) -> tuple[RunDir, dict | None]:
    """(run dir, its summary if the run is already complete, else None)."""
    run = RunDir(out_dir)
    check_same_config(run, cfg)
    if run.summary_path.exists():
        print(f"[harness] {run.root} is complete (summary.json exists); nothing to do")
        return run, json.loads(run.summary_path.read_text())
    return run, None


@dataclass
class Setup:
    device: torch.device
    task: object
    policy: torch.nn.Module
    tok: object
    render: object  # Problem -> prompt token ids
    pad_id: int
    task_info: dict  # what prepare_task did (a dataset task: prompts dropped, pass-rate buckets)


def start_run(run: RunDir, cfg: RunConfig) -> Setup:
    """Write the resolved config, set threads and seed, record the machine (run.json), build the task and
    the initial policy (prepared for training: train/core/policy_module.py), fit the task to it (a dataset task: long prompts dropped, pass-rate buckets: task_setup.py)."""
    atomic_write_text(run.config_path, dump_config(cfg))  # the auto levers as resolved for this device
    start_governor(cfg.train.threads)  # torch threads, fewer while another process holds a core (harness/threads.py)
    run.record_attempt(
        {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "commit": machine.git_commit(),
            "machine": machine.describe(),
            "auto_levers": {"device": cfg.auto_device, **cfg.auto_levers},  # harness/device_defaults.py
            **({"hub": hub} if (hub := hub_record(cfg)) else {}),  # the Hub snapshots it loads (hub_record.py)
        }
    )
    print(f"[harness] {device_defaults.describe(cfg.auto_levers, cfg.auto_device)}", flush=True)
    torch.manual_seed(cfg.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    matmul_precision(cfg.train.tf32)  # train.tf32 (auto: on CUDA)
    task = build_task(cfg)
    task.place(device, parallel.map_shards)  # reward models on the run's device, each process scoring its rows
    policy, tok, render = initial_policy(cfg, device)
    policy = prepare_policy(policy, cfg)  # LoRA adapters, activation checkpointing (docs/scale.md)
    info = prepare_task(cfg, task, tok, render, lambda: make_backend(cfg.rollout, policy, tok))
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return Setup(device, task, policy, tok, render, pad_id, info)


# ----------------------------------------------------------------------------- where a rerun resumes
def resume_point(run: RunDir, load: Callable[[Path], Any]) -> tuple[Path | None, Any]:
    """(checkpoint, load(checkpoint)) of the newest usable checkpoint, or (None, None) for a
    fresh directory. An unreadable checkpoint is renamed unreadable_step_* (kept, never loaded)."""
    found = run.checkpoints()
    if not found:
        steps = run.logged_steps()
        if steps:
            aside = sorted(p.name for p in run.ckpt_root.glob("unreadable_step_*")) if run.ckpt_root.is_dir() else []
            why = f" (unreadable checkpoints set aside: {', '.join(aside)})" if aside else ""
            raise OrphanMetrics(
                f"{run.metrics_path} holds steps {steps[0]}..{steps[-1]} but {run.ckpt_root} has no checkpoint to "
                f"resume them from{why}; refusing to restart at step 0 over them. Restore the checkpoints, or use "
                "another --out (or delete this directory) to start afresh."
            )
        return None, None
    marker = run.marker()
    if marker != found[0].name:
        what = "is missing" if marker is None else f"names {marker!r}"
        print(f"[harness] {run.ckpt_root}/latest {what}; the newest checkpoint on disk is {found[0].name}", flush=True)
    for i, ckpt in enumerate(found):
        reason = verify(ckpt)
        if reason is None:
            try:
                return ckpt, load(ckpt)
            except Exception as err:  # noqa: BLE001 -- any load failure: try the previous checkpoint
                reason = f"{type(err).__name__}: {str(err)[:200]}"
        aside = run.set_aside(ckpt)
        nxt = f"falling back to {found[i + 1].name}" if i + 1 < len(found) else "no earlier checkpoint is left"
        print(
            f"[harness] WARNING: checkpoint {ckpt.name} is unreadable ({reason}); kept as {aside.name}; {nxt}",
            flush=True,
        )
    raise NoReadableCheckpoint(
        f"no checkpoint in {run.ckpt_root} loads ({', '.join(p.name for p in found)} were set aside as "
        "unreadable_step_*); refusing to restart at step 0 over this run. Use another --out to start afresh."
    )
