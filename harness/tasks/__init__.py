"""Verifiable-reward tasks: a registry and a fail-loud factory.

    task = make_task("countdown", difficulty_mix={"easy": 1, "hard": 1}, format_weight=0.1)
    problems = task.problems(64, seed=0, split="train")
    text = task.demonstration(problems[0], random.Random(0))        # SFT target
    reward = task.score(problems[0], completion, truncated=False)   # RewardBreakdown

See common.py for the answer line, reward and split rules, and each task module for its
formats, difficulty buckets and the length regime it is designed to create.
"""
from __future__ import annotations

import inspect

from harness.tasks.arithmetic import ArithmeticTask
from harness.tasks.base import Problem, RewardBreakdown, Task
from harness.tasks.countdown import CountdownTask

TASKS: dict[str, type[Task]] = {"arithmetic": ArithmeticTask, "countdown": CountdownTask}


def task_kwargs(name: str) -> tuple[str, ...]:
    """The constructor knobs of task `name`."""
    params = inspect.signature(_lookup(name).__init__).parameters
    return tuple(p for p in params if p != "self")


def make_task(name: str, **kwargs) -> Task:
    """Build a registered task; unknown names and knobs are ValueErrors listing the allowed ones."""
    allowed = task_kwargs(name)
    for key in kwargs:
        if key not in allowed:
            raise ValueError(f"unknown argument {key!r} for task {name!r}; allowed: {', '.join(allowed)}")
    return TASKS[name](**kwargs)


def _lookup(name: str) -> type[Task]:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; allowed: {', '.join(TASKS)}")
    return TASKS[name]


__all__ = ["TASKS", "ArithmeticTask", "CountdownTask", "Problem", "RewardBreakdown", "Task",
           "make_task", "task_kwargs"]
