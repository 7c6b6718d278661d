"""A response's span: its positions up to the last one a mask keeps.

A single-turn response's mask is a prefix (its tokens up to EOS), so its span is the count of its kept tokens.
A multi-turn trajectory (harness/rollout/turns.py) holds the tool's or environment's tokens between the model's
turns, with mask 0: they are inside the span (the model attends to them, as it did when it sampled the next
turn) but out of the loss. Packing a row for a forward (logprobs.pack, prefix_groups) lays out its span.

Shapes: B rows, T response width.
"""

from __future__ import annotations

import torch


def span_lengths(mask: torch.Tensor) -> torch.Tensor:
    """(B,) long: 1 + the last position where mask (B, T) > 0; 0 for a row it keeps nothing of."""
    if mask.shape[-1] == 0:
        return torch.zeros(mask.shape[:-1], dtype=torch.long, device=mask.device)
    pos = torch.arange(1, mask.shape[-1] + 1, device=mask.device)  # (T,) t + 1
    return ((mask > 0).long() * pos).amax(-1)


def span_mask(mask: torch.Tensor) -> torch.Tensor:
    """(B, T) long: 1 on the positions of each row's span, 0 after it."""
    return (torch.arange(mask.shape[-1], device=mask.device) < span_lengths(mask).unsqueeze(-1)).long()
