"""Advantages (docs/objective.md §1): A = (reward - baseline) / scale, and GAE for the critic.

Glossary: N prompts, G = group size, B = N*G sequences with groups contiguous (rows
[g*G, (g+1)*G) answer prompt g), T = padded response length, M = response mask (B, T).

Papers: GRPO 2402.03300 (group mean / group std), RLOO 2402.14740 (leave-one-out),
Dr.GRPO 2503.20783 (no std), Lite PPO 2508.08221 (group mean, batch std of the rewards),
REINFORCE++ 2501.03262 (batch std of the centred rewards), GAE Schulman et al. 1506.02438,
PPO 1707.06347 (advantage whitening).

Exactness: wherever a reward equals every reward its baseline averages over (an all-equal
group under group_mean / leave_one_out, an all-equal batch under batch_mean) the advantage
is exactly 0.0, never a rounding residue divided by adv_eps. A spread of exactly 0 (an
all-equal set, or a single sample under the sample std) divides by 1 instead of 0 + adv_eps,
so no scale ever produces NaN or inf.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from harness.objective.config import ObjectiveConfig


def _spread(x: torch.Tensor, std: str) -> torch.Tensor:
    """std over the last dim, sample (N-1) or population (N); exactly 0 when all values are equal
    (also for a single value, where the sample std would be 0/0)."""
    n = x.shape[-1]
    if n == 1:
        return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    s = x.std(dim=-1, correction=1 if std == "sample" else 0)
    same = x.amax(dim=-1) == x.amin(dim=-1)
    return torch.where(same, torch.zeros_like(s), s)


def _divide(u: torch.Tensor, spread: torch.Tensor, eps: float) -> torch.Tensor:
    """u / (spread + eps), EPS OUTSIDE the sqrt; a zero spread divides by 1 (u is 0 there for group baselines)."""
    denom = torch.where(spread > 0, spread + eps, torch.ones_like(spread))
    return u / denom


def group_advantages(cfg: "ObjectiveConfig", rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Sequence advantages (B,) from sequence rewards (B,), groups of `group_size` contiguous.

    baseline b_i:  group_mean     b_i = (1/G) sum_j r_j                       (GRPO 2402.03300 Eq. 3)
                   leave_one_out  b_i = (1/(G-1)) sum_{j != i} r_j             (RLOO 2402.14740)
                                  so r_i - b_i = G/(G-1) * (r_i - mean)
                   batch_mean     b   = mean over all B rewards
                   none           b   = 0
    scale:         group_std      std_g(r) + adv_eps                         (GRPO; Dr.GRPO removes it)
                   batch_std      std_B(r) (batch_std_of=reward, Lite PPO) or std_B(r - b)
                                  (batch_std_of=centered, REINFORCE++-baseline) + adv_eps
                   none           1
    std: sample (N-1) or population (N). baseline='critic' is per token: use gae_advantages.
    """
    if cfg.baseline == "critic":
        raise ValueError(
            "baseline='critic' gives per-token advantages from a value head: use "
            "harness.objective.gae_advantages (and whiten for scale='batch_std'), not group_advantages"
        )
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be (B,), got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.shape[0] % group_size:
        raise ValueError(f"group_size={group_size} must be >= 1 and divide B={rewards.shape[0]}")
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()
    r = rewards.detach().to(torch.float64)
    G = group_size
    g = r.view(-1, G)  # (N, G)
    group_same = (g.amax(-1) == g.amin(-1)).unsqueeze(-1)  # (N, 1) all-equal groups

    if cfg.baseline == "group_mean":
        u = g - g.mean(-1, keepdim=True)  # r_i - mean_g
        u = torch.where(group_same, torch.zeros_like(u), u)
    elif cfg.baseline == "leave_one_out":
        if G < 2:
            raise ValueError(
                f"baseline='leave_one_out' needs group_size >= 2 (the other G-1 rewards), got group_size={G}; "
                "allowed baselines with group_size=1: ['group_mean', 'batch_mean', 'none']"
            )
        loo = (g.sum(-1, keepdim=True) - g) / (G - 1)  # mean of the OTHER G-1 rewards
        u = torch.where(group_same, torch.zeros_like(g), g - loo)
    elif cfg.baseline == "batch_mean":
        u = g - r.mean()
        if r.amax() == r.amin():
            u = torch.zeros_like(u)
    elif cfg.baseline == "none":
        u = g.clone()
    else:  # pragma: no cover - the config's Literal forbids it
        raise ValueError(f"unknown baseline {cfg.baseline!r}")

    if cfg.scale == "group_std":
        a = _divide(u, _spread(g, cfg.std).unsqueeze(-1), cfg.adv_eps)
    elif cfg.scale == "batch_std":
        src = r if cfg.batch_std_of == "reward" else u.reshape(-1)
        a = _divide(u, _spread(src, cfg.std), cfg.adv_eps)
    elif cfg.scale == "none":
        a = u
    else:  # pragma: no cover
        raise ValueError(f"unknown scale {cfg.scale!r}")
    return a.reshape(-1).to(out_dtype)


