"""Importance ratios (docs/objective.md §2): the per-token ratio tensor the surrogate uses,
carrying the gradient of its mode.

Glossary: B sequences, T padded response length, M response mask (B, T), |o_i| = sum_t M[i, t].

Papers: PPO 1707.06347 (token ratio), GSPO 2507.18071 (sequence ratio s_i, GSPO-token
s_{i,t}), GPG 2504.02546 / REINFORCE (no ratio).
"""
from __future__ import annotations

import torch

RATIO_MODES = ("token", "sequence", "sequence_token", "none")


def sequence_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B,) length-normalised log ratio (1/|o_i|) sum_t M (logp - old_logp); 0 for an empty row."""
    m = mask > 0
    diff = torch.where(m, logp - old_logp, torch.zeros_like(logp))
    return diff.sum(-1) / m.sum(-1).clamp(min=1).to(logp.dtype)


def importance_ratio(mode: str, logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-token ratio rho (B, T) for `mode`; padding never reaches a value or a gradient
    (token/none give 1 there, the sequence modes repeat s_i; aggregation masks them out).

    token           rho_{i,t} = exp(logp - old_logp)                                 (PPO r_t(theta))
    sequence        rho_{i,t} = s_i = exp((1/|o_i|) sum_t M (logp - old_logp))        (GSPO s_i(theta))
                    same for every token of i; the gradient flows through the sequence mean
    sequence_token  rho_{i,t} = sg(s_i) * exp(logp - sg(logp))                        (GSPO-token s_{i,t}(theta))
                    value s_i, gradient s_i * grad logp_{i,t} per token
    none            rho_{i,t} = exp(logp - sg(logp)): value 1, gradient grad logp      (REINFORCE / GPG)
    logp is the current policy's (with grad), old_logp the behaviour policy's (detached here).
    """
    if logp.shape != old_logp.shape or logp.shape != mask.shape or logp.dim() != 2:
        raise ValueError(
            f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)}, mask {tuple(mask.shape)} must all be (B, T)"
        )
    m = mask > 0
    zero = torch.zeros_like(logp)
    lp = torch.where(m, logp, zero)  # padding may hold garbage (-inf); keep it out of exp and grads
    old = torch.where(m, old_logp.detach(), zero)
    if mode == "token":
        return torch.exp(lp - old)
    if mode == "sequence":
        s = torch.exp(sequence_log_ratio(lp, old, m))  # (B,)
        return s.unsqueeze(-1).expand_as(lp)
    if mode == "sequence_token":
        s = torch.exp(sequence_log_ratio(lp, old, m)).detach()  # sg(s_i)
        return s.unsqueeze(-1) * torch.exp(lp - lp.detach())
    if mode == "none":
        return torch.exp(lp - lp.detach())
    raise ValueError(f"unknown ratio {mode!r}; allowed: {list(RATIO_MODES)}")


def is_sequence_level(mode: str) -> bool:
    """Whether the ratio is one value per sequence (clip metrics are then shares of sequences)."""
    return mode in ("sequence", "sequence_token")
