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
    return model, tok, make_render(tok, cfg.model.prompt_suffix, system_prompt(cfg))


def system_prompt(cfg) -> str | None:
    """A dataset task's task.data.system_prompt (None otherwise)."""
    data = getattr(cfg.task, "data", None)
    return data.system_prompt if cfg.task.name == "dataset" and data is not None else None


def make_render(tok, suffix: str = "", system: str | None = None):
    """Problem -> prompt token ids (the model's template around the problem's prompt + suffix, with a
    dataset problem's system prompt and chat messages: render_problem), memoised. `system`: the system
    prompt of anything without its own meta (a DPO pair's prompt)."""
    cache: dict[str, list[int]] = {}

    def render(problem) -> list[int]:
        meta = getattr(problem, "meta", None)
        if meta is None and system is not None:
            meta = {"system": system}
            problem = _WithMeta(problem.prompt, meta)
        meta = meta or {}
        key = (
            problem.prompt
            if not (meta.get("messages") or meta.get("system"))
            else json.dumps([problem.prompt, meta.get("messages"), meta.get("system")])
        )
        if key not in cache:
            cache[key] = render_problem(tok, problem, suffix)
        return cache[key]

    return render


class _WithMeta:
    def __init__(self, prompt: str, meta: dict):
        self.prompt, self.meta = prompt, meta
