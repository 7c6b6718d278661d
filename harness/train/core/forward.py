"""The forwards of a step's rows, one place each: the no-grad log-probs of a batch under any policy
(pi_old, pi_ref, pi_theta) and the loss of one micro-batch with gradient (the update's; a diagnostic
takes the same one).

Shapes: B rows, T padded response length, b rows of one micro-batch. Every forward goes micro-batch by
micro-batch (Batch.micro_batches), so the micro-batch boundaries are the trainers' own; what a forward
observes (the rollout/train mismatch, an MoE's routing) goes to the MismatchStats it is given.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from harness.models.logprobs import chunked_head, padded_widths, response_forward
from harness.models.moe import is_moe
from harness.objective import LossInputs, inputs_needed
from harness.objective import loss as objective_loss
from harness.objective.extensions import forward_extras
from harness.parallel import full_params, gather_objects, world
from harness.train.core.batch import Batch, gather_shard
from harness.train.core.mismatch import MismatchStats
from harness.train.core.policy_module import compute_precision
from harness.train.core.routing import capture_routing
from harness.train.core.step_context import StepContext


@torch.no_grad()
def batch_forward(
    model,
    batch: Batch,
    sc: StepContext,
    *,
    mismatch: MismatchStats | None = None,
    head=None,
    replay: bool | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One no-grad forward of `model` (pi_old, pi_ref, ...) over the batch's responses (response_mask), by
    micro-batch, as the step context says (pad id, temperature, micro-batch rows, shared prefixes)
    -> (logp (B, T), what `head` reads from the logits, by name, B rows each: {} without a head).
    head: the active extensions' `old_forward` (objective.old_forward_extras) when `model` is pi_old (SimKO's
    top-K). replay: force the rollout's expert choices (batch.routing, MoE); None: the context's
    (objective.routing_replay). mismatch: a MismatchStats fed with these log-probs (as the old policy's) against
    the sampler's on the loss mask, and with the routing."""
    replay = sc.replay if replay is None else replay
    micro = sc.micro or len(batch)
    capture = mismatch is not None and is_moe(model)
    lps, parts = [], []
    whole, batch = batch, batch.shard()  # on N processes: this one's rows (harness/parallel.py), gathered below
    with full_params(model):  # FSDP: the whole weights, for this process's own number of forwards
        for part in batch.micro_batches(micro):
            routing = part.routing if replay else None
            with capture_routing(model) if capture else nullcontext() as calls:
                lp, _, read = response_forward(
                    model,
                    part.prompt_ids,
                    part.response_ids,
                    part.response_mask,
                    sc.pad_id,
                    sc.temperature,
                    routing=routing,
                    head=head,
                    share_prefix=sc.share_prefix,
                    lengths=part.response_spans,
                )
            if mismatch is not None:
                mismatch.add_logprobs(lp, part.rollout_logp.to(lp.device), part.mask, sum(part.mask_lens))
                if capture:
                    mismatch.add_routing(part.index, part.prompt_ids, part.response_mask, calls, part.routing)
            lps.append(lp)
            parts.append(read)
    read = {k: torch.cat([p[k] for p in parts]) for k in (parts[0] if parts else {})}
    return gather_shard(lps, whole), gather_reads(read)


def head_chunks(cfg):
    """train.chunked_head: the forwards inside run the output head by chunks of train.head_chunk_tokens positions
    (harness/models/chunked_head.py); off, the whole logits."""
    return chunked_head(cfg.train.head_chunk_tokens if cfg.train.chunked_head else 0)


