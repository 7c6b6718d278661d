"""One way to register: every built-in mode and preset is declared with the calls a plugin
uses (register_baseline, ..., register_preset; docs/extending.md), in the module of its function, and no
module of the package imports a name only so that something registers."""

import re
from pathlib import Path

from harness.objective.modes import BUILTIN, DECLARED, KINDS, Mode, Modes
from harness.objective.presets import BUILTIN_PRESETS, PRESET_DECLARED, PRESET_ORIGINS, PRESETS

HARNESS = Path(__file__).resolve().parents[2] / "harness"


def undeclared_builtins() -> list[str]:
    """The package's modes not declared through `register` in the module of their function."""
    out = []
    for kind, reg in KINDS.items():
        for name, mode in reg.modes.items():
            if mode.origin != BUILTIN:
                continue
            where = DECLARED.get((kind, name))
            if where is None:
                out.append(f"{kind} {name!r}: not declared with register(...) (a Mode entry or Modes.register)")
            elif where[0] != where[1] or not where[0].startswith("harness.objective."):
                out.append(f"{kind} {name!r}: declared in {where[0]}, its function is in {where[1]}")
    return out


def test_every_builtin_mode_is_declared_by_the_plugin_decorator_beside_its_function():
    assert undeclared_builtins() == []


def test_a_mode_entered_any_other_way_is_caught():
    probe = Modes("probe_kind", {"entry": Mode(lambda cfg: True, "a dict entry, as built-ins were declared")})
    try:
        assert undeclared_builtins() == [
            "probe_kind 'entry': not declared with register(...) (a Mode entry or Modes.register)"
        ]
    finally:
        del KINDS[probe.kind]


def test_a_declaration_away_from_its_function_is_caught():
    DECLARED[("baseline", "group_mean")], was = (
        ("harness.objective.config", "harness.objective.advantages"),
        DECLARED[("baseline", "group_mean")],
    )
    try:
        assert undeclared_builtins() == [
            "baseline 'group_mean': declared in harness.objective.config, its function is in "
            "harness.objective.advantages"
        ]
    finally:
        DECLARED[("baseline", "group_mean")] = was


def test_every_builtin_preset_is_a_register_preset_call_in_presets_py():
    assert BUILTIN_PRESETS and set(BUILTIN_PRESETS) <= set(PRESETS)
    assert {PRESET_DECLARED.get(p) for p in BUILTIN_PRESETS} == {"harness.objective.presets"}
    assert {PRESET_ORIGINS[p] for p in BUILTIN_PRESETS} == {BUILTIN}


def imports_kept_only_by_noqa() -> list[str]:
    """Lines under harness/ that import a name the module never uses, kept by `noqa: F401` (an import
    made only so that a module registers something is one)."""
    out = []
    for path in sorted(HARNESS.rglob("*.py")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(r"\s*(from\s+\S+\s+)?import\s", line) and re.search(r"noqa:[^#]*\bF401\b", line):
                out.append(f"{path.relative_to(HARNESS.parent)}:{i}: {line.strip()}")
    return out


def test_no_module_imports_a_name_it_never_uses():
    assert imports_kept_only_by_noqa() == []
