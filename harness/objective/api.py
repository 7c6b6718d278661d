"""The objective's calls for a trainer (docs/objective.md, "The trainer's calls"): every decision about the objective's
scoring and loss is made here (the data side's and the after-step's in batching.py), so a trainer
computes the tensors `inputs_needed` asks for and branches on no objective knob and no variant's name (a
variant's extra tensors travel in `extras`, extensions.py).

    needs  = inputs_needed(obj)                          which tensors to compute (reference, components, ...)
    mask   = loss_mask(obj, mask, truncated)             mask_truncated ("Batch-level knobs")
    fixed  = batch_correction(obj, mask, old_logp, rollout_logp)
                                                         the step's part of the rollout correction: verl's
                                                         rejection sampling shrinks the mask, the IS weights'
                                                         batch mean goes to the loss in extras
    scored = advantages(obj, rewards, mask, G, logp=, ref_logp=, extras=)
                                                         KL in the reward ("KL to the reference"), group
                                                         baselines, or a mode's per-token advantages
                                                         (critic + GAE, PRIME) ("Advantage")
                                                         -> Scored(adv, returns, rewards, metrics, extras)
    loss, metrics = loss(obj, LossInputs(...), num_seqs, num_tokens)
                                                         policy loss with entropy detach and TIS
                                                         gating, + the active modes' loss terms

Glossary: N prompts, G group size, B = N*G sequences (groups contiguous), b rows of one
micro-batch, T padded response length, M the response mask (B, T).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from harness.objective.advantage_clip import clip_advantages
from harness.objective.advantages import group_advantages
from harness.objective.batch_correction import BatchCorrection, batch_correction, old_policy_readers
from harness.objective.entropy_control import entropy_bonus_on
from harness.objective.extensions import Scored, active_hooks, active_modes, components, one_hook
from harness.objective.kl import kl_in_reward, loss_kl_on, reward_kl_on
from harness.objective.kl_control import reward_kl_mean
from harness.objective.policy import policy_loss
from harness.objective.positive_nll import positive_nll_on
from harness.objective.rollout_correction import uses_sampler_logp
from harness.objective.router_aux import router_aux_on

if TYPE_CHECKING:
    from harness.objective.config import ObjectiveConfig


@dataclass(frozen=True)
class Needs:
    """What a trainer must compute for this objective (and nothing else decides it).

    ref_logp             a frozen reference policy and its log-probs (kl_coef > 0; DPO; a mode's hooks)
    current_logp_for_kl  the behaviour policy's log-probs (B, T) before the update, for the KL
                         placed in the reward or the reverse KL to the teacher (pass them as
                         `advantages(logp=...)`); a single-pass update that has no old-log-prob forward must run one
    recompute_old_logp   pi_old's log-probs must be recomputed by a forward of their own even when the
                         update is a single pass (TIS / rollout_is weigh pi_old,train against the sampler,
                         rollout_rs rejects by it; the optimal token baseline scores with pi_old's logits);
                         not to be confused with old_forward below
    adv_only_gradient    a row with advantage 0 contributes no gradient (no KL-in-loss, entropy or
                         positive-example NLL term), so a diagnostic may skip such rows
    components           the trained components the active modes read, by the name of their output in
                         `extras` (values: PPO's value model, prm_logp: PRIME's reward model, lam: λ-GRPO's λ);
                         before the update their outputs go to `advantages(extras=...)` (those that score),
                         with gradient into `LossInputs` in every micro-batch
    old_forward          an active extension's `old_forward` hook reads pi_old's logits (SimKO's top-K): pi_old's
                         forward takes `old_forward_extras` as its head, even when its log-probs come from the
                         sampler; a single-pass update reads it from its first forward
    train_forward        an active extension's `train_forward` hook reads the training forward's logits: it takes
                         `forward_extras` as its head
    greedy_rewards       an active mode's baseline is the reward of a greedy response (ReMax): the rollout draws
                         one response per prompt at temperature 0, scores it with the same rewards (not trained
                         on) and passes each row's as `advantages(extras={"greedy_rewards": (B,)})`
    teacher_logp         an active mode reads a frozen teacher's log-probs of the sampled tokens (on-policy
                         distillation, objective.distill_coef > 0): the trainer loads the run's model.teacher and
                         passes its no-grad forward's log-probs (B, T) as `advantages(extras={"teacher_logp": ...})`
    router_aux_loss      the training forward of an MoE returns its router's load-balancing loss (transformers'
                         `output_router_logits=True`, `out.aux_loss`) as `LossInputs.extras["router_aux_loss"]`
                         (router_aux_loss_coef > 0)

    Two inputs are not asked for, because a trainer passes them to `loss` every time: the entropy (B, T) with
    grad (`loss` detaches it when the entropy does not enter the loss) and the sampler's log-probs (B, T) in
    `LossInputs.rollout_logp` (read only by the rollout correction of docs/objective.md, "Batch-level knobs": tis_cap,
    rollout_is, off_policy_mask_threshold, m2_threshold). A trained value model is "values" in `components`.
    """

    ref_logp: bool
    current_logp_for_kl: bool
    recompute_old_logp: bool
    adv_only_gradient: bool
    components: tuple[str, ...] = ()
    old_forward: bool = False
    train_forward: bool = False
    greedy_rewards: bool = False
    teacher_logp: bool = False
    router_aux_loss: bool = False


def inputs_needed(obj: ObjectiveConfig) -> Needs:
    """Which tensors the trainer must compute for `obj` (see `Needs`)."""
    parts = components(obj)
    teacher = any(m.hooks is not None and m.hooks.teacher for _, _, m in active_modes(obj))
    return Needs(
        ref_logp=obj.needs_reference,
        current_logp_for_kl=reward_kl_on(obj) or teacher,
        recompute_old_logp=bool(old_policy_readers(obj)) or _scores_from_old_forward(obj),
        adv_only_gradient=not (loss_kl_on(obj) or entropy_bonus_on(obj) or positive_nll_on(obj)),
        components=parts,
        old_forward=bool(active_hooks(obj, "old_forward")),
        train_forward=bool(active_hooks(obj, "old_forward") or active_hooks(obj, "train_forward")),
        greedy_rewards=any(m.hooks is not None and m.hooks.greedy for _, _, m in active_modes(obj)),
        teacher_logp=teacher,
        router_aux_loss=router_aux_on(obj),
    )


def _scores_from_old_forward(obj: ObjectiveConfig) -> bool:
    """A mode whose advantages read its own `old_forward` hook's tensors (the optimal token baseline's sum_v pi^2):
    pi_old's forward runs before the advantages, so the update cannot be a single pass."""
    return any(m.hooks is not None and m.hooks.advantages and m.hooks.old_forward for _, _, m in active_modes(obj))


def loss_mask(obj: ObjectiveConfig, mask: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """The mask the loss sees (B, T): with mask_truncated, the rows of truncated responses
    (truncated (B,) bool, no EOS) are zeroed (docs/objective.md, "Batch-level knobs"); otherwise `mask` itself."""
    if not obj.mask_truncated:
        return mask
    if truncated.shape != mask.shape[:1]:
        raise ValueError(f"truncated {tuple(truncated.shape)} must be (B,) for mask {tuple(mask.shape)}")
    return mask * (~truncated).float().unsqueeze(1).to(mask.device)


def advantages(
    obj: ObjectiveConfig,
    rewards: torch.Tensor,
    mask: torch.Tensor,
    group_size: int,
    *,
    logp: torch.Tensor | None = None,
    ref_logp: torch.Tensor | None = None,
    extras: Mapping[str, torch.Tensor] | None = None,
    **named: torch.Tensor | None,
) -> Scored:
    """Rewards (B,) -> advantages, with every decision of docs/objective.md, "Advantage" and "KL to the reference" made
    here.

    KL in the reward (kl_placement: reward, kl_coef > 0) needs `logp` (the behaviour policy's,
    (B, T)) and `ref_logp`. mask (B, T) is the loss mask (after `loss_mask`). extras: the
    components' outputs before the update (values (B, T) of the critic, prm_logp (B, T) of PRIME's
    reward model); a keyword argument is one of them (`values=v` is `extras={"values": v}`). A mode
    with per-token advantages (critic: GAE + whitening; PRIME) computes them from its hooks;
    otherwise r_i - kl_coef sum_t M k1 when
    the KL is in the reward, then the group/batch baseline and scale; then adv_clip_low / adv_clip_high
    clamp the advantages (advantage_clip.py). Every active mode's
    `scoring` hook adds the per-row tensors its loss needs to `Scored.extras`.
    """
    inputs = {**(extras or {}), **{k: v for k, v in named.items() if v is not None}, "logp": logp, "ref_logp": ref_logp}
    kl_reward = reward_kl_on(obj)
    if kl_reward and (logp is None or ref_logp is None):
        raise ValueError(
            f"kl_placement='reward' with kl_coef={obj.kl_coef} needs logp (the behaviour policy's log-probs) and "
            "ref_logp (the reference's), both (B, T): inputs_needed(obj).current_logp_for_kl / .ref_logp"
        )
    per_token = one_hook(obj, "advantages")
    if per_token is not None:
        scored = per_token(obj, rewards, mask, group_size, inputs)
    else:
        if kl_reward:
            rewards = kl_in_reward(obj, rewards, logp, ref_logp, mask)
        scored = Scored(adv=group_advantages(obj, rewards, group_size), returns=None, rewards=rewards)
    scored.adv, clip_metrics = clip_advantages(obj, scored.adv, mask)  # adv_clip_low / adv_clip_high, when set
    scored.metrics.update(clip_metrics)
    for hook in active_hooks(obj, "scoring"):
        scored.extras.update(hook(obj, rewards, mask, group_size))
    if kl_reward and getattr(obj, "kl_target", None) is not None:  # the adaptive controller's KL_t (kl_control.py)
        scored.metrics["kl/reward"] = float(reward_kl_mean(logp, ref_logp, mask))  # read by the host each step
    return scored


class LossInputs:
    """One micro-batch, all (b, T) unless said.

    logp          current policy, with grad
    old_logp      behaviour policy (detached)
    adv           (b,) or (b, T), from `advantages`
    mask          the loss mask (`loss_mask`)
    entropy       per-token entropy, with grad (detached here when entropy_coef is 0), or None
    ref_logp      reference (when inputs_needed(obj).ref_logp)
    rollout_logp  the sampler's log-probs: used only when the objective asks (a rollout correction: docs/objective.md,
                  "Batch-level knobs")
    extras        what the active modes read beyond these (extensions.py): the components' outputs with
                  grad (values, prm_logp, lam), what the scoring kept (old_values, returns, outcomes,
                  group_lengths, group_pos) and what the forwards read (SimKO's topk_logp,
                  old_topk_logp, is_argmax). Any other keyword argument is one of them:
                  LossInputs(..., values=v) is LossInputs(..., extras={"values": v}).
    """

    def __init__(
        self,
        logp: torch.Tensor,
        old_logp: torch.Tensor,
        adv: torch.Tensor,
        mask: torch.Tensor,
        entropy: torch.Tensor | None = None,
        ref_logp: torch.Tensor | None = None,
        rollout_logp: torch.Tensor | None = None,
        *,
        extras: Mapping[str, torch.Tensor] | None = None,
        **named: torch.Tensor | None,
    ):
        self.logp, self.old_logp, self.adv, self.mask = logp, old_logp, adv, mask
        self.entropy, self.ref_logp, self.rollout_logp = entropy, ref_logp, rollout_logp
        self.extras: dict[str, torch.Tensor] = {k: v for k, v in {**(extras or {}), **named}.items() if v is not None}


def loss(
    obj: ObjectiveConfig,
    x: LossInputs,
    num_seqs: float | None = None,
    num_tokens: float | None = None,
    deferred: bool = False,
) -> tuple[torch.Tensor, dict[str, float]]:
    """(scalar loss, metrics) of one micro-batch: policy_loss (ratio, surrogate, TIS, KL in the
    loss, entropy bonus, aggregation) + every active mode's loss term (the critic's value
    loss, PRIME's reward-model BCE). num_seqs / num_tokens: the whole optimizer
    mini-batch's denominators (docs/objective.md, "Aggregation"). Decided here: the entropy is detached when
    entropy_coef is 0 (it is then only a metric); the sampler's log-probs reach the loss only when a rollout correction
    is on. Metrics: those of docs/objective.md, "Metrics" (loss/policy, loss/kl, loss/entropy, clip/*, ratio/*, kl/*,
    entropy) and the terms' (loss/value, value/clip_frac, value/explained_variance; loss/prm; agg/lambda). deferred: the
    metrics the policy loss computes are left on the device (objective/deferred.py `read` finishes them), so that a
    trainer's micro-batch waits on nothing before its backward."""
    entropy = x.entropy
    if entropy is not None and not entropy_bonus_on(obj):
        entropy = entropy.detach()
    total, metrics = policy_loss(
        obj,
        x.logp,
        x.old_logp,
        x.adv,
        x.mask,
        ref_logp=x.ref_logp,
        entropy=entropy,
        rollout_logp=x.rollout_logp if uses_sampler_logp(obj) else None,
        num_seqs=num_seqs,
        num_tokens=num_tokens,
        extras=x.extras,
        deferred=deferred,
    )
    for term in active_hooks(obj, "loss_term"):
        value, more = term(obj, x, num_seqs, num_tokens)
        if value is not None:
            total = total + value
        metrics = {**metrics, **more}
    return total, metrics


__all__ = [
    "Needs",
    "inputs_needed",
    "loss_mask",
    "batch_correction",
    "BatchCorrection",
    "advantages",
    "Scored",
    "LossInputs",
    "loss",
    "active_modes",
]
