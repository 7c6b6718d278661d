"""Surrogates and clipping (docs/objective.md §3): the per-token loss l_{i,t} before KL, entropy and
aggregation, plus the masks of where the clip binds (for the clip/frac metrics).

Glossary: B sequences, T padded response length; rho (B, T) from ratios.py, A (B, T) the
advantage broadcast to tokens. eps_low/eps_high are DISTANCES from 1 for every clip mode.

Papers: PPO 1707.06347 (L^CLIP, Eq. 7), dual-clip PPO Ye et al. 1912.09729,
DAPO 2503.14476 (decoupled eps_low/eps_high: clip-higher), CISPO / MiniMax-M1 2506.13585,
GSPO 2507.18071 (same clip on the sequence ratio).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from harness.objective.modes import Mode, Modes


def _bounds(eps_low: float | None, eps_high: float) -> tuple[float | None, float]:
    return (None if eps_low is None else 1.0 - eps_low), 1.0 + eps_high


def surrogate_loss(
    clip: str,
    ratio: torch.Tensor,
    adv: torch.Tensor,
    logp: torch.Tensor,
    eps_low: float | None,
    eps_high: float,
    dual_clip: float | None = None,
) -> torch.Tensor:
    """Per-token loss l (B, T) to MINIMISE.

    ppo    l = -min(rho*A, clip(rho, 1-eps_low, 1+eps_high)*A)                   (PPO Eq. 7; DAPO clip-higher)
           dual_clip c, A<0:  l = min(l, -c*A)                                    (dual-clip PPO 1912.09729)
    cispo  l = -sg(clip(rho, 1-eps_low, 1+eps_high)) * A * logp                   (CISPO objective, 2506.13585)
           the weight is clipped, the token is never dropped; eps_low None = no lower bound
    none   l = -rho*A
    ratio, adv, logp: (B, T); adv carries no gradient.
    """
    lo, hi = _bounds(eps_low, eps_high)
    return CLIP[clip].loss(ratio, adv, logp, lo, hi, dual_clip)


def _ppo(ratio, adv, logp, lo, hi, dual_clip):
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, min=lo, max=hi) * adv
    loss = -torch.minimum(unclipped, clipped)
    if dual_clip is not None:
        capped = torch.minimum(loss, -dual_clip * adv)  # only ever binds for A < 0
        loss = torch.where(adv < 0, capped, loss)
    return loss


def _cispo(ratio, adv, logp, lo, hi, dual_clip):
    weight = torch.clamp(ratio, min=lo, max=hi).detach()  # sg(r_hat)
    return -weight * adv * logp


def _none(ratio, adv, logp, lo, hi, dual_clip):
    return -ratio * adv


class Surrogate(NamedTuple):
    loss: object  # (ratio, adv, logp, lower bound | None, upper bound, dual_clip) -> l (B, T)
    clips: bool  # whether the bounds 1-eps_low, 1+eps_high act (clip_masks, the clip/frac metrics)


# The `clip` knob (docs/objective.md §3).
CLIP: Modes = Modes("clip", {
    "ppo": Mode(Surrogate(_ppo, True), "-min(rho A, clip(rho, 1-eps_low, 1+eps_high) A), dual_clip optional (PPO 1707.06347)"),
    "cispo": Mode(Surrogate(_cispo, True), "-sg(clip(rho, 1-eps_low, 1+eps_high)) A logp: the IS weight is clipped, "
                  "no token dropped (CISPO 2506.13585)"),
    "none": Mode(Surrogate(_none, False), "-rho A, no clipping"),
})
CLIP_MODES = CLIP.names


def clip_masks(
    clip: str, ratio: torch.Tensor, adv: torch.Tensor, eps_low: float | None, eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(low, high) bool (B, T): where the clip binds in the direction of the advantage.

    low:  A < 0 and rho < 1 - eps_low   (the update that would push rho further down is cut)
    high: A > 0 and rho > 1 + eps_high  (the update that would push rho further up is cut)
    For cispo the same conditions mark where the IS weight is capped; clip 'none' never binds.
    """
    r = ratio.detach()
    if not CLIP[clip].clips:
        f = torch.zeros_like(r, dtype=torch.bool)
        return f, f
    lo, hi = _bounds(eps_low, eps_high)
    low = (adv < 0) & (r < lo) if lo is not None else torch.zeros_like(r, dtype=torch.bool)
    high = (adv > 0) & (r > hi)
    return low, high
