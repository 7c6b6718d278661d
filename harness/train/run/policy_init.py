"""The policy a run starts from: the cached SFT warm start, or a fresh/pretrained model."""
from __future__ import annotations

import torch

from harness.models import build_model, load_model, render_prompt
from harness.train.run.warmstart import ensure_warm_start

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def initial_policy(cfg, device: torch.device):
    """-> (model on device, tokenizer, render: Problem -> prompt token ids)."""
    dtype = DTYPES[cfg.model.dtype]
    if cfg.warm_start.enabled and cfg.model.name.startswith("tiny-"):
        model, tok = load_model(ensure_warm_start(cfg), dtype=dtype)
    else:
        model, tok = build_model(cfg.model.name, seed=cfg.seed, overrides=cfg.model.overrides, dtype=dtype)
    model.to(device)
    return model, tok, make_render(tok, cfg.model.prompt_suffix)


def make_render(tok, suffix: str = ""):
    """Problem -> prompt token ids (the model's template around problem.prompt + suffix), memoised."""
    cache: dict[str, list[int]] = {}

    def render(problem) -> list[int]:
        if problem.prompt not in cache:
            cache[problem.prompt] = render_prompt(tok, problem.prompt + suffix)
        return cache[problem.prompt]

    return render
