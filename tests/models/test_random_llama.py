"""The GPU check's random-weight models (harness/models/random_llama.py): SmolLM2-135M's shape and a ~1.1B Llama,
both with SmolLM2's tokenizer; accepted by the config (with config-field overrides) and built seeded."""

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.models import build_model, is_moe
from harness.models.lora import meta_model


@pytest.mark.parametrize(("name", "millions"), [("smollm2-135m-random", 134.5), ("llama-1b-random", 1170.3)])
def test_shapes_and_parameter_counts(name, millions):
    arch = meta_model(name)
    assert sum(p.numel() for p in arch.parameters()) / 1e6 == pytest.approx(millions, abs=0.1)
    assert arch.config.vocab_size == 49152 and is_moe(name) is False


def test_config_takes_the_names_and_checks_their_overrides():
    cfg = load_config("experiments/runs/bench_smollm2.yaml", ["model.name=llama-1b-random"])
    assert cfg.model.name == "llama-1b-random"
    with pytest.raises(ConfigError, match="num_hiden_layers"):
        load_config(
            "experiments/runs/bench_smollm2.yaml",
            ["model.name=llama-1b-random", "model.overrides={num_hiden_layers: 1}"],
        )


def test_built_seeded_with_smollm2s_tokenizer():
    small = {"num_hidden_layers": 1, "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
             "num_key_value_heads": 2}  # fmt: skip
    a, tok = build_model("llama-1b-random", seed=0, overrides=small)
    b, _ = build_model("llama-1b-random", seed=0, overrides=small)
    c, _ = build_model("llama-1b-random", seed=1, overrides=small)
    assert torch.equal(a.lm_head.weight, b.lm_head.weight) and not torch.equal(a.lm_head.weight, c.lm_head.weight)
    assert len(tok) == 49152 and tok.chat_template and a.generation_config.eos_token_id == tok.eos_token_id
