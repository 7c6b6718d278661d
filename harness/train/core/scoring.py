"""Scoring a step's episode: everything the policy update reads, computed in one place for the RL
trainer (harness/train/rl/step.py) and the probes (harness/probes/engine.py) alike.

    episode --loss mask (objective.mask_truncated)--> the step's Batch
      pi_old's log-probs: none on a single pass (the update's first forward is pi_old's), the sampler's
        (train.old_logp), or a no-grad forward of the policy, which also feeds the rollout/train mismatch
      pi_ref's log-probs (a frozen reference, when the objective needs one); pi_theta's for a KL in the reward
      pi_T's log-probs (on-policy distillation's frozen teacher, model.teacher, when the objective reads them), timed
      the step's rollout correction: the mask after rejection sampling, the IS weights' batch mean
      the scoring components' outputs (PPO's values, PRIME's reward model) --> advantages (the objective)
    --> the batch with adv, old_logp, ref_logp and what the active modes keep (extras); the scoring's metrics

The objective decides what is computed (`inputs_needed`); nothing here branches on an objective knob or a
variant (the train knobs choose where pi_old comes from: a single pass, the sampler, a stale sampler).
Shapes: B rows, T response length.
"""

from __future__ import annotations

import time

import torch

from harness.config import ConfigError
from harness.models import build_model
from harness.models.hub import model_path
from harness.models.logprobs import padded_widths
from harness.objective import advantages, batch_correction, inputs_needed, loss_mask
from harness.objective.extensions import old_forward_extras
from harness.train.core.batch import Batch
from harness.train.core.episode import Episode
from harness.train.core.forward import batch_forward, batch_logprobs, head_chunks, merge_extras
from harness.train.core.policy_module import AUTOCAST_DTYPES, compute_precision, reference_of
from harness.train.core.step_context import StepContext


def frozen_reference(cfg, model: torch.nn.Module) -> torch.nn.Module | None:
    """pi_ref: the policy a run starts from, frozen (a copy of `model`, or a LoRA policy with its adapters off:
    core/policy_module.py reference_of) when the objective needs one, else None."""
    if not inputs_needed(cfg.objective).ref_logp:
        return None
    t = cfg.train  # train.ref_compute_dtype: pi_ref kept in the autocast's dtype (auto: on CUDA under bf16)
    dtype = AUTOCAST_DTYPES.get(t.autocast) if t.ref_compute_dtype is True and t.autocast else None
    return reference_of(model, dtype)


def frozen_teacher(cfg, device: torch.device) -> torch.nn.Module | None:
    """pi_T: model.teacher loaded frozen (eval mode, no gradient) in the policy's dtype on `device`, when the
    objective reads its log-probs (on-policy distillation, objective.distill_coef > 0), else None. A built-in
    name builds as model.name does (a tiny-* model from the run's seed)."""
    if not inputs_needed(cfg.objective).teacher_logp:
        return None
    name = model_path(cfg.model.teacher, key="model.teacher")  # a Hub id: its snapshot in the cache
    teacher, _ = build_model(name, seed=cfg.seed, dtype=getattr(torch, cfg.model.dtype))
    return teacher.to(device).eval().requires_grad_(False)


def teacher_logprobs(sc: StepContext, batch: Batch) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """({"teacher_logp": pi_T's log-probs of the sampled tokens (B, T)}, {"perf/teacher_seconds": its forward's
    seconds}) by micro-batch as pi_ref's (its own routing, no replay); ({}, {}) without a teacher."""
    if sc.teacher is None:
        return {}, {}
    t0 = time.perf_counter()
    logp = batch_logprobs(sc.teacher, batch, sc, replay=False)
    if logp.device.type == "cuda":
        torch.cuda.synchronize(logp.device)
    return {"teacher_logp": logp}, {"perf/teacher_seconds": time.perf_counter() - t0}


def _check_routing(cfg, rollout) -> None:
    """Routing replay (R3): every forward uses the rollout's choices, so the backend must have returned them."""
    if cfg.objective.routing_replay and rollout.extras.get("routing") is None:
        raise ConfigError(
            f"objective.routing_replay=true: rollout.backend={cfg.rollout.backend!r} returned no routing to replay"
        )


