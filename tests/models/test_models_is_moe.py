"""The one MoE test (harness.models.is_moe) gives the same answer before a model loads (its
name, its folder's config.json) and after (the model, its config), and agrees with the routers
the harness hooks."""

import json

import pytest

from harness.models import build_model, is_moe, routers, save_model


@pytest.mark.parametrize("name, expected", [("tiny-moe", True), ("tiny-dense", False)])
def test_name_model_config_and_routers_agree(name, expected):
    model, _ = build_model(name, seed=0, overrides={"num_hidden_layers": 1})
    assert is_moe(name) is expected
    assert is_moe(model) is expected
    assert is_moe(model.config) is expected
    assert bool(routers(model)) is expected


def test_registered_dense_name_and_unknown_name():
    assert is_moe("smollm2-135m") is False  # known without converting the GGUF
    assert is_moe("/no/such/model/folder") is None  # cannot be told before loading


def test_folder_is_read_from_its_config_json(tmp_path):
    model, tok = build_model("tiny-moe", seed=0, overrides={"num_hidden_layers": 1})
    folder = save_model(model, tok, tmp_path / "moe")
    assert is_moe(folder) is True and is_moe(str(folder)) is True
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(json.dumps({"model_type": "x", "num_local_experts": 1}))
    assert is_moe(tmp_path / "cfg") is False  # one expert: dense


@pytest.mark.parametrize(
    "config, expected",
    [
        ({"num_local_experts": 8}, True),  # Mixtral
        ({"num_experts": 60}, True),  # Qwen2-MoE
        ({"n_routed_experts": 64}, True),  # DeepSeek
        ({"num_experts": 1}, False),
        ({"num_experts": True}, False),  # a boolean is not a count
        ({"hidden_size": 64}, False),
    ],
)
def test_config_mappings(config, expected):
    assert is_moe(config) is expected
