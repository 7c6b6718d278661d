"""The step-0 eval of a cached warm start, cached beside it.

Every run that starts from the same warm start and evaluates with the same settings draws
the same samples at step 0 (common random numbers: evaluate.py), so its step-0 eval is a
property of the warm start, not of the run. It is computed once and stored in
WARM_START/eval_cache/<key>.json (metrics + per-prompt pass@1); later runs (other seeds,
presets, knobs) load it. The key holds everything that can change those samples or their
scoring: the eval section (less `every`), the rollout section, the task, the prompt suffix,
the model dtype and torch's thread count (CPU matmuls may round differently across thread
counts, which can flip a near-tie sample).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from harness.train.rundir import atomic_write_text

CACHE_DIR = "eval_cache"


def eval_cache_path(cfg, warm_folder: Path) -> Path:
    ev = {k: v for k, v in cfg.eval.model_dump().items() if k != "every"}
    key = {"eval": ev, "rollout": cfg.rollout.model_dump(), "task": cfg.task.model_dump(),
           "prompt_suffix": cfg.model.prompt_suffix, "dtype": cfg.model.dtype, "threads": torch.get_num_threads()}
    digest = hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return Path(warm_folder) / CACHE_DIR / f"{digest}.json"


def load_eval(path: Path) -> tuple[dict, list[float]] | None:
    """(metrics, per-prompt pass@1) if cached, else None (also for an unreadable file)."""
    try:
        data = json.loads(path.read_text())
        return data["metrics"], data["pass_at_1"]
    except (OSError, ValueError, KeyError):
        return None


def save_eval(path: Path, metrics: dict, pass_at_1: list[float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"metrics": metrics, "pass_at_1": pass_at_1}))
