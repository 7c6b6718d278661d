"""Reward functions of the user's own: `module.path:function`, imported by name.

Contract (docs/tasks.md "Your own reward function"):

    def my_reward(prompt: str, completion: str, answer: str, row: dict) -> float | dict:
        ...

prompt: the problem's prompt text (its last user message for a chat-messages prompt), without
the model's template; completion: the model's text (special tokens stripped); answer: the row's
answer field as text; row: every field of the dataset row (nested fields as dicts). It returns
a number (the reward; "correct" when > 0) or a dict {"reward": number, "correct": bool} (the
"correct" key optional). It is called for truncated completions too; a truncated completion is
never correct whatever it returns. It runs under the task's per-completion time limit
(task.reward_timeout) and, with task.reward_workers > 0, in worker processes (it must then be
importable there: a module on sys.path, not a lambda or a function defined in __main__).

A function that raises, exits (sys.exit, os._exit), or returns something else, stops the run with
one line naming the function, the row and the completion (`RewardFunctionError`): never a silent 0.
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
from collections.abc import Callable
from typing import Any

from harness.faults import RunFault
from harness.user_exits import CalledOsExit, no_os_exit, what_it_did

PARAMS = ("prompt", "completion", "answer", "row")


class RewardFunctionError(RunFault):
    """A user reward function raised or returned something that is not a reward (exit status 1)."""


def load_function(spec: str) -> Callable:
    """`module.path:function` -> the function; ValueError (one line) when it does not import or fit."""
    fn = import_named(spec, "function", "my_rewards:brevity")
    if not callable(fn):
        raise ValueError(f"{spec!r} is a {type(fn).__name__}, not a function")
    check_signature(fn, spec)
    return fn


def import_named(spec: str, kind: str, example: str) -> Any:
    """`module.path:attr` -> the module's attribute, imported by name (reward functions, tools, environments);
    ValueError (one line) when the spec is malformed, the module does not import, or has no such attribute."""
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise ValueError(f"{spec!r} must look like module.path:{kind} (e.g. {example})")
    module_name, attr = spec.split(":")
    try:
        with no_os_exit():  # os._exit on import would end the harness silently (exits.py)
            module = importlib.import_module(module_name)
    except (Exception, SystemExit, CalledOsExit) as err:  # noqa: BLE001 -- any import failure is the user's to fix
        reason = f"{type(err).__name__}: {' '.join(str(err).split())}"
        if isinstance(err, (SystemExit, CalledOsExit)):
            reason = f"it {what_it_did(err)} on import"
        raise ValueError(
            f"{spec!r}: module {module_name!r} does not import ({reason}); is it on sys.path (PYTHONPATH)?"
        ) from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
            raise ValueError(f"{spec!r}: module {module_name!r} has no {attr!r}; its callables: {names}")
        obj = getattr(obj, part)
    return obj


def check_signature(fn: Callable, spec: str) -> None:
    """fn must accept (prompt, completion, answer, row), positionally."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin without a signature: the first call tells
    try:
        sig.bind("prompt", "completion", "answer", {})
    except TypeError:
        raise ValueError(
            f"{spec!r} has signature {fn.__name__}{sig}; a reward function takes "
            f"({', '.join(PARAMS)}) -> float or {{'reward': float, 'correct': bool}}"
        ) from None


def read_result(value: Any) -> tuple[float, bool | None]:
    """A function's return value -> (reward, correct or None); ValueError saying what is wrong."""
    correct = None
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"reward", "correct"})
        if "reward" not in value or unknown:
            raise ValueError(f"returned a dict with keys {sorted(value)}; allowed: 'reward' (required) and 'correct'")
        correct = value.get("correct")
        if correct is not None and not isinstance(correct, bool):
            raise ValueError(f"returned correct={correct!r}; it must be true or false")
        value = value["reward"]
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, numbers.Real):
        raise ValueError(
            f"returned {value!r} (a {type(value).__name__}); allowed: a number, or a dict "
            "{'reward': number, 'correct': bool}"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"returned {value} (not finite)")
    return value, correct
