"""`harness config CONFIG --explain`: every knob of the resolved config, its value and its description."""

from __future__ import annotations

from pydantic import BaseModel

from harness import device_defaults
from harness.config.base import show
from harness.config.run import RunConfig
from harness.objective.explain import explain_objective


def _auto_note(cfg: RunConfig, key: str) -> str:
    """`  (auto on cpu; on cuda: 'bf16')` for a lever left auto: the value shown is this device's."""
    if key not in cfg.auto_levers:
        return ""
    other = "cpu" if cfg.auto_device == "cuda" else "cuda"
    data = {**cfg.to_dict(keep_auto=True)}
    values = {f"{s}.{k}": v for s in ("model", "train", "rollout") for k, v in data[s].items()}
    values["model.lora"] = cfg.model.lora
    there = device_defaults.resolve(values, other).get(key)
    return f"  (auto, resolved for {cfg.auto_device}; on {other}: {show(there)})"


def explain_config(cfg: RunConfig) -> str:
    """`harness config CONFIG --explain`: every knob of the resolved config with its value and its doc;
    the objective's knobs also say which mode reads them and whether it is selected now (plugins'
    knobs included: harness/objective/explain.py)."""
    lines = [f"# {cfg.objective.algorithm} ({cfg.trainer} trainer): every knob, its value, its doc", ""]
    for name, field in RunConfig.model_fields.items():
        value = getattr(cfg, name)
        if name == "objective":
            lines += explain_objective(value)
        elif isinstance(value, BaseModel):
            for key, sub in type(value).model_fields.items():
                lines.append(f"{name}.{key}: {show(getattr(value, key))}{_auto_note(cfg, f'{name}.{key}')}")
                lines.append(f"    {sub.description or '(no description)'}")
        else:
            lines += [f"{name}: {show(value)}", f"    {field.description or '(no description)'}"]
    return "\n".join(lines) + "\n"
