"""The policy update: K inner epochs x mini-batches (optimizer steps) x micro-batches.

Shapes: B rows of the episode, T response length. Denominators of the aggregation are
those of the whole mini-batch (num_seqs, num_tokens), so gradient accumulation over
micro-batches reproduces the mini-batch gradient exactly. Every trained module (the policy
and its components, harness/train/core/components.py) takes each optimizer step together.
"""

from __future__ import annotations

import math

import torch

from harness.objective.deferred import read, scalar
from harness.objective.entropy_control import ENTROPY_COEF_KEY, ENTROPY_WINDOW_KEY, AdaptiveEntropy
from harness.objective.policy import SEQUENCE_MEAN_METRICS
from harness.objective.ratios import is_sequence_level
from harness.objective.rollout_correction import ROW_METRICS
from harness.parallel import all_reduce_grads, gather_objects, is_sharded, set_gradient_sync, shard, world
from harness.train.core.batch import Batch
from harness.train.core.components import clip_and_step, finite_everywhere
from harness.train.core.forward import forward_loss, pad_backward
from harness.train.core.mismatch import MismatchStats
from harness.train.core.step_context import StepContext
from harness.train.diagnostics.metrics import UpdateMetrics


def per_sequence(obj, part: Batch, metrics: dict) -> dict[str, float]:
    """The metrics that are means over sequences (those of a sequence-level ratio: GSPO's clip fractions and
    ratio mean, objective/policy.py; the rollout correction's shares of rows), each weighted by the micro-batch's
    sequences with a token."""
    keys = [*(SEQUENCE_MEAN_METRICS if is_sequence_level(obj.ratio) else ()), *(k for k in ROW_METRICS if k in metrics)]
    if not keys:
        return {}
    n = float(sum(k > 0 for k in part.mask_lens))  # from the batch's row lengths
    return {k: n for k in keys if k in metrics}


def policy_update(
    sc: StepContext,
    batch: Batch,
    generator: torch.Generator,
    update_policy: bool = True,
    entropy_ctl: AdaptiveEntropy | None = None,
) -> dict[str, float]:
    """batch.old_logp is None when sc.single_pass (the first forward is pi_old); batch.extras holds
    what the objective's active modes kept from the scoring (a value model's old_values and returns, ...);
    batch.routing, the rollout's expert choices, is replayed in every forward when objective.routing_replay.
    sc.mismatch: with sc.single_pass, every forward here is the old policy's: its log-probs (and, on an MoE, its
    routing) feed the rollout/train mismatch metrics.
    update_policy False (a step of train.component_warmup_steps): only the components take their
    optimizer steps; the policy's gradient is measured (grad/norm) and dropped.
    entropy_ctl: the adaptive entropy coefficient's state (objective/entropy_control.py): every micro-batch of an
    optimizer step applies its coefficient, and each optimizer step updates it from the step's mean entropy.
    Returns step metrics (clip/*, ratio/*, kl/*, entropy, loss/*, value/*, grad/norm)."""
    cfg, policy = sc.cfg, sc.policy
    tr = cfg.train
    trained = sc.trained
    B = len(batch)
    mb_size = B // tr.mini_batches
    acc = UpdateMetrics()
    grad_norms = []
    policy.module.train()
    for epoch in range(tr.inner_epochs):
        perm = torch.randperm(B, generator=generator).tolist()
        for m in range(tr.mini_batches):
            mb = batch.rows(_mini_batch_rows(perm, m, mb_size, tr.share_prefix))
            for t in trained:
                t.zero_grad()
            windows: list = []  # the adaptive entropy's (sum of H, count) of each micro-batch
            step_extras = _coef_extras(entropy_ctl, cfg.objective)
            bad = _backward_shard(sc, mb, acc, (epoch, m), step_extras, windows)
            finite_everywhere(trained, bad)  # NonFiniteUpdate on every process if one found a bad loss
            all_reduce_grads([t.module for t in trained])  # DDP's gradient sum: the whole mini-batch's gradient
            frozen = () if update_policy else (policy.name,)
            grad_norms.append(clip_and_step(trained, tr.grad_clip, f"(epoch {epoch}, mini-batch {m})", frozen))
            if entropy_ctl is not None:  # Skywork-OR1 / TRL: one update per optimizer step
                entropy_ctl.update(cfg.objective, _window_entropy(windows))
            acc.end_minibatch()
    acc.settle()  # the step's metrics read from the device, once
    out = (UpdateMetrics.merged(gather_objects(acc)) if world() > 1 else acc).result()
    out["grad/norm"] = sum(grad_norms) / len(grad_norms)
    out["grad/norm_max"] = max(grad_norms)
    if entropy_ctl is not None:
        out["entropy/coef"] = entropy_ctl.coef  # after the step's updates (TRL logs entropy_coef so)
    return out