def score_episode(sc: StepContext, ep: Episode, old_weights=None) -> tuple[Batch, dict]:
    """The step's batch with old / ref log-probs, advantages and what the active modes keep for the
    loss (extras: value targets, reward-model labels, pi_old's top-K, ...), and the scoring's metrics.
    sc: the step's policy (pi_old), reference, components and forwards; its pi_old forward feeds sc.mismatch
    (on a single pass the update's first forward does). old_weights: rollout.staleness > 0, () -> a context in
    which the policy holds the sampler's (stale) weights: pi_old is computed there
    (harness/train/rl/staleness.py), and the mismatch is fed by a forward of the policy as it is (theta_t), so
    that it shows the staleness."""
    cfg, model, mismatch = sc.cfg, sc.model, sc.mismatch
    obj, needs = cfg.objective, inputs_needed(cfg.objective)
    r = ep.rollout
    mask = loss_mask(obj, r.response_mask.to(sc.device), r.truncated)
    _check_routing(cfg, r)
    batch = Batch.from_rollout(r, mask, sc.device)
    head = (lambda view: old_forward_extras(obj, view)) if needs.old_forward else None
    # train.autocast, train.pad_to_multiple_of, train.chunked_head: these forwards compute as the update's do
    with compute_precision(cfg, sc.device), padded_widths(cfg.train.pad_to_multiple_of), head_chunks(cfg):
        if sc.single_pass:  # the update's first forward is pi_old's (what the extensions read from it too)
            old_logp, read = None, {}
        elif old_weights is not None:  # rollout.staleness: pi_old is the stale sampler's
            old_logp, read = stale_old_logp(sc, batch, head, old_weights)
        elif cfg.reuses_rollout_logp():  # train.old_logp: the sampler's log-probs are pi_old's
            old_logp, read = r.sampler_logp.to(sc.device), {}
            if head is not None:  # the sampler gives no logits: one forward for what the extensions read
                _, read = batch_forward(model, batch, sc, head=head)
        else:
            old_logp, read = batch_forward(model, batch, sc, mismatch=mismatch, head=head)
        # pi_ref routes by its own choices (no replay)
        ref_logp = batch_logprobs(sc.ref, batch, sc, replay=False) if sc.ref is not None else None
        current = old_logp
        if current is None and needs.current_logp_for_kl:
            current = batch_logprobs(model, batch, sc)
        given = {c.provides: c.predict(batch, sc.pad_id, sc.micro or len(batch)) for c in sc.components if c.scores}
        teacher, timed = teacher_logprobs(sc, batch)  # on-policy distillation: pi_T's log-probs, timed
        given.update(teacher)
    fixed = batch_correction(obj, batch.mask, old_logp, batch.rollout_logp)  # rollout_rs; IS batch mean
    if fixed.mask is not batch.mask:
        batch, mask = batch.with_(mask=fixed.mask), fixed.mask
    given.update(read)  # what the modes' old_forward hooks read from pi_old (the optimal token baseline's sum pi^2)
    if old_logp is not None:
        given["old_logp"] = old_logp
    if ep.greedy_rewards is not None:  # ReMax: each row's prompt's greedy reward (inputs_needed(obj).greedy_rewards)
        given["greedy_rewards"] = ep.greedy_rewards.repeat_interleave(cfg.train.group_size).to(sc.device)
    scored = advantages(
        obj, ep.rewards.to(sc.device), mask, cfg.train.group_size, logp=current, ref_logp=ref_logp, extras=given
    )
    extras = merge_extras(old_forward=read, advantages=scored.extras, batch_correction=fixed.extras)
    return batch.with_(adv=scored.adv, old_logp=old_logp, ref_logp=ref_logp, extras=extras), (
        {**fixed.metrics, **scored.metrics, **timed}
    )


def stale_old_logp(sc: StepContext, batch: Batch, head, old_weights):
    """rollout.staleness > 0: (pi_old's log-probs, what the extensions read from its forward), pi_old the sampler's
    policy theta_{t-k}: the sampler's own log-probs where train.old_logp may reuse them (they are exact:
    RunConfig.rollout_logp_inexact), else a no-grad forward with theta_{t-k} in the policy. The mismatch is fed
    by a no-grad forward of theta_t (the policy at the start of the update) against the sampler."""
    if sc.mismatch is not None:  # theta_t against the sampler: the staleness, measured
        batch_forward(sc.model, batch, sc, mismatch=sc.mismatch)
    reuse = sc.cfg.reuses_rollout_logp()
    if reuse and head is None:
        return batch.rollout_logp, {}
    with old_weights():
        logp, read = batch_forward(sc.model, batch, sc, head=head)
    return (batch.rollout_logp if reuse else logp), read
