"""The policy update: K inner epochs x mini-batches (optimizer steps) x micro-batches.

Shapes: B rows of the episode, T response length. Denominators of the aggregation are
those of the whole mini-batch (num_seqs, num_tokens), so gradient accumulation over
micro-batches reproduces the mini-batch gradient exactly.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch

from harness.objective import policy_loss, value_loss
from harness.objective.aggregation import batch_denominators
from harness.models.moe import routers
from harness.train.logprobs import response_logprobs
from harness.train.metrics import UpdateMetrics
from harness.train.mismatch import MismatchStats
from harness.train.nonfinite import NonFiniteUpdate, describe
from harness.train.routing import capture_routing


def _rows(batch: dict, idx: list[int]) -> dict:
    out = {}
    for k, v in batch.items():
        if v is None:
            out[k] = None
        elif isinstance(v, list):
            out[k] = [v[i] for i in idx]
        else:
            out[k] = v[idx]
    return out


def _check(optimizer, critic_optimizer, name: str, value: torch.Tensor, where: str) -> None:
    """Raise NonFiniteUpdate (gradients cleared, no optimizer step taken) if value is not finite."""
    if (msg := describe(name, value)) is not None:
        optimizer.zero_grad(set_to_none=True)
        if critic_optimizer is not None:
            critic_optimizer.zero_grad(set_to_none=True)
        raise NonFiniteUpdate(f"{msg} {where}")


def policy_update(model, optimizer, batch: dict, cfg, pad_id: int, generator: torch.Generator,
                  on_policy_single_pass: bool, critic=None, critic_optimizer=None,
                  mismatch: MismatchStats | None = None) -> dict[str, float]:
    """batch: prompt_ids (B lists), response_ids (B,T), mask (B,T), adv (B,) or (B,T),
    old_logp (B,T) or None when on_policy_single_pass, ref_logp (B,T) or None, rollout_logp (B,T);
    with a critic (PPO) also old_values (B,T) and returns (B,T); optionally routing (B,S,L,k),
    the rollout's expert choices, replayed in every forward when objective.routing_replay.
    mismatch: when given with on_policy_single_pass, every forward here is the old policy's:
    its log-probs (and, on an MoE, its routing) feed the rollout/train mismatch metrics.
    Returns step metrics (clip/*, ratio/*, kl/*, entropy, loss/*, value/*, grad/norm)."""
    obj, tr = cfg.objective, cfg.train
    observe = mismatch is not None and on_policy_single_pass
    capture = observe and bool(routers(model))
    replay = obj.routing_replay and batch.get("routing") is not None
    B = batch["response_ids"].shape[0]
    mb_size = B // tr.mini_batches
    micro = tr.micro_batch_size or mb_size
    acc = UpdateMetrics()
    grad_norms = []
    model.train()
    for _epoch in range(tr.inner_epochs):
        perm = torch.randperm(B, generator=generator).tolist()
        for m in range(tr.mini_batches):
            mb_idx = perm[m * mb_size:(m + 1) * mb_size]
            mb = _rows(batch, mb_idx)
            num_seqs, num_tokens = batch_denominators(mb["mask"])  # of the whole mini-batch
            optimizer.zero_grad(set_to_none=True)
            if critic is not None:
                critic_optimizer.zero_grad(set_to_none=True)
            for s in range(0, mb_size, micro):
                part = _rows(mb, list(range(s, min(s + micro, mb_size))))
                with capture_routing(model) if capture else nullcontext() as calls:
                    logp, entropy, _ = response_logprobs(model, part["prompt_ids"], part["response_ids"], part["mask"],
                                                         pad_id, cfg.rollout.temperature, with_entropy=True,
                                                         routing=part["routing"] if replay else None)
                if observe:  # single pass: logp is the old policy's
                    mismatch.add_logprobs(logp, part["rollout_logp"], part["mask"])
                    if capture:
                        mismatch.add_routing(mb_idx[s:s + micro], part["prompt_ids"], part["mask"], calls,
                                             part.get("routing"))
                old = logp.detach() if on_policy_single_pass else part["old_logp"]
                loss, metrics = policy_loss(
                    obj, logp, old, part["adv"], part["mask"], ref_logp=part["ref_logp"],
                    entropy=entropy if obj.entropy_coef else entropy.detach(),
                    rollout_logp=part["rollout_logp"] if obj.tis_cap else None,
                    num_seqs=num_seqs, num_tokens=num_tokens)
                where = f"(epoch {_epoch}, mini-batch {m}, rows {s}..{min(s + micro, mb_size) - 1})"
                if critic is not None:
                    values = critic(part["prompt_ids"], part["response_ids"], part["mask"], pad_id)
                    vloss, vmetrics = value_loss(obj, values, part["old_values"], part["returns"], part["mask"],
                                                 num_seqs=num_seqs, num_tokens=num_tokens)
                    _check(optimizer, critic_optimizer, "loss/value", vloss, where)
                    loss = loss + vloss
                    metrics = {**metrics, **vmetrics}
                _check(optimizer, critic_optimizer, "loss/policy", loss, where)
                loss.backward()
                acc.add(metrics, float(part["mask"].sum()))
            if tr.grad_clip:
                grad_norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), tr.grad_clip)))
            else:
                grad_norms.append(float(torch.sqrt(sum((p.grad.float() ** 2).sum() for p in model.parameters() if p.grad is not None))))
            _check(optimizer, critic_optimizer, "grad/norm", torch.tensor(grad_norms[-1]), f"(epoch {_epoch}, mini-batch {m})")
            optimizer.step()
            if critic is not None:
                if tr.grad_clip:
                    torch.nn.utils.clip_grad_norm_(critic.parameters(), tr.grad_clip)
                critic_optimizer.step()
            acc.end_minibatch()
    out = acc.result()
    out["grad/norm"] = sum(grad_norms) / len(grad_norms)
    out["grad/norm_max"] = max(grad_norms)
    return out
