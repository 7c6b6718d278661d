"""The rules of multi-turn rollouts (task.tools, task.environment, rollout.max_turns, rollout.max_tool_tokens):
each tool imports and has its schema, the environment class has reset and step, and the run is one that rolls
out turn after turn (the RL trainer on the hf backend, one process). Checked before any model loads."""

from __future__ import annotations

from typing import Any

from harness.config.base import field_default
from harness.config.rollout import RolloutSection
from harness.config.task import TaskSection
from harness.tasks.environment import load_environment
from harness.tasks.tools import load_tools

TURN_KEYS = (
    ("rollout", "max_turns"),
    ("rollout", "max_tool_tokens"),
    ("task", "tool_timeout"),
    ("task", "tool_workers"),
)
DEFAULTS = {"rollout": RolloutSection, "task": TaskSection}


def check_multi_turn(run: Any) -> None:
    """task.tools / task.environment: importable and well-formed, not both, with a trainer and backend that roll
    out turns; their knobs unset without them."""
    t = run.task
    if not t.tools and not t.environment:
        changed = [f"{s}.{k}" for s, k in TURN_KEYS if getattr(getattr(run, s), k) != field_default(DEFAULTS[s], k)]
        if changed:
            raise ValueError(
                f"{', '.join(changed)}: a knob of multi-turn rollouts, which only task.tools or task.environment "
                "start; drop it, or set one of those"
            )
        return
    if t.tools and t.environment:
        raise ValueError(
            f"task.tools={list(t.tools)} with task.environment={t.environment!r}: give one (an environment calls "
            "its own tools)"
        )
    key = "task.tools" if t.tools else "task.environment"
    if run.trainer != "rl":
        raise ValueError(f"{key} with trainer={run.trainer!r}: multi-turn rollouts train with the RL trainer only")
    if run.rollout.backend != "hf":
        raise ValueError(f"{key} with rollout.backend={run.rollout.backend!r}: multi-turn rollouts run on hf only")
    if run.train.nproc > 1:
        raise ValueError(f"{key} with train.nproc={run.train.nproc}: multi-turn rollouts run on one process")
    if t.tools:
        load_tools(list(t.tools))  # ValueError naming task.tools[i]
    else:
        try:
            load_environment(t.environment)
        except ValueError as err:
            raise ValueError(f"task.environment={err}") from None
