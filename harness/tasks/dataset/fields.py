"""Fields of a dataset row: dotted paths, prompt templates, chat-message prompts.

get_field(row, "reward_model.ground_truth")   # nested dicts (verl's parquet); "answers.0": a list element
render_template("{question}\\nOptions: {choices}", row)   # {dotted.path} placeholders; lists one item a line
as_messages(row["prompt"])    # a list of {role, content} (verl, TRL conversational) -> messages, else None
"""

from __future__ import annotations

import string
from typing import Any

_MISSING = object()
_MAX_WIDTH = 10_000  # a format spec's padding, in characters (a 10**11 width asks for 100 GB a row)
ROLES = ("system", "user", "assistant")


def lookup(row: Any, path: str) -> Any:
    """The value at a dotted path, or _MISSING."""
    node = row
    for part in path.split("."):
        if isinstance(node, dict):
            node = node.get(part, _MISSING)
        elif isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def missing_field(row: dict, path: str, columns: list[str]) -> str | None:
    """Why `path` is not in `row` (None: it is): names the level that is missing and what is there."""
    node, walked = row, []
    for part in path.split("."):
        here = ".".join(walked) or "the row"
        if isinstance(node, dict):
            if part not in node:
                keys = columns if not walked else sorted(node)
                what = "columns" if not walked else f"keys of {here}"
                return f"no field {part!r}{'' if not walked else ' in ' + here}; its {what}: {keys}"
            node = node[part]
        elif isinstance(node, list):
            if not (part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node)):
                return f"{here} is a list of {len(node)}; name an element by its index ({here}.0)"
            node = node[int(part)]
        else:
            return f"{here} is a {type(node).__name__}, not a mapping with {part!r}"
        walked.append(part)
    return None


def get_field(row: dict, path: str) -> Any:
    value = lookup(row, path)
    if value is _MISSING:
        raise KeyError(path)
    return value


def template_fields(template: str) -> list[str]:
    """The dotted paths a template reads; ValueError for a malformed one."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as err:
        raise ValueError(
            f"is not a valid template ({err}); write fields as {{name}} and a literal brace as {{{{ }}}}"
        ) from None
    fields = [name for _, name, _, _ in parts if name is not None]
    for _, name, spec, conversion in parts:
        if name:
            _check_spec(name, spec, conversion)
    if any(not f for f in fields):
        raise ValueError("has an empty {} placeholder; name a field, e.g. {question}")
    if not fields:
        raise ValueError("names no field; write fields as {name}, e.g. '{question}'")
    return fields


def _check_spec(name: str, spec: str, conversion: str | None) -> None:
    """A placeholder's conversion and format spec must apply to text (every field is formatted as text)."""
    if conversion not in (None, "s", "r", "a"):
        raise ValueError(f"has {{{name}!{conversion}}}: allowed conversions are !s, !r and !a (or none)")
    try:
        width = len(format("text", spec))
    except (ValueError, TypeError, OverflowError, MemoryError) as err:
        why = str(err) or type(err).__name__  # MemoryError: no message
        raise ValueError(
            f"has {{{name}:{spec}}}, whose format spec does not apply to text ({why}); every "
            f"field is formatted as text: write a string spec such as {{{name}:.200}} or {{{name}:>10}}, or none"
        ) from None
    if width > _MAX_WIDTH:
        raise ValueError(f"has {{{name}:{spec}}}, which pads a field to {width} characters; allowed: <= {_MAX_WIDTH}")


def as_text(value: Any) -> str:
    """A field's value as prompt text: strings as they are, lists one item a line, None as ''."""
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(as_text(v) for v in value)
    return str(value)


def render_template(template: str, row: dict) -> str:
    out = []
    formatter = string.Formatter()
    for literal, name, spec, conversion in formatter.parse(template):
        out.append(literal)
        if name is not None:
            value = formatter.convert_field(as_text(get_field(row, name)), conversion)
            out.append(format(value, spec) if spec else value)
    return "".join(out)


def as_messages(value: Any) -> list[dict] | None:
    """A list of chat messages ({role, content} with a known role and text content) as plain dicts,
    None if `value` is not one. ValueError for a list of dicts that is almost one."""
    if not isinstance(value, list) or not value or not all(isinstance(m, dict) for m in value):
        return None
    out = []
    for i, m in enumerate(value):
        role, content = m.get("role"), m.get("content")
        if role not in ROLES or not isinstance(content, str):
            raise ValueError(f"message {i} is {m!r}; a chat message is {{role: system|user|assistant, content: text}}")
        out.append({"role": role, "content": content})
    return out
