"""Environments of the researcher's own (`task.environment: module.path:Class`): one instance a rollout row.

    class Guess:                                # docs/tasks.md, "Tools and environments"
        def reset(self, problem) -> str:        # the first user message
            ...
        def step(self, text: str):              # the model's turn -> (observation, done) or (..., reward)
            ...

`reset(problem)` gets the task's Problem (its prompt, answer, meta) and returns the first user message the
model sees; `step(text)` gets the model's turn (special tokens stripped) and returns (observation, done) or
(observation, done, reward): the observation is the next user message (ignored when done), and a reward (a
number, given at any step; the last one counts) replaces the task's reward of that row. The class is
constructed with no arguments, once a row, in the trainer's process. A method that raises stops the run with
one line naming the environment (EnvironmentError); a tool's failure, by contrast, is the model's to read.
"""

from __future__ import annotations

import inspect
import math
import numbers
from typing import NamedTuple

from harness.faults import RunFault
from harness.tasks.rewards.functions import import_named
from harness.user_exits import CalledOsExit, no_os_exit, what_it_did


class Reply(NamedTuple):
    """A session's answer to one model turn (harness/rollout/turns.py reads it)."""

    messages: list[dict]  # chat messages that follow the model's turn ({"role", "content"}); [] when done
    done: bool
    reward: float | None = None
    calls: int = 0  # tool calls the turn made
    errors: int = 0  # those that failed or did not parse


class EnvironmentError(RunFault):  # noqa: A001 -- the user's environment class failed (exit status 1)
    """A method of the user's environment raised, exited, or returned something else."""


def load_environment(spec: str) -> type:
    """`module.path:Class` -> the class; ValueError (one line) when it does not import or lacks reset/step."""
    cls = import_named(spec, "Class", "my_envs:Guess")
    if not inspect.isclass(cls):
        raise ValueError(f"{spec!r} is a {type(cls).__name__}, not a class")
    missing = [m for m in ("reset", "step") if not callable(getattr(cls, m, None))]
    if missing:
        raise ValueError(
            f"{spec!r} has no {' or '.join(missing)} method; an environment has reset(problem) and step(text)"
        )
    return cls


class EnvSession:
    """One row's environment instance, its replies read into Replies."""

    def __init__(self, cls: type, spec: str):
        self.spec = spec
        self.env = self._call(cls, "constructor")

    def _call(self, fn, what: str, *args):
        try:
            with no_os_exit():
                return fn(*args)
        except (Exception, SystemExit, CalledOsExit) as err:  # noqa: BLE001 -- the user's class: stop, naming it
            raise EnvironmentError(f"environment {self.spec} {what} {what_it_did(err)}") from None

    def reset(self, problem) -> str:
        first = self._call(self.env.reset, "reset", problem)
        if not isinstance(first, str):
            raise EnvironmentError(f"environment {self.spec} reset returned a {type(first).__name__}, not a string")
        return first

    def step(self, text: str) -> Reply:
        out = self._call(self.env.step, "step", text)
        if not isinstance(out, tuple) or len(out) not in (2, 3) or not isinstance(out[0], (str, type(None))):
            raise EnvironmentError(
                f"environment {self.spec} step returned {out!r:.80}; allowed: (observation: str, done: bool) or "
                "(observation, done, reward: number)"
            )
        reward = out[2] if len(out) == 3 else None
        if reward is not None and (not isinstance(reward, numbers.Real) or not math.isfinite(reward)):
            raise EnvironmentError(f"environment {self.spec} step returned reward {reward!r}; allowed: a finite number")
        done = bool(out[1])
        messages = [] if done or not out[0] else [{"role": "user", "content": out[0]}]
        return Reply(messages, done, None if reward is None else float(reward))
