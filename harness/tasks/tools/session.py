"""The task's tools as one rollout row's session: the model's turn is read for calls, the calls run, their
answers are the next messages; a turn with no call is the model's answer (the row is done).

    session = ToolSession(runner, "plain")
    first = session.reset(problem)        # the problem's prompt, after the tools' description (plain format)
    reply = session.step(model_text)      # Reply(messages=[{"role": "tool", "content": "408"}], done=False, ...)

Each answer is a "tool" message. hermes: the model's chat template renders it (as it rendered the tools' schemas
in the prompt: harness/train/core/agent.py). plain: it follows as "<result>ANSWER</result>\\n" (render.py), after
a description of the tools (`describe`) that opened the first user message.
"""

from __future__ import annotations

import json

from harness.tasks.environment import Reply
from harness.tasks.tools.parse import TAGS, parse_calls
from harness.tasks.tools.runner import ToolRunner
from harness.tasks.tools.schema import Tool


def describe(tools: list[Tool]) -> str:
    """The plain format's description of the tools, opening the first user message."""
    open_tag, close_tag = TAGS["plain"]
    lines = [f"Tools (call: {open_tag}NAME ARGS{close_tag}; answer: <result>...</result>):"]
    for t in tools:
        f = t.schema["function"]
        args = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in t.parameters.items())
        lines.append(f"{t.name}({args}): {f.get('description', '')}")
    return "\n".join(lines) + "\n"


class ToolSession:
    def __init__(self, runner: ToolRunner, fmt: str):
        self.runner, self.fmt = runner, fmt

    def reset(self, problem) -> str:
        return describe(self.runner.tools) + problem.prompt if self.fmt == "plain" else problem.prompt

    def step(self, text: str) -> Reply:
        calls = parse_calls(text, self.fmt, self.runner.tools)
        if not calls:
            return Reply([], True)
        answers = self.runner.run_many(calls)
        messages = [{"role": "tool", "content": a.text} for a in answers]  # plain: <result>...</result> (render.py)
        return Reply(messages, False, None, len(calls), sum(a.error for a in answers))


def schemas(tools: list[Tool]) -> list[dict]:
    """The tools' JSON schemas, as apply_chat_template(tools=...) takes them."""
    return [json.loads(json.dumps(t.schema)) for t in tools]
