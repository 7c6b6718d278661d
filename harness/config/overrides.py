"""model.overrides: checked against the model's config class before any model loads (section model)."""

from __future__ import annotations

import dataclasses
import difflib
import json
from pathlib import Path

from harness.models.random_llama import RANDOM_SHAPES, random_config
from harness.models.tiny import VOCAB_SIZE, tiny_dense_config, tiny_moe_config

# from_pretrained options that model.overrides may pass for smollm2-135m or a model folder
LOAD_OPTIONS = (
    "attn_implementation",
    "device_map",
    "low_cpu_mem_usage",
    "revision",
    "subfolder",
    "trust_remote_code",
    "use_safetensors",
    "variant",
    "max_memory",
    "offload_folder",
    "offload_state_dict",
    "key_mapping",
    "gguf_file",
    "quantization_config",
    "tp_plan",
    "use_kernels",
)


def _config_keys(cls) -> set[str]:
    """The fields a transformers config class knows (dataclass fields, aliases, serialised keys)."""
    keys = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    keys |= set(getattr(cls, "attribute_map", {}) or {})
    try:
        keys |= set(cls().to_dict())
    except Exception:  # noqa: BLE001 -- a class without defaults: its fields alone
        pass
    return keys


_CHECKED_OVERRIDES: dict[str, None] = {}


def check_model_overrides(name: str, overrides: dict) -> None:
    """model.overrides: every key a field of the model's config class (or, for pretrained
    weights, a from_pretrained option), every value accepted by that class; tiny-* models are
    also built without weights (meta device), which catches shape errors."""
    memo = json.dumps([name, overrides], sort_keys=True, default=str)
    if memo in _CHECKED_OVERRIDES:
        return
    from transformers import CONFIG_MAPPING, LlamaConfig, MixtralConfig

    tiny = {"tiny-dense": LlamaConfig, "tiny-moe": MixtralConfig, **dict.fromkeys(RANDOM_SHAPES, LlamaConfig)}
    folder = None if name in tiny or name == "smollm2-135m" else Path(name)
    if name in tiny:
        cls, options = tiny[name], ()
    elif folder is not None:
        cls, options = CONFIG_MAPPING[json.loads((folder / "config.json").read_text())["model_type"]], LOAD_OPTIONS
    else:
        cls, options = LlamaConfig, LOAD_OPTIONS  # SmolLM2 is a Llama (its folder may not be converted yet)
    known = _config_keys(cls) | set(options)
    for key in ("dtype", "torch_dtype"):
        if key in overrides:
            raise ValueError(
                f"model.overrides.{key}={overrides[key]!r}: the precision is model.dtype "
                "(float32 | bfloat16), not an override"
            )
    for key in overrides:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=3)
            hint = f"did you mean {' or '.join(repr(n) for n in near)}? " if near else ""
            raise ValueError(
                f"model.overrides.{key}: not a field of {cls.__name__} (model.name={name!r}); {hint}allowed: "
                f"the fields of transformers.{cls.__name__}{' or from_pretrained options ' + str(list(options)) if options else ''}"
            )
    fields = {k: v for k, v in overrides.items() if k not in options}
    try:
        if name in tiny:
            import torch
            from transformers import AutoModelForCausalLM

            if name in RANDOM_SHAPES:  # random weights, SmolLM2's tokenizer: its vocabulary is the shape's
                config = random_config(name, **fields)
            else:
                config = (tiny_dense_config if name == "tiny-dense" else tiny_moe_config)(**fields)
            if name not in RANDOM_SHAPES and config.vocab_size < VOCAB_SIZE:
                raise ValueError(
                    f"vocab_size={config.vocab_size} is below the character tokenizer's {VOCAB_SIZE} tokens"
                )
            with torch.device("meta"):
                AutoModelForCausalLM.from_config(config)
        elif folder is not None:
            from transformers import AutoConfig

            AutoConfig.from_pretrained(folder, local_files_only=True, **fields)
        elif fields:
            LlamaConfig(**fields)
    except Exception as err:  # noqa: BLE001 -- transformers raises TypeError, ValueError and its own errors
        raise ValueError(
            f"model.overrides={overrides!r} do not fit {cls.__name__} (model.name={name!r}): "
            f"{' '.join(str(err).split())}"
        ) from None
    _CHECKED_OVERRIDES[memo] = None
