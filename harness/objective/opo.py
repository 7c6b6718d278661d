"""OPO's length-weighted baseline (Hao et al., "On-Policy RL with Optimal Reward Baseline", arXiv 2505.23585),
docs/objective.md, "Advantage" -- `baseline: opo`.

Under a sequence-sum loss the gradient's variance is least with the baseline that weighs each response's
reward by its length (the paper's Eq. 5, with the gradient's norm taken proportional to the length):

    b_g = sum_{j in g} |o_j| r_j / sum_{j in g} |o_j|,     A_i = (r_i - b_g) / scale

`scale: none` in the `opo` preset, as the paper and verl 0.9.1's `opo` estimator
(verl/trainer/ppo/core_algos.py `compute_opo_outcome_advantage`, equal to 1e-6:
tests/objective/test_objective_opo.py). A group of one response has baseline 0 (verl's rule); a group whose
responses are all empty, no weight, takes the plain mean; an all-equal group's advantage is exactly 0.

Glossary: N prompts, G group size, B = N*G (groups contiguous), T padded response length, M the mask (B, T),
|o_i| = sum_t M[i, t].
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from harness.objective.advantages import SCALE
from harness.objective.extensions import Hooks, Scored
from harness.objective.kl import kl_in_reward, reward_kl_on
from harness.objective.modes import register_baseline

if TYPE_CHECKING:
    from harness.objective.config import ObjectiveConfig


def opo_centred(rewards: torch.Tensor, lengths: torch.Tensor, group_size: int) -> torch.Tensor:
    """r - b (N, G) in float64 from the rewards (B,) and the response lengths |o_i| (B,):
    b_g = sum_j |o_j| r_j / sum_j |o_j| over each group (2505.23585 Eq. 5); 0 for a group of one."""
    r = rewards.detach().to(torch.float64).view(-1, group_size)  # (N, G)
    n = lengths.detach().to(torch.float64).view(-1, group_size)  # (N, G)
    if group_size == 1:
        return r.clone()  # verl: a lone response's baseline is 0
    total = n.sum(-1, keepdim=True)  # (N, 1)
    weighted = (n * r).sum(-1, keepdim=True) / total.clamp_min(1.0)  # sum |o_j| r_j / sum |o_j|
    b = torch.where(total > 0, weighted, r.mean(-1, keepdim=True))  # no length at all: the plain mean
    same = (r.amax(-1) == r.amin(-1)).unsqueeze(-1)  # all-equal group: exactly 0, never a rounding residue
    return torch.where(same, torch.zeros_like(r), r - b)


@register_baseline(
    "opo",
    doc="b_g = the group's length-weighted mean reward, sum |o_j| r_j / sum |o_j| (OPO 2505.23585, verl `opo`)",
    hooks=Hooks(),
    per_token=True,
)
def _opo_scored(
    cfg: ObjectiveConfig, rewards: torch.Tensor, mask: torch.Tensor, group_size: int, inputs: dict
) -> Scored:
    """The `advantages` hook: the baseline needs the response lengths, which only the mask (B, T) holds."""
    if reward_kl_on(cfg):
        rewards = kl_in_reward(cfg, rewards, inputs["logp"], inputs["ref_logp"], mask)
    if rewards.dim() != 1 or rewards.shape[0] % group_size:
        raise ValueError(f"rewards (B,) with B a multiple of group_size={group_size}, got {tuple(rewards.shape)}")
    r = rewards.detach().to(torch.float64).view(-1, group_size)
    u = opo_centred(rewards, (mask > 0).sum(-1), group_size)
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()
    adv = SCALE[cfg.scale](u, r, cfg).reshape(-1).to(out_dtype)
    return Scored(adv=adv, returns=None, rewards=rewards)


__all__ = ["opo_centred"]
