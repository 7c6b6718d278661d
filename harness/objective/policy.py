"""The policy loss: ratio -> surrogate -> TIS weight -> KL in loss -> entropy -> aggregation.

One code path for every algorithm; a preset only sets the knobs (docs/objective.md, "Importance ratio"
to "Batch-level knobs", and "Metrics").

Glossary: B sequences, T padded response length, M response mask (B, T).
Inputs (all (B, T) log-probs of the SAMPLED tokens):
    logp         current policy pi_theta (carries the gradient)
    old_logp     behaviour policy pi_old as recomputed by the trainer at rollout time
    ref_logp     frozen reference pi_ref (for the KL in the loss and the kl/ref metric)
    rollout_logp the sampler's own log-probs (vLLM / bf16 engine / hf), for the rollout correction
    entropy      full-distribution entropy per token (B, T), for the entropy bonus and metric
    adv          (B,) per-sequence or (B, T) per-token advantages (no gradient)
    extras       what the active modes read beyond these (extensions.py: SimKO's top-K log-probs,
                 λ-GRPO's learned λ and group lengths)

Papers: PPO 1707.06347, GRPO 2402.03300, DAPO 2503.14476, GSPO 2507.18071,
CISPO 2506.13585, GPG 2504.02546, Dr.GRPO 2503.20783, SAPO 2511.20347, GMPO 2507.20673,
DPPO 2602.04879; TIS: Yao et al., "Your efficient RL
framework secretly brings you off-policy RL training" (2025 blog); k3: Schulman,
"Approximating KL Divergence".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

import torch

from harness.objective.aggregation import aggregate, masked_mean, seq_mean
from harness.objective.batch_correction import NORM_KEY
from harness.objective.deferred import Deferred, read, scalar
from harness.objective.entropy_control import ENTROPY_WINDOW_KEY, entropy_bonus_on, entropy_coef_now, entropy_term
from harness.objective.extensions import active_hooks, one_hook
from harness.objective.kl import kl_penalty, loss_kl_on, loss_kl_term
from harness.objective.padding import zero_padding
from harness.objective.ratios import RATIO, is_sequence_level
from harness.objective.rollout_correction import Correction, rollout_correction, uses_sampler_logp
from harness.objective.surrogates import clip_masks, surrogate_loss, surrogate_metrics

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


class Tokens(NamedTuple):
    """The inputs on the response tokens, padding replaced by 0 (it may hold -inf / NaN): all (B, T)."""

    m: torch.Tensor  # bool mask
    lp: torch.Tensor  # logp, with its gradient
    old: torch.Tensor  # old_logp, detached
    ref: torch.Tensor | None  # ref_logp, detached
    A: torch.Tensor  # the advantage broadcast to tokens, detached
    zero: torch.Tensor

    def clean(self, x: torch.Tensor | None, detach: bool = True) -> torch.Tensor | None:
        """Another (B, T) input (entropy, rollout_logp) cleaned as these are: padding.py's zero_padding."""
        if x is None:
            return None
        return zero_padding(x.detach() if detach else x, self.m, self.lp.dtype)


def _tokens(logp, old_logp, adv, mask, ref_logp) -> Tokens:
    m = mask > 0
    zero = torch.zeros_like(logp)
    lp, old = zero_padding(logp, m), zero_padding(old_logp.detach(), m, logp.dtype)
    ref = None if ref_logp is None else zero_padding(ref_logp.detach(), m, logp.dtype)
    a = adv.detach().to(logp.dtype)
    A = a.unsqueeze(-1).expand_as(lp) if a.dim() == 1 else torch.where(m, a, zero)  # (B, T)
    return Tokens(m, lp, old, ref, A, zero)


def _token_keep(cfg: ObjectiveConfig, t: Tokens, entropy, extras) -> torch.Tensor | None:
    """(B, T) bool: the response tokens every active token mask keeps (the 80/20 rule's top-entropy tokens,
    entropy_control.py); None when no mask is active."""
    keep = None
    for token_mask in active_hooks(cfg, "token_mask"):
        kept = token_mask(cfg, entropy, t.m, extras)
        keep = kept & t.m if keep is None else keep & kept
    return keep


