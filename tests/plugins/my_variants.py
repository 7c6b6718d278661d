"""A researcher's own variants, in one file outside the harness package (docs/extending.md walks
through it): a median baseline, and a surrogate with a knob of its own. A config uses them with one
line (the module must be importable: in the working directory, or on PYTHONPATH):

    objective:
      plugins: [my_variants]
      baseline: median
      clip: tanh_clip
      tanh_width: 0.3          # its own knob: validated, documented by `harness config --explain`

or the preset below: `objective: {plugins: [my_variants], preset: median_tanh}`.
"""

import torch

from harness.objective import Knob, register_baseline, register_clip, register_preset


@register_baseline(
    "median",
    doc="b_i = the (lower) median of the group's rewards: one outlier reward moves no other response's advantage",
)
def median_baseline(rewards, cfg):
    """rewards (N, G) float64 -> r - b (N, G)."""
    return rewards - rewards.median(dim=-1, keepdim=True).values


def tanh_masks(ratio, adv, logp, old_logp, cfg):
    """(low, high) (B, T): the tokens whose ratio left the band |rho - 1| <= tanh_width (their gradient is
    damped below sech^2(1) = 0.42 of its on-policy value): the clip/frac metrics."""
    outside = ((ratio - 1.0).abs() > cfg.tanh_width) & (adv != 0)
    return outside & (ratio < 1), outside & (ratio > 1)


@register_clip(
    "tanh_clip",
    doc="-A (1 + w tanh((rho - 1) / w)), w = tanh_width: the ratio's weight squashed "
    "smoothly into (1 - w, 1 + w) instead of clipped",
    knobs=[
        Knob("tanh_width", 0.2, "half-width w of tanh_clip's band: the weight of a token stays in (1 - w, 1 + w)", gt=0)
    ],
    masks=tanh_masks,
)
def tanh_clip(ratio, adv, logp, old_logp, cfg):
    """ratio, adv (B, T) -> the per-token loss (B, T) to minimise; its gradient is
    -A sech^2((rho - 1) / w) rho grad logp: the on-policy gradient at rho = 1, fading outside the band."""
    w = cfg.tanh_width
    return -adv * (1.0 + w * torch.tanh((ratio - 1.0) / w))


register_preset(
    "median_tanh", baseline="median", scale="none", clip="tanh_clip", tanh_width=0.2, agg="token_mean", kl_coef=0.0
)
