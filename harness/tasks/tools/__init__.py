"""A task's tools (`task.tools: [module.path:function, ...]`): the researcher's typed functions the model calls.

schema.py   import by name, the JSON schema from type hints + docstring (transformers' get_json_schema)
parse.py    calls read from the model's text: hermes <tool_call>{json}</tool_call>, or plain <call>NAME ARGS</call>
runner.py   each call under a time limit, in this process or worker processes; every failure an answer
session.py  one rollout row's session: calls parsed, run, answered (harness/rollout/turns.py drives it)
render.py   the tool format a tokenizer takes, and the tokens of the messages that follow a model's turn
"""

from harness.tasks.tools.parse import FORMATS, TAGS, BadCall, Call, parse_calls
from harness.tasks.tools.render import ObservationRender, tool_format
from harness.tasks.tools.runner import ToolAnswer, ToolRunner
from harness.tasks.tools.schema import Tool, load_tools
from harness.tasks.tools.session import ToolSession, describe, schemas

__all__ = [
    "FORMATS",
    "TAGS",
    "BadCall",
    "Call",
    "ObservationRender",
    "Tool",
    "ToolAnswer",
    "ToolRunner",
    "ToolSession",
    "describe",
    "load_tools",
    "parse_calls",
    "schemas",
    "tool_format",
]
