"""Importance ratios (docs/objective.md §2): the per-token ratio tensor the surrogate uses,
carrying the gradient of its mode.

Glossary: B sequences, T padded response length, M response mask (B, T), |o_i| = sum_t M[i, t].

Papers: PPO 1707.06347 (token ratio), GSPO 2507.18071 (sequence ratio s_i, GSPO-token
s_{i,t}), GPG 2504.02546 / REINFORCE (no ratio), GMPO 2507.20673 (geometric mean of the
token ratios, clipped per token in log space).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from harness.objective.modes import Mode, Modes

def sequence_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B,) length-normalised log ratio (1/|o_i|) sum_t M (logp - old_logp); 0 for an empty row."""
    m = mask > 0
    diff = torch.where(m, logp - old_logp, torch.zeros_like(logp))
    return diff.sum(-1) / m.sum(-1).clamp(min=1).to(logp.dtype)


class RatioClip(NamedTuple):
    """What a ratio that clips itself (geometric) reads: the advantage (B, T) and the log-space
    clip distances (eps_low None = no lower bound)."""

    adv: torch.Tensor
    eps_low: float | None
    eps_high: float


def importance_ratio(mode: str, logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor,
                     clip: RatioClip | None = None) -> torch.Tensor:
    """Per-token ratio rho (B, T) for `mode`; padding never reaches a value or a gradient
    (token/none give 1 there, the sequence modes repeat s_i; aggregation masks them out).

    token           rho_{i,t} = exp(logp - old_logp)                                 (PPO r_t(theta))
    sequence        rho_{i,t} = s_i = exp((1/|o_i|) sum_t M (logp - old_logp))        (GSPO s_i(theta))
                    same for every token of i; the gradient flows through the sequence mean
    sequence_token  rho_{i,t} = sg(s_i) * exp(logp - sg(logp))                        (GSPO-token s_{i,t}(theta))
                    value s_i, gradient s_i * grad logp_{i,t} per token
    none            rho_{i,t} = exp(logp - sg(logp)): value 1, gradient grad logp      (REINFORCE / GPG)
    geometric       rho_{i,t} = s_i = exp((1/|o_i|) sum_t M x~_t), x = logp - old_logp,   (GMPO 2507.20673)
                    x~ = min(x, clamp(x, -eps_low, eps_high)) where A > 0, max(x, clamp(...)) where A <= 0:
                    the clip acts per token in LOG space, in the direction of the advantage;
                    needs `clip` (RatioClip: the advantage and the distances)
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
    return RATIO[mode](lp, old, m, clip)


def _token(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, clip: RatioClip | None) -> torch.Tensor:
    return torch.exp(lp - old)


def _sequence(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, clip: RatioClip | None) -> torch.Tensor:
    s = torch.exp(sequence_log_ratio(lp, old, m))  # (B,)
    return s.unsqueeze(-1).expand_as(lp)


def _sequence_token(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, clip: RatioClip | None) -> torch.Tensor:
    s = torch.exp(sequence_log_ratio(lp, old, m)).detach()  # sg(s_i)
    return s.unsqueeze(-1) * torch.exp(lp - lp.detach())


def _none(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, clip: RatioClip | None) -> torch.Tensor:
    return torch.exp(lp - lp.detach())


def _need_clip(clip: RatioClip | None, shape: torch.Size) -> RatioClip:
    if clip is None:
        raise ValueError("ratio='geometric' clips in log space by the sign of the advantage: pass "
                         "clip=RatioClip(adv (B, T), eps_low, eps_high)")
    if clip.adv.shape != shape:
        raise ValueError(f"RatioClip.adv must be (B, T) = {tuple(shape)}, got {tuple(clip.adv.shape)}")
    return clip


def geometric_log_ratio(x: torch.Tensor, adv: torch.Tensor, eps_low: float | None, eps_high: float) -> torch.Tensor:
    """GMPO's clipped token log-ratio x~ (B, T) from x = logp - old_logp (B, T) (2507.20673, Eq. 4 in
    log space): A > 0: min(x, clamp(x, -eps_low, eps_high)) -- only the upward move is capped;
    A <= 0: max(x, clamp(x, -eps_low, eps_high)) -- only the downward move is capped.
    A capped token carries no gradient (it is the constant bound)."""
    clamped = torch.clamp(x, min=None if eps_low is None else -eps_low, max=eps_high)
    return torch.where(adv > 0, torch.minimum(x, clamped), torch.maximum(x, clamped))


def geometric_clip_masks(x: torch.Tensor, adv: torch.Tensor, eps_low: float | None,
                         eps_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(low, high) bool (B, T): the tokens whose log-ratio GMPO's clip replaced by its bound
    (high: A > 0 and x > eps_high; low: A < 0 and x < -eps_low) -- the clip/frac metrics."""
    high = (adv > 0) & (x > eps_high)
    low = (adv < 0) & (x < -eps_low) if eps_low is not None else torch.zeros_like(high)
    return low, high


def _geometric(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, clip: RatioClip | None) -> torch.Tensor:
    c = _need_clip(clip, lp.shape)
    xt = geometric_log_ratio(lp - old, c.adv, c.eps_low, c.eps_high)
    xt = torch.where(m, xt, torch.zeros_like(xt))
    s = torch.exp(xt.sum(-1) / m.sum(-1).clamp(min=1).to(lp.dtype))  # (B,) geometric mean of the clipped ratios
    return s.unsqueeze(-1).expand_as(lp)


# The `ratio` knob (docs/objective.md §2): name -> rho(lp, old, m), all (B, T), padding already zeroed.
RATIO: Modes = Modes("ratio", {
    "token": Mode(_token, "exp(logp - old_logp) per token (PPO, GRPO, DAPO, CISPO)"),
    "sequence": Mode(_sequence, "s_i = exp(mean_t(logp - old_logp)), one value per sequence (GSPO 2507.18071)"),
    "sequence_token": Mode(_sequence_token, "sg(s_i) * exp(logp - sg(logp)): value s_i, per-token gradient (GSPO-token)"),
    "none": Mode(_none, "exp(logp - sg(logp)): value 1, gradient grad logp (on-policy REINFORCE / GPG 2504.02546)"),
    "geometric": Mode(_geometric, "s_i = exp(mean_t of the token log-ratios, each clipped in log space by the sign "
                      "of A), one value per sequence (GMPO 2507.20673); clip none"),
})
RATIO_MODES = RATIO.names
RATIO_CLIPS_ITSELF = frozenset({"geometric"})  # ratios that read RatioClip (the advantage and eps_low/eps_high)
SEQUENCE_LEVEL = frozenset({"sequence", "sequence_token"})  # ratios with one value per sequence and one clip
# (geometric has one value per sequence too, but it clips token by token: its clip/frac counts tokens)


def is_sequence_level(mode: str) -> bool:
    """Whether the ratio is one value per sequence (clip metrics are then shares of sequences)."""
    return RATIO.check(mode) in SEQUENCE_LEVEL