def gae_advantages(
    token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised Advantage Estimation (Schulman et al. 1506.02438, Eq. 16), masked.

    token_rewards, values, mask: (B, T); the mask is right-padded (response tokens first).
        delta_t = r_t + gamma * V_{t+1} - V_t        (V after the last response token = 0: terminal)
        A_t     = delta_t + gamma * lam * A_{t+1}
        R_t     = A_t + V_t                           (the value target)
    Returns (advantages, returns), both (B, T), detached, 0 on padding.
    """
    if not (token_rewards.shape == values.shape == mask.shape) or token_rewards.dim() != 2:
        raise ValueError(
            f"token_rewards {tuple(token_rewards.shape)}, values {tuple(values.shape)} and mask "
            f"{tuple(mask.shape)} must all be (B, T)"
        )
    m = mask > 0
    r = torch.where(m, token_rewards.detach(), torch.zeros_like(token_rewards))
    v = torch.where(m, values.detach(), torch.zeros_like(values)).to(r.dtype)
    T = r.shape[1]
    adv = torch.zeros_like(r)
    last = torch.zeros_like(r[:, 0])
    for t in reversed(range(T)):
        next_v = v[:, t + 1] if t + 1 < T else torch.zeros_like(last)
        delta = r[:, t] + gamma * next_v - v[:, t]
        last = torch.where(m[:, t], delta + gamma * lam * last, torch.zeros_like(last))
        adv[:, t] = last
    returns = torch.where(m, adv + v, torch.zeros_like(adv))
    return adv, returns


def whiten(
    x: torch.Tensor, mask: torch.Tensor, *, std: str = "sample", eps: float = 1e-6, shift_mean: bool = True
) -> torch.Tensor:
    """(x - mean) / (std + eps) over the response tokens of the whole batch (PPO advantage
    whitening; `scale: batch_std` for the critic baseline). x, mask: (B, T) -> (B, T), 0 on padding.
    All-equal values give exactly 0 (with shift_mean); a zero std divides by 1."""
    m = mask > 0
    vals = x.detach()[m].to(torch.float64)
    out = torch.zeros_like(x, dtype=torch.float64)
    if vals.numel() == 0:
        return out.to(x.dtype)
    centred = vals - vals.mean() if shift_mean else vals
    if shift_mean and vals.amax() == vals.amin():
        centred = torch.zeros_like(vals)
    out[m] = _divide(centred, _spread(vals, std), eps)
    return out.to(x.dtype)


def critic_advantages(
    cfg: "ObjectiveConfig", token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The critic path of §1: GAE(cfg.gamma, cfg.lam), then whitening when scale='batch_std'.
    Returns (advantages (B, T), returns (B, T)); the returns are the un-whitened value targets."""
    adv, returns = gae_advantages(token_rewards, values, mask, cfg.gamma, cfg.lam)
    if cfg.scale == "batch_std":
        adv = whiten(adv, mask, std=cfg.std, eps=cfg.adv_eps)
    return adv, returns
