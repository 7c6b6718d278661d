"""`harness eval RUN_DIR`: pass@k of a finished run's final checkpoint on the held-out set."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from harness.config import load_config
from harness.models import load_model
from harness.rollout import make_backend
from harness.tasks import make_task
from harness.train.evaluate import evaluate
from harness.train.loop import EVAL_SEED_OFFSET
from harness.train.policy_init import DTYPES, make_render
from harness.train.rundir import RunDir, atomic_write_text


def eval_run(run_dir: str | Path, n_samples: int | None = None, num_prompts: int | None = None) -> dict:
    run = RunDir(run_dir)
    ckpt = run.latest_checkpoint()
    if ckpt is None or not run.config_path.exists():
        raise FileNotFoundError(f"{run_dir} has no config.yaml or checkpoint: train it first")
    overrides = [f"eval.n_samples={n_samples}"] if n_samples else []
    overrides += [f"eval.num_prompts={num_prompts}"] if num_prompts else []
    if n_samples:
        overrides.append(f"eval.ks={[k for k in (1, 2, 4, 8, 16, 32, 64) if k <= n_samples]}")
    cfg = load_config(run.config_path, overrides)
    model, tok = load_model(ckpt, dtype=DTYPES[cfg.model.dtype])
    model.to("cuda" if torch.cuda.is_available() else "cpu")
    task = make_task(cfg.task.name, **({"difficulty_mix": cfg.task.difficulty_mix} if cfg.task.difficulty_mix else {}),
                     **cfg.task.options)
    problems = task.problems(cfg.eval.num_prompts, seed=cfg.eval.seed + EVAL_SEED_OFFSET, split="eval")
    backend = make_backend(cfg.rollout, model, tok)
    try:
        result = evaluate(task, backend, make_render(tok, cfg.model.prompt_suffix), problems, cfg, step=10**6)
    finally:
        backend.close()
    result = {"checkpoint": ckpt.name, "n_samples": cfg.eval.n_samples, "num_prompts": cfg.eval.num_prompts, **result}
    atomic_write_text(run.root / "eval.json", json.dumps(result, indent=2, sort_keys=True))
    return result
