"""Every option has a description: `harness config --explain` prints one under every key, and
no option of any config section is left without one (the nested sections, such as `model.lora`
and `task.data`, which --explain prints as one value, included)."""

import pytest
from pydantic import BaseModel

from harness.config import RunConfig, _Section, explain_config, load_config
from harness.objective.explain import knob_rows


def _sections(cls=_Section) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_sections(sub)]
    return out


def _options() -> list[tuple[str, str]]:
    """(section class, option) for every option that is a value, not a section of its own."""
    rows = []
    for cls in _sections():
        for name, field in cls.model_fields.items():
            kind = field.annotation
            if not (isinstance(kind, type) and issubclass(kind, BaseModel)):
                rows.append((cls.__name__, name))
    return rows


OPTIONS = _options()


def test_the_options_are_found():
    names = {f"{c}.{o}" for c, o in OPTIONS}
    assert {"RolloutSection.temperature", "TrainSection.lr", "EvalSection.ks", "LoraSection.alpha"} <= names
    assert "RunConfig.model" not in names  # a section, whose options are listed one by one


@pytest.mark.parametrize("section, option", OPTIONS)
def test_every_option_has_a_description(section, option):
    cls = next(c for c in _sections() if c.__name__ == section)
    assert (cls.model_fields[option].description or "").strip(), f"{section}.{option} has no description"


@pytest.mark.parametrize("name", [r.name for r in knob_rows()])
def test_every_objective_knob_has_a_description(name):
    assert next(r for r in knob_rows() if r.name == name).doc.strip(), f"objective.{name} has no description"


@pytest.mark.parametrize("config", ["experiments/runs/smoke.yaml", "experiments/runs/dpo.yaml", None])
def test_explain_prints_no_option_without_a_description(config):
    cfg = load_config(config) if config else RunConfig()
    text = explain_config(cfg)
    assert "rollout.temperature:" in text and "eval.ks:" in text
    assert "(no description)" not in text, [ln for ln in text.splitlines() if "no description" in ln]
