"""Tools and environments of a researcher's, for the multi-turn tests (imported by name: tests.tasks.user_tools)."""

from __future__ import annotations

import os
import sys
import time


def add(a: int, b: int) -> str:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return str(a + b)


def echo(text: str) -> str:
    """Say it back.

    Args:
        text: what to say
    """
    return text


def boom(x: int) -> str:
    """Raise.

    Args:
        x: anything
    """
    raise ZeroDivisionError("no")


def hang(x: int) -> str:
    """Sleep for a long time.

    Args:
        x: anything
    """
    time.sleep(30)
    return "late"


def leave(x: int) -> str:
    """sys.exit.

    Args:
        x: anything
    """
    sys.exit(3)


def hard_exit(x: int) -> str:
    """os._exit.

    Args:
        x: anything
    """
    os._exit(4)


def suicide(x: int) -> str:
    """Kill its own process.

    Args:
        x: anything
    """
    os.kill(os.getpid(), 9)
    return "never"


def number(x: int) -> int:
    """Return an int, not a string.

    Args:
        x: anything
    """
    return x


def no_hints(x):
    """No type hint.

    Args:
        x: anything
    """
    return str(x)


def no_doc(x: int) -> str:
    return str(x)


class Guess:
    """Guess the answer: each wrong turn is told 'higher' or 'lower'; a right one ends with reward 1."""

    def reset(self, problem) -> str:
        self.answer = int(problem.answer)
        return f"Guess a number. {problem.prompt}"

    def step(self, text: str):
        try:
            value = int(text.strip().split()[-1])
        except (ValueError, IndexError):
            return "say a number", False
        if value == self.answer:
            return "", True, 1.0
        return ("higher" if value < self.answer else "lower"), False, 0.0


class NoStep:
    def reset(self, problem) -> str:
        return problem.prompt
