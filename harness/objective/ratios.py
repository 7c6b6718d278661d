"""Importance ratios (docs/objective.md §2): the per-token ratio tensor the surrogate uses,
carrying the gradient of its mode.

Glossary: B sequences, T padded response length, M response mask (B, T), |o_i| = sum_t M[i, t].

Papers: PPO 1707.06347 (token ratio), GSPO 2507.18071 (sequence ratio s_i, GSPO-token
s_{i,t}), GPG 2504.02546 / REINFORCE (no ratio).
"""
from __future__ import annotations

import torch

from harness.objective.modes import Mode, Modes

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
    return RATIO[mode](lp, old, m)


def _token(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return torch.exp(lp - old)


def _sequence(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    s = torch.exp(sequence_log_ratio(lp, old, m))  # (B,)
    return s.unsqueeze(-1).expand_as(lp)


def _sequence_token(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    s = torch.exp(sequence_log_ratio(lp, old, m)).detach()  # sg(s_i)
    return s.unsqueeze(-1) * torch.exp(lp - lp.detach())


def _none(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return torch.exp(lp - lp.detach())


# The `ratio` knob (docs/objective.md §2): name -> rho(lp, old, m), all (B, T), padding already zeroed.
RATIO: Modes = Modes("ratio", {
    "token": Mode(_token, "exp(logp - old_logp) per token (PPO, GRPO, DAPO, CISPO)"),
    "sequence": Mode(_sequence, "s_i = exp(mean_t(logp - old_logp)), one value per sequence (GSPO 2507.18071)"),
    "sequence_token": Mode(_sequence_token, "sg(s_i) * exp(logp - sg(logp)): value s_i, per-token gradient (GSPO-token)"),
    "none": Mode(_none, "exp(logp - sg(logp)): value 1, gradient grad logp (on-policy REINFORCE / GPG 2504.02546)"),
})
RATIO_MODES = RATIO.names
SEQUENCE_LEVEL = frozenset({"sequence", "sequence_token"})  # ratios with one value per sequence


def is_sequence_level(mode: str) -> bool:
    """Whether the ratio is one value per sequence (clip metrics are then shares of sequences)."""
    return RATIO.check(mode) in SEQUENCE_LEVEL
