"""The one owner of padding: a (B, T) tensor's padded positions replaced by 0.

Padding may hold anything (-inf log-probs of pad tokens, NaN): replaced here, once, before any
exp, product or gradient sees it. `policy_loss` cleans its inputs with this (policy.Tokens) and
hands the clean tensors on; `importance_ratio`, called on its own, cleans with the same function.
"""

from __future__ import annotations

import torch


def zero_padding(x: torch.Tensor, m: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """x (B, T) with the positions where the bool mask m (B, T) is False set to 0 (in `dtype`, default x's)."""
    x = x if dtype is None else x.to(dtype)
    return torch.where(m, x, torch.zeros((), dtype=x.dtype, device=x.device))
