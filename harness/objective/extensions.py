"""The extras slot: what a variant needs beyond the core tensors, declared once, read by no name.

The core of a step is logp, old_logp, ref_logp, the mask, the entropy and the advantages. A variant
that needs more (SimKO's top-K log-probs, λ-GRPO's group lengths and learned λ, PRIME's implicit
reward model, PPO's value model) declares it in its mode's `Hooks`; the trainers and `policy_loss`
ask the active modes for their hooks and carry whatever they return in one `extras` mapping
(`Batch.extras`, `LossInputs.extras`), never branching on a variant's name:

    component      a trained module beside the policy whose output is `extras[component]`
                   (harness/train/core/components.py builds it: values, prm_logp, lam)
    reference      it needs pi_ref's log-probs
    advantages     (cfg, rewards (B,), mask (B, T), group_size, extras) -> Scored: per-token
                   advantages instead of the group baseline (critic + GAE, PRIME)
    scoring        (cfg, rewards (B,), mask (B, T), group_size) -> {name: (B, ...)}: per-row tensors
                   computed once per step and carried to the loss (λ-GRPO's group lengths)
    old_forward    (cfg, TokenLogits) -> {name: (B, T, ...)}: read from pi_old's forward, no grad
                   (SimKO: pi_old's top-K tokens and their log-probs)
    train_forward  (cfg, TokenLogits, extras) -> {name: ...}: read from the training forward, with
                   grad (SimKO: the log-probs of those tokens now)
    token_loss     (cfg, logp, old_logp, adv (B, T), mask, entropy, extras) -> l (B, T): replaces the
                   surrogate (docs/objective.md, "Surrogate and clipping"; SimKO)
    row_weights    (cfg, extras) -> f (b,): multiplies each row's token losses (λ-GRPO)
    token_mask     (cfg, entropy, mask, extras) -> (b, T) bool: the tokens the policy gradient (and the entropy
                   bonus) act on; the others' surrogate is 0 (the 80/20 rule's top-entropy tokens, entropy_control.py)
    loss_term      (cfg, LossInputs, num_seqs, num_tokens) -> (scalar or None, metrics): added to the
                   loss (the critic's value loss, PRIME's reward-model BCE, λ's metric)
    rollout_mask   (cfg, logp (B, T) detached, rollout_logp (B, T), adv (B, T), mask bool) -> (keep (B, T)
                   bool, metrics): tokens whose policy-gradient term is dropped against the sampler's
                   log-probs (off-policy sequence masking, M2PO: rollout_correction.py)
    greedy         it needs the reward of one greedy (temperature 0) response per prompt, (B,) in
                   `extras["greedy_rewards"]` of `advantages` (ReMax): the rollout draws and scores it
    teacher        it needs a frozen teacher's log-probs of the sampled tokens, (B, T) in
                   `extras["teacher_logp"]` of `advantages` (on-policy distillation: the run's model.teacher)

The data side and the after-step, read by the trainer through objective/batching.py:

    reward_shaping (cfg, lengths (B,), max_new_tokens) -> (B,): added to each response's reward before
                   the step sees it (DAPO's overlong punishment)
    refill_filter  (cfg, rewards (B,), correct (B,), G) -> keep (N,) bool: the groups a sampling round
                   keeps; the dropped ones are refilled by further rounds (DAPO's dynamic sampling)
    group_filter   (cfg, rewards (B,), correct (B,), G) -> (keep (N,) bool, metrics): the groups the
                   step trains on once sampling is done, not refilled (ScaleRL's zero-variance filter)
    retire_at      (cfg) -> p: a prompt whose running pass rate reaches p leaves the training pool
                   (ScaleRL's no-positive-resampling)
    reset_reference (cfg, step) -> bool: pi_ref <- pi_theta after this step (iterative GRPO)
    resample       (cfg, rewards (B,), generator) -> idx (B,) long: the rows of the scored batch the update
                   trains on, drawn from it (PF-PPO's reward-weighted resampling, pf_ppo.py)

The built-in extensions -- modes no knob selects, active by their `switch` -- are below: SimKO, the
KL term, and the data side's overlong shaping, dynamic sampling, zero-variance filter and
no-positive-resampling.

Glossary: B rows, b rows of a micro-batch, T response length, V vocabulary, K = simko_top_k.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from harness.objective import shaping, simko
from harness.objective.modes import KINDS, Mode, Modes, Requires, register_extension


@dataclass(frozen=True)
class Hooks:
    """A mode's part of the extras slot (see the module docstring); every hook optional."""

    component: str | None = None
    reference: bool = False
    advantages: Callable | None = None
    scoring: Callable | None = None
    old_forward: Callable | None = None
    train_forward: Callable | None = None
    token_loss: Callable | None = None
    row_weights: Callable | None = None
    loss_term: Callable | None = None
    token_mask: Callable | None = None
    rollout_mask: Callable | None = None
    greedy: bool = False
    teacher: bool = False
    reward_shaping: Callable | None = None
    refill_filter: Callable | None = None
    group_filter: Callable | None = None
    retire_at: Callable | None = None
    reset_reference: Callable | None = None
    resample: Callable | None = None


