"""Configs of the tiny models trained from scratch on the synthetic tasks (CPU-sized).

tiny-dense: Llama (GQA, RoPE, SwiGLU), ~0.8M parameters.
tiny-moe: Mixtral (top-k routed SwiGLU experts), same attention; each expert is half
the dense FFN width, so top-2 routing has the dense model's active FFN width
(~1.4M parameters in all). Both architectures are supported by vLLM.

Vocab and special-token ids come from the character tokenizer; any field can be
overridden (e.g. `tiny_dense_config(num_hidden_layers=2)`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.models.tokenizer import CHARS, SPECIAL_TOKENS

if TYPE_CHECKING:
    from transformers import LlamaConfig, MixtralConfig

VOCAB_SIZE = len(SPECIAL_TOKENS) + len(CHARS)
_SHARED = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=128,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    tie_word_embeddings=True,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
    initializer_range=0.02,
)


def tiny_dense_config(**overrides) -> LlamaConfig:
    """Llama config: hidden 128, 4 layers, 4 heads (2 KV heads), FFN 384."""
    from transformers import LlamaConfig  # heavy: transformers loads only where a config is built

    return LlamaConfig(**{**_SHARED, "intermediate_size": 384, **overrides})


def tiny_moe_config(**overrides) -> MixtralConfig:
    """Mixtral config: as tiny-dense, FFN replaced by 4 experts of width 192, top-2 routing.

    `output_router_logits` stays False by default (generation does not need it); pass
    `output_router_logits=True` to a forward to get `outputs.router_logits`
    (see harness.models.moe).
    """
    from transformers import MixtralConfig  # heavy: transformers loads only where a config is built

    cfg = {
        **_SHARED,
        "intermediate_size": 192,  # per expert
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "router_aux_loss_coef": 0.0,  # the objective decides whether to add a balancing loss
        "sliding_window": None,
        **overrides,
    }
    return MixtralConfig(**cfg)


TINY_CONFIGS = {"tiny-dense": tiny_dense_config, "tiny-moe": tiny_moe_config}  # model.name -> its config
