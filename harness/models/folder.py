"""A local Hugging Face model folder, checked before it loads; the context length of any model name.

    folder_problem(Path("runs/sft"))            # None, or why from_pretrained would fail on it (one line)
    model_positions("tiny-dense", {})           # 512: the positions a prompt and its completion share

folder_problem reads config.json (valid JSON, a model_type that transformers knows and can build a
causal LM of, unless the folder brings its own code: auto_map), the weights' headers (a safetensors
file's header and its size, a sharded index's files, a .bin's zip or pickle start, a GGUF's magic)
and the tokenizer's files: what would otherwise be a traceback after transformers loads.
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

WEIGHTS = ("*.safetensors", "*.safetensors.index.json", "pytorch_model*.bin", "*.gguf")
TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
_MAX_HEADER = 100_000_000  # the safetensors format's own limit on its JSON header


def _config(folder: Path) -> tuple[dict | None, str | None]:
    """(config.json as a dict, None) or (None, why it is not one)."""
    config = folder / "config.json"
    if not config.is_file():
        return None, f"no config.json in {folder}"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        return None, f"{config} is not valid JSON ({err})"
    if not isinstance(data, dict) or not data.get("model_type"):
        return None, f"{config} has no model_type"
    return data, None


def _model_type_problem(folder: Path, data: dict) -> str | None:
    """A model_type transformers cannot build a causal LM of (a folder with its own code, auto_map, is left be)."""
    if "auto_map" in data:
        return None
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # heavy: folders only

    kind = data["model_type"]
    if kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return (
            f"{folder / 'config.json'} has model_type={kind!r}, which this transformers cannot load as a causal "
            "LM (AutoModelForCausalLM); a newer transformers, or a folder whose config.json has auto_map and "
            "model.overrides.trust_remote_code=true, may"
        )
    return None


def safetensors_problem(path: Path) -> str | None:
    """Why `path` is not a readable safetensors file (its header and its size; the tensors are not read)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return f"{path} is not a safetensors file ({size} bytes)"
        n = struct.unpack("<Q", head)[0]
        if n > min(_MAX_HEADER, size - 8):
            return f"{path} is not a safetensors file (its header length {n} does not fit its {size} bytes)"
        try:
            header = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError):
            return f"{path} is not a safetensors file (its header is not JSON)"
    if not isinstance(header, dict):
        return f"{path} is not a safetensors file (its header is not a JSON object)"
    try:
        end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    except (TypeError, KeyError, IndexError, ValueError):
        return f"{path} is not a safetensors file (a tensor's entry has no data_offsets)"
    if end > size - 8 - n:
        return f"{path} is truncated: its tensors end at byte {8 + n + end}, the file has {size}"
    return None


def _bin_problem(path: Path) -> str | None:
    """A torch.save file is a zip archive (or, before torch 1.6, a pickle: its first byte 0x80)."""
    if zipfile.is_zipfile(path):
        return None
    with open(path, "rb") as f:
        first = f.read(1)
    return None if first == b"\x80" else f"{path} is not a PyTorch weights file (neither a zip archive nor a pickle)"


def _weights_problem(folder: Path) -> str | None:
    """No weights at all, or a weights file whose header is not what its name says."""
    if not any(any(folder.glob(w)) for w in WEIGHTS):
        return f"no weights in {folder} (model.safetensors, pytorch_model.bin or a sharded index)"
    for index in sorted(folder.glob("*.safetensors.index.json")):
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
            return f"{index} is not a sharded index (JSON with a weight_map)"
        missing = sorted(s for s in shards if not (folder / s).is_file())
        if missing:
            return f"{index} names shards that are not in {folder}: {missing[:3]}"
    for path in sorted(folder.glob("*.safetensors")):
        problem = safetensors_problem(path)
        if problem:
            return problem
    for path in sorted(folder.glob("pytorch_model*.bin")):
        problem = _bin_problem(path)
        if problem:
            return problem
    for path in sorted(folder.glob("*.gguf")):
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF":
                return f"{path} is not a GGUF file (it does not start with GGUF)"
    return None


def folder_problem(folder: Path) -> str | None:
    """Why `folder` cannot be loaded as a Hugging Face model and tokenizer (None: it can, as far as its
    config, its weights' headers and its file names tell)."""
    data, problem = _config(folder)
    if problem:
        return problem
    problem = _weights_problem(folder) or _model_type_problem(folder, data)
    if problem:
        return problem
    if not any((folder / f).is_file() for f in TOKENIZER):
        return f"no tokenizer files in {folder} ({', '.join(TOKENIZER)})"
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json"):
        path = folder / name
        if path.is_file():
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as err:
                return f"{path} is not valid JSON ({type(err).__name__}: {' '.join(str(err).split())[:120]})"
    return None


def classifier_problem(folder: Path) -> str | None:
    """Why `folder` is not a reward model's: a sequence classifier (AutoModelForSequenceClassification) with
    one label, its weights and its tokenizer's files (None: it is, as far as its files tell; that it loads
    and scores is checked by loading it: harness/tasks/rewards/reward_model.py)."""
    if not folder.is_dir():
        return f"{folder} is not a folder"
    data, problem = _config(folder)
    if problem:
        return problem
    problem = _weights_problem(folder)
    if problem:
        return problem
    if "auto_map" not in data:
        from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

        if data["model_type"] not in MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES:
            return (
                f"{folder / 'config.json'} has model_type={data['model_type']!r}, which this transformers cannot "
                "load as a sequence classifier (AutoModelForSequenceClassification)"
            )
    kinds = data.get("architectures") or []
    if kinds and not any(str(k).endswith("ForSequenceClassification") for k in kinds):
        return (
            f"{folder / 'config.json'} has architectures={kinds}: not a sequence classifier (a reward model is "
            "saved from AutoModelForSequenceClassification with num_labels=1, e.g. by harness train-rm)"
        )
    labels = data.get("num_labels") or len(data.get("id2label") or {}) or 2  # transformers' default: 2 labels
    if labels != 1:
        return (
            f"{folder / 'config.json'} has {labels} labels (id2label); a reward model has one (num_labels=1: "
            "one score per sequence)"
        )
    if not any((folder / f).is_file() for f in TOKENIZER):
        return f"no tokenizer files in {folder} ({', '.join(TOKENIZER)})"
    return None


def folder_positions(folder: Path, overrides: dict | None = None) -> int | None:
    """max_position_embeddings of a model folder's config (an override of it wins); None: it does not say."""
    overrides = overrides or {}
    if "max_position_embeddings" in overrides:
        return overrides["max_position_embeddings"]
    data, problem = _config(folder)
    if problem:
        return None
    text = data.get("text_config") if isinstance(data.get("text_config"), dict) else {}
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        for source in (data, text):
            value = source.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None
