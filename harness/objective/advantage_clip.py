"""Advantage clipping (docs/objective.md, "Advantage"): the advantages, once computed, clamped to
[adv_clip_low, adv_clip_high], each bound optional.

    A_i <- min(max(A_i, adv_clip_low), adv_clip_high)       (per row, or per token for the critic / PRIME)

NeMo-RL's `grpo.advantage_clip_low` / `advantage_clip_high` (applied after the normalisation) and
ROLL's `advantage_clip: c` (= adv_clip_low -c, adv_clip_high c): a rare group whose one right answer
gets A = (G - 1) / sqrt(G) under the group std moves the policy no more than the clip allows.

Each bound is its own switch. A bound on the wrong side of 0 would give the zero advantage of a group whose
rewards are all equal a sign, training on groups with no signal, so adv_clip_low <= 0 <= adv_clip_high; both 0
would leave no advantage at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from harness.objective.modes import Knob, Requires, register_extension

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs

LOW_KNOB = Knob(
    "adv_clip_low",
    None,
    "lower bound of the advantages after their baseline and scale (NeMo-RL advantage_clip_low; ROLL "
    "advantage_clip c = -c here); <= 0; null = none",
    type=float,
    le=0,
    nullable=True,
)
HIGH_KNOB = Knob(
    "adv_clip_high",
    None,
    "upper bound of the advantages after their baseline and scale (NeMo-RL advantage_clip_high; ROLL "
    "advantage_clip c); >= 0; null = none",
    type=float,
    ge=0,
    nullable=True,
)


@register_extension(
    "adv_clip_low",
    doc="advantages clamped from below at adv_clip_low (NeMo-RL advantage_clip_low, ROLL advantage_clip)",
    knobs=(LOW_KNOB,),
    switch="adv_clip_low",
)
def _low_on(cfg: ObjectiveKnobs) -> bool:
    return getattr(cfg, "adv_clip_low", None) is not None


@register_extension(
    "adv_clip_high",
    doc="advantages clamped from above at adv_clip_high (NeMo-RL advantage_clip_high, ROLL advantage_clip)",
    knobs=(HIGH_KNOB,),
    switch="adv_clip_high",
    requires=(
        Requires(
            "adv_clip_low",
            why="an interval [0, 0] leaves every advantage 0",
            accepts=lambda lo, cfg: lo is None or lo < 0 or cfg.adv_clip_high > 0,
            allowed_text="a float < 0 or null while adv_clip_high is 0",
        ),
    ),
)
def _high_on(cfg: ObjectiveKnobs) -> bool:
    return getattr(cfg, "adv_clip_high", None) is not None


def clip_advantages(
    cfg: ObjectiveKnobs, adv: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, dict[str, float]]:
    """(adv clamped to [adv_clip_low, adv_clip_high], metrics). adv: (B,) per row or (B, T) per token; mask (B, T).
    adv/clip_frac: the share of the response rows (per-row advantages) or response tokens (per-token)
    whose advantage a bound moved; absent when neither bound is set."""
    low, high = getattr(cfg, "adv_clip_low", None), getattr(cfg, "adv_clip_high", None)
    if low is None and high is None:
        return adv, {}
    clipped = adv.clamp(min=low, max=high)  # min(max(A, low), high), a bound None = none
    moved = clipped != adv
    where = (mask > 0) if adv.dim() == 2 else (mask > 0).any(-1)  # the tokens, or the rows with a response
    frac = float(moved[where].float().mean()) if where.any() else 0.0
    return clipped, {"adv/clip_frac": frac}


__all__ = ["clip_advantages"]
