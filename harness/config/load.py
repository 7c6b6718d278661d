"""From a YAML file and dotted overrides to a validated RunConfig (`load_config`), and back (`dump_config`):
the overrides parsed and set, pydantic's errors turned into one line per problem naming the dotted key, the
value and what is allowed (`ConfigError`)."""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from harness.config.base import ConfigError
from harness.config.run import TO_BUILD, RunConfig
from harness.config.strict_yaml import read_yaml, yaml_loads
from harness.objective.modes import BOOL_MSG, KnobError


def parse_override(item: str) -> tuple[str, Any]:
    """'objective.eps_high=0.28' -> ('objective.eps_high', 0.28); values are YAML scalars/lists/mappings,
    parsed strictly (a value that is not valid YAML raises ConfigError naming the override)."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like dotted.key=value")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {item!r}: the key before '=' must be a dotted key such as train.steps")
    if not raw.strip():
        return key, None
    return key, yaml_loads(raw, f"override {item!r}")


def set_dotted(d: dict, key: str, value: Any) -> None:
    """Set d['a']['b'] = value for key 'a.b', creating sections as needed."""
    parts = key.split(".")
    cur = d
    for p in parts[:-1]:
        nxt = cur.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"cannot set {key!r}: {p!r} is not a section")
        cur = nxt
    cur[parts[-1]] = value


def allowed_keys(section_path: tuple) -> list[str]:
    """Field names of the section at a dotted path (for error messages)."""
    model: Any = RunConfig
    for p in section_path:
        field = model.model_fields.get(str(p))
        sections = (
            [
                a
                for a in (typing.get_args(field.annotation) or (field.annotation,))
                if isinstance(a, type) and issubclass(a, BaseModel)
            ]
            if field is not None
            else []
        )  # an optional section: X | None
        if not sections:
            return []
        model = sections[0]
    return sorted(model.model_fields)


_UNION_TAG = re.compile(r"^(bool|int|float|str|none|constrained-\w+|literal\[.*\]|list\[.*\]|dict\[.*\])$")


def _merge_union_errors(errors: list[dict]) -> list[dict]:
    """pydantic's errors with a union's members folded into one per field: `tf32: bool | "auto"` given 'maybe'
    fails both members, one error each (loc ending in the member's tag); the user sees one line naming both."""
    merged: dict[tuple, dict] = {}
    out: list[dict] = []
    for e in errors:
        loc = e["loc"]
        if not (loc and isinstance(loc[-1], str) and _UNION_TAG.match(loc[-1])):
            out.append(e)
            continue
        field = loc[:-1]
        if field in merged:
            merged[field]["msg"] += "; or " + e["msg"].removeprefix("Value error, ").removeprefix("Input should be ")
            continue
        merged[field] = {**e, "loc": field, "type": "union", "msg": e["msg"]}
        out.append(merged[field])
    return out


def _format_error(err: ValidationError) -> str:
    lines = []
    for e in _merge_union_errors(err.errors()):
        loc = tuple(x for x in e["loc"] if not (isinstance(x, str) and x.startswith("function-")))
        key = ".".join(str(x) for x in loc) or "<config>"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] in ("bool_type", "union") and msg.startswith("Input should be a valid boolean"):
            msg = BOOL_MSG + msg.removeprefix("Input should be a valid boolean")
        if e["type"] == "extra_forbidden":
            allowed = allowed_keys(loc[:-1])
            near = difflib.get_close_matches(str(loc[-1]), allowed, n=1) if loc else []
            lines.append(
                f"unknown key '{key}'{f' (did you mean {near[0]!r}?)' if near else ''}; allowed keys here: {allowed}"
            )
        elif isinstance(err := (e.get("ctx") or {}).get("error"), KnobError):  # a knob a mode declares
            lines.append(f"'{key}.{err.knob}': {err.reason} (got {err.value!r})")
        elif loc == ("objective",) and e["type"] == "value_error":  # a rule of the objective: its message says it all
            lines.append(msg)
        else:
            got = e.get("input")
            lines.append(f"'{key}': {msg} (got {got!r})" if key != "<config>" else msg)
    if len(lines) == 1:
        return f"invalid run config: {lines[0]}"
    return f"invalid run config ({len(lines)} errors):\n  " + "\n  ".join(lines)


def build_config(data: dict, source: str | None = None, reward_models_to_build: Iterable[str | Path] = ()) -> RunConfig:
    """A validated RunConfig from a mapping; errors raise ConfigError (prefixed with `source`).
    reward_models_to_build: reward model folders written before the run starts (a study's `reward_model:`,
    harness/experiment/expand.py), not checked while they are absent or empty."""
    prefix = f"{source}: " if source else ""
    if not isinstance(data, dict):
        raise ConfigError(
            f"{prefix}the top level of a run config must be a mapping of sections (got {type(data).__name__})"
        )
    try:
        return RunConfig.model_validate(data, context={TO_BUILD: frozenset(map(str, reward_models_to_build))})
    except ValidationError as err:
        raise ConfigError(prefix + _format_error(err)) from None
    except ValueError as err:  # raised by ObjectiveConfig.preset / validators outside pydantic's wrapper
        raise ConfigError(f"{prefix}invalid run config: {err}") from None


def load_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """YAML file + dotted overrides -> validated RunConfig. Every problem (the file, an override,
    a key or value) raises ConfigError naming the file, the overrides and the dotted key."""
    data: dict = {}
    source = str(path) if path is not None else "run config"
    if overrides:
        source += f" (with overrides {' '.join(overrides)})"
    if path is not None:
        data = read_yaml(path, "run config")
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections (got {type(data).__name__})")
    for item in overrides:
        key, value = parse_override(item)
        try:
            set_dotted(data, key, value)
        except ConfigError as err:
            raise ConfigError(f"{source}: {err}") from None
    return build_config(data, source)


def dump_config(cfg: RunConfig, keep_auto: bool = False) -> str:
    """The config as YAML: resolved (what a run records), or with its `auto` levers kept (keep_auto)."""
    return yaml.safe_dump(cfg.to_dict(keep_auto), sort_keys=False)