def _token_losses(cfg: ObjectiveConfig, t: Tokens, rho: torch.Tensor, entropy, correction: Correction, extras, keep):
    """(l_pg, l_kl, l_ent), each (B, T): the surrogate (or an extension's token loss) x the rollout correction,
    the KL in the loss and the entropy bonus, each row scaled by the extensions' row weights; the surrogate and the
    bonus only on the tokens `keep` keeps (when a token mask is active)."""
    token_loss = one_hook(cfg, "token_loss")
    if token_loss is not None:  # an extension replaces the surrogate (SimKO)
        loss_pg = token_loss(cfg, t.lp, t.old, t.A, t.m, entropy, extras)
    else:
        loss_pg = surrogate_loss(cfg, rho, t.A, t.lp, t.old, mask=t.m)  # the surrogate
    if correction.w is not None:
        # the rollout correction against the sampler (rollout_correction.py): TIS w = min(pi_old_train / pi_rollout,
        # cap) and its kin, times the off-policy / M2PO masks; no gradient
        loss_pg = loss_pg * correction.w
    if keep is not None:  # 80/20 rule, 2506.01939 Eq. 5: 1(H_t >= tau_rho) on the token's policy loss
        loss_pg = loss_pg * keep.to(loss_pg.dtype)
    loss_kl = t.zero
    if loss_kl_on(cfg):  # the KL in the loss
        if t.ref is None:
            raise ValueError(
                f"kl_coef={cfg.kl_coef} with kl_placement='loss' needs ref_logp (the reference policy's "
                "log-probs); set kl_coef=0 to train without a reference model"
            )
        loss_kl = loss_kl_term(cfg, t.lp, t.ref, rho)  # kl_coef k, times rho under kl_bias_correction
    ent = t.clean(entropy, detach=False)
    loss_ent = -entropy_coef_now(cfg, extras) * ent if ent is not None else t.zero  # entropy bonus
    if keep is not None and ent is not None:  # TRL 1.16: the bonus acts on the tokens the policy loss keeps
        loss_ent = loss_ent * keep.to(loss_ent.dtype)
    for row_weights in active_hooks(cfg, "row_weights"):  # e.g. λ-GRPO: sum_i f_i sum_t M l_it / sum M
        f = row_weights(cfg, extras).to(t.lp.dtype).unsqueeze(-1)
        loss_pg, loss_kl, loss_ent = loss_pg * f, loss_kl * f, loss_ent * f
    return loss_pg, loss_kl, loss_ent


def policy_loss(
    cfg: ObjectiveConfig,
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
    extras: Mapping[str, torch.Tensor] | None = None,
    deferred: bool = False,
) -> tuple[torch.Tensor, dict[str, float]]:
    """(loss scalar, metrics) of one (micro-)batch.

    l_{i,t} = surrogate(rho, A)                                   ratio, clip and its knobs
            * sg(w_{i,t})                                          the rollout correction against rollout_logp:
                                                                   TIS min(exp(old_logp - rollout_logp), tis_cap),
                                                                   rollout_is, off-policy mask, M2PO
            + kl_coef * k(logp, ref_logp)                          when kl_placement='loss' and kl_coef > 0
            - entropy_coef * H                                     when entropy is given
    loss = aggregate(cfg.agg, l, M, norm_constant, num_seqs, num_tokens)
    Truncated responses are removed by the caller (mask_truncated zeroes their mask rows).
    num_seqs / num_tokens: the whole optimizer mini-batch's denominators (gradient accumulation).
    extras: the active extensions' inputs (extensions.py); an extension may replace the surrogate by
    its token loss (SimKO: `simko_token_loss`, which needs `entropy`) or scale each row's token losses
    by its row weights f_i (λ-GRPO's learned length weights, with their gradient).

    Metrics (docs/objective.md, "Metrics"; means over this batch's response tokens, or over its sequences for the
    clip fractions and ratio stats of sequence-level ratios): clip/frac, clip/frac_low,
    clip/frac_high, ratio/mean, ratio/max, kl/ref (k3, when ref_logp is given), kl/old (mean of
    old_logp - logp), entropy (when given), loss/policy, loss/kl, loss/entropy (the aggregated
    contributions; loss = their sum); the rollout correction's (rollout_is/*, off_policy_mask/*, m2po/*) when
    on. They are read from the device together, once; deferred: left there (objective/deferred.py: a trainer
    reads a whole step's at once).
    """
    _check_shapes(logp, mask, adv, old_logp=old_logp, ref_logp=ref_logp, entropy=entropy, rollout_logp=rollout_logp)
    t = _tokens(logp, old_logp, adv, mask, ref_logp)
    rho = RATIO[cfg.ratio].ratio(t.lp, t.old, t.m, t.A, cfg)  # padding already zeroed: importance_ratio's work
    keep = _token_keep(cfg, t, entropy, extras or {})
    correction = _correction(cfg, t, rollout_logp, (extras or {}).get(NORM_KEY))
    parts = _token_losses(cfg, t, rho, entropy, correction, extras or {}, keep)
    agg = dict(
        agg=cfg.agg, mask=t.m, norm_constant=cfg.norm_constant, num_seqs=num_seqs, num_tokens=num_tokens, cfg=cfg
    )
    if cfg.entropy_agg == "agg":  # the bonus aggregated with the policy's agg, in one sum with the surrogate
        loss = aggregate(loss_tok=parts[0] + parts[1] + parts[2], **agg)
    else:
        loss = aggregate(loss_tok=parts[0] + parts[1], **agg) + entropy_term(cfg, parts[2], agg, keep)
    with torch.no_grad():
        metrics = {**_metrics(cfg, t, rho, parts, agg, entropy, keep), **correction.metrics}
        metrics.update(_entropy_control_metrics(cfg, t, rho, entropy, keep, deferred))
    return loss, metrics if deferred else read(metrics)


