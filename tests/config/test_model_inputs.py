"""A model folder and the run's lengths and rewards, checked by load_config before any model loads:
a folder whose config.json names a model_type transformers cannot load, or whose weights are not what their
names say (a garbage or truncated safetensors file, a sharded index naming missing shards, a .bin that is no
torch.save file), a rollout.max_new_tokens that fills the model's positions, rewards whose weights are all 0.
Each is one line naming the key and the file or value; the CLI exits 2 without loading a model."""

from __future__ import annotations

import json
import shutil
import struct

import pytest

from harness.config import ConfigError, load_config
from harness.models.folder import folder_problem
from tests.config.test_early_checks import no_model  # noqa: F401 -- the fixture: every way to a model raises
from tests.tasks.conftest import gsm8k_rows, write_jsonl

SMOKE = "experiments/runs/smoke.yaml"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A real model folder (tiny-dense, saved as safetensors with its tokenizer)."""
    from harness.models import build_model, save_model

    folder = tmp_path_factory.mktemp("model") / "tiny"
    save_model(*build_model("tiny-dense", seed=0, overrides={"num_hidden_layers": 1}), folder)
    return folder


def copy(saved, tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(saved, folder)
    return folder


def err(overrides) -> str:
    with pytest.raises(ConfigError) as e:
        load_config(SMOKE, ["warm_start.enabled=false", *overrides])
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


def test_a_saved_model_folder_passes(saved):
    assert folder_problem(saved) is None
    cfg = load_config(SMOKE, [f"model.name={saved}", "warm_start.enabled=false"])
    assert cfg.model.name == str(saved)


def test_an_unknown_model_type_is_refused(saved, tmp_path):
    folder = copy(saved, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "llama9"}))
    msg = err([f"model.name={folder}"])
    assert f"model.name={str(folder)!r} is a folder but not a Hugging Face model" in msg
    assert "has model_type='llama9', which this transformers cannot load as a causal LM" in msg
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "clip"}))  # known, but no causal LM
    assert "model_type='clip'" in err([f"model.name={folder}"])
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "llama9", "auto_map": {}}))
    assert folder_problem(folder) is None  # its own code (trust_remote_code): transformers' registry cannot tell


def test_garbage_or_truncated_safetensors_are_refused(saved, tmp_path):
    folder = copy(saved, tmp_path)
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(b"this is not a model" * 10)
    assert "model.safetensors is not a safetensors file (its header length" in err([f"model.name={folder}"])
    weights.write_bytes(struct.pack("<Q", 12) + b"not json at all")
    assert "model.safetensors is not a safetensors file (its header is not JSON)" in err([f"model.name={folder}"])
    weights.write_bytes(data[: len(data) // 2])
    msg = err([f"model.name={folder}"])
    assert "model.safetensors is truncated: its tensors end at byte" in msg and f"the file has {len(data) // 2}" in msg
    weights.write_bytes(b"")
    assert "model.safetensors is not a safetensors file (0 bytes)" in err([f"model.name={folder}"])


def test_other_weights_files_are_checked(saved, tmp_path):
    folder = copy(saved, tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"<html>404</html>")
    assert "pytorch_model.bin is not a PyTorch weights file" in err([f"model.name={folder}"])
    (folder / "pytorch_model.bin").unlink()
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model-00001.safetensors"}}))
    assert "names shards that are not in" in err([f"model.name={folder}"])
    (folder / "model.safetensors.index.json").unlink()
    (folder / "model.gguf").write_bytes(b"GGML....")
    assert "model.gguf is not a GGUF file" in err([f"model.name={folder}"])


def test_a_tokenizer_file_that_is_not_json_is_refused(saved, tmp_path):
    folder = copy(saved, tmp_path)
    name = next(n for n in ("tokenizer.json", "tokenizer_config.json") if (folder / n).is_file())
    (folder / name).write_text("<html>rate limited</html>")
    assert f"{folder / name} is not valid JSON (JSONDecodeError: " in err([f"model.name={folder}"])


def test_cli_a_garbage_model_folder_exits_2_before_any_model_loads(no_model, saved, tmp_path, capsys):  # noqa: F811
    from harness.cli import main

    folder = copy(saved, tmp_path)
    (folder / "model.safetensors").write_bytes(b"\x00" * 64)
    code = main(["train", SMOKE, f"model.name={folder}", "warm_start.enabled=false", "--out", str(tmp_path / "r")])
    err_text = capsys.readouterr().err
    assert code == 2 and "model.safetensors is not a safetensors file" in err_text and "Traceback" not in err_text


def test_max_new_tokens_that_fill_the_models_positions_are_refused(saved):
    msg = err(["rollout.max_new_tokens=512"])
    assert msg.endswith(
        "rollout.max_new_tokens=512 leaves no room for a prompt in the 512 positions (max_position_embeddings) "
        "of model.name='tiny-dense'; allowed: below 512, less the longest prompt"
    )
    assert "in the 128 positions" in err(
        ["model.overrides={max_position_embeddings: 128}", "rollout.max_new_tokens=200"]
    )
    assert "in the 512 positions" in err([f"model.name={saved}", "rollout.max_new_tokens=600"])
    load_config(SMOKE, ["rollout.max_new_tokens=511", "warm_start.enabled=false"])
    for n in (0, -5):
        msg = err([f"model.overrides={{max_position_embeddings: {n}}}"])
        assert msg.endswith(f"model.overrides.max_position_embeddings={n!r}: allowed: an integer >= 1"), msg


def test_every_reward_weight_zero_is_refused(tmp_path):
    path = write_jsonl(tmp_path / "train.jsonl", gsm8k_rows(20))
    data = f"task.data={{train: {path}, prompt_key: question}}"
    base = ["task.name=dataset", data, "task.reward_workers=0"]
    msg = err([*base, "task.rewards=[{verifier: gsm8k, weight: 0}, {verifier: number, weight: 0.0}]"])
    assert msg.endswith(
        "task.rewards: every weight is 0 ([0.0, 0.0]), so every completion's reward is 0 and the policy has "
        "nothing to learn; give at least one reward a weight other than 0"
    )
    load_config(SMOKE, ["warm_start.enabled=false", *base, "task.rewards=[{verifier: gsm8k, weight: 0}, number]"])
