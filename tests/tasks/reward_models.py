"""Tiny reward model folders for the tests: a random Llama sequence classifier (num_labels 1) with the
character tokenizer and a chat template of its own (not the policy's), saved as a local HF folder."""

from __future__ import annotations

from pathlib import Path

import torch

from harness.models.tiny import tiny_dense_config
from harness.models.tokenizer import char_tokenizer

# A template unlike the policy's (harness/models/tokenizer.py): role tags, a newline after each turn.
RM_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '[' + message['role'] + '] ' + message['content'] + '\\n' }}"
    "{% endfor %}"
)


def tiny_reward_model(folder: Path, seed: int = 0, num_labels: int = 1, template: str | None = RM_TEMPLATE) -> Path:
    """A random 1-layer Llama sequence classifier saved to `folder` with its tokenizer (seeded)."""
    from transformers import LlamaForSequenceClassification

    config = tiny_dense_config(num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_labels=num_labels)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForSequenceClassification(config)
        torch.nn.init.normal_(model.score.weight, std=1.0)  # scores of order 1, not 0.02
    tok = char_tokenizer()
    tok.chat_template = template
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
