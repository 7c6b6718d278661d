"""The data side and the after-step of a step, as the active modes declare them (their `Hooks`,
extensions.py): the trainer calls these and reads no knob of its own.

    shaping = reward_shaping(obj, lengths, max_new_tokens, like)   added to each response's reward (B,)
    refills(obj)                                                     a sampling round refills dropped groups
    keep    = refill_keep(obj, rewards, correct, G)                  (N,) the groups a round keeps, or None
    keep, m = group_keep(obj, rewards, correct, G)                   (N,) the groups the step trains on, or None
    retire_at(obj)                                                   the pass rate retiring a prompt, or None
    resets_reference(obj, step)                                      pi_ref <- pi_theta after this step
    idx     = resampled_rows(obj, rewards, generator)                (B,) the rows the update trains on, or None

Shapes: N prompts, G group size, B = N*G rows with each prompt's G rows contiguous.
"""

from __future__ import annotations

from typing import Any

import torch

from harness.objective.extensions import active_hooks


def reward_shaping(obj: Any, lengths: torch.Tensor, max_new_tokens: int, like: torch.Tensor) -> torch.Tensor:
    """(B,) the sum of the active modes' shaping terms (zeros like `like`, the rewards, without one)."""
    out = torch.zeros_like(like)
    for fn in active_hooks(obj, "reward_shaping"):
        out = out + fn(obj, lengths, max_new_tokens)
    return out


def refills(obj: Any) -> bool:
    """Whether a mode filters the groups of each sampling round and has the dropped ones refilled."""
    return bool(active_hooks(obj, "refill_filter"))


def refill_keep(obj: Any, rewards: torch.Tensor, correct: torch.Tensor, group_size: int) -> torch.Tensor | None:
    """(N,) bool: the groups of one sampling round every refill filter keeps; None when no mode filters."""
    return _all_keep([fn(obj, rewards, correct, group_size) for fn in active_hooks(obj, "refill_filter")])


def group_keep(obj: Any, rewards: torch.Tensor, correct: torch.Tensor, group_size: int):
    """((N,) bool the groups every group filter keeps, their metrics), or (None, {}) when no mode filters; the
    dropped groups are not refilled."""
    got = [fn(obj, rewards, correct, group_size) for fn in active_hooks(obj, "group_filter")]
    metrics = {k: v for _, m in got for k, v in m.items()}
    return _all_keep([keep for keep, _ in got]), metrics


def retire_at(obj: Any) -> float | None:
    """The running pass rate at which a prompt leaves the training pool (a mode's), None: no pool."""
    found = [fn(obj) for fn in active_hooks(obj, "retire_at")]
    return min(found) if found else None


def resets_reference(obj: Any, step: int) -> bool:
    """Whether pi_ref takes the policy's weights after `step` (a mode's schedule)."""
    return any(fn(obj, step) for fn in active_hooks(obj, "reset_reference"))


def resampled_rows(obj: Any, rewards: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
    """(B,) long: the rows of the scored batch the update trains on, drawn by the active mode (PF-PPO's
    reward-weighted resampling); None when no mode resamples (the batch as it is)."""
    found = active_hooks(obj, "resample")
    if len(found) > 1:
        raise ValueError("two active modes resample the batch; pick one")
    return found[0](obj, rewards, generator) if found else None


def _all_keep(keeps: list[torch.Tensor]) -> torch.Tensor | None:
    if not keeps:
        return None
    out = keeps[0]
    for k in keeps[1:]:
        out = out & k
    return out