def _coef_extras(entropy_ctl: AdaptiveEntropy | None, obj) -> dict:
    """The coefficient the adaptive controller applies in this optimizer step, as the loss reads it (extras)."""
    return {} if entropy_ctl is None else {ENTROPY_COEF_KEY: torch.tensor(entropy_ctl.applied(obj))}


def _window_entropy(windows: list) -> float:
    """The mean entropy of one optimizer step over the tokens the bonus acted on: the micro-batches' sums over
    their token counts (on N processes, of all processes' micro-batches; TRL's window-global mean)."""
    got = read(windows)
    if world() > 1:
        got = [w for part in gather_objects(got) for w in part]
    total, count = sum(s for s, _ in got), sum(n for _, n in got)
    return total / max(count, 1.0)


def _mini_batch_rows(perm: list[int], m: int, size: int, share_prefix: bool) -> list[int]:
    """The rows of mini-batch m: the shuffle's m-th slice. train.share_prefix: the same rows in batch order, so a
    prompt's rows in the mini-batch are contiguous and its micro-batch runs the prompt once
    (harness/models/prefix_groups.py); the mini-batch's gradient is the same sum over the same rows."""
    rows = perm[m * size : (m + 1) * size]
    return sorted(rows) if share_prefix else rows


def _backward_shard(
    sc: StepContext, mb: Batch, acc: UpdateMetrics, at, step_extras: dict | None = None, windows: list | None = None
) -> str | None:
    """Forward and backward of this process's rows of the mini-batch `mb`, micro-batch by micro-batch, their
    gradients accumulated (on N processes summed after: the caller); their metrics into `acc`, left on the
    device. Nothing here waits on the device: the denominators and packing widths come from the batch's row
    lengths (read once a step), and the losses are checked once, after the last backward. Returns what was not
    finite in a loss, or None (the first such micro-batch's; but under FSDP the rollout/train mismatch then keeps
    only the micro-batches up to it, as when the loop stopped there). step_extras: one value for the whole step
    the loss reads (the adaptive entropy coefficient); windows: gets each micro-batch's entropy measurement for
    the adaptive controller. FSDP (a sharded module): every process runs as many
    micro-batches (pads of zero weight where it has fewer rows) and reduce-scatters at its last backward."""
    trained, cfg, mismatch = sc.trained, sc.cfg, sc.mismatch
    lockstep = any(is_sharded(t.module) for t in trained)
    num_seqs, num_tokens = mb.denominators()  # of the whole mini-batch
    parts = mb.my_micro_batches(cfg.train.micro_batch_size, lockstep)  # None: a pad
    s, losses = shard(len(mb)).start, []
    for i, part in enumerate(parts):
        for t in trained:
            set_gradient_sync(t.module, i == len(parts) - 1)
        if part is None:
            pad_backward(sc, mb.rows([0]), (num_seqs, num_tokens))
            continue
        where = f"(epoch {at[0]}, mini-batch {at[1]}, rows {s}..{s + len(part) - 1})"
        fed = mismatch.mark() if mismatch is not None else 0
        loss, metrics = forward_loss(sc, part, (num_seqs, num_tokens), step_extras)
        if ENTROPY_WINDOW_KEY in metrics:  # the adaptive entropy's measurement, not a logged metric
            window = metrics.pop(ENTROPY_WINDOW_KEY)
            if windows is not None:
                windows.append(window)
        loss.backward()  # a bad loss: the update is refused after (its gradient is cleared unused)
        losses.append((scalar(loss), where, mismatch.mark() if mismatch is not None else fed))
        acc.add(metrics, scalar(part.mask.sum()), per_sequence(cfg.objective, part, metrics))
        s += len(part)
    return _first_bad_loss(losses, mismatch, lockstep)


def _first_bad_loss(losses: list, mismatch: MismatchStats | None, lockstep: bool) -> str | None:
    """(loss, where, mismatch mark) of each micro-batch -> the first non-finite loss's message, or None; the losses
    read from the device in one copy."""
    for value, where, fed in read(losses):
        if not math.isfinite(value):
            if mismatch is not None and not lockstep:
                mismatch.drop_after(fed)
            return f"loss/policy is {value} {where}".rstrip()
    return None
