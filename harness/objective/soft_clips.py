"""The 2025-26 surrogates that reshape or keep the gradient a hard clip removes (docs/objective.md,
"Surrogates and ratios of 2025-26"): VESPO's Gamma-shaped sequence weight, GPPO / CE-GPPO's bounded gradient through clipped tokens and
DRO's quadratic log-ratio penalty, each declared here as a mode of the `clip` knob (surrogates.py's registry).

Glossary: B sequences, T padded response length; rho (B, T) from ratios.py, A (B, T) the advantage
broadcast to tokens, logp / old_logp (B, T) with padding zeroed; sg = stop-gradient.

Papers: VESPO 2602.10693 (TRL 1.16 `loss_type="vespo"`), GPPO / Klear-Reasoner 2508.07629,
CE-GPPO 2509.20712 (the authors' `compute_gppo_loss_general_beta`), DRO (verl 0.9.1
`compute_policy_loss_dro`: REINFORCE with a quadratic log-ratio penalty instead of a clip).
"""

from __future__ import annotations

import torch

from harness.objective.modes import Knob, Requires, register_clip
from harness.objective.surrogates import DUAL_CLIP, EPS

VESPO_KNOBS = (
    Knob(
        "vespo_k_pos",
        2.0,
        "VESPO (2602.10693) power k where A >= 0: phi(w) = e^lambda w^k e^(-lambda w); larger = weights w < 1 "
        "down faster (TRL vespo_k_pos)",
        ge=0,
    ),
    Knob(
        "vespo_lambda_pos",
        3.0,
        "VESPO decay lambda where A >= 0: larger = weights w > 1 down faster (TRL vespo_lambda_pos)",
        gt=0,
    ),
    Knob("vespo_k_neg", 3.0, "VESPO power k where A < 0 (TRL vespo_k_neg)", ge=0),
    Knob("vespo_lambda_neg", 2.0, "VESPO decay lambda where A < 0 (TRL vespo_lambda_neg)", gt=0),
)
GPPO_KNOBS = (
    Knob(
        "gppo_beta1",
        1.0,
        "GPPO/CE-GPPO (2508.07629, 2509.20712): gradient scale of the tokens below 1-eps_low with A < 0 "
        "(beta1 (1-eps_low) A grad logp); 1 = GPPO, 0 = PPO's gradient",
        ge=0,
    ),
    Knob(
        "gppo_beta2",
        1.0,
        "GPPO/CE-GPPO: gradient scale of the tokens above 1+eps_high with A > 0 (beta2 (1+eps_high) A grad logp)",
        ge=0,
    ),
)
DRO_BETA = Knob(
    "dro_beta",
    None,
    "DRO (verl policy_loss.dro_beta): weight of the quadratic log-ratio penalty beta/2 (logp - old_logp)^2",
    type=float,
    gt=0,
    nullable=True,
    required=True,
)
DRO_WHY = "DRO penalises each token's own log-ratio and reads no importance ratio"


def vespo_weight(
    ratio: torch.Tensor, adv: torch.Tensor, k_pos: float, lambda_pos: float, k_neg: float, lambda_neg: float
) -> torch.Tensor:
    """VESPO's reshaping kernel phi(w) (B, T), no gradient (2602.10693; TRL `get_gamma_weights`):
        phi(w) = e^lambda w^k e^(-lambda w) = exp(lambda + k log w - lambda w),  phi(1) = 1,
    k, lambda = (k_pos, lambda_pos) where A >= 0, (k_neg, lambda_neg) where A < 0; w = rho (the
    sequence product of the token ratios under ratio='sequence_product'). A weight that is not a
    number (w = inf) is 0, as in TRL."""
    w = ratio.detach()
    nonneg = adv >= 0
    k = torch.where(nonneg, torch.full_like(w, k_pos), torch.full_like(w, k_neg))
    lam = torch.where(nonneg, torch.full_like(w, lambda_pos), torch.full_like(w, lambda_neg)).clamp(min=1e-4)
    log_phi = lam + k * torch.log(w) - lam * w  # log phi(w) = lambda + k log w - lambda w   (VESPO kernel)
    return torch.exp(log_phi).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)


def vespo_masks(ratio, adv, logp, old_logp, cfg):
    """Damped to below half the on-policy weight: phi(w) < 1/2 (and A != 0); low: w < 1, high: w > 1."""
    phi = vespo_weight(ratio, adv, cfg.vespo_k_pos, cfg.vespo_lambda_pos, cfg.vespo_k_neg, cfg.vespo_lambda_neg)
    damped = (phi < 0.5) & (adv != 0)
    return damped & (ratio < 1), damped & (ratio > 1)