class TokenLogits(NamedTuple):
    """One forward's view of the response tokens (harness/models/logprobs.py builds it). A hook reads the logits
    through `topk_index` and `logprobs_at`: under train.chunked_head the view is harness/models/chunked_head.py's
    ChunkedTokenLogits, with the same two methods and no whole logits."""

    logits: torch.Tensor  # (B, T, V) at the sampling temperature
    logz: torch.Tensor  # (B, T) their log-sum-exp
    mask: torch.Tensor  # (B, T) the mask of that forward
    response_ids: torch.Tensor  # (B, T) the sampled tokens

    def detached(self) -> TokenLogits:
        return TokenLogits(self.logits.detach(), self.logz.detach(), self.mask, self.response_ids)

    def topk_index(self, k: int) -> torch.Tensor:
        """(B, T, k) the k most likely tokens at each position (no gradient)."""
        return self.logits.detach().topk(k, dim=-1).indices

    def logprobs_at(self, index: torch.Tensor) -> torch.Tensor:
        """(B, T, K) log-probs of the tokens `index` (B, T, K), 0 on padding: logits[index] - log Z."""
        index = index.to(self.logits.device)
        return (self.logits.gather(-1, index) - self.logz.unsqueeze(-1)) * self.mask.unsqueeze(-1)


@dataclass
class Scored:
    """What `advantages` returns.

    adv      (B,) per-sequence (group baselines) or (B, T) per-token (critic, PRIME) advantages, no grad
    returns  (B, T) value targets R = A + V (un-whitened) when a value model scored, else None
    rewards  (B,) the sequence rewards used, KL in the reward applied where it applies (critic:
             the sum over the row of its per-token rewards)
    metrics  step metrics of the scoring (PRIME: prm/loss, prm/accuracy, reward/process_mean)
    extras   per-row tensors the loss needs from the scoring (critic: old_values, returns; PRIME:
             outcomes; λ-GRPO: group_lengths, group_pos): the trainer keeps them on the batch
    """

    adv: torch.Tensor
    returns: torch.Tensor | None
    rewards: torch.Tensor
    metrics: dict[str, float] = field(default_factory=dict)
    extras: dict[str, torch.Tensor] = field(default_factory=dict)


# ----------------------------------------------------------------------------- what is active
def active_modes(cfg: Any) -> list[tuple[str, str, Mode]]:
    """(kind, name, mode) of every mode cfg selects and every extension it turns on."""
    return [(kind, name, mode) for kind, reg in KINDS.items() for name, mode in reg.active(cfg)]


def active_hooks(cfg: Any, hook: str) -> list[Callable]:
    """The `hook` of every active mode that has one, in registry order."""
    out = []
    for _, _, mode in active_modes(cfg):
        fn = getattr(mode.hooks, hook, None) if mode.hooks is not None else None
        if fn is not None:
            out.append(fn)
    return out


def one_hook(cfg: Any, hook: str) -> Callable | None:
    """The single active `hook` (token_loss, advantages), None if none; two at once is a config error."""
    found = [
        (f"{kind}={name!r}", getattr(m.hooks, hook))
        for kind, name, m in active_modes(cfg)
        if m.hooks is not None and getattr(m.hooks, hook) is not None
    ]
    if len(found) > 1:
        raise ValueError(f"{' and '.join(w for w, _ in found)} both replace the {hook}; pick one")
    return found[0][1] if found else None


def components(cfg: Any) -> tuple[str, ...]:
    """The trained components the active modes read (their `extras` names)."""
    return tuple(m.hooks.component for _, _, m in active_modes(cfg) if m.hooks is not None and m.hooks.component)


def forward_extras(
    cfg: Any, view: TokenLogits, extras: Mapping[str, torch.Tensor], is_old_policy: bool
) -> dict[str, torch.Tensor]:
    """What the active extensions read from a training forward. is_old_policy: this forward is also
    pi_old's (a single-pass update), so their `old_forward` parts come from it too (detached)."""
    out: dict[str, torch.Tensor] = {}
    if is_old_policy:
        for fn in active_hooks(cfg, "old_forward"):
            out.update(fn(cfg, view.detached()))
    for fn in active_hooks(cfg, "train_forward"):
        out.update(fn(cfg, view, {**extras, **out}))
    return out


