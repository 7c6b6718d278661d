"""Tool calls read from the model's text, in one of two formats (FORMATS):

    hermes  <tool_call>{"name": "calculator", "arguments": {"expression": "12*34"}}</tool_call>
            (the format of the chat templates that render tools: Qwen2.5, Hermes; TRL's and verl's parser)
    plain   <call>calculator 12*34</call>   or   <call>calculator {"expression": "12*34"}</call>
            (for a model whose chat template renders no tools, such as the character model: after the tool's
            name, a JSON object of arguments, or the text of a tool's only argument)

    calls = parse_calls(text, "plain", tools)   # [Call(name, arguments) | BadCall(text, reason), ...]

A call that does not parse (not JSON, no name, no closing tag, unknown tool, an argument of the wrong type) is
a BadCall: the model reads its reason back as the tool's answer, and it counts as a tool error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.tasks.tools.schema import Tool

FORMATS = ("hermes", "plain")
TAGS = {"hermes": ("<tool_call>", "</tool_call>"), "plain": ("<call>", "</call>")}
_CASTS = {"string": str, "integer": int, "number": float}


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict


@dataclass(frozen=True)
class BadCall:
    text: str  # what the model wrote between the tags (or after the opening one)
    reason: str


def parse_calls(text: str, fmt: str, tools: list[Tool]) -> list[Call | BadCall]:
    """Every call in `text`, in order; [] when it has none (the model's turn is its answer)."""
    open_tag, close_tag = TAGS[fmt]
    found: list[Call | BadCall] = []
    pos = text.find(open_tag)
    while pos >= 0:
        start = pos + len(open_tag)
        end = text.find(close_tag, start)
        if end < 0:
            found.append(BadCall(text[start:], f"no closing {close_tag}"))
            break
        body = text[start:end].strip()
        found.append(_hermes(body) if fmt == "hermes" else _plain(body))
        pos = text.find(open_tag, end + len(close_tag))
    by_name = {t.name: t for t in tools}
    return [_checked(c, by_name) for c in found]


def _hermes(body: str) -> Call | BadCall:
    """{"name": str, "arguments": {...} or a JSON string of one}."""
    try:
        value = json.loads(body)
    except json.JSONDecodeError as err:
        return BadCall(body, f"not JSON ({err.msg})")
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return BadCall(body, 'not {"name": ..., "arguments": {...}}')
    args = value.get("arguments", {})
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return BadCall(body, "arguments are not a JSON object")
    if not isinstance(args, dict):
        return BadCall(body, "arguments are not a JSON object")
    return Call(value["name"], args)


def _plain(body: str) -> Call | BadCall:
    """NAME, then a JSON object of arguments or the text of the tool's only argument (read by _checked)."""
    name, _, rest = body.partition(" ")
    if not name:
        return BadCall(body, "no tool name")
    rest = rest.strip()
    if rest.startswith("{"):
        try:
            args = json.loads(rest)
        except json.JSONDecodeError as err:
            return BadCall(body, f"arguments are not JSON ({err.msg})")
        if isinstance(args, dict):
            return Call(name, args)
    return Call(name, {"": rest})  # the text of the only argument: named by _checked


def _checked(call: Call | BadCall, tools: dict[str, Tool]) -> Call | BadCall:
    """A call of a known tool with the arguments its schema names, each of its type where it can be cast."""
    if isinstance(call, BadCall):
        return call
    tool = tools.get(call.name)
    text = json.dumps({"name": call.name, "arguments": call.arguments})
    if tool is None:
        return BadCall(text, f"unknown tool {call.name!r}; the tools: {sorted(tools)}")
    params, args = tool.parameters, dict(call.arguments)
    if "" in args:  # plain format, bare text: the tool's only argument
        if len(params) != 1:
            return BadCall(text, f"{call.name} takes {len(params)} arguments: give them as a JSON object")
        args = {next(iter(params)): args.pop("")}
    unknown = sorted(set(args) - set(params))
    missing = sorted(set(tool.schema["function"]["parameters"].get("required", [])) - set(args))
    if unknown or missing:
        return BadCall(text, f"{call.name} takes {sorted(params)}; unknown: {unknown}, missing: {missing}")
    for key, value in args.items():
        cast = _CASTS.get(params[key].get("type"))
        if cast is not None and isinstance(value, str) and cast is not str:
            try:
                args[key] = cast(value.strip())
            except ValueError:
                return BadCall(text, f"{key}={value!r} is not a {params[key]['type']}")
    return Call(call.name, args)
