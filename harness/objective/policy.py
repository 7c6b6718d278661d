"""The policy loss: ratio -> surrogate -> TIS weight -> KL in loss -> entropy -> aggregation.

One code path for every algorithm; a preset only sets the knobs (docs/objective.md §2-5, §9).

Glossary: B sequences, T padded response length, M response mask (B, T).
Inputs (all (B, T) log-probs of the SAMPLED tokens):
    logp         current policy pi_theta (carries the gradient)
    old_logp     behaviour policy pi_old as recomputed by the trainer at rollout time
    ref_logp     frozen reference pi_ref (for the KL in the loss and the kl/ref metric)
    rollout_logp the sampler's own log-probs (vLLM / bf16 engine), for TIS
    entropy      full-distribution entropy per token (B, T), for the entropy bonus and metric
    adv          (B,) per-sequence or (B, T) per-token advantages (no gradient)

Papers: PPO 1707.06347, GRPO 2402.03300, DAPO 2503.14476, GSPO 2507.18071,
CISPO 2506.13585, GPG 2504.02546, Dr.GRPO 2503.20783, SAPO 2511.20347, GMPO 2507.20673,
DPPO 2602.04879; TIS: Yao et al., "Your efficient RL
framework secretly brings you off-policy RL training" (2025 blog); k3: Schulman,
"Approximating KL Divergence".
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from harness.objective.aggregation import aggregate, masked_mean, seq_mean
from harness.objective.kl import kl_penalty
from harness.objective.simko import simko_token_loss
from harness.objective.ratios import RATIO_CLIPS_ITSELF, RatioClip, geometric_clip_masks, importance_ratio, is_sequence_level
from harness.objective.surrogates import ZooKnobs, clip_masks, surrogate_loss

if TYPE_CHECKING:
    from harness.objective.config import ObjectiveConfig


def _check_shapes(logp: torch.Tensor, mask: torch.Tensor, adv: torch.Tensor, **others: torch.Tensor | None) -> None:
    if logp.dim() != 2:
        raise ValueError(f"logp must be (B, T), got shape {tuple(logp.shape)}")
    B, T = logp.shape
    if mask.shape != logp.shape:
        raise ValueError(f"mask must be (B, T) = {(B, T)} like logp, got {tuple(mask.shape)}")
    for name, t in others.items():
        if t is not None and t.shape != logp.shape:
            raise ValueError(f"{name} must be (B, T) = {(B, T)} like logp, got {tuple(t.shape)}")
    if adv.shape not in ((B,), (B, T)):
        raise ValueError(f"adv must be (B,) = {(B,)} or (B, T) = {(B, T)}, got {tuple(adv.shape)}")


def _simko(cfg: "ObjectiveConfig", lp, old, A, m, entropy, topk) -> torch.Tensor:
    """SimKO's per-token loss (B, T) (docs/objective.md §13) from the inputs `topk` carries."""
    if topk is None or any(t is None for t in topk) or entropy is None:
        raise ValueError(f"simko_top_k={cfg.simko_top_k} needs the top-K log-probs of the training forward and of "
                         "pi_old, the argmax flag and the entropy of every response token (LossInputs.topk_logp, "
                         ".old_topk_logp, .is_argmax, .entropy): inputs_needed(obj).topk_logp")
    topk_logp, old_topk_logp, is_argmax = topk
    return simko_token_loss(lp, old, topk_logp, old_topk_logp.to(lp.dtype), is_argmax.to(m.device), entropy, A, m,
                            simko_top_k=cfg.simko_top_k, simko_tau=cfg.simko_tau, simko_mix=cfg.simko_mix,
                            simko_neg_scale=cfg.simko_neg_scale, eps_low=cfg.eps_low, eps_high=cfg.eps_high)


