"""`model.lm_head_fp32`: the LM head's logits computed in fp32 whatever the model's precision.

ScaleRL (arXiv 2510.13786 §3.2, "FP32 precision at the LM head", after MiniMax-M1 2506.13585 §3.3): the
sampler's and the trainer's token probabilities drift apart when the head's matmul rounds in bf16; computing
it in fp32, in the generator and the trainer alike, narrows the mismatch and raised the asymptote of their
compute curve. Here the head's forward is replaced on the module instance:

    logits = h.float() @ W.float()^T (+ b.float())      autocast off inside, so train.autocast leaves it fp32

The weights stay in the model's dtype (no copy kept); the hf rollout engine is the policy module (or a deep
copy of it, which keeps the replaced forward), so sampling uses the same fp32 head. Shapes: h (..., d) hidden
states, W (V, d), logits (..., V).
"""

from __future__ import annotations

import types

import torch
from torch.nn import functional as F


def _fp32_forward(self, hidden: torch.Tensor) -> torch.Tensor:
    with torch.autocast(hidden.device.type, enabled=False):
        bias = None if self.bias is None else self.bias.float()
        return F.linear(hidden.float(), self.weight.float(), bias)  # (..., V) in fp32


def lm_head_fp32(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with its output embedding (the LM head) computing fp32 logits; returns `model`."""
    head = model.get_output_embeddings()
    if not isinstance(head, torch.nn.Linear):
        raise ValueError(f"model.lm_head_fp32=true: the model's LM head is a {type(head).__name__}, not a Linear")
    head.forward = types.MethodType(_fp32_forward, head)
    return model
