"""The policy update: K inner epochs x mini-batches (optimizer steps) x micro-batches.

Shapes: B rows of the episode, T response length. Denominators of the aggregation are
those of the whole mini-batch (num_seqs, num_tokens), so gradient accumulation over
micro-batches reproduces the mini-batch gradient exactly. Every trained module (the policy
and its components, harness/train/core/components.py) takes each optimizer step together.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch

from harness.models.logprobs import response_forward
from harness.models.moe import is_moe
from harness.objective import LossInputs, inputs_needed
from harness.objective import loss as objective_loss
from harness.objective.aggregation import batch_denominators
from harness.objective.extensions import forward_extras
from harness.train.core.batch import Batch
from harness.train.diagnostics.metrics import UpdateMetrics
from harness.train.diagnostics.mismatch import MismatchStats
from harness.train.diagnostics.routing import capture_routing
from harness.train.core.components import Component, Trained, check_finite, clip_and_step


def policy_update(policy: Trained, components: list[Component], batch: Batch, cfg, pad_id: int,
                  generator: torch.Generator, on_policy_single_pass: bool,
                  mismatch: MismatchStats | None = None) -> dict[str, float]:
    """batch.old_logp is None when on_policy_single_pass (the first forward is pi_old); batch.extras holds
    what the objective's active modes kept from the scoring (a value model's old_values and returns, ...);
    batch.routing, the rollout's expert
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
    single_pass: the forward's own log-probs are pi_old's (ratio 1 at the first step), and so is what the
    active extensions read from pi_old's forward (SimKO's top-K)."""
    obj = cfg.objective
    observe = mismatch is not None and single_pass
    capture = observe and is_moe(model)
    replay = obj.routing_replay and part.routing is not None
    needs = inputs_needed(obj)
    head = (lambda view: forward_extras(obj, view, part.extras, single_pass)) if needs.train_forward else None
    with capture_routing(model) if capture else nullcontext() as calls:
        logp, entropy, read = response_forward(model, part.prompt_ids, part.response_ids, part.mask, pad_id,
                                               cfg.rollout.temperature, with_entropy=True,
                                               routing=part.routing if replay else None, head=head)
    if observe:  # single pass: logp is the old policy's
        mismatch.add_logprobs(logp, part.rollout_logp, part.mask)
        if capture:
            mismatch.add_routing(part.index, part.prompt_ids, part.mask, calls, part.routing)
    old = logp.detach() if single_pass else part.old_logp
    live = {c.provides: c(part, pad_id) for c in components}  # values, prm_logp (b, T), lam: with gradient
    x = LossInputs(logp, old, part.adv, part.mask, entropy, part.ref_logp, part.rollout_logp,
                   extras={**part.extras, **read, **live})
    return objective_loss(obj, x, num_seqs, num_tokens)
