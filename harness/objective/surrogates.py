"""Surrogates and clipping (docs/objective.md, "Surrogate and clipping"): the per-token loss l_{i,t} before KL, entropy
and aggregation, plus the masks of where the clip binds (for the clip/frac metrics).

Glossary: B sequences, T padded response length; rho (B, T) from ratios.py, A (B, T) the
advantage broadcast to tokens. eps_low/eps_high are DISTANCES from 1 for every clip mode.

Papers: PPO 1707.06347 (L^CLIP, Eq. 7), dual-clip PPO Ye et al. 1912.09729,
DAPO 2503.14476 (decoupled eps_low/eps_high: clip-higher), CISPO / MiniMax-M1 2506.13585,
GSPO 2507.18071 (same clip on the sequence ratio), SAPO 2511.20347 (a soft sigmoid gate instead
of the hard clip), DPPO 2602.04879 (a trust region on the divergence of the token's probability:
total variation or binary KL); INTELLECT-2 2505.07291 (two-sided clip `delta`); VESPO 2602.10693,
GPPO 2508.07629 / CE-GPPO 2509.20712 and DRO (verl 0.9.1) in soft_clips.py, declared there.

The clip/frac metrics (docs/objective.md, "Metrics" and "Clip fractions") count, for every mode, the response tokens
whose gradient the trust region removed or damped: ppo/cispo where the clip binds, sapo where the gate's
gradient weight is below half its peak, dppo_* where the divergence mask drops the token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import torch

from harness.objective.modes import Knob, Modes, Requires, register_clip

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs


def _bounds(cfg: ObjectiveKnobs) -> tuple[float | None, float]:
    """(1 - eps_low or None, 1 + eps_high): the clip bounds (eps_* are distances from 1)."""
    return (None if cfg.eps_low is None else 1.0 - cfg.eps_low), 1.0 + cfg.eps_high


def surrogate_loss(
    cfg: ObjectiveKnobs,
    ratio: torch.Tensor,
    adv: torch.Tensor,
    logp: torch.Tensor,
    old_logp: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token loss l (B, T) to MINIMISE under cfg.clip (and its knobs).

    ppo    l = -min(rho*A, clip(rho, 1-eps_low, 1+eps_high)*A)                   (PPO Eq. 7; DAPO clip-higher)
           dual_clip c, A<0:  l = min(l, -c*A)                                    (dual-clip PPO 1912.09729)
           delta d: the unclipped term is min(rho, d)*A                           (INTELLECT-2 2505.07291; TRL delta)
    cispo  l = -sg(clip(rho, 1-eps_low, 1+eps_high)) * A * logp                   (CISPO objective, 2506.13585)
           the weight is clipped, the token is never dropped; eps_low None = no lower bound
    none   l = -rho*A
    sapo   l = -(4/tau) sigma(tau (rho - 1)) A, tau = sapo_tau_pos where A > 0 else sapo_tau_neg   (SAPO)
    dppo_tv / dppo_kl   l = -A sg(min(rho, is_cap)) logp m, m the divergence mask (`dppo_mask`)  (DPPO)
    vespo  l = -sg(phi(rho)) A logp, phi(w) = e^lambda w^k e^(-lambda w)              (VESPO 2602.10693)
    gppo   PPO's value, the clipped tokens' gradient kept at beta (1 +- eps) A grad logp  (GPPO / CE-GPPO)
    dro    l = -(logp A - dro_beta/2 (logp - old_logp)^2), no clip                  (DRO, verl 0.9.1)
    ratio, adv, logp, old_logp: (B, T); adv carries no gradient; dppo reads old_logp. A registered
    clip is `fn(ratio, adv, logp, old_logp, cfg) -> l (B, T)`.
    clip_cov / kl_cov (entropy_control.py) read the batch's tokens: `mask` (B, T) bool, the response tokens.
    """
    surrogate = CLIP[cfg.clip]
    if surrogate.masked:
        return surrogate.loss(ratio, adv, logp, old_logp, cfg, _need_mask(cfg, mask))
    return surrogate.loss(ratio, adv, logp, old_logp, cfg)


