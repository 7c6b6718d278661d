"""`rollout.decode_attention: matmul`: the one-token decoding steps of hf generation compute attention as two
batched matrix products and a softmax, instead of torch's fused CPU kernel.

Why: a decoding step has one query row a head. torch's `scaled_dot_product_attention` on a CPU runs it through its
flash kernel, built for long query blocks: on this project's 2-core AMD EPYC (Zen 4), at SmolLM2-135M's shapes (64
rows, 9 query heads over 3 key/value heads, 112 cached positions, head size 64, a padding mask), one call took 5.8 ms
in bf16 and 2.8 ms in fp32, against 1.1 and 1.0 ms for the products below; a whole bf16 generate of 64 rows x 64
tokens 30.7-31.8 s against 21.2-22.4 s (`python benchmarks/decode_attention.py --repeats 5 --generate 3`;
benchmarks/README.md, "Decoding attention as two products"). The grouped query heads are rows of one product with
their key/value head, so the key/value heads are never repeated (transformers' sdpa path copies them G times).

    s = q k^T * scaling          (b, Hkv, G, S)  in fp32: the G query heads that share a key/value head are rows
    s = s + mask                 (-inf where the mask forbids: left padding)
    p = softmax(s)               (b, Hkv, G, S)  fp32
    out = p v                    (b, Hkv, G, d)  fp32, cast back to the query's dtype

Shapes: b rows, H query heads, Hkv key/value heads, G = H / Hkv, S cached positions, d head size. Products and softmax
in fp32 whatever the engine's dtype, as the fused kernel accumulates: the same result up to rounding (within 2^-7 of
float64 attention in bf16, 1e-5 in fp32; tests/models/test_decode_attention.py), not bit for bit, which is why it is a knob
and off by default: a sampled token can flip at a near-tie, so CPU runs and reports keep their numbers unless asked.

Everything else goes to transformers' sdpa function unchanged (bit for bit the model's `sdpa`): more than one query
row (the prefill, the trainer's forwards), a GPU (whose fused kernels serve one row well), dropout, or an attention
with extras the products do not compute (logit soft-capping, sinks, a position bias).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "harness_decode_matmul"  # the attention implementation's name in transformers' registries
EXTRAS = ("softcap", "s_aux", "sinks", "position_bias")  # what the products do not compute: left to sdpa


def one_row_attention(query, key, value, attention_mask, scaling: float) -> torch.Tensor:
    """query (b, H, 1, d), key / value (b, Hkv, S, d), attention_mask None, bool (b or 1, 1, 1, S; True = attend)
    or additive float -> (b, 1, H, d), as transformers' attention functions return it."""
    b, h, _, d = query.shape
    hkv = key.shape[1]
    q = query.reshape(b, hkv, h // hkv, d).float()  # query head i = kv head i // G: rows of its kv head's product
    s = torch.matmul(q, key.float().transpose(-1, -2)) * scaling  # (b, Hkv, G, S)
    if attention_mask is not None:
        mask = attention_mask[..., -1:, :]  # (b, 1, 1, S)
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.float()
    p = torch.softmax(s, dim=-1)
    out = torch.matmul(p, value.float())  # (b, Hkv, G, d)
    return out.reshape(b, h, 1, d).transpose(1, 2).to(query.dtype).contiguous()


def decode_matmul_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """transformers' attention function of NAME: one_row_attention for a CPU decoding step, else sdpa's."""
    plain = query.shape[2] == 1 and query.device.type == "cpu" and not dropout
    if not plain or any(kwargs.get(k) is not None for k in EXTRAS):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    return one_row_attention(query, key, value, attention_mask, scale), None


AttentionInterface.register(NAME, decode_matmul_attention)
AttentionMaskInterface.register(NAME, sdpa_mask)  # the masks sdpa gets: the prefill's calls are sdpa's own


@contextmanager
def decoding_products(model: torch.nn.Module, on: bool):
    """While entered, `model` (a transformers model whose attention is sdpa) runs NAME: its one-row decoding steps as
    products, the rest as sdpa. A no-op when `on` is false or the model's attention is not sdpa (eager already
    computes products; flash kernels are a GPU's). The model's implementation is restored on exit."""
    before = getattr(model.config, "_attn_implementation", None)
    if not on or before != "sdpa":
        yield
        return
    model.set_attn_implementation(NAME)
    try:
        yield
    finally:
        model.set_attn_implementation(before)