def gather_reads(read: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What a head read from this process's rows -> from every row, in row order (one process: `read`)."""
    if world() == 1:
        return read
    parts = [p for p in gather_objects({k: v.cpu() for k, v in read.items()}) if p]
    device = next(iter(read.values())).device if read else None
    return {k: torch.cat([p[k] for p in parts]).to(device or "cpu") for k in (parts[0] if parts else {})}


def batch_logprobs(
    model, batch: Batch, sc: StepContext, *, mismatch: MismatchStats | None = None, replay: bool | None = None
) -> torch.Tensor:
    """(B, T) log-probs of the batch's responses under `model` (pi_old, pi_ref or pi_theta; batch_forward)."""
    return batch_forward(model, batch, sc, mismatch=mismatch, replay=replay)[0]


def forward_loss(sc: StepContext, part: Batch, denominators: tuple[float, float], step_extras: dict | None = None):
    """Forward of the policy (and every component) on one micro-batch -> the objective's (loss, metrics), the
    metrics still on the device (objective/deferred.py: the update reads a step's at once). denominators:
    (num_seqs, num_tokens) of the whole mini-batch. sc.single_pass: the forward's own log-probs are pi_old's (ratio
    1 at the first step), and so is what the active extensions read from pi_old's forward (SimKO's top-K), and
    they feed sc.mismatch. step_extras: what the objective reads that is one value for the whole optimizer step
    (the adaptive entropy coefficient)."""
    cfg, model, mismatch, single_pass = sc.cfg, sc.model, sc.mismatch, sc.single_pass
    obj = cfg.objective
    observe = mismatch is not None and single_pass
    capture = observe and is_moe(model)
    replay = sc.replay and part.routing is not None
    needs = inputs_needed(obj)
    # pi_old's forward-read parts (SimKO's top-K) come from this forward only where the batch has no pi_old forward
    # of its own: a diagnostic's probe runs single-pass on a batch the step scored with one
    old_here = single_pass and part.old_logp is None
    head = (lambda view: forward_extras(obj, view, part.extras, old_here)) if needs.train_forward else None
    pad = padded_widths(cfg.train.pad_to_multiple_of)  # train.pad_to_multiple_of: the rows' width (logprobs.py)
    precision = compute_precision(cfg, part.mask.device)
    with capture_routing(model) if capture else nullcontext() as calls, precision, pad, head_chunks(cfg):
        logp, entropy, read = response_forward(
            model,
            part.prompt_ids,
            part.response_ids,
            part.mask,
            sc.pad_id,
            sc.temperature,
            with_entropy=True,
            routing=part.routing if replay else None,
            head=head,
            share_prefix=sc.share_prefix,
            lengths=part.mask_spans,
            router_aux=needs.router_aux_loss,
        )
    if observe:  # single pass: logp is the old policy's
        mismatch.add_logprobs(logp, part.rollout_logp, part.mask, sum(part.mask_lens))
        if capture:
            mismatch.add_routing(part.index, part.prompt_ids, part.mask, calls, part.routing)
    old = logp.detach() if single_pass else part.old_logp
    with compute_precision(cfg, part.mask.device), padded_widths(cfg.train.pad_to_multiple_of):  # train.autocast
        live = {c.provides: c(part, sc.pad_id) for c in sc.components}  # values, prm_logp (b, T), lam: with gradient
    x = LossInputs(
        logp,
        old,
        part.adv,
        part.mask,
        entropy,
        part.ref_logp,
        part.rollout_logp,
        extras=merge_extras(batch=part.extras, forward=read, components=live, step=step_extras or {}),
    )
    return objective_loss(obj, x, *denominators, deferred=True)


def merge_extras(**bags: dict) -> dict:
    """The objective's extras from the bags that fill them (the batch's, this forward's hooks, the components',
    the step's), one dict; a key two bags provide is an error naming both, since one would silently replace
    the other's value in the loss (a plugin's hook returning a built-in key, say)."""
    out: dict = {}
    source: dict[str, str] = {}
    for bag, values in bags.items():
        for key, value in values.items():
            if key in out:
                raise ValueError(f"extras key {key!r} is provided by both {source[key]} and {bag}; rename one of them")
            out[key], source[key] = value, bag
    return out


def pad_backward(sc: StepContext, row: Batch, denominators: tuple[float, float]) -> None:
    """FSDP (harness/train/core/sharding.py): a process with fewer micro-batches than another runs this in
    place of each missing one: the loss of one row times zero, forward and backward, so that every process
    takes part in the same all-gathers and reduce-scatters. It adds nothing to any gradient or metric."""
    loss, _ = forward_loss(sc.probe(), row, denominators)
    (loss * 0.0).backward()
