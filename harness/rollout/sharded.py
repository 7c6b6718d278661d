"""Generation on several processes: each process samples its contiguous share of the prompts (whole
groups: a prompt's G samples never span processes) with its own engine, and every process gets the whole
batch back, in the order of the prompts, as one process would have returned it.

Which rows a process draws does not change what they are: under `rollout.seeding: prompt` (hf) and with
vLLM's per-request seeds, a prompt's samples come from the seed of its index in the whole batch
(SamplingParams.first_prompt), so N processes sample what 1 process does (harness/rollout/row_seeds.py).
Evals go through the same engine: pass@k is computed on the gathered batch, as on one process.

Shapes: N prompts, G samples each, B = N*G rows, T response length (each process pads to its own; the
gathered batch to the widest), S routing width (MoE).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from harness import parallel
from harness.rollout.base import RolloutBackend, RolloutBatch, SamplingParams


def _pad_to(t: torch.Tensor, width: int, value, dim: int = 1) -> torch.Tensor:
    pad = [0, 0] * (t.dim() - 1 - dim) + [0, width - t.shape[dim]]
    return torch.nn.functional.pad(t, pad, value=value)


def concat_rollouts(parts: list[RolloutBatch], pad_id: int) -> RolloutBatch:
    """RolloutBatches of consecutive prompts -> one, right-padded to the widest response (pad_id, 0, 0;
    routing to the widest S with -1)."""
    T = max(p.response_ids.shape[1] for p in parts)
    extras = {}
    if all("routing" in p.extras for p in parts):
        S = max(p.extras["routing"].shape[1] for p in parts)
        extras["routing"] = torch.cat([_pad_to(p.extras["routing"], S, -1) for p in parts])
    return RolloutBatch(
        prompt_ids=[r for p in parts for r in p.prompt_ids],
        response_ids=torch.cat([_pad_to(p.response_ids, T, pad_id) for p in parts]),
        response_mask=torch.cat([_pad_to(p.response_mask, T, 0.0) for p in parts]),
        sampler_logp=torch.cat([_pad_to(p.sampler_logp, T, 0.0) for p in parts]),
        truncated=torch.cat([p.truncated for p in parts]),
        texts=[t for p in parts for t in p.texts],
        extras=extras,
    )


def _to(r: RolloutBatch, device) -> RolloutBatch:
    move = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
    return replace(
        r,
        response_ids=move(r.response_ids),
        response_mask=move(r.response_mask),
        sampler_logp=move(r.sampler_logp),
        truncated=move(r.truncated),
        extras={k: move(v) for k, v in r.extras.items()},
    )


class ShardedBackend(RolloutBackend):
    """Wraps this process's engine (`inner`): generate samples this process's shard of the prompts and
    returns the whole batch, gathered from every process (torch.distributed.all_gather_object)."""

    def __init__(self, inner: RolloutBackend, pad_id: int):
        self.inner, self.pad_id = inner, pad_id

    def generate(self, prompts: list[list[int]], group_size: int, params: SamplingParams) -> RolloutBatch:
        mine = parallel.shard(len(prompts))
        local = None
        device = None
        if len(mine):
            out = self.inner.generate(
                [prompts[i] for i in mine], group_size, replace(params, first_prompt=params.first_prompt + mine.start)
            )
            device = out.response_ids.device
            local = _to(out, "cpu")
        parts = [p for p in parallel.gather_objects(local) if p is not None]
        whole = concat_rollouts(parts, self.pad_id)
        return _to(whole, device) if device is not None and device.type != "cpu" else whole

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.inner.sync_weights(model)

    def close(self) -> None:
        self.inner.close()
