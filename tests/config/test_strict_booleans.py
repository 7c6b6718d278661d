"""Every boolean key of the run config is strict: a string ("yes", "true") or a number (1) is refused naming the
key and saying what is allowed, never read as true. The keys are found by walking the config's models (every
section, the objective's fields) and the knobs the modes declare, so a boolean added later is swept too."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from harness.config import ConfigError, RunConfig, load_config
from harness.objective.modes import all_knobs

SMOKE = "experiments/runs/smoke.yaml"


def _holds_bool(annotation) -> bool:
    return annotation is bool or any(_holds_bool(a) for a in typing.get_args(annotation))


def _models(annotation):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for a in typing.get_args(annotation):
        yield from _models(a)


def boolean_keys(model: type[BaseModel] = RunConfig, prefix: str = "") -> list[str]:
    """The dotted keys of every boolean field under `model` (a union with a boolean counts: tf32: bool | auto)."""
    out = []
    for name, field in model.model_fields.items():
        if _holds_bool(field.annotation):
            out.append(prefix + name)
        for sub in _models(field.annotation):
            out += boolean_keys(sub, f"{prefix}{name}.")
    return out


KEYS = sorted({*boolean_keys(), *(f"objective.{k}" for k, (kn, _) in all_knobs().items() if kn.base_type is bool)})


def test_the_sweep_finds_the_booleans_of_every_section():
    sections = {k.split(".")[0] for k in KEYS}
    assert {"model", "warm_start", "rollout", "train", "tracking", "objective"} <= sections
    assert {"objective.use_adaptive_entropy", "objective.dynamic_sampling", "train.tf32", "tracking.mlflow"} <= set(
        KEYS
    )


@pytest.mark.parametrize("value", ["'yes'", "'true'", "1"])
@pytest.mark.parametrize("key", KEYS)
def test_a_boolean_key_refuses_a_string_or_a_number(key, value):
    with pytest.raises(ConfigError) as err:
        load_config(SMOKE, [f"{key}={value}"])
    msg = str(err.value)
    assert f"'{key}': Input should be a valid boolean: true or false" in msg, msg


@pytest.mark.parametrize("key", KEYS)
def test_a_boolean_key_takes_true_and_false(key):
    """The refusal is of the type only: each key still takes a YAML boolean (where its rules allow it)."""
    for value in ("true", "false"):
        try:
            load_config(SMOKE, [f"{key}={value}"])
        except ConfigError as err:
            assert "valid boolean" not in str(err), str(err)
