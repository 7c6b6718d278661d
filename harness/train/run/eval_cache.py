"""The step-0 eval of a cached warm start, cached beside it.

Every run that starts from the same warm start and evaluates with the same settings draws
the same samples at step 0 (common random numbers: evaluate.py), so its step-0 eval is a
property of the warm start, not of the run (no objective knob enters an eval score). It is computed once and stored in
WARM_START/eval_cache/<key>.json (metrics + per-prompt pass@1); later runs (other seeds,
presets, knobs, the DPO trainer) load it. `eval_at` is the eval both trainers call. The key holds everything that can change those samples or their
scoring: the eval section (less `every`), the rollout section, the task, the prompt suffix,
the model dtype and torch's thread count (CPU matmuls may round differently across thread
counts, which can flip a near-tie sample), the machine's kernel path and a digest of the code that
samples and scores (harness/machine.py): an eval cached by other code or on other kernels is redone.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from harness import machine, parallel
from harness.atomic import atomic_write_text
from harness.tasks import task_code
from harness.tasks.dataset.hub import without_hub_defaults
from harness.train.eval.evaluate import evaluate, save_prompt_scores
from harness.train.run.warmstart import warm_start_folder

CACHE_DIR = "eval_cache"
# The modules whose code samples and scores an eval (the task's own modules are added from its class).
EVAL_MODULES = (
    "harness.train.eval.evaluate",
    "harness.train.run.eval_cache",
    "harness.train.core.collect",
    "harness.rollout.base",
    "harness.objective.passk",
    "harness.models.logprobs",
)
_BACKEND_MODULES = {
    # the backend's module first, then what it imports from harness.rollout (tests/train/test_code_digests.py)
    "hf": ("harness.rollout.hf", "harness.rollout.hf_rows", "harness.rollout.samplers", "harness.rollout.row_seeds"),
    "vllm": (
        "harness.rollout.vllm_backend",
        "harness.rollout.vllm_engine",
        "harness.rollout.vllm_sync",
        "harness.rollout.vllm_worker",
    ),
}


def eval_code_digest(cfg) -> str:
    return machine.code_digest(
        [*EVAL_MODULES, *_BACKEND_MODULES.get(cfg.rollout.backend, ()), *task_code(cfg.task.name)]
    )


def eval_cache_path(cfg, warm_folder: Path) -> Path:
    ev = {k: v for k, v in cfg.eval.model_dump().items() if k not in ("every", "spacing", "points")}  # when, not what
    # "scoring": evals score the task's reward alone (no objective shaping, evaluate.py); entries written
    # before that (a dapo run's eval/reward/mean carried its overlong shaping) have no such field: never read
    key = {
        "scoring": "task_reward",
        "eval": ev,
        "rollout": {k: v for k, v in cfg.rollout.model_dump().items() if k != "staleness"},  # step 0: no stale weights
        "task": without_hub_defaults(cfg.task.model_dump()),
        "prompt_suffix": cfg.model.prompt_suffix,
        "dtype": cfg.model.dtype,
        **({"lm_head_fp32": True} if cfg.model.lm_head_fp32 else {}),  # model.lm_head_fp32: other logits
        "threads": torch.get_num_threads(),
        "code": eval_code_digest(cfg),
        "kernels": machine.kernel_path(),
    }
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


def eval_at(task, backend, render, problems, cfg, step: int, run_root: Path) -> dict[str, float]:
    """evaluate() at `step`, per-prompt pass@1 saved to the run dir; at step 0 of a run from a
    warm start (the policy is the warm start) the eval comes from the cache, or is cached."""
    if step != 0 or not cfg.warm_start.enabled:
        return evaluate(task, backend, render, problems, cfg, step, save_to=run_root)
    path = eval_cache_path(cfg, warm_start_folder(cfg))
    cached = load_eval(path)
    if cached is not None:
        metrics, pass_at_1 = cached
        save_prompt_scores(run_root, 0, pass_at_1)
        if parallel.is_main():
            print(f"[harness] step-0 eval of the warm start: cached in {path}")
        return metrics
    per_prompt: dict = {}
    metrics = evaluate(task, backend, render, problems, cfg, 0, per_prompt=per_prompt, save_to=run_root)
    if parallel.is_main():  # on N processes every rank computed the same eval; rank 0 caches it
        save_eval(path, metrics, per_prompt["pass_at_1"].tolist())
    return metrics
