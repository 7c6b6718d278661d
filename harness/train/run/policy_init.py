"""The policy a run starts from: the cached SFT warm start, or a fresh/pretrained model."""
from __future__ import annotations

import json

import torch

from harness.models import build_model, load_model, render_problem
from harness.train.run.warmstart import ensure_warm_start

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def initial_policy(cfg, device: torch.device):
    """-> (model on device, tokenizer, render: Problem -> prompt token ids)."""
    dtype = DTYPES[cfg.model.dtype]
    if cfg.uses_warm_start():  # a fresh tiny model, or a pretrained one with warm_start.pretrained
        model, tok = load_model(ensure_warm_start(cfg), dtype=dtype)
    else:
        model, tok = build_model(cfg.model.name, seed=cfg.seed, overrides=cfg.model.overrides, dtype=dtype)
    model.to(device)
    return model, tok, make_render(tok, cfg.model.prompt_suffix)


def make_render(tok, suffix: str = ""):
    """Problem -> prompt token ids (the model's template around the problem's prompt + suffix, with a
    dataset problem's system prompt and chat messages: render_problem), memoised."""
    cache: dict[str, list[int]] = {}

    def render(problem) -> list[int]:
        meta = getattr(problem, "meta", None) or {}
        key = problem.prompt if not (meta.get("messages") or meta.get("system")) else json.dumps(
            [problem.prompt, meta.get("messages"), meta.get("system")])
        if key not in cache:
            cache[key] = render_problem(tok, problem, suffix)
        return cache[key]

    return render