def policy_loss(
    cfg: "ObjectiveConfig",
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    ref_logp: torch.Tensor | None = None,
    *,
    entropy: torch.Tensor | None = None,
    rollout_logp: torch.Tensor | None = None,
    num_seqs: int | float | torch.Tensor | None = None,
    num_tokens: int | float | torch.Tensor | None = None,
    row_weights: torch.Tensor | None = None,
    topk: tuple | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """(loss scalar, metrics) of one (micro-)batch.

    l_{i,t} = surrogate(rho, A)                                   §2-3 (ratio, clip, eps_low/high, dual_clip)
            * sg(min(exp(old_logp - rollout_logp), tis_cap))       TIS, when tis_cap and rollout_logp are given
            + kl_coef * k(logp, ref_logp)                          §4, when kl_placement='loss' and kl_coef > 0
            - entropy_coef * H                                     when entropy is given
    loss = aggregate(cfg.agg, l, M, norm_constant, num_seqs, num_tokens)   §5
    Truncated responses are removed by the caller (mask_truncated zeroes their mask rows).
    num_seqs / num_tokens: the whole optimizer mini-batch's denominators (gradient accumulation).
    row_weights: (B,) f_i multiplying each row's token losses before the aggregation (λ-GRPO's
    learned length weights, agg: lambda_length, §13; with their gradient); None: 1.
    topk: SimKO (simko_top_k > 0, §13): (topk_logp (B, T, K) with grad, old_topk_logp (B, T, K),
    is_argmax (B, T) bool); the surrogate is then `simko_token_loss` (needs `entropy` for its gate).

    Metrics (§9; means over this batch's response tokens, or over its sequences for the
    clip fractions and ratio stats of sequence-level ratios): clip/frac, clip/frac_low,
    clip/frac_high, ratio/mean, ratio/max, kl/ref (k3, when ref_logp is given), kl/old (mean of
    old_logp - logp), entropy (when given), loss/policy, loss/kl, loss/entropy (the aggregated
    contributions; loss = their sum).
    """
    _check_shapes(logp, mask, adv, old_logp=old_logp, ref_logp=ref_logp, entropy=entropy, rollout_logp=rollout_logp)
    m = mask > 0
    zero = torch.zeros_like(logp)

    def clean(x: torch.Tensor | None, detach: bool = True) -> torch.Tensor | None:
        """Padding may hold -inf / NaN: replace it by 0 so it reaches neither values nor gradients."""
        if x is None:
            return None
        x = x.detach() if detach else x
        return torch.where(m, x.to(logp.dtype), zero)

    lp = clean(logp, detach=False)
    old = clean(old_logp)
    ref = clean(ref_logp)
    a = adv.detach().to(logp.dtype)
    A = a.unsqueeze(-1).expand_as(lp) if a.dim() == 1 else torch.where(m, a, zero)  # (B, T)

    # §2 ratio, §3 surrogate (§12: sapo, dppo_*, geometric)
    rclip = RatioClip(A, cfg.eps_low, cfg.eps_high) if cfg.ratio in RATIO_CLIPS_ITSELF else None
    rho = importance_ratio(cfg.ratio, lp, old, m, rclip)
    zoo = ZooKnobs(old_logp=old, sapo_tau_pos=cfg.sapo_tau_pos, sapo_tau_neg=cfg.sapo_tau_neg,
                   div_low=cfg.div_low, div_high=cfg.div_high, is_cap=cfg.is_cap)
    if cfg.simko_top_k:  # SimKO (§13): PPO clip of the top-K-mixed ratio, the negative branch scaled
        loss_pg = _simko(cfg, lp, old, A, m, entropy, topk)
    else:
        loss_pg = surrogate_loss(cfg.clip, rho, A, lp, cfg.eps_low, cfg.eps_high, cfg.dual_clip, zoo)

    # §6 truncated importance sampling: w = min(pi_old_train / pi_rollout, cap), no gradient
    if cfg.tis_cap is not None and rollout_logp is not None:
        w = torch.exp(old - clean(rollout_logp)).clamp(max=cfg.tis_cap)
        loss_pg = loss_pg * w

    # §4 KL in the loss
    loss_kl = zero
    if cfg.kl_placement == "loss" and cfg.kl_coef > 0:
        if ref is None:
            raise ValueError(
                f"kl_coef={cfg.kl_coef} with kl_placement='loss' needs ref_logp (the reference policy's "
                "log-probs); set kl_coef=0 to train without a reference model"
            )
        loss_kl = cfg.kl_coef * kl_penalty(lp, ref, cfg.kl_estimator)

    # entropy bonus
    ent = clean(entropy, detach=False)
    loss_ent = -cfg.entropy_coef * ent if ent is not None else zero

    if row_weights is not None:  # λ-GRPO: sum_i f_i sum_t M l_it / sum M (§13)
        f = row_weights.to(lp.dtype).unsqueeze(-1)
        loss_pg, loss_kl, loss_ent = loss_pg * f, loss_kl * f, loss_ent * f
    agg = dict(agg=cfg.agg, mask=m, norm_constant=cfg.norm_constant, num_seqs=num_seqs, num_tokens=num_tokens)
    loss = aggregate(loss_tok=loss_pg + loss_kl + loss_ent, **agg)

    with torch.no_grad():
        seq_level = is_sequence_level(cfg.ratio)
        share = seq_mean if seq_level else masked_mean
        low, high = clip_masks(cfg.clip, rho, A, cfg.eps_low, cfg.eps_high, zoo, logp=lp)
        if rclip is not None:  # GMPO: the tokens whose log-ratio the clip replaced by its bound
            g_low, g_high = geometric_clip_masks(lp.detach() - old, A, cfg.eps_low, cfg.eps_high)
            low, high = low | g_low, high | g_high
        r_vals = rho.detach()
        metrics: dict[str, float] = {
            "clip/frac": share((low | high).to(lp.dtype), m),
            "clip/frac_low": share(low.to(lp.dtype), m),
            "clip/frac_high": share(high.to(lp.dtype), m),
            "ratio/mean": share(r_vals, m),
            "ratio/max": float(r_vals[m].max().item()) if bool(m.any()) else float("nan"),
            "kl/old": masked_mean(old - lp.detach(), m),
            "loss/policy": float(aggregate(loss_tok=loss_pg.detach(), **agg).item()),
            "loss/kl": float(aggregate(loss_tok=loss_kl.detach(), **agg).item()),
            "loss/entropy": float(aggregate(loss_tok=loss_ent.detach(), **agg).item()),
        }
        if ref is not None:
            metrics["kl/ref"] = masked_mean(kl_penalty(lp.detach(), ref, "k3"), m)
        if ent is not None:
            metrics["entropy"] = masked_mean(ent, m)
    return loss, metrics
