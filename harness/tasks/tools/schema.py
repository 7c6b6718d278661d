"""A task's tools: the researcher's own typed Python functions, `module.path:function`, imported by name.

    tools = load_tools(["my_tools:calculator"])      # ValueError naming task.tools[i] when one does not fit
    tools[0].schema                                   # the JSON schema the model's chat template renders

Contract (docs/tasks.md, "Tools and environments"): every argument has a type hint, the docstring says what the
tool does and has an `Args:` line for every argument (transformers' own `get_json_schema` reads them, as the
chat templates of the Hub expect), and the tool returns a string (what the model reads back). A tool that
raises, hangs, exits or returns something else is not a crash: the model reads an error message (runner.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.tasks.rewards.functions import import_named


@dataclass(frozen=True)
class Tool:
    """One tool: its `module.path:function` spec, its name (the function's) and its JSON schema."""

    spec: str
    name: str
    schema: dict  # {"type": "function", "function": {"name", "description", "parameters"}}

    @property
    def parameters(self) -> dict:
        """The schema's {argument: {"type": ..., "description": ...}}."""
        return self.schema["function"]["parameters"].get("properties", {})


def tool_function(spec: str) -> Callable:
    """`module.path:function` -> the function (ValueError naming the spec when it does not import)."""
    fn = import_named(spec, "function", "my_tools:calculator")
    if not callable(fn):
        raise ValueError(f"{spec!r} is a {type(fn).__name__}, not a function")
    return fn


def json_schema(fn: Callable, spec: str) -> dict:
    """transformers' `get_json_schema` of the function; ValueError saying what the type hints or the docstring
    lack."""
    from transformers.utils import get_json_schema

    try:
        return get_json_schema(fn)
    except Exception as err:  # noqa: BLE001 -- its TypeHintParsingException, DocstringParsingException
        raise ValueError(
            f"{spec!r}: {' '.join(str(err).split())}; a tool needs a type hint on every argument and a docstring "
            "with an 'Args:' line for each (transformers.utils.get_json_schema)"
        ) from None


def load_tools(specs: list[str]) -> list[Tool]:
    """task.tools -> Tools; ValueError naming task.tools[i] for one that does not import, lacks type hints or a
    docstring, or has the name of another."""
    tools, names = [], {}
    for i, spec in enumerate(specs):
        where = f"task.tools[{i}]"
        try:
            fn = tool_function(spec)
            schema = json_schema(fn, spec)
        except ValueError as err:
            raise ValueError(f"{where}={err}") from None
        name = schema["function"]["name"]
        if name in names:
            raise ValueError(f"{where}={spec!r}: tool name {name!r} is also task.tools[{names[name]}]'s")
        names[name] = i
        tools.append(Tool(spec, name, schema))
    return tools
