"""A small causal-LM folder (tiny-dense, 1 layer) as a reward model's base, and a separable pairs file."""

import json
import random

import pytest

from harness.models.registry import build_model, save_model

SMALL = {"num_hidden_layers": 1, "hidden_size": 64, "intermediate_size": 128, "max_position_embeddings": 64}


@pytest.fixture(scope="session")
def small_base(tmp_path_factory):
    """A local HF folder: a 1-layer tiny-dense causal LM and its character tokenizer."""
    model, tok = build_model("tiny-dense", seed=0, overrides=SMALL)
    return str(save_model(model, tok, tmp_path_factory.mktemp("base") / "lm"))


def marker_pairs(n: int, seed: int = 0) -> list[dict]:
    """Pairs whose chosen completion always ends with the word "yes" and the rejected with "no": separable by a
    token the model can see at the scored (last) position's context."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        rows.append(
            {"prompt": f"{a}+{b}=?{i}", "chosen": f"{rng.randint(1, 18)} yes", "rejected": f"{rng.randint(1, 18)} no"}
        )
    return rows


@pytest.fixture
def marker_file(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in marker_pairs(48)))
    return path
