"""The model's parameter count N of a run, for the FLOPs estimate, from its config.yaml without weights:
the model is built on torch's meta device (no memory, no download; a pretrained model's folder must
hold its config.json)."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.models.smollm2 import FOLDER_NAME, model_cache_root
from harness.models.tiny import TINY_CONFIGS


def model_params(run_dir: str | Path) -> float | None:
    """Parameters of the run's model (tied embeddings counted once); None when its config cannot say."""
    try:
        model = (yaml.safe_load((Path(run_dir) / "config.yaml").read_text()) or {}).get("model") or {}
    except (OSError, yaml.YAMLError):
        return None
    name, overrides = model.get("name"), model.get("overrides") or {}
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if name in TINY_CONFIGS:
        config = TINY_CONFIGS[name](**overrides)
    else:
        folder = model_cache_root() / FOLDER_NAME if name == "smollm2-135m" else Path(str(name))
        if not (folder / "config.json").is_file():
            return None
        config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(config)
    return float(sum(p.numel() for p in net.parameters()))
