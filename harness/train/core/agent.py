"""The run's multi-turn rollouts: task.tools or task.environment turn the backend into a TurnsBackend.

    backend = multi_turn(cfg, make_backend(cfg.rollout, policy, tok), tok, policy)   # itself without either

Each rollout row opens a session (`Sessions`): the task's tools (harness/tasks/tools/session.py; one ToolRunner
shared by every row) or one instance of the researcher's environment class (harness/tasks/environment.py).
Its first message is rendered as a single-turn prompt is (model.prompt_suffix, a dataset's system prompt),
with the tools' JSON schemas in the chat template where it renders them (the hermes format), or their plain
description opening the message (the plain format: harness/tasks/tools/render.py tool_format). The loop, the
masks and the tokenisation are harness/rollout/turns.py's.
"""

from __future__ import annotations

from dataclasses import replace

from harness.models.registry import render_problem
from harness.rollout.base import RolloutBackend
from harness.rollout.turns import TurnsBackend
from harness.tasks.environment import EnvSession, load_environment
from harness.tasks.tools import TAGS, ObservationRender, ToolRunner, ToolSession, load_tools, schemas, tool_format


def with_first_message(problem, text: str):
    """The problem with its (last) user message replaced by a session's first message."""
    meta = dict(getattr(problem, "meta", None) or {})
    messages = meta.get("messages")
    if messages:
        last = max(i for i, m in enumerate(messages) if m["role"] == "user")
        meta["messages"] = [dict(m, content=text) if i == last else m for i, m in enumerate(messages)]
    return replace(problem, prompt=text, meta=meta)


class Sessions:
    """problem -> (a new session, its first message's prompt ids); close() ends the tools' worker processes."""

    def __init__(self, cfg, tokenizer):
        t = cfg.task
        self.tok, self.suffix, self.runner, self.cls = tokenizer, cfg.model.prompt_suffix, None, None
        self.fmt = tool_format(tokenizer)
        self.tools = None  # the JSON schemas the chat template renders (hermes)
        if t.environment:
            self.cls, self.spec = load_environment(t.environment), t.environment
        else:
            tools = load_tools(list(t.tools))
            self.runner = ToolRunner(tools, t.tool_timeout, t.tool_workers)
            self.tools = schemas(tools) if self.fmt == "hermes" else None

    def __call__(self, problem):
        session = ToolSession(self.runner, self.fmt) if self.runner is not None else EnvSession(self.cls, self.spec)
        first = session.reset(problem)
        return session, render_problem(self.tok, with_first_message(problem, first), self.suffix, tools=self.tools)

    @property
    def stop(self) -> tuple[str, ...]:
        """The plain format's closing tag ends a tool-calling turn (hermes models end theirs with EOS)."""
        return (TAGS["plain"][1],) if self.runner is not None and self.fmt == "plain" else ()

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()


class AgentBackend(TurnsBackend):
    """TurnsBackend that also ends its sessions' worker processes on close."""

    def close(self) -> None:
        self.start.close()
        super().close()


def multi_turn(cfg, backend: RolloutBackend, tokenizer, model=None) -> RolloutBackend:
    """`backend` as the run's task needs it: turn after turn with task.tools or task.environment, else itself."""
    t = cfg.task
    if not t.tools and not t.environment:
        return backend
    sessions = Sessions(cfg, tokenizer)
    observe = ObservationRender(tokenizer, sessions.tools, cfg.rollout.max_tool_tokens, sessions.fmt)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    positions = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return AgentBackend(
        backend, sessions, observe, cfg.rollout.max_turns, pad_id, tokenizer, sessions.stop, max_context=positions
    )


class ToolPrompts:
    """A task whose problems' prompts are their tool sessions' first messages (the plain format's description of
    the tools, then the prompt): what the SFT warm start of a task.tools run trains on, so that it sees the
    prompts the rollouts do (harness/train/run/warmstart.py). Everything else is the task's."""

    def __init__(self, task, sessions: Sessions):
        self.task, self.sessions = task, sessions

    def problems(self, *args, **kwargs) -> list:
        return [self._opened(p) for p in self.task.problems(*args, **kwargs)]

    def _opened(self, problem):
        return with_first_message(problem, ToolSession(self.sessions.runner, self.sessions.fmt).reset(problem))

    def __getattr__(self, name: str):
        return getattr(self.task, name)


def tool_prompts(task, cfg, tokenizer):
    """`task` as the warm start of a task.tools run sees it (ToolPrompts); itself without tools."""
    return ToolPrompts(task, Sessions(cfg, tokenizer)) if cfg.task.tools else task
