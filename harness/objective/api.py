"""The objective's calls for a trainer (docs/objective.md §11): every decision about the objective
is made here, so a trainer computes the tensors `inputs_needed` asks for and branches on nothing
else.

    needs  = inputs_needed(obj)                          which tensors to compute (reference, values, ...)
    mask   = loss_mask(obj, mask, truncated)             mask_truncated (§6)
    scored = advantages(obj, rewards, mask, G, logp=, ref_logp=, values=)
                                                         KL in the reward (§4), group baselines or
                                                         critic + GAE (§1) -> Scored(adv, returns, rewards)
    loss, metrics = loss(obj, LossInputs(...), num_seqs, num_tokens)
                                                         policy loss (§2-6) with entropy detach and TIS
                                                         gating, + value loss when values are given (§1)

Glossary: N prompts, G group size, B = N*G sequences (groups contiguous), b rows of one
micro-batch, T padded response length, M the response mask (B, T).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from harness.objective.advantages import critic_advantages, group_advantages
from harness.objective.lambda_grpo import lambda_row_weights
from harness.objective.kl import KL_PLACEMENT, kl_in_reward, token_rewards_with_kl
from harness.objective.policy import policy_loss
from harness.objective.prime import prime_advantages, prime_process_rewards, prime_rm_accuracy, prime_rm_loss
from harness.objective.value import value_loss

if TYPE_CHECKING:
    from harness.objective.config import ObjectiveConfig


@dataclass(frozen=True)
class Needs:
    """What a trainer must compute for this objective (and nothing else decides it).

    ref_logp             a frozen reference policy and its log-probs (kl_coef > 0; or DPO)
    values               a trained value model: its predictions (B, T) before the update for
                         `advantages`, with gradient in `loss` (baseline: critic)
    current_logp_for_kl  the behaviour policy's log-probs (B, T) before the update, for the KL
                         placed in the reward (pass them as `advantages(logp=...)`); a
                         single-pass update that has no old-log-prob forward must run one
    rollout_logp         the sampler's log-probs (B, T) in `LossInputs.rollout_logp` (TIS)
    old_logp_forward     pi_old's log-probs must come from a separate forward even when the
                         update is a single pass (TIS weighs pi_old,train against the sampler)
    entropy_grad         the entropy enters the loss (entropy_coef != 0): compute it with grad
    adv_only_gradient    a row with advantage 0 contributes no gradient (no KL-in-loss or
                         entropy term), so a diagnostic may skip such rows
    prm_logp             PRIME's implicit reward model pi_phi (baseline: prime, §13): its log-probs
                         of the sampled tokens (B, T) before the update for `advantages`, with
                         gradient in `loss` (its BCE), and `LossInputs.outcomes`; needs ref_logp too
    lam                  λ-GRPO's learned scalar λ (agg: lambda_length, §13) in `LossInputs.lam`,
                         with each row's `group_lengths` (b, G) and `group_pos` (b,)
    topk_logp            K > 0 (SimKO, simko_top_k, §13): the training forward's log-probs of pi_old's
                         K most likely tokens (b, T, K) with gradient, pi_old's (b, T, K), and whether
                         the sampled token is pi_old's argmax (b, T) in `LossInputs`; entropy too
    """

    ref_logp: bool
    values: bool
    current_logp_for_kl: bool
    rollout_logp: bool
    old_logp_forward: bool
    entropy_grad: bool
    adv_only_gradient: bool
    prm_logp: bool = False
    lam: bool = False
    topk_logp: int = 0


def _kl_in(obj: "ObjectiveConfig", placement: str) -> bool:
    return obj.kl_coef > 0 and KL_PLACEMENT.check(obj.kl_placement) == placement


def _critic(obj: "ObjectiveConfig") -> bool:
    return obj.baseline == "critic"  # the per-token baseline: a value model + GAE


def _prime(obj: "ObjectiveConfig") -> bool:
    return obj.baseline == "prime"  # PRIME's implicit process rewards (§13): a trained reward model


def inputs_needed(obj: "ObjectiveConfig") -> Needs:
    """Which tensors the trainer must compute for `obj` (see `Needs`)."""
    tis = obj.tis_cap is not None
    return Needs(
        ref_logp=obj.needs_reference,
        values=_critic(obj),
        current_logp_for_kl=_kl_in(obj, "reward"),
        rollout_logp=tis,
        old_logp_forward=tis,
        entropy_grad=bool(obj.entropy_coef),
        adv_only_gradient=not (_kl_in(obj, "loss") or obj.entropy_coef),
        prm_logp=_prime(obj),
        lam=obj.agg == "lambda_length",
        topk_logp=obj.simko_top_k,
    )


def loss_mask(obj: "ObjectiveConfig", mask: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """The mask the loss sees (B, T): with mask_truncated, the rows of truncated responses
    (truncated (B,) bool, no EOS) are zeroed (docs/objective.md §6); otherwise `mask` itself."""
    if not obj.mask_truncated:
        return mask
    if truncated.shape != mask.shape[:1]:
        raise ValueError(f"truncated {tuple(truncated.shape)} must be (B,) for mask {tuple(mask.shape)}")
    return mask * (~truncated).float().unsqueeze(1).to(mask.device)


@dataclass
class Scored:
    """What `advantages` returns.

    adv      (B,) per-sequence (group baselines) or (B, T) per-token (critic) advantages, no grad
    returns  (B, T) value targets R = A + V (un-whitened) when values were given, else None
    rewards  (B,) the sequence rewards used, KL in the reward applied where it applies (critic:
             the sum over the row of its per-token rewards)
    metrics  step metrics of the scoring (PRIME: prm/loss, prm/accuracy, reward/process_mean)
    """

    adv: torch.Tensor
    returns: torch.Tensor | None
    rewards: torch.Tensor
    metrics: dict[str, float] = field(default_factory=dict)


def advantages(obj: "ObjectiveConfig", rewards: torch.Tensor, mask: torch.Tensor, group_size: int, *,
               logp: torch.Tensor | None = None, ref_logp: torch.Tensor | None = None,
               values: torch.Tensor | None = None, prm_logp: torch.Tensor | None = None) -> Scored:
    """Rewards (B,) -> advantages, with every decision of §1 and §4 made here.

    KL in the reward (kl_placement: reward, kl_coef > 0) needs `logp` (the behaviour policy's,
    (B, T)) and `ref_logp`; the critic baseline needs `values` (B, T). mask (B, T) is the loss
    mask (after `loss_mask`). Critic: per-token rewards r_t = -kl_coef k1_t + [t last] r_i, GAE,
    whitening for scale: batch_std (§1). PRIME (baseline: prime, §13) needs `prm_logp` (the
    implicit reward model's, (B, T)) and `ref_logp`: its token rewards prime_beta * (prm_logp -
    ref_logp) and the binary outcomes `rewards` -> `prime_advantages`. Otherwise: r_i - kl_coef
    sum_t M k1 when the KL is in the reward, then the group/batch baseline and scale (§1).
    """
    if _prime(obj):
        return _prime_scored(obj, rewards, mask, group_size, prm_logp, ref_logp)
    kl_reward = _kl_in(obj, "reward")
    if kl_reward and (logp is None or ref_logp is None):
        raise ValueError(
            f"kl_placement='reward' with kl_coef={obj.kl_coef} needs logp (the behaviour policy's log-probs) and "
            "ref_logp (the reference's), both (B, T): inputs_needed(obj).current_logp_for_kl / .ref_logp"
        )
    if _critic(obj):
        if values is None:
            raise ValueError(f"baseline={obj.baseline!r} needs values (B, T) from the value model "
                             "(inputs_needed(obj).values)")
        shape_src = logp if kl_reward else torch.zeros_like(values)  # only shape and dtype when no KL
        tok = token_rewards_with_kl(obj, rewards, shape_src, ref_logp if kl_reward else None, mask)
        adv, returns = critic_advantages(obj, tok, values, mask)
        return Scored(adv=adv, returns=returns, rewards=tok.sum(-1))
    if kl_reward:
        rewards = kl_in_reward(obj, rewards, logp, ref_logp, mask)
    return Scored(adv=group_advantages(obj, rewards, group_size), returns=None, rewards=rewards)


def _prime_scored(obj: "ObjectiveConfig", rewards: torch.Tensor, mask: torch.Tensor, group_size: int,
                  prm_logp: torch.Tensor | None, ref_logp: torch.Tensor | None) -> Scored:
    """PRIME's advantages (B, T) and the reward model's metrics on the step's batch (§13):
    prm/loss its BCE, prm/accuracy the share of rows whose score sum_t M q predicts the outcome,
    reward/process_mean the mean token reward prime_beta * q over the response tokens."""
    if prm_logp is None or ref_logp is None:
        raise ValueError("baseline='prime' needs prm_logp (the implicit reward model's log-probs) and ref_logp "
                         "(the reference's), both (B, T): inputs_needed(obj).prm_logp / .ref_logp")
    q = (prm_logp - ref_logp).detach()  # log pi_phi - log pi_ref per sampled token
    proc = prime_process_rewards(q, mask, obj.prime_beta, obj.prime_keep_last_token)
    adv, _ = prime_advantages(proc, rewards, mask, group_size, obj.prime_coef, obj.outcome_coef, obj.std, obj.adv_eps)
    m = mask > 0
    metrics = {"prm/loss": float(prime_rm_loss(q, mask, rewards, obj.prime_beta)),
               "prm/accuracy": prime_rm_accuracy(q, mask, rewards),
               "reward/process_mean": float(proc[m].mean()) if m.any() else 0.0}
    return Scored(adv=adv, returns=None, rewards=rewards, metrics=metrics)


@dataclass
class LossInputs:
    """One micro-batch, all (b, T) unless said.

    logp          current policy, with grad
    old_logp      behaviour policy (detached)
    adv           (b,) or (b, T), from `advantages`
    mask          the loss mask (`loss_mask`)
    entropy       per-token entropy, with grad (detached here when entropy_coef is 0), or None
    ref_logp      reference (when inputs_needed(obj).ref_logp)
    rollout_logp  the sampler's log-probs: used only when the objective asks (TIS, tis_cap set)
    values        value model output, with grad (critic)
    old_values    value model output before the update (detached)
    returns       value targets from `advantages` (Scored.returns)
    prm_logp      PRIME's reward model's log-probs, with grad (baseline: prime)
    outcomes      (b,) the binary outcome labels its BCE is trained on (baseline: prime)
    lam           λ-GRPO's learned λ, a 0-dim tensor with grad (agg: lambda_length)
    group_lengths (b, G) the lengths of each row's group; group_pos (b,) the row's place in it
    topk_logp     (b, T, K) log-probs of pi_old's top-K tokens under the current policy, with grad (SimKO)
    old_topk_logp (b, T, K) the same under pi_old; is_argmax (b, T) bool: sampled token = pi_old's argmax
    """

    logp: torch.Tensor
    old_logp: torch.Tensor
    adv: torch.Tensor
    mask: torch.Tensor
    entropy: torch.Tensor | None
    ref_logp: torch.Tensor | None = None
    rollout_logp: torch.Tensor | None = None
    values: torch.Tensor | None = None
    old_values: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    prm_logp: torch.Tensor | None = None
    outcomes: torch.Tensor | None = None
    lam: torch.Tensor | None = None
    group_lengths: torch.Tensor | None = None
    group_pos: torch.Tensor | None = None
    topk_logp: torch.Tensor | None = None
    old_topk_logp: torch.Tensor | None = None
    is_argmax: torch.Tensor | None = None


def _lambda_weights(obj: "ObjectiveConfig", x: LossInputs) -> torch.Tensor | None:
    """λ-GRPO's row weights f (b,) (agg: lambda_length, §13), differentiable in x.lam; None otherwise."""
    if obj.agg != "lambda_length":
        return None
    if x.lam is None or x.group_lengths is None or x.group_pos is None:
        raise ValueError("agg='lambda_length' needs lam (the learned λ), group_lengths (b, G) and group_pos (b,) "
                         "in LossInputs: inputs_needed(obj).lam")
    return lambda_row_weights(x.group_lengths, x.group_pos, x.lam, obj.lambda_r)


