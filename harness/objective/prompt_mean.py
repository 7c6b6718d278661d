"""`agg: prompt_mean` -- prompt-level loss aggregation (ScaleRL, arXiv 2510.13786 §3.2 and Eq. 1 of its recipe, §4):
each prompt's G responses share one token mean, and every prompt weighs the same.

    L = (1/N) sum_g (1 / sum_{i in g} |o_i|) sum_{i in g} sum_t M l_it          ScaleRL "prompt average"

between token_mean (every token of the batch weighs the same: a prompt with long answers weighs more) and
seq_mean_token_mean (every response weighs the same: a long response's tokens weigh less). With groups of G
contiguous rows and B = N G rows it is seq_mean_token_sum with the row weight f_i = G / L_g(i), L_g the
group's token count:

    L = (1/B) sum_i f_i sum_t M l_it,      f_i = G / sum_{j in g(i)} |o_j|

so the weights are computed once a step from the whole batch's mask (the `scoring` hook: random mini-batch rows
keep their group's count) and a mini-batch's loss is the same sum over its rows (its own B). When every
response of a group has the same length, f_i = 1/|o_i| and the loss is seq_mean_token_mean's.
Shapes: B rows, T response length, G group size.
"""

from __future__ import annotations

import torch

from harness.objective.extensions import Hooks


def prompt_weights(mask: torch.Tensor, group_size: int) -> torch.Tensor:
    """(B,) f_i = G / L_g(i) from the loss mask (B, T) of whole groups; a group with no token: 0."""
    lengths = (mask > 0).sum(-1).to(torch.float32)  # |o_i|
    per_group = lengths.view(-1, group_size).sum(-1, keepdim=True)  # (N, 1) L_g
    f = torch.where(per_group > 0, group_size / per_group.clamp(min=1), torch.zeros_like(per_group))
    return f.expand(-1, group_size).reshape(-1)


def _scoring(cfg, rewards: torch.Tensor, mask: torch.Tensor, group_size: int) -> dict[str, torch.Tensor]:
    return {"prompt_weight": prompt_weights(mask, group_size)}


def _row_weights(cfg, extras) -> torch.Tensor:
    if extras.get("prompt_weight") is None:
        raise ValueError("agg='prompt_mean' needs prompt_weight (b,) in LossInputs.extras: its scoring hook's")
    return extras["prompt_weight"]


HOOKS = Hooks(scoring=_scoring, row_weights=_row_weights)