def old_forward_extras(cfg: Any, view: TokenLogits) -> dict[str, torch.Tensor]:
    """What the active extensions read from pi_old's own forward (no grad)."""
    out: dict[str, torch.Tensor] = {}
    for fn in active_hooks(cfg, "old_forward"):
        out.update(fn(cfg, view))
    return out


# ----------------------------------------------------------------------------- built-in extensions
def _build(fn: Callable) -> Callable:
    return fn  # an extension's impl: active(cfg) -> bool


def _is_on(cfg: Any, name: str, mode: Mode) -> bool:
    """An extension is on when its config carries its knobs (a plugin's: the config names the plugin) and
    its switch says so."""
    return all(hasattr(cfg, k.name) for k in mode.knobs) and bool(mode.impl(cfg))


# The extensions (kind "extension"): active when their switch says so, whatever the mode knobs select.
EXTENSIONS: Modes = Modes("extension", build=_build, active=_is_on)


@register_extension(
    "simko",
    doc="SimKO (2510.14807): at high-entropy tokens a correct response spreads simko_mix of its gradient over "
    "pi_old's top-K tokens, a wrong one's argmax is pushed simko_neg_scale harder; needs the top-K log-probs",
    knobs=simko.KNOBS,
    switch="simko_top_k",
    when="objective.simko_top_k > 0",
    requires=(
        Requires("clip", ("ppo",), simko.WHY),
        Requires("ratio", ("token",), simko.WHY),
        Requires("dual_clip", (None,), simko.WHY),
        Requires("eps_low", why=simko.WHY, accepts=lambda v, cfg: v is not None, allowed_text="a number"),
    ),
    hooks=Hooks(old_forward=simko.old_topk, train_forward=simko.train_topk, token_loss=simko.token_loss),
)
def _simko_on(cfg: Any) -> bool:
    return cfg.simko_top_k > 0


def _reference_reset_due(cfg: Any, step: int) -> bool:
    """objective.ref_update_every n: pi_ref <- pi_theta after every n-th step (0: never)."""
    return bool(cfg.ref_update_every) and (step + 1) % cfg.ref_update_every == 0


@register_extension(
    "kl",
    doc="the KL term to pi_ref (docs/objective.md, 'KL to the reference'): kl_coef k in the loss or kl_coef k1 off the "
    "reward; loads pi_ref",
    reads=("kl_estimator", "kl_placement", "ref_update_every"),
    switch="kl_coef",
    when="objective.kl_coef > 0",
    hooks=Hooks(reference=True, reset_reference=_reference_reset_due),
)
def _kl_on(cfg: Any) -> bool:
    return cfg.kl_coef > 0


@register_extension(
    "overlong",
    doc="DAPO's soft overlong punishment (docs/objective.md, 'Batch-level knobs'): reward - overlong_penalty, "
    "linear over the buffer",
    reads=("overlong_penalty",),
    switch="overlong_buffer",
    when="objective.overlong_buffer > 0",
    hooks=Hooks(reward_shaping=shaping.overlong_shaping),
)
def _overlong_on(cfg: Any) -> bool:
    return cfg.overlong_buffer > 0


@register_extension(
    "dynamic_sampling",
    doc="DAPO's dynamic sampling (docs/objective.md, 'Batch-level knobs'): drop all-equal groups and refill them",
    reads=("train.max_refill_rounds",),
    switch="dynamic_sampling",
    when="objective.dynamic_sampling=true",
    hooks=Hooks(refill_filter=shaping.mixed_accuracy_groups),
)
def _dynamic_sampling_on(cfg: Any) -> bool:
    return bool(cfg.dynamic_sampling)


@register_extension(
    "zero_variance_filter",
    doc="ScaleRL's zero-variance filtering (2510.13786, docs/objective.md, 'Batch-level knobs'): drop all-equal "
    "groups, no refill",
    switch="zero_variance_filter",
    when="objective.zero_variance_filter=true",
    min_group_size=2,  # a group of one response is always all-equal
    hooks=Hooks(group_filter=shaping.unequal_reward_groups),
)
def _zero_variance_filter_on(cfg: Any) -> bool:
    return bool(cfg.zero_variance_filter)


@register_extension(
    "no_positive_resampling",
    doc="ScaleRL's no-positive-resampling (2510.13786, docs/objective.md, 'Batch-level knobs'): prompts solved at a "
    "running pass rate >= the threshold leave the training pool",
    switch="no_positive_resampling",
    when="objective.no_positive_resampling set",
    hooks=Hooks(retire_at=shaping.retirement_pass_rate),
)
def _no_positive_resampling_on(cfg: Any) -> bool:
    return cfg.no_positive_resampling is not None


__all__ = [
    "Hooks",
    "TokenLogits",
    "Scored",
    "EXTENSIONS",
    "active_modes",
    "active_hooks",
    "components",
    "forward_extras",
    "old_forward_extras",
    "one_hook",
]
