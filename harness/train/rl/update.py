"""The policy update: K inner epochs x mini-batches (optimizer steps) x micro-batches.

Shapes: B rows of the episode, T response length. Denominators of the aggregation are
those of the whole mini-batch (num_seqs, num_tokens), so gradient accumulation over
micro-batches reproduces the mini-batch gradient exactly. Every trained module (the policy
and its components, harness/train/run/components.py) takes each optimizer step together.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch

from harness.objective import LossInputs
from harness.objective import loss as objective_loss
from harness.objective.aggregation import batch_denominators
from harness.models.moe import is_moe
from harness.train.batch import Batch
from harness.models.logprobs import response_logprobs, response_logprobs_topk
from harness.objective import inputs_needed
from harness.train.diagnostics.metrics import UpdateMetrics
from harness.train.diagnostics.mismatch import MismatchStats
from harness.train.diagnostics.routing import capture_routing
from harness.train.run.components import Component, Trained, check_finite, clip_and_step


def policy_update(policy: Trained, components: list[Component], batch: Batch, cfg, pad_id: int,
                  generator: torch.Generator, on_policy_single_pass: bool,
                  mismatch: MismatchStats | None = None) -> dict[str, float]:
    """batch.old_logp is None when on_policy_single_pass (the first forward is pi_old); with a
    value model, batch.old_values and batch.returns are set; batch.routing, the rollout's expert
    choices, is replayed in every forward when objective.routing_replay.
    mismatch: when given with on_policy_single_pass, every forward here is the old policy's:
    its log-probs (and, on an MoE, its routing) feed the rollout/train mismatch metrics.
    Returns step metrics (clip/*, ratio/*, kl/*, entropy, loss/*, value/*, grad/norm)."""
    tr = cfg.train
    trained = [policy, *components]
    B = len(batch)
    mb_size = B // tr.mini_batches
    acc = UpdateMetrics()
    grad_norms = []
    policy.module.train()
    for epoch in range(tr.inner_epochs):
        perm = torch.randperm(B, generator=generator).tolist()
        for m in range(tr.mini_batches):
            mb = batch.rows(perm[m * mb_size:(m + 1) * mb_size])
            num_seqs, num_tokens = batch_denominators(mb.mask)  # of the whole mini-batch
            for t in trained:
                t.zero_grad()
            s = 0
            for part in mb.micro_batches(tr.micro_batch_size):
                where = f"(epoch {epoch}, mini-batch {m}, rows {s}..{s + len(part) - 1})"
                loss, metrics = forward_loss(policy.module, components, part, cfg, pad_id, on_policy_single_pass,
                                             mismatch, num_seqs, num_tokens)
                check_finite(trained, "loss/policy", loss, where)
                loss.backward()
                acc.add(metrics, float(part.mask.sum()))
                s += len(part)
            grad_norms.append(clip_and_step(trained, tr.grad_clip, f"(epoch {epoch}, mini-batch {m})"))
            acc.end_minibatch()
    out = acc.result()
    out["grad/norm"] = sum(grad_norms) / len(grad_norms)
    out["grad/norm_max"] = max(grad_norms)
    return out


def forward_loss(model, components: list[Component], part: Batch, cfg, pad_id: int, single_pass: bool,
                 mismatch: MismatchStats | None, num_seqs: float, num_tokens: float):
    """Forward of the policy `model` (and every component) on one micro-batch -> the objective's (loss, metrics).
    single_pass: the forward's own log-probs (and top-K) are pi_old's (ratio 1 at the first step)."""
    obj = cfg.objective
    observe = mismatch is not None and single_pass
    capture = observe and is_moe(model)
    replay = obj.routing_replay and part.routing is not None
    k = inputs_needed(obj).topk_logp  # SimKO's top-K (docs/objective.md §13)
    simko = {}
    with capture_routing(model) if capture else nullcontext() as calls:
        if k:  # pi_old's top-K tokens (the first forward's own when it is pi_old)
            logp, entropy, topk, index = response_logprobs_topk(
                model, part.prompt_ids, part.response_ids, part.mask, pad_id, cfg.rollout.temperature, k,
                topk_index=None if single_pass else part.topk_index, with_entropy=True,
                routing=part.routing if replay else None)
            simko = {"topk_logp": topk, "old_topk_logp": topk.detach() if single_pass else part.old_topk_logp,
                     "is_argmax": part.response_ids.to(index.device) == index[..., 0]}
        else:
            logp, entropy, _ = response_logprobs(model, part.prompt_ids, part.response_ids, part.mask, pad_id,
                                                 cfg.rollout.temperature, with_entropy=True,
                                                 routing=part.routing if replay else None)
    if observe:  # single pass: logp is the old policy's
        mismatch.add_logprobs(logp, part.rollout_logp, part.mask)
        if capture:
            mismatch.add_routing(part.index, part.prompt_ids, part.mask, calls, part.routing)
    old = logp.detach() if single_pass else part.old_logp
    live = {c.provides: c(part, pad_id) for c in components}  # values, prm_logp (b, T), with gradient
    x = LossInputs(logp=logp, old_logp=old, adv=part.adv, mask=part.mask, entropy=entropy, ref_logp=part.ref_logp,
                   rollout_logp=part.rollout_logp, old_values=part.old_values, returns=part.returns,
                   outcomes=part.outcomes, group_lengths=part.group_lengths, group_pos=part.group_pos, **simko,
                   **live)
    return objective_loss(obj, x, num_seqs, num_tokens)
