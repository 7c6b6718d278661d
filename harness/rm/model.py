"""The reward model: a base's LM as a sequence classifier with one output, and its scores.

Bases: tiny-dense / tiny-moe (built from their config, seeded, character tokenizer), the random-weight
shapes of harness/models/random_llama.py, smollm2-135m (its converted folder), or a local Hugging Face
folder (a causal LM, or a reward model to train further). The LM's body is kept; the head is a fresh
linear layer hidden -> 1 drawn from `seed` (a folder that is already a 1-label classifier keeps its head).
The score of a sequence is the logit at its last non-pad token (transformers' pooling).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from harness.models.folder import folder_problem
from harness.models.random_llama import RANDOM_SHAPES, random_config
from harness.models.smollm2 import smollm2_folder
from harness.models.tiny import TINY_CONFIGS
from harness.models.tokenizer import char_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

BASES = (*TINY_CONFIGS, *RANDOM_SHAPES, "smollm2-135m")
# a tokenizer without a chat template gets this one (saved with the reward model)
FALLBACK_CHAT_TEMPLATE = (
    "{{ bos_token if bos_token else '' }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}\n{% endfor %}{{ eos_token if eos_token else '' }}"
)


def base_problem(base: str) -> str | None:
    """Why `base` cannot be a reward model's base (None: it can), without loading it."""
    if base in BASES:
        return None
    if Path(base).is_dir():
        return folder_problem(Path(base))
    return f"--base={base!r}: not a model name ({', '.join(BASES)}) nor an existing local Hugging Face folder"


def base_tokenizer(base: str) -> PreTrainedTokenizerBase:
    """The base's tokenizer with a pad token (else its EOS) and a chat template (else FALLBACK_CHAT_TEMPLATE);
    loads no model."""
    from transformers import AutoTokenizer

    if base in TINY_CONFIGS:
        tok = char_tokenizer(model_max_length=TINY_CONFIGS[base]().max_position_embeddings)
    else:
        folder = Path(base) if base not in BASES else smollm2_folder()  # the random shapes use SmolLM2's
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if tok.pad_token_id is None:
        if tok.eos_token is None:
            raise ValueError(f"the tokenizer of {base} has neither a pad nor an EOS token to pad with")
        tok.pad_token = tok.eos_token
    if not tok.chat_template:
        tok.chat_template = FALLBACK_CHAT_TEMPLATE
    return tok


def build_reward_model(base: str, seed: int, pad_id: int) -> PreTrainedModel:
    """A sequence classifier with num_labels 1 of `base` (module docstring), in train mode; pad_id: its
    tokenizer's (the pooling finds the last token that is not pad_id)."""
    from transformers import AutoModelForSequenceClassification

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # the fresh head's draw (and a config-built body's)
        if base in TINY_CONFIGS or base in RANDOM_SHAPES:
            config = TINY_CONFIGS[base]() if base in TINY_CONFIGS else random_config(base)
            config.num_labels = 1
            model = AutoModelForSequenceClassification.from_config(config, dtype=torch.float32)
        else:
            model = AutoModelForSequenceClassification.from_pretrained(
                smollm2_folder() if base == "smollm2-135m" else Path(base),
                num_labels=1,
                dtype=torch.float32,
                local_files_only=True,
                ignore_mismatched_sizes=True,  # a classifier with another number of labels: a fresh head
            )
    model.config.pad_token_id = pad_id
    for m in model.modules():  # TRL's disable_dropout (its default): the two forwards of a pair see one model
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model.train()


def pad_right(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask), both (B, T): `seqs` right-padded with pad_id (as TRL's collator)."""
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def forward_scores(model, seqs: list[list[int]], pad_id: int) -> torch.Tensor:
    """(B,) scores of token sequences, one forward (gradients flow)."""
    dev = next(model.parameters()).device
    ids, mask = pad_right(seqs, pad_id)
    return model(input_ids=ids.to(dev), attention_mask=mask.to(dev), use_cache=False).logits[:, 0].float()


@torch.no_grad()
def scores(model, seqs: list[list[int]], pad_id: int, batch_size: int) -> torch.Tensor:
    """(B,) scores of token sequences in micro-batches of batch_size, no gradients, on the CPU."""
    out = [forward_scores(model, seqs[i : i + batch_size], pad_id).cpu() for i in range(0, len(seqs), batch_size)]
    return torch.cat(out) if out else torch.zeros(0)
