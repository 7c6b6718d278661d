"""Section `warm_start`: the SFT before RL, and whether a run has one (a tiny model is built fresh and
warm-started by default; a pretrained one only with warm_start.pretrained)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictBool

from harness.config.base import _Section

TINY = ("tiny-dense", "tiny-moe")  # built fresh (harness/models/registry.py): warm-started by default


class WarmStartSection(_Section):
    enabled: StrictBool = Field(
        True, description="SFT the freshly built model on task demonstrations before RL (cached)"
    )
    steps: int = Field(300, ge=0, description="SFT optimizer steps")
    batch_size: int = Field(64, ge=1, description="demonstrations per SFT optimizer step")
    lr: float = Field(3e-3, gt=0, description="SFT learning rate (AdamW, no weight decay)")
    threads: int = Field(
        2,
        ge=1,
        description="torch CPU threads of the SFT, held fixed whatever the load (the thread governor does "
        "not act) and part of the cache key: the thread count changes a long SFT's weights, so the same "
        "warm start is rebuilt from the same config on the same CPU (docs/reproducibility.md)",
    )
    cache_dir: str = Field(
        "results/warmstart", description="checkpoints are cached here, keyed by model+task+SFT settings"
    )
    pretrained: StrictBool = Field(
        False,
        description="also SFT a pretrained model (smollm2-135m or a folder) before RL, on "
        "the task's demonstrations (a dataset's task.data.solution_key); off: a pretrained model "
        "starts from its own weights",
    )


def uses_warm_start(run: Any) -> bool:
    """Whether the run starts from an SFT warm start: a freshly built tiny model with
    warm_start.enabled, or a pretrained one with warm_start.enabled and warm_start.pretrained."""
    ws = run.warm_start
    return ws.enabled and (run.model.name in TINY or ws.pretrained)


def pretrained_problem(run: Any) -> str | None:
    """warm_start.pretrained set where it is not read: the warm start is off, or the model is built fresh."""
    ws = run.warm_start
    if not (ws.pretrained and (not ws.enabled or run.model.name in TINY)):
        return None
    why = (
        "warm_start.enabled=false"
        if not ws.enabled
        else f"model.name={run.model.name!r} is built fresh (its warm start is governed by warm_start.enabled alone)"
    )
    return f"warm_start.pretrained=true asks for an SFT warm start of a pretrained model, and {why}: drop it"