def _need_mask(cfg: ObjectiveKnobs, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        raise ValueError(f"clip={cfg.clip!r} selects among the batch's tokens: pass mask (B, T), the response mask")
    return mask > 0


def surrogate_metrics(cfg: ObjectiveKnobs, ratio, adv, logp, old_logp, mask) -> dict:
    """The metrics a surrogate declares of itself (clip_cov/frac, kl_cov/frac), no grad; {} for most."""
    surrogate = CLIP[cfg.clip]
    if surrogate.metrics is None:
        return {}
    return surrogate.metrics(ratio.detach(), adv, logp.detach(), old_logp, cfg, _need_mask(cfg, mask))


def no_masks(ratio, adv, logp, old_logp, cfg):
    """A surrogate that never clips: (low, high) all False."""
    f = torch.zeros_like(ratio, dtype=torch.bool)
    return f, f


def _bound_masks(ratio, adv, logp, old_logp, cfg):
    """ppo / cispo: where the clip binds in the direction of the advantage."""
    lo, hi = _bounds(cfg)
    low = (adv < 0) & (ratio < lo) if lo is not None else torch.zeros_like(ratio, dtype=torch.bool)
    return low, (adv > 0) & (ratio > hi)


class Surrogate(NamedTuple):
    loss: object  # (ratio, adv, logp, old_logp | None, cfg) -> l (B, T); masked: (..., cfg, mask) -> l (B, T)
    masks: object = no_masks  # (ratio, adv, logp | None, old_logp | None, cfg) -> (low, high) bool (B, T)
    masked: bool = False  # the loss reads the response mask (a selection among the batch's tokens: Clip-Cov)
    metrics: object = None  # (ratio, adv, logp, old_logp, cfg, mask) -> {name: Deferred}: its own metrics


def _build(fn, masks=None, masked: bool = False, metrics=None) -> Surrogate:
    return Surrogate(fn, masks or no_masks, masked, metrics)


EPS = ("eps_low", "eps_high")
DPPO_WHY = "DPPO's trust region is on each sampled token's probability"
DPPO_KNOBS = (
    Knob(
        "div_low",
        0.15,
        "DPPO divergence bound where A <= 0 (2602.04879; clip=dppo_tv: total variation, dppo_kl: binary KL)",
        ge=0,
    ),
    Knob("div_high", 0.15, "DPPO divergence bound where A > 0 (2602.04879; clip=dppo_tv | dppo_kl)", ge=0),
    Knob("is_cap", 20.0, "DPPO: cap of the detached IS weight min(rho, is_cap) (2602.04879)", gt=0),
)
SAPO_KNOBS = (
    Knob("sapo_tau_pos", 1.0, "SAPO gate temperature where A > 0 (2511.20347): larger = sharper gate", gt=0),
    Knob(
        "sapo_tau_neg",
        1.05,
        "SAPO gate temperature where A <= 0 (2511.20347; > tau_pos damps negative updates faster)",
        gt=0,
    ),
)
DUAL_CLIP = Knob(
    "dual_clip",
    None,
    "dual-clip PPO constant c > 1 (1912.09729): for A<0 the loss is capped at -c*A",
    type=float,
    gt=1,
    nullable=True,
    strict=True,
)

DELTA = Knob(
    "delta",
    None,
    "two-sided clip (INTELLECT-2 2505.07291; TRL delta): the unclipped term's ratio capped at delta, "
    "so a token with A<0 costs at most delta*|A|; with delta >= 1+eps_high it equals dual_clip=delta",
    type=float,
    gt=1,
    nullable=True,
    strict=True,
)

# The `clip` knob (docs/objective.md, "Surrogate and clipping").
CLIP: Modes = Modes("clip", build=_build)


@register_clip(
    "ppo",
    doc="-min(rho A, clip(rho, 1-eps_low, 1+eps_high) A), dual_clip optional (PPO 1707.06347)",
    knobs=(DUAL_CLIP, DELTA),
    reads=EPS,
    masks=_bound_masks,
)
def _ppo(ratio, adv, logp, old_logp, cfg):
    lo, hi = _bounds(cfg)
    # INTELLECT-2 2505.07291 two-sided clip (TRL `delta`): min(rho, delta) A in the unclipped term
    unclipped = (ratio if cfg.delta is None else torch.clamp(ratio, max=cfg.delta)) * adv
    clipped = torch.clamp(ratio, min=lo, max=hi) * adv
    loss = -torch.minimum(unclipped, clipped)
    if cfg.dual_clip is not None:
        capped = torch.minimum(loss, -cfg.dual_clip * adv)  # only ever binds for A < 0
        loss = torch.where(adv < 0, capped, loss)
    return loss


@register_clip(
    "cispo",
    doc="-sg(clip(rho, 1-eps_low, 1+eps_high)) A logp: the IS weight is clipped, no token dropped (CISPO 2506.13585)",
    reads=EPS,
    masks=_bound_masks,
)
def _cispo(ratio, adv, logp, old_logp, cfg):
    lo, hi = _bounds(cfg)
    weight = torch.clamp(ratio, min=lo, max=hi).detach()  # sg(r_hat)
    return -weight * adv * logp


@register_clip("none", doc="-rho A, no clipping")
def _none(ratio, adv, logp, old_logp, cfg):
    return -ratio * adv


def sapo_tau(adv: torch.Tensor, tau_pos: float, tau_neg: float) -> torch.Tensor:
    """tau (B, T): tau_pos where A > 0, tau_neg elsewhere (SAPO's asymmetric temperatures)."""
    return torch.where(adv > 0, torch.full_like(adv, tau_pos), torch.full_like(adv, tau_neg))


def sapo_weight(ratio: torch.Tensor, adv: torch.Tensor, tau_pos: float, tau_neg: float) -> torch.Tensor:
    """The gate's gradient weight 4 p (1 - p), p = sigma(tau (rho - 1)) (B, T), no grad: 1 at rho = 1."""
    tau = sapo_tau(adv, tau_pos, tau_neg)
    p = torch.sigmoid(tau * (ratio.detach() - 1.0))
    return 4.0 * p * (1.0 - p)


def _sapo_masks(ratio, adv, logp, old_logp, cfg):
    """The gate damps a token to below half its peak gradient: 4p(1-p) < 1/2 (|tau (rho - 1)| > 1.7627);
    low = such a token with rho < 1, high = with rho > 1 (the gate damps both directions, whatever A)."""
    damped = (sapo_weight(ratio, adv, cfg.sapo_tau_pos, cfg.sapo_tau_neg) < 0.5) & (adv != 0)
    return damped & (ratio < 1), damped & (ratio > 1)


@register_clip(
    "sapo",
    doc="-(4/tau) sigmoid(tau (rho - 1)) A: a soft gate, tau = sapo_tau_pos (A > 0) / sapo_tau_neg (SAPO 2511.20347)",
    knobs=SAPO_KNOBS,
    masks=_sapo_masks,
)
def _sapo(ratio, adv, logp, old_logp, cfg):
    # SAPO 2511.20347: f(rho) = (4/tau) sigma(tau (rho - 1)); grad_theta f = 4 p (1 - p) rho grad logp,
    # p = sigma(tau (rho - 1)): weight 1 at rho = 1 (the on-policy gradient), decaying smoothly off it.
    tau = sapo_tau(adv, cfg.sapo_tau_pos, cfg.sapo_tau_neg)
    return -(4.0 / tau) * torch.sigmoid(tau * (ratio - 1.0)) * adv


def dppo_mask(
    kind: str, logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, div_low: float, div_high: float
) -> torch.Tensor:
    """DPPO's trust-region mask m (B, T) bool (2602.04879), on the sampled token's probabilities
    pi = exp(logp), mu = exp(old_logp), no gradient:
      tv  m = (pi - mu <= div_high) where A > 0;  (pi - mu >= -div_low) elsewhere
      kl  D = mu (log mu - log pi) + (1 - mu) log((1 - mu + 1e-8) / (1 - pi + 1e-8))   (binary KL)
          m = (D <= div_high) or (pi <= mu) where A > 0;  (D <= div_low) or (pi >= mu) elsewhere
    A token is dropped only when it moved too far in the direction its advantage pushes."""
    lp, old = logp.detach(), old_logp.detach()
    pi, mu = torch.exp(lp), torch.exp(old)
    pos = adv > 0
    if kind == "tv":
        return torch.where(pos, pi - mu <= div_high, pi - mu >= -div_low)
    if kind == "kl":
        d = mu * (old - lp) + (1.0 - mu) * torch.log((1.0 - mu + 1e-8) / (1.0 - pi + 1e-8))
        return torch.where(pos, (d <= div_high) | (pi <= mu), (d <= div_low) | (pi >= mu))
    raise ValueError(f"unknown DPPO divergence {kind!r}; allowed: ['tv', 'kl']")


def _dppo_kept(kind: str, logp, old_logp, adv, cfg) -> torch.Tensor:
    if old_logp is None or logp is None:
        raise ValueError(f"clip='dppo_{kind}' needs logp and the behaviour log-probs old_logp (B, T)")
    return dppo_mask(kind, logp, old_logp, adv, cfg.div_low, cfg.div_high)


def _dppo(kind: str):
    def loss(ratio, adv, logp, old_logp, cfg):
        m = _dppo_kept(kind, logp, old_logp, adv, cfg)
        w = torch.clamp(ratio, max=cfg.is_cap).detach()  # rho_bar = sg(min(rho, is_cap))
        return -adv * w * logp * m.to(logp.dtype)  # l = -A rho_bar logp m

    return loss


def _dppo_masks(kind: str):
    def masks(ratio, adv, logp, old_logp, cfg):
        dropped = ~_dppo_kept(kind, logp, old_logp, adv, cfg)
        return dropped & (adv < 0), dropped & (adv > 0)

    return masks


register_clip(
    "dppo_tv",
    doc="-A sg(min(rho, is_cap)) logp, tokens whose "
    "probability moved more than div_low/div_high (total variation) dropped (DPPO 2602.04879)",
    knobs=DPPO_KNOBS,
    requires=(Requires("ratio", ("token",), DPPO_WHY),),
    masks=_dppo_masks("tv"),
)(_dppo("tv"))
register_clip(
    "dppo_kl",
    doc="as dppo_tv with the binary KL of the sampled token's probability as the divergence (DPPO 2602.04879)",
    knobs=DPPO_KNOBS,
    requires=(Requires("ratio", ("token",), DPPO_WHY),),
    masks=_dppo_masks("kl"),
)(_dppo("kl"))


def clip_masks(
    cfg: ObjectiveKnobs,
    ratio: torch.Tensor,
    adv: torch.Tensor,
    logp: torch.Tensor | None = None,
    old_logp: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(low, high) bool (B, T): the tokens whose gradient the trust region removed or damped.

    ppo, cispo  low: A < 0 and rho < 1 - eps_low; high: A > 0 and rho > 1 + eps_high (the clip binds in
                the direction of the advantage; for cispo: where the IS weight is capped)
    sapo        the gate's gradient weight 4p(1-p) < 1/2; low: rho < 1, high: rho > 1
    dppo_*      the divergence mask drops the token; low: A < 0, high: A > 0 (needs logp, old_logp)
    vespo       the weight phi(rho) < 1/2 (A != 0); low: rho < 1, high: rho > 1
    gppo        as ppo (where the gradient is bounded instead of removed)
    none, dro   never
    """
    lp = None if logp is None else logp.detach()
    return CLIP[cfg.clip].masks(ratio.detach(), adv, lp, old_logp, cfg)
