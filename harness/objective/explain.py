"""Every knob of the objective, described from its declaration: `harness config CONFIG --explain`
prints them for a resolved config, and docs/objective.md's knob table is `knob_table()` (a test keeps
the page equal to it, so the page lists exactly what the registries declare).

    python -m harness.objective.explain          # print the two tables docs/objective.md holds
    python -m harness.objective.explain --write  # replace them in docs/objective.md

A row: the knob, what it may hold (a mode knob: its registered modes), its default (the grpo
preset's), when it is read (always, or the modes that own or read it) and its one line of doc.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.objective.config import MODE_KNOBS, ObjectiveConfig, knob_default
from harness.objective.knob_rules import reads, switches, when_text
from harness.objective.modes import BUILTIN, KIND_ORDER, KINDS, all_knobs, readers


@dataclass(frozen=True)
class KnobRow:
    name: str
    values: str  # what it may hold
    default: Any
    when: str  # "always", or the modes that read it
    doc: str


def _schema_range(spec: dict) -> str:
    """'a float >= 0', 'an int >= 1', 'true or false', 'a float > 0 or null' from a JSON schema."""
    options = spec.get("anyOf", [spec])
    nullable = any(o.get("type") == "null" for o in options)
    main = next((o for o in options if o.get("type") != "null"), {})
    words = {
        "number": "a float",
        "integer": "an int",
        "boolean": "true or false",
        "string": "a string",
        "array": "a list of module names",
    }.get(main.get("type", ""), "a value")
    bounds = [
        f"{op} {main[k]:g}"
        for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"))
        if k in main
    ]
    return f"{words} {' and '.join(bounds)}".strip() + (" or null" if nullable else "")


def _modes(kind: str, builtin_only: bool) -> str:
    reg = MODE_KNOBS[kind]
    names = reg.builtin_names() if builtin_only else reg.names
    return ", ".join(f"`{n}`" for n in names)


def _read_when(name: str) -> str:
    if name in switches():
        return (
            "always (it turns on " + ", ".join(n for n, m in KINDS["extension"].modes.items() if m.switch == name) + ")"
        )
    who = readers(name)
    return when_text(who).replace("objective.", "") if who else "always"


def knob_rows(builtin_only: bool = True) -> list[KnobRow]:
    """One row per knob: the config's fields, then the knobs the modes declare (built-in ones only,
    for the docs; a process's plugins' too with builtin_only=False)."""
    props = ObjectiveConfig.model_json_schema()["properties"]
    rows = []
    for name, field in ObjectiveConfig.model_fields.items():
        values = _modes(name, builtin_only) if name in MODE_KNOBS else _schema_range(props[name])
        rows.append(KnobRow(name, values, knob_default(name), _read_when(name), field.description or ""))
    for name, (knob, owners) in all_knobs().items():
        if builtin_only and not any(m.origin == BUILTIN for _, _, m in owners):
            continue
        rows.append(KnobRow(name, knob.range_text(), knob.default, _read_when(name), knob.doc))
    return rows


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def knob_table() -> str:
    """The markdown table docs/objective.md holds under "Every knob at a glance" (generated: edit the
    declarations, then paste `python -m harness.objective.explain`)."""
    lines = ["| knob | values | default | read when | meaning |", "|---|---|---|---|---|"]
    for r in knob_rows():
        doc = r.doc.replace("|", "\\|")
        lines.append(f"| `{r.name}` | {r.values} | `{_show(r.default)}` | {r.when} | {doc} |")
    return "\n".join(lines)


def explain_objective(cfg: ObjectiveConfig) -> list[str]:
    """`harness config --explain`'s objective part: every knob of `cfg` with its value, who reads it,
    whether it is read now, and its doc (two lines each)."""
    out = []
    rows = {r.name: r for r in knob_rows(builtin_only=False)}
    for name in cfg.knob_names():
        r = rows.get(name)
        if r is None:
            continue
        always = r.when.startswith("always")
        now = "read" if always or reads(cfg, name) else "not read now"
        owner = "" if always else f"read with {r.when}; "
        out.append(f"objective.{name}: {_show(getattr(cfg, name))}  [{owner}{now}]")
        out.append(f"    {r.doc}" + (f" -- one of {r.values}" if name in MODE_KNOBS else f" ({r.values})"))
    return out


def rules_table() -> str:
    """The markdown table of the combination rules the built-in modes declare (`requires`, required
    knobs, group sizes): docs/objective.md's "Combinations" table."""
    lines = ["| with | the rule | why |", "|---|---|---|"]
    for kind in KIND_ORDER:
        reg = KINDS.get(kind)
        for mode in reg.modes.values() if reg else ():
            if mode.origin != BUILTIN:
                continue
            when = mode.when.replace("objective.", "")
            for knob in mode.knobs:
                if knob.required:
                    lines.append(
                        f"| {when} | `{knob.name}` is required ({knob.range_text().removesuffix(' or null')}) "
                        f"| {knob.doc} |"
                    )
            for rule in mode.requires:
                allowed = rule.allowed_text or ", ".join(f"`{_show(v)}`" for v in rule.allowed)
                lines.append(f"| {when} | `{rule.knob}`: {allowed} | {rule.why} |")
            if mode.min_group_size > 1:
                lines.append(
                    f"| {when} | `train.group_size` >= {mode.min_group_size} | a group statistic: a group "
                    "of one response is its own mean and has no spread |"
                )
            if mode.group_rule is not None:  # its docstring: "the rule: why"
                rule, _, why = (mode.group_rule.__doc__ or "").strip().partition(": ")
                lines.append(f"| {when} | {rule} | {why} |")
    return "\n".join(lines)


__all__ = ["KnobRow", "knob_rows", "knob_table", "rules_table", "explain_objective", "write_tables"]


def write_tables(doc: str) -> str:
    """`doc` (docs/objective.md's text) with its two generated tables replaced by the declarations' own."""
    for marker, table in (("knob table", knob_table()), ("rules table", rules_table())):
        head, rest = doc.split(f"<!-- {marker}: generated -->\n", 1)
        _, tail = rest.split(f"\n<!-- end of the {marker} -->", 1)
        doc = f"{head}<!-- {marker}: generated -->\n{table}\n<!-- end of the {marker} -->{tail}"
    return doc


if __name__ == "__main__":
    import sys
    from pathlib import Path

    if "--write" in sys.argv[1:]:
        page = Path("docs/objective.md")
        page.write_text(write_tables(page.read_text()))
        print(f"wrote the knob and rules tables of {page}")
    else:
        print("### Every knob at a glance\n")
        print(knob_table())
        print("\n### Combinations\n")
        print(rules_table())
