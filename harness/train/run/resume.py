"""Resuming a run from its newest readable checkpoint (setup.py resume_point finds it), on any number of processes.

    ckpt, loaded = read_newest(run, policy)             # rank 0 reads; every rank gets (name, (weights, state))
    restore_policy(policy, backend, ckpt, loaded)       # before the components are built from the policy
    start, elapsed = restore_state(ctx, trainer, ckpt, loaded[1])   # optimizer, components, trainer; the logs cut

The weights are loaded in place (the optimizer and the rollout engine keep the policy module), then the engine
synced; the run directory's records after the checkpoint's step are cut (they are redone).
"""

from __future__ import annotations

from typing import Any

import torch

from harness import parallel
from harness.train.core.policy_module import check_resumed_base, load_policy_weights, read_policy_weights
from harness.train.core.rundir import RunDir
from harness.train.core.trainer import RunContext, Trainer
from harness.train.run.setup import resume_point


def read_newest(run: RunDir, policy: torch.nn.Module) -> tuple[str | None, Any]:
    """(the newest readable checkpoint's name, (its policy weights, its trainer state)) as rank 0 read them, on
    every rank (a run resumes on any number of processes); (None, None) for a fresh run."""
    ckpt, loaded = (
        resume_point(run, lambda c: (read_policy_weights(policy, c), run.load_state(c)))
        if parallel.is_main()
        else (None, None)
    )
    return parallel.broadcast_object((ckpt.name if ckpt is not None else None, loaded))


def restore_policy(policy: torch.nn.Module, backend, ckpt: str, loaded) -> None:
    """The checkpoint's weights into `policy` in place, then into the rollout engine."""
    check_resumed_base(policy, loaded[1], ckpt)  # LoRA: the adapters' base is the one built now
    load_policy_weights(policy, loaded[0])
    backend.sync_weights(policy)


def restore_state(ctx: RunContext, trainer: Trainer, ckpt: str, state: dict) -> tuple[int, float]:
    """The policy's optimizer, every component's and the trainer's state from `state`; the run's records after
    its step cut. Returns (the first step to run, the wall seconds the run had spent)."""
    ctx.policy.optimizer.load_state_dict(state["optimizer"])
    for c in ctx.components:
        c.load(state)
    trainer.load_state_dict(state)
    start = state["step"] + 1
    ctx.run.truncate_after(state["step"])
    ctx.last_ckpt = ckpt
    if parallel.is_main():
        print(f"[harness] resuming {ctx.run.root} at step {start} from {ckpt}")
    return start, state["elapsed"]