def loss(obj: "ObjectiveConfig", x: LossInputs, num_seqs: float | None = None,
         num_tokens: float | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """(scalar loss, metrics) of one micro-batch: policy_loss (ratio, surrogate, TIS, KL in the
    loss, entropy bonus, aggregation; §2-6) + value_loss when `x.values` is given (§1).
    num_seqs / num_tokens: the whole optimizer mini-batch's denominators (§5).
    Decided here: the entropy is detached when entropy_coef is 0 (it is then only a metric);
    the sampler's log-probs reach the loss only when tis_cap is set. Metrics: §9's
    (loss/policy, loss/kl, loss/entropy, clip/*, ratio/*, kl/*, entropy, and with values
    loss/value, value/clip_frac, value/explained_variance; with prm_logp (PRIME) + its BCE, loss/prm;
    agg: lambda_length: the row weights of the learned λ, agg/lambda)."""
    entropy = x.entropy
    if entropy is not None and not obj.entropy_coef:
        entropy = entropy.detach()
    total, metrics = policy_loss(obj, x.logp, x.old_logp, x.adv, x.mask, ref_logp=x.ref_logp, entropy=entropy,
                                 rollout_logp=x.rollout_logp if obj.tis_cap else None,
                                 num_seqs=num_seqs, num_tokens=num_tokens, row_weights=_lambda_weights(obj, x),
                                 topk=(x.topk_logp, x.old_topk_logp, x.is_argmax) if obj.simko_top_k else None)
    if x.lam is not None:
        metrics = {**metrics, "agg/lambda": float(x.lam.detach())}
    if x.values is not None:
        if x.old_values is None or x.returns is None:
            raise ValueError("values given without old_values and returns (b, T): the value loss needs all three")
        vloss, vmetrics = value_loss(obj, x.values, x.old_values, x.returns, x.mask,
                                     num_seqs=num_seqs, num_tokens=num_tokens)
        total = total + vloss
        metrics = {**metrics, **vmetrics}
    if x.prm_logp is not None:  # PRIME's reward model: BCE(sigmoid(prime_beta sum_t M q), outcome), §13
        if x.ref_logp is None or x.outcomes is None:
            raise ValueError("prm_logp given without ref_logp (b, T) and outcomes (b,): the reward model's loss "
                             "needs all three")
        rm = prime_rm_loss(x.prm_logp - x.ref_logp.detach(), x.mask, x.outcomes, obj.prime_beta, num_seqs)
        total = total + rm
        metrics = {**metrics, "loss/prm": float(rm.detach())}
    return total, metrics
