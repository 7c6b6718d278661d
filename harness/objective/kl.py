"""KL to the reference policy (docs/objective.md §4): estimators and the two placements.

Glossary: B sequences, T padded response length, M response mask (B, T).
Estimators (Schulman, "Approximating KL Divergence", 2020 blog), with d = ref_logp - logp,
samples drawn from pi_theta (so E[k1] = E[k3] = KL(pi_theta || pi_ref)):
    k1 = -d = logp - ref_logp          unbiased, can be negative
    k2 = d^2 / 2                       biased, low variance, >= 0
    k3 = exp(d) - d - 1                unbiased, >= 0 (GRPO 2402.03300 Eq. 4)
Placements: `loss` adds kl_coef * k to the token loss (GRPO; done in policy_loss);
`reward` subtracts kl_coef * k1 from the reward (PPO 1707.06347 / InstructGPT 2203.02155,
RLOO 2402.14740, REINFORCE++ 2501.03262) -- the functions below, computed from the
rollout-time log-probs and carrying no gradient.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from harness.objective.config import ObjectiveConfig

KL_ESTIMATORS = ("k1", "k2", "k3")


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token KL estimate (B, T) of pi_theta from pi_ref; the gradient flows through logp."""
    if logp.shape != ref_logp.shape:
        raise ValueError(f"logp {tuple(logp.shape)} and ref_logp {tuple(ref_logp.shape)} must have the same shape")
    d = ref_logp.detach() - logp  # log(pi_ref / pi_theta)
    if estimator == "k1":
        return -d  # log(pi_theta / pi_ref)
    if estimator == "k2":
        return 0.5 * d * d  # (1/2) (log r)^2
    if estimator == "k3":
        return torch.expm1(d) - d  # (r - 1) - log r, r = pi_ref / pi_theta
    raise ValueError(f"unknown kl_estimator {estimator!r}; allowed: {list(KL_ESTIMATORS)}")


def _reward_kl_active(cfg: "ObjectiveConfig", ref_logp: torch.Tensor | None) -> bool:
    if cfg.kl_placement != "reward" or cfg.kl_coef == 0:
        return False
    if ref_logp is None:
        raise ValueError(
            f"kl_coef={cfg.kl_coef} with kl_placement='reward' needs ref_logp (the reference policy's log-probs); "
            "set kl_coef=0 to train without a reference model"
        )
    return True


def kl_in_reward(
    cfg: "ObjectiveConfig",
    rewards: torch.Tensor,
    logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    mask: torch.Tensor,
) -> torch.Tensor:
    """Sequence rewards (B,) with the reward-placed KL: r_i - kl_coef * sum_t M k1_{i,t}.

    Used with a non-critic baseline (RLOO, REINFORCE++): the penalised reward then goes into
    group_advantages. logp = the rollout policy's log-probs (B, T). A no-op (rewards returned
    as float) unless kl_placement='reward' and kl_coef > 0. No gradient.
    """
    r = rewards.detach().to(logp.dtype)
    if not _reward_kl_active(cfg, ref_logp):
        return r
    m = mask > 0
    k1 = torch.where(m, kl_penalty(logp.detach(), ref_logp, "k1"), torch.zeros_like(logp))
    return r - cfg.kl_coef * k1.sum(-1)


def token_rewards_with_kl(
    cfg: "ObjectiveConfig",
    rewards: torch.Tensor,
    logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    mask: torch.Tensor,
) -> torch.Tensor:
    """Per-token rewards (B, T) for the critic path (GAE):
        r_{i,t} = -kl_coef * k1_{i,t} * M_{i,t}  +  [t = last response token of i] * r_i
    (InstructGPT 2203.02155 Eq. 2 spread over tokens). The KL term is present only when
    kl_placement='reward' and kl_coef > 0. A row without response tokens gets no reward. No gradient.
    """
    if rewards.dim() != 1 or rewards.shape[0] != logp.shape[0] or logp.shape != mask.shape:
        raise ValueError(
            f"rewards {tuple(rewards.shape)} must be (B,) and logp {tuple(logp.shape)}, mask {tuple(mask.shape)} (B, T)"
        )
    m = mask > 0
    out = torch.zeros_like(logp, dtype=logp.dtype).detach()
    if _reward_kl_active(cfg, ref_logp):
        k1 = torch.where(m, kl_penalty(logp.detach(), ref_logp, "k1"), torch.zeros_like(out))
        out = out - cfg.kl_coef * k1
    pos = torch.arange(out.shape[1], device=out.device).expand_as(m)
    last = torch.where(m, pos, torch.full_like(pos, -1)).amax(-1)  # index of the last response token
    has = last >= 0
    rows = torch.arange(out.shape[0], device=out.device)
    out[rows[has], last[has]] += rewards.detach().to(out.dtype)[has]
    return out
