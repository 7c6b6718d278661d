"""Dotted run-config keys in a study file (`objective.preset`, `train.group_size`): checked against
RunConfig's fields, and applied to a run-config mapping."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from harness.config import RunConfig, set_dotted
from harness.experiment.study import StudyError
from harness.objective.modes import all_knobs


def _section_model(path: tuple[str, ...]):
    """Walk RunConfig's fields along `path`; returns ('model', cls) | ('free', None) | ('leaf', None)
    or raises KeyError(prefix, allowed) at the first unknown component."""
    model: Any = RunConfig
    for i, part in enumerate(path):
        if model is None:
            raise KeyError((path[:i], []))
        if part == "preset" and i == 1 and path[0] == "objective":
            if i != len(path) - 1:
                raise KeyError((path[: i + 1], []))
            return "leaf", None
        fld = model.model_fields.get(part)
        declared = _declared_knobs() if path[:i] == ("objective",) else ()
        if fld is None and part in declared:  # a knob a mode declares (a plugin's: imported by load.py)
            if i != len(path) - 1:
                raise KeyError((path[: i + 1], []))
            return "leaf", None
        if fld is None:
            allowed = sorted(model.model_fields) + (["preset", *sorted(declared)] if path[:i] == ("objective",) else [])
            raise KeyError((path[:i], allowed))
        ann = fld.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
            continue
        origin = getattr(ann, "__origin__", None)
        if ann is dict or origin is dict or "dict" in str(ann):
            return "free", None  # model.overrides.*, task.options.*, tracking.tags.* ...
        if i != len(path) - 1:
            raise KeyError((path[: i + 1], []))
        return "leaf", None
    return "model", model


def _declared_knobs() -> tuple[str, ...]:
    """The objective knobs the modes declare (harness/objective/modes.py), plugins' included."""
    return tuple(all_knobs())


def key_problem(key: Any) -> str | None:
    """Why `key` is not a dotted run-config key (None: it is one)."""
    if not isinstance(key, str) or not key:
        return f"key {key!r} must be a dotted run-config key such as objective.preset"
    try:
        _section_model(tuple(key.split(".")))
    except KeyError as err:
        prefix, allowed = err.args[0]
        sect = ".".join(prefix) or "the top level of a run config"
        hint = f"; allowed keys under {sect}: {allowed}" if allowed else f" ({sect} has no sub-keys)"
        return f"'{key}' is not a run-config key{hint}"
    return None


def check_key(key: str, where: str) -> str:
    """Raise StudyError unless `key` is a dotted run-config key; returns its kind."""
    problem = key_problem(key)
    if problem:
        raise StudyError(f"{where}: {problem}")
    return _section_model(tuple(key.split(".")))[0]


def apply_override(data: dict, key: str, value: Any) -> None:
    """Set a dotted key; a mapping given for a whole SECTION (e.g. `train: {steps: 4}`) is merged
    into it key by key, a mapping for a leaf or free-form dict replaces it."""
    kind = check_key(key, key)
    if kind == "model" and isinstance(value, dict):
        for k, v in value.items():
            apply_override(data, f"{key}.{k}", v)
    else:
        set_dotted(data, key, copy.deepcopy(value))
