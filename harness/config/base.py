"""What every section shares: the config's two exceptions, the strict section base, and the helpers the
sections' rules use to read a default and show a value in a message."""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


class ConfigError(ValueError):
    """A config key or value is wrong; the message names the dotted key."""


class ConfigWarning(UserWarning):
    """A config that runs, but likely not as meant (the CLI prints it as one line)."""


class _Section(BaseModel):
    """Unknown keys are errors, floats must be finite, and a boolean is never read as a number."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name and bool_as_number(cls.model_fields[info.field_name].annotation, value):
            raise ValueError("a boolean where a number is expected; write a number")
        return value


def bool_as_number(annotation: Any, value: Any) -> bool:
    """Whether `value` (or an element of it) is a bool where `annotation` expects an int or float
    (pydantic's lax mode would silently read True as 1)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return bool_as_number(args[0], value)
    if origin in (Union, types.UnionType):
        if isinstance(value, bool) and (bool in args or Any in args):
            return False
        return any(bool_as_number(a, value) for a in args if a is not type(None))
    if isinstance(value, bool):
        return annotation in (int, float)
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return any(bool_as_number(args[1], v) for v in value.values())
    if origin in (list, tuple) and isinstance(value, (list, tuple)) and args:
        if origin is tuple and args[-1] is not Ellipsis:
            return any(bool_as_number(a, v) for a, v in zip(args, value))
        return any(bool_as_number(args[0], v) for v in value)
    return False


def field_default(model: type[BaseModel], key: str) -> Any:
    """The default of a section's field (a factory called: a fresh list or dict)."""
    return model.model_fields[key].get_default(call_default_factory=True)


def show(v: Any) -> str:
    """A value as a message shows it: a tuple as the YAML list it was written as."""
    return repr(list(v)) if isinstance(v, tuple) else repr(v)
