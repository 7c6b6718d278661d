"""Batch-level reward shaping and filtering of DAPO (Yu et al. 2503.14476) and ScaleRL (2510.13786),
docs/objective.md, "Batch-level knobs"; below them, the hooks the data side's extensions declare (extensions.py), each
reading its own knobs.

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


# ----------------------------------------------------------------------------- the extensions' hooks
def overlong_shaping(cfg, lengths: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """objective.overlong_buffer / overlong_penalty: R_len of each response (B,), max_len = rollout.max_new_tokens."""
    return overlong_penalty(lengths, max_new_tokens, cfg.overlong_buffer, cfg.overlong_penalty)


def mixed_accuracy_groups(cfg, rewards: torch.Tensor, correct: torch.Tensor, group_size: int) -> torch.Tensor:
    """objective.dynamic_sampling: (N,) the groups with 0 < #correct < G (DAPO Eq. 11), on accuracy, not on the
    shaped reward."""
    return dynamic_sampling_keep(correct.float(), group_size)


def unequal_reward_groups(cfg, rewards: torch.Tensor, correct: torch.Tensor, group_size: int):
    """objective.zero_variance_filter: ((N,) the groups whose rewards, as the objective sees them, are not all
    equal, {groups/zero_var_dropped: how many are not})."""
    keep = dynamic_sampling_keep(rewards, group_size)
    return keep, {"groups/zero_var_dropped": float((~keep).sum())}


def retirement_pass_rate(cfg) -> float:
    """objective.no_positive_resampling: the running pass rate at which a prompt leaves the pool."""
    return cfg.no_positive_resampling
