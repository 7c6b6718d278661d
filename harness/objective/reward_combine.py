"""How several rewards become the one reward the objective sees (`task.reward_combine`, docs/tasks.md).

Glossary: N prompts, G = group size, B = N*G completions (groups contiguous), K rewards (a dataset
task's `task.rewards`; a generated task's `correct` and `format`, weights 1 and format_weight).

    sum_then_normalize   r = sum_k w_k r_k; the objective's baseline and scale normalise r (TRL 1.16's
                         default `multi_objective_aggregation`; every run before this knob)
    normalize_then_sum   r = sum_k w_k (r_k - mean_g r_k) / (std_g r_k + adv_eps)      (GDPO 2601.05242 Eq. 4-5;
                         TRL 1.16 `normalize_then_sum`, verl 0.9.1 `gdpo`): each reward normalised within its
                         group first, so a reward of large spread cannot drown the others; the objective's
                         baseline and scale then act on the sum (GDPO then whitens over the batch:
                         `baseline: batch_mean, scale: batch_std`, equal to TRL and verl there)

The std is the objective's `std` (sample = TRL's and verl's) and the eps its `adv_eps` (verl 1e-6;
TRL hard-codes 1e-4). A group whose reward k is all equal contributes exactly 0 for that reward.
"""

from __future__ import annotations

import torch

from harness.objective.advantages import STD, _divide, _spread

REWARD_COMBINE = ("sum_then_normalize", "normalize_then_sum")


def normalize_then_sum(
    values: torch.Tensor, weights: torch.Tensor, group_size: int, std: str = "sample", adv_eps: float = 1e-6
) -> torch.Tensor:
    """(B,) GDPO's combined reward from the unweighted rewards `values` (B, K) and their weights (K,),
    groups of `group_size` contiguous rows; float64 inside, float32 out, no gradient."""
    if values.dim() != 2 or weights.shape != values.shape[1:]:
        raise ValueError(f"values must be (B, K) and weights (K,), got {tuple(values.shape)}, {tuple(weights.shape)}")
    if group_size < 2 or values.shape[0] % group_size:
        raise ValueError(f"normalize_then_sum needs group_size >= 2 dividing B={values.shape[0]}, got {group_size}")
    STD.check(std)
    v = values.detach().to(torch.float64).view(-1, group_size, values.shape[1]).transpose(1, 2)  # (N, K, G)
    centred = v - v.mean(-1, keepdim=True)  # r_k - mean_g r_k
    same = v.amax(-1, keepdim=True) == v.amin(-1, keepdim=True)
    centred = torch.where(same, torch.zeros_like(centred), centred)  # an all-equal group: exactly 0
    normed = _divide(centred, _spread(v, std).unsqueeze(-1), adv_eps)  # GDPO Eq. 4: per reward, per group
    summed = (normed * weights.to(torch.float64).view(1, -1, 1)).sum(1)  # GDPO Eq. 5: sum_k w_k A_k, (N, G)
    return summed.reshape(-1).to(torch.float32)


def combine(
    mode: str, totals: torch.Tensor, values: torch.Tensor, weights: torch.Tensor, group_size: int, obj
) -> torch.Tensor:
    """The (B,) reward the objective sees: the task's weighted totals (sum_then_normalize, unchanged) or
    GDPO's normalize_then_sum of the per-reward values (B, K) with weights (K,), read with obj.std, obj.adv_eps."""
    if mode == "sum_then_normalize":
        return totals
    if mode == "normalize_then_sum":
        return normalize_then_sum(values, weights, group_size, obj.std, obj.adv_eps)
    raise ValueError(f"task.reward_combine={mode!r}; allowed: {list(REWARD_COMBINE)}")
