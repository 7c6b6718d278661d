"""Each mode name is defined once (harness/objective/modes.py): the registry of its knob drives the
config's validation, the dispatch and what docs/objective.md must list (its two tables are generated
from the declarations: harness/objective/explain.py)."""

import re
import typing
from pathlib import Path

import pytest

from harness.config import ConfigError, load_config
from harness.objective import MODE_KNOBS, ObjectiveConfig, register_baseline
from harness.objective.explain import knob_table, rules_table
from harness.objective.modes import KINDS, Mode, Modes

DOCS = Path("docs/objective.md").read_text()


def _glance_row(knob: str) -> str:
    """The row of docs/objective.md's "Every knob at a glance" table whose first cell names `knob`."""
    table = DOCS.split("### Every knob at a glance", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("|") and f"`{knob}`" in line.split("|")[1]]
    assert len(rows) == 1, f"{knob}: {len(rows)} rows in the knob table"
    return rows[0]


@pytest.mark.parametrize("knob", sorted(MODE_KNOBS))
def test_every_registered_mode_is_in_the_docs_knob_table(knob):
    values = "|".join(_glance_row(knob).split("|")[2:])
    for name in MODE_KNOBS[knob].builtin_names():
        assert f"`{name}`" in values, f"docs/objective.md: mode {name!r} of {knob!r} missing from the knob table"


@pytest.mark.parametrize("knob", sorted(MODE_KNOBS))
def test_the_docs_list_no_mode_the_registry_lacks(knob):
    values = "|".join(_glance_row(knob).split("|")[2:])
    listed = set(re.findall(r"`([a-z0-9_]+)`", values))
    have = set(MODE_KNOBS[knob].builtin_names())
    assert listed <= have, f"{knob}: documented but not registered: {listed - have}"


def test_the_config_validates_mode_knobs_against_the_registries():
    """No frozen Literal: a mode registered after import is accepted at once, and gone once removed."""
    for name, field in ObjectiveConfig.model_fields.items():
        assert typing.get_origin(field.annotation) is not typing.Literal, f"{name}: a frozen Literal"
    assert set(MODE_KNOBS) <= set(ObjectiveConfig.model_fields)

    @register_baseline("registry_probe", doc="b = 0, registered by a test")
    def _probe(rewards, cfg):
        return rewards.clone()

    try:
        assert ObjectiveConfig(baseline="registry_probe", scale="none").baseline == "registry_probe"
    finally:
        MODE_KNOBS["baseline"].unregister("registry_probe")
    with pytest.raises(ValueError, match="unknown baseline 'registry_probe'"):
        ObjectiveConfig(baseline="registry_probe")


def _generated(marker: str) -> str:
    return DOCS.split(f"<!-- {marker}: generated -->\n", 1)[1].split(f"\n<!-- end of the {marker} -->", 1)[0]


def test_the_docs_tables_are_the_declarations():
    """docs/objective.md's knob and rules tables are what `python -m harness.objective.explain` prints."""
    assert _generated("knob table") == knob_table(), "regenerate: python -m harness.objective.explain"
    assert _generated("rules table") == rules_table(), "regenerate: python -m harness.objective.explain"


@pytest.mark.parametrize("knob", sorted(MODE_KNOBS))
def test_unknown_mode_is_a_config_error_naming_key_value_and_allowed(knob):
    with pytest.raises(ConfigError) as e:
        load_config("experiments/runs/smoke.yaml", [f"objective.{knob}=bogus_mode"])
    msg = str(e.value)
    assert f"objective.{knob}" in msg and "'bogus_mode'" in msg, msg
    for name in MODE_KNOBS[knob]:
        assert f"'{name}'" in msg, (name, msg)


@pytest.mark.parametrize("knob", sorted(MODE_KNOBS))
def test_dispatch_of_an_unknown_mode_names_knob_value_and_allowed(knob):
    reg = MODE_KNOBS[knob]
    with pytest.raises(ValueError) as e:
        reg["bogus_mode"]
    msg = str(e.value)
    assert knob in msg and "'bogus_mode'" in msg and all(f"'{n}'" in msg for n in reg)


def test_every_mode_has_a_doc_line():
    for knob, reg in MODE_KNOBS.items():
        for name in reg:
            doc = reg.doc(name)
            assert doc and "\n" not in doc, (knob, name)


def test_a_registry_is_one_definition_of_names_impls_and_literal():
    reg = Modes("colour", {"red": Mode(1, "warm"), "blue": Mode(2, "cold")})
    try:
        assert reg.names == ("red", "blue") and list(reg) == ["red", "blue"] and len(reg) == 2
        assert reg["blue"] == 2 and "red" in reg and "green" not in reg
        assert typing.get_args(reg.literal) == ("red", "blue")
        assert reg.describe() == "- `red`: warm\n- `blue`: cold"
        assert reg.check("red") == "red"
        with pytest.raises(ValueError, match=r"unknown colour 'green'; allowed colour values: \['red', 'blue'\]"):
            reg.check("green")
    finally:
        del KINDS["colour"]  # a registry joins KINDS: leave none behind (test_one_way_to_register reads them all)
    shade = Modes("shade")  # a registry starts empty: the decorators of its modules fill it (modes.register)
    try:
        assert len(shade) == 0 and KINDS["shade"] is shade
    finally:
        del KINDS["shade"]


def test_every_builtin_preset_holds_only_declared_knobs_and_allowed_values():
    """A preset is checked against the declarations (register_preset does it for a researcher's own)."""
    from harness.objective import PRESETS
    from harness.objective.mode_registries import check_knob_values
    from harness.objective.presets import BUILTIN_PRESETS

    for name in BUILTIN_PRESETS:
        check_knob_values(PRESETS[name], f"preset {name!r}")
    with pytest.raises(ValueError, match="preset 'x': sapo_tau_pos: Input should be greater than 0"):
        check_knob_values({"sapo_tau_pos": -1.0}, "preset 'x'")
    with pytest.raises(ValueError, match="preset 'x': unknown clip 'tanh'"):
        check_knob_values({"clip": "tanh"}, "preset 'x'")
