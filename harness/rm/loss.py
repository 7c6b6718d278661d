"""The Bradley–Terry reward-model loss (InstructGPT, arXiv 2203.02155 eq. 1), as TRL 1.16's RewardTrainer.

Shapes: (P,) rewards of the chosen and of the rejected completion of P pairs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def bt_loss(
    chosen: torch.Tensor,
    rejected: torch.Tensor,
    margin: torch.Tensor | None = None,
    center_rewards_coefficient: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """-> (loss, metrics). chosen, rejected: (P,) scalar rewards; margin: (P,) or None.

    loss = -mean log σ(r_c - r_r - m)                      (m = 0 without a margin; Llama 2, 2307.09288)
         + η · mean((r_c + r_r)²)                          (η = center_rewards_coefficient, 2312.09244)
    TRL 1.16 trl/trainer/reward_trainer.py RewardTrainer.compute_loss computes the same.
    """
    if chosen.shape != rejected.shape or chosen.dim() != 1:
        raise ValueError(
            f"chosen and rejected must be (P,) tensors, got {tuple(chosen.shape)}, {tuple(rejected.shape)}"
        )
    diff = chosen - rejected
    if margin is not None:
        diff = diff - margin
    loss = -F.logsigmoid(diff).mean()  # -log σ(r_c - r_r - m)
    if center_rewards_coefficient is not None:
        loss = loss + center_rewards_coefficient * torch.mean((chosen + rejected) ** 2)  # η (r_c + r_r)²
    with torch.no_grad():
        metrics = {
            "accuracy": float((chosen > rejected).float().mean()),
            "margin": float((chosen - rejected).mean()),
            "mean_reward": float(torch.cat([chosen, rejected]).mean()),
        }
    return loss, metrics
