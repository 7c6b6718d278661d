"""PPO critic loss (docs/objective.md, "Advantage": `critic`; "Metrics": `loss/value`).

Glossary: B sequences, T padded response length, M response mask (B, T).
Papers: PPO 1707.06347 (value loss, Eq. 9), value clipping as in OpenAI baselines / TRL PPO
(ppo2: "clipped value loss"), GAE 1506.02438 for the returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from harness.objective.aggregation import aggregate, masked_mean

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs


def value_loss(
    cfg: ObjectiveKnobs,
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    num_seqs: int | float | torch.Tensor | None = None,
    num_tokens: int | float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """vf_coef * aggregate(agg, l_v) with the config's knobs: `clipped_value_loss`."""
    return clipped_value_loss(
        values,
        old_values,
        returns,
        mask,
        vf_coef=cfg.vf_coef,
        value_clip=cfg.value_clip,
        agg=cfg.agg,
        norm_constant=cfg.norm_constant,
        num_seqs=num_seqs,
        num_tokens=num_tokens,
    )


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    vf_coef: float,
    value_clip: float | None,
    agg: str,
    norm_constant: float | None = None,
    num_seqs: int | float | torch.Tensor | None = None,
    num_tokens: int | float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """vf_coef * aggregate(agg, l_v), all inputs (B, T); values carry the gradient.

        V_clip = V_old + clip(V - V_old, -value_clip, +value_clip)
        l_v    = 1/2 * max((V - R)^2, (V_clip - R)^2)        (value_clip None: 1/2 (V - R)^2)
    Metrics: loss/value (the vf_coef-weighted term), value/clip_frac (share of response tokens
    where the clip binds: |V - V_old| > value_clip and the clipped branch is the larger; inside
    the band V_clip = V_old + (V - V_old) equals V only up to rounding, which must not count),
    value/explained_variance.
    """
    for name, t in (("old_values", old_values), ("returns", returns), ("mask", mask)):
        if t.shape != values.shape or values.dim() != 2:
            raise ValueError(f"values {tuple(values.shape)} and {name} {tuple(t.shape)} must both be (B, T)")
    m = mask > 0
    zero = torch.zeros_like(values)
    v = torch.where(m, values, zero)
    v_old = torch.where(m, old_values.detach().to(values.dtype), zero)
    ret = torch.where(m, returns.detach().to(values.dtype), zero)
    unclipped = (v - ret) ** 2
    if value_clip is not None:
        v_clip = v_old + torch.clamp(v - v_old, -value_clip, value_clip)
        clipped = (v_clip - ret) ** 2
        per_tok = 0.5 * torch.maximum(unclipped, clipped)
        binds = ((v - v_old).abs() > value_clip) & (clipped > unclipped)
        clip_frac = masked_mean(binds.to(values.dtype), m)
    else:
        per_tok = 0.5 * unclipped
        clip_frac = 0.0
    loss = vf_coef * aggregate(agg, per_tok, m, norm_constant, num_seqs, num_tokens)
    metrics = {
        "loss/value": float(loss.detach().item()),
        "value/clip_frac": clip_frac,
        "value/explained_variance": explained_variance(values, returns, mask),
    }
    return loss, metrics


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var[R - V] / Var[R] over the response tokens (1 = perfect critic, 0 = constant, < 0 worse).
    NaN when the returns have no variance (or there are no tokens)."""
    m = mask > 0
    r = returns.detach()[m].to(torch.float64)
    v = values.detach()[m].to(torch.float64)
    if r.numel() == 0:
        return float("nan")
    var_r = r.var(correction=0)
    if var_r == 0:
        return float("nan")
    return float(1.0 - (r - v).var(correction=0) / var_r)
