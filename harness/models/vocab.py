"""A model name's token -> id map read from its tokenizer files, without loading a tokenizer or weights: what a
second model that reads the policy's token ids (on-policy distillation's teacher, model.teacher) is checked
against before anything loads.

    token_ids("tiny-dense")        # the character tokenizer's 100 ids (harness/models/tokenizer.py)
    token_ids("runs/sft/final")    # tokenizer.json's model.vocab and added_tokens; None: no file says
    vocab_difference(ours, theirs) # None when equal, else the first token whose id differs (one line)
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.models.random_llama import RANDOM_SHAPES
from harness.models.smollm2 import FOLDER_NAME, model_cache_root
from harness.models.tiny import TINY_CONFIGS
from harness.models.tokenizer import CHARS, SPECIAL_TOKENS


def _folder_ids(folder: Path) -> dict[str, int] | None:
    """tokenizer.json's vocabulary (a BPE's or WordLevel's {token: id}, a Unigram's [[piece, score], ...] by
    position) with its added tokens; None without a readable tokenizer.json."""
    try:
        data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        vocab = data["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    ids = dict(vocab) if isinstance(vocab, dict) else {piece[0]: i for i, piece in enumerate(vocab)}
    for tok in data.get("added_tokens") or []:
        ids[tok["content"]] = int(tok["id"])
    return ids


def token_ids(name: str) -> dict[str, int] | None:
    """{token: id} of model `name` (a built-in name or a folder); None: not known before it loads (SmolLM2's
    folder not converted yet, a folder without tokenizer.json)."""
    if name in TINY_CONFIGS:
        return {tok: i for i, tok in enumerate(SPECIAL_TOKENS + CHARS)}
    if name in RANDOM_SHAPES or name == "smollm2-135m":
        return _folder_ids(model_cache_root() / FOLDER_NAME)  # SmolLM2's tokenizer, for the random ones too
    return _folder_ids(Path(name))


def vocab_difference(ours: dict[str, int], theirs: dict[str, int]) -> str | None:
    """None when the two maps are equal, else what differs first: the sizes, and one token with its two ids."""
    if ours == theirs:
        return None
    for tok, i in sorted(ours.items(), key=lambda kv: kv[1]):
        if theirs.get(tok) != i:
            other = "has no such token" if tok not in theirs else f"has it at id {theirs[tok]}"
            return (
                f"{len(theirs)} tokens against {len(ours)}; token {tok!r} is id {i} in the policy's, the other {other}"
            )
    extra = min(set(theirs) - set(ours), key=lambda t: theirs[t])
    return f"{len(theirs)} tokens against {len(ours)}; token {extra!r} (id {theirs[extra]}) is not in the policy's"


__all__ = ["token_ids", "vocab_difference"]
