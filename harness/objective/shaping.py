"""Batch-level reward shaping and filtering of DAPO (Yu et al. 2503.14476), docs/objective.md §6.

Glossary: N prompts, G group size, B = N*G sequences with groups contiguous.
"""

from __future__ import annotations

import torch


def overlong_penalty(lengths: torch.Tensor, max_len: int, buffer: int, penalty: float = 1.0) -> torch.Tensor:
    """DAPO soft overlong punishment (R_length), added to the task reward; (B,) lengths -> (B,) float <= 0.

        R_len(L) = 0                                       L <= max_len - buffer
                 = -penalty * (L - (max_len - buffer)) / buffer    max_len - buffer < L <= max_len
                 = -penalty                                L > max_len
    (paper: max_len = L_max = 20480, buffer = L_cache = 4096, penalty 1.0). buffer = 0 -> all 0.
    """
    lengths = torch.as_tensor(lengths)
    out_dtype = lengths.dtype if lengths.is_floating_point() else torch.get_default_dtype()
    if buffer < 0 or buffer > max_len:
        raise ValueError(f"overlong_buffer={buffer} must lie in [0, max_len={max_len}]")
    if penalty < 0:
        raise ValueError(f"overlong_penalty={penalty} must be >= 0")
    L = lengths.to(torch.float64)
    if buffer == 0:
        return torch.zeros_like(L, dtype=out_dtype)
    expected = max_len - buffer
    ramp = -penalty * (L - expected) / buffer
    out = torch.where(L <= expected, torch.zeros_like(L), torch.where(L <= max_len, ramp, torch.full_like(L, -penalty)))
    return out.to(out_dtype)


def dynamic_sampling_keep(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """(N,) bool: groups whose rewards are NOT all equal (DAPO dynamic sampling: the constraint
    0 < |{o_i correct}| < G of its objective). An all-equal group has zero advantage under group baselines, so it
    contributes no gradient and only dilutes the batch. Pass the correctness (accuracy, 0/1), not
    the overlong-shaped reward, as DAPO and verl do: an all-wrong group whose lengths differ is dropped."""
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be (B,), got shape {tuple(rewards.shape)}")
    if group_size < 2 or rewards.shape[0] % group_size:
        raise ValueError(
            f"dynamic_sampling needs group_size >= 2 dividing B={rewards.shape[0]} (a single sample is always "
            f"'all equal'), got group_size={group_size}"
        )
    g = rewards.view(-1, group_size)
    return g.amax(-1) != g.amin(-1)