def _entropy_control_metrics(cfg: ObjectiveConfig, t: Tokens, rho, entropy, keep, deferred: bool) -> dict:
    """The entropy controls' metrics (entropy_control.py): the surrogate's own (clip_cov/frac, kl_cov/frac), the
    share of tokens a token mask keeps (entropy/kept_frac) and, for the adaptive controller (deferred calls of the
    trainer only), the sum and count of the entropy over the tokens the bonus acts on."""
    out = surrogate_metrics(cfg, rho, t.A, t.lp, t.old, t.m)
    if keep is not None:
        out["entropy/kept_frac"] = masked_mean(keep.to(t.lp.dtype), t.m, deferred=True)
    ent = t.clean(entropy)
    if deferred and ent is not None and getattr(cfg, "use_adaptive_entropy", False) and entropy_bonus_on(cfg):
        acts = t.m if keep is None else keep
        h_sum = torch.where(acts, ent, t.zero).sum()
        out[ENTROPY_WINDOW_KEY] = (scalar(h_sum), scalar(acts.sum()))
    return out


def _correction(cfg: ObjectiveConfig, t: Tokens, rollout_logp: torch.Tensor | None, norm=None) -> Correction:
    """The rollout correction (rollout_correction.py), its IS weights divided by the step's mean `norm` (b,)
    under rollout_is_batch_normalize (batch_correction.py); none without the sampler's log-probs (tis_cap then
    weighs nothing; the other knobs refuse to run without them)."""
    if rollout_logp is None:
        if uses_sampler_logp(cfg) and cfg.tis_cap is None:
            raise ValueError(
                "objective.rollout_is, off_policy_mask_threshold and m2_threshold need rollout_logp (the sampler's "
                "log-probs, (B, T)): pass them as LossInputs.rollout_logp"
            )
        return Correction(None, {})
    return rollout_correction(cfg, t.lp, t.old, t.clean(rollout_logp), t.A, t.m, norm)


# the metrics that are means over sequences under a sequence-level ratio (`share` in _metrics below): a trainer
# merging micro-batches weighs them by sequences, not tokens (harness/train/rl/update.py)
SEQUENCE_MEAN_METRICS = ("clip/frac", "clip/frac_low", "clip/frac_high", "ratio/mean")


def _metrics(
    cfg: ObjectiveConfig, t: Tokens, rho: torch.Tensor, parts, agg: dict, entropy, keep=None
) -> dict[str, Deferred]:
    """The metrics of docs/objective.md, "Metrics" of the batch (no grad), still on the device: clip fractions, ratio
    stats, KL, entropy, the loss's parts."""
    loss_pg, loss_kl, loss_ent = parts
    share = seq_mean if is_sequence_level(cfg.ratio) else masked_mean
    low, high = clip_masks(cfg, rho, t.A, logp=t.lp, old_logp=t.old)
    ratio_masks = RATIO[cfg.ratio].masks
    if ratio_masks is not None:  # a ratio that clips itself (GMPO): the tokens it replaced by its bound
        r_low, r_high = ratio_masks(t.lp, t.old, t.A, cfg)
        low, high = low | r_low, high | r_high
    r_vals = rho.detach()
    dtype = t.lp.dtype
    metrics: dict[str, Deferred] = {
        "clip/frac": share((low | high).to(dtype), t.m, deferred=True),
        "clip/frac_low": share(low.to(dtype), t.m, deferred=True),
        "clip/frac_high": share(high.to(dtype), t.m, deferred=True),
        "ratio/mean": share(r_vals, t.m, deferred=True),
        "ratio/max": _masked_max(r_vals, t.m),
        "kl/old": masked_mean(t.old - t.lp.detach(), t.m, deferred=True),
        "loss/policy": scalar(aggregate(loss_tok=loss_pg.detach(), **agg)),
        "loss/kl": scalar(aggregate(loss_tok=loss_kl.detach(), **agg)),
        "loss/entropy": scalar(entropy_term(cfg, loss_ent.detach(), agg, keep)),
    }
    if t.ref is not None:
        metrics["kl/ref"] = masked_mean(kl_penalty(t.lp.detach(), t.ref, "k3"), t.m, deferred=True)
    ent = t.clean(entropy, detach=False)
    if ent is not None:
        metrics["entropy"] = masked_mean(ent, t.m, deferred=True)
    return metrics


def _masked_max(x: torch.Tensor, m: torch.Tensor) -> Deferred:
    """max of x over the mask's tokens (the same value as x[m].max(): a max does not round); NaN without any."""
    top = torch.where(m, x, float("-inf")).max()
    return Deferred(lambda v, n: v[0] if n[0] > 0 else float("nan"), top, m.sum())
