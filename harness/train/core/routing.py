"""Expert choices of training forwards (MoE): capture them and compare them as sets.

Shapes: L MoE layers, b rows of a forward, W its packed width (harness.models.logprobs.pack),
k experts per token, N = b * W.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from harness.models.moe import router_hooks


@contextmanager
def capture_routing(model: nn.Module) -> Iterator[list[list[tuple[torch.Tensor, torch.Tensor]]]]:
    """Yields `calls`: calls[l] gets one (own, used) pair of (N, k) index tensors per
    forward of layer l. own = the router's own top-k (of its unforced logits), used = the
    experts the layer actually mixed (the replayed ones under replay_routing)."""

    def own_and_used(out):
        logits, _, index = out
        return logits.detach().float().topk(index.shape[-1], dim=-1).indices, index.detach()

    with router_hooks(model, own_and_used) as calls:
        yield calls


def by_row(per_layer: list[torch.Tensor], rows: int) -> torch.Tensor:
    """L tensors (N, k) of one forward -> (b, W, L, k)."""
    return torch.stack([t.reshape(rows, -1, t.shape[-1]) for t in per_layer], dim=2)


def one_forward(calls: list[list[tuple[torch.Tensor, torch.Tensor]]], rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The (own, used) choices, each (b, W, L, k), of the single forward `calls` recorded."""
    if any(len(c) != 1 for c in calls):
        raise ValueError(f"expected one recorded forward per layer, got {[len(c) for c in calls]}")
    return by_row([c[0][0] for c in calls], rows), by_row([c[0][1] for c in calls], rows)


def set_disagreement(a: torch.Tensor, b: torch.Tensor, valid: torch.Tensor) -> tuple[float, float]:
    """a, b: (..., k) expert ids per token, valid: (...) bool.
    -> (number of (token, slot) choices of a that are not among b's k experts for that token,
        number of (token, slot) choices compared). Order within the k slots does not matter."""
    in_b = (a.unsqueeze(-1) == b.unsqueeze(-2)).any(-1)  # (..., k)
    k = a.shape[-1]
    v = valid.unsqueeze(-1).expand_as(in_b)
    return float((~in_b & v).sum()), float(valid.sum()) * k