@register_clip(
    "vespo",
    doc="-sg(phi(rho)) A logp, phi(w) = e^lambda w^k e^(-lambda w) a smooth Gamma-shaped weight, no clip "
    "(VESPO 2602.10693; its ratio: sequence_product)",
    knobs=VESPO_KNOBS,
    masks=vespo_masks,
)
def vespo_loss(ratio, adv, logp, old_logp, cfg):
    """l = -sg(phi(w)) A logp (VESPO 2602.10693): the gradient is phi(w) A grad logp, no token dropped."""
    phi = vespo_weight(ratio, adv, cfg.vespo_k_pos, cfg.vespo_lambda_pos, cfg.vespo_k_neg, cfg.vespo_lambda_neg)
    return -phi * adv * logp


def gppo_regions(ratio: torch.Tensor, adv: torch.Tensor, eps_low: float | None, eps_high: float):
    """(low, high) bool (B, T): where PPO's clip would bind in the direction of A (low: A < 0 and
    rho < 1 - eps_low; high: A > 0 and rho > 1 + eps_high); eps_low None = no lower bound."""
    r = ratio.detach()
    high = (adv > 0) & (r > 1.0 + eps_high)
    low = (adv < 0) & (r < 1.0 - eps_low) if eps_low is not None else torch.zeros_like(high)
    return low, high


def gppo_masks(ratio, adv, logp, old_logp, cfg):
    """Where the clip binds: the tokens whose gradient GPPO bounds (beta (1 +- eps) instead of rho)."""
    return gppo_regions(ratio, adv, cfg.eps_low, cfg.eps_high)


@register_clip(
    "gppo",
    doc="PPO's clipped value, the clipped tokens' gradient kept and bounded at beta1 (1-eps_low) / "
    "beta2 (1+eps_high) A grad logp (GPPO 2508.07629, CE-GPPO 2509.20712)",
    knobs=(*GPPO_KNOBS, DUAL_CLIP),
    reads=EPS,
    masks=gppo_masks,
)
def gppo_loss(ratio, adv, logp, old_logp, cfg):
    """GPPO (2508.07629) / CE-GPPO (2509.20712): PPO's clipped value with the gradient kept, bounded:
        low  (A < 0, rho < 1 - eps_low):  l = -beta1 (1 - eps_low)  rho / sg(rho) A   grad: beta1 (1-eps_low) A grad logp
        high (A > 0, rho > 1 + eps_high): l = -beta2 (1 + eps_high) rho / sg(rho) A   grad: beta2 (1+eps_high) A grad logp
        else                              l = -rho A
    then dual_clip c, A < 0: l = min(l, -c A) (the authors' code applies it with c = 3)."""
    low, high = gppo_regions(ratio, adv, cfg.eps_low, cfg.eps_high)
    keep = ratio / ratio.detach()  # value 1, gradient grad logp (for a token ratio)
    lo_bound = 0.0 if cfg.eps_low is None else 1.0 - cfg.eps_low
    loss = -ratio * adv
    loss = torch.where(low, -cfg.gppo_beta1 * lo_bound * keep * adv, loss)  # CE-GPPO Eq.: beta1 (1-eps) rho/sg(rho) A
    loss = torch.where(high, -cfg.gppo_beta2 * (1.0 + cfg.eps_high) * keep * adv, loss)  # beta2 (1+eps) rho/sg(rho) A
    if cfg.dual_clip is not None:
        loss = torch.where(adv < 0, torch.minimum(loss, -cfg.dual_clip * adv), loss)
    return loss


@register_clip(
    "dro",
    doc="-(logp A - dro_beta/2 (logp - old_logp)^2): REINFORCE with a quadratic log-ratio penalty, "
    "no clip (DRO, verl 0.9.1)",
    knobs=(DRO_BETA,),
    requires=(Requires("ratio", ("token",), DRO_WHY),),
)
def dro_loss(ratio, adv, logp, old_logp, cfg):
    """DRO (verl 0.9.1 `compute_policy_loss_dro`): l = -(logp A - beta/2 (logp - old_logp)^2): REINFORCE
    with a quadratic penalty on each token's log-ratio instead of a clip; the ratio is not read."""
    if old_logp is None:
        raise ValueError("clip='dro' needs the behaviour log-probs old_logp (B, T)")
    log_ratio = logp - old_logp
    return -(logp * adv - 0.5 * cfg.dro_beta * log_ratio.square())  # -(logp A - beta/2 (log pi/pi_old)^2)
