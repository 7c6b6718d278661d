"""Countdown: reach a target from given numbers with + - * /, each number used at most once.

Formats (char-level friendly; the model side prepends BOS and appends EOS, no template):
    prompt         "Make 23 from 3 5 4\\n"
    demonstration  "3+5+4=12 no\\n3*5+4=19 no\\n5*4+3=23 yes\\nAnswer: 5*4+3"
The demonstration is a search trace: each line tries one candidate that uses every number
(a left-to-right chain "((a o b) o c) o d" written with minimal parentheses, every
intermediate a positive integer), states its value and "no"/"yes"; the last line is
"Answer: <expression>". The verifier parses the last Answer line with a small
recursive-descent parser (integers, + - * /, parentheses; no unary minus, no eval),
evaluates it exactly with fractions, and accepts it iff it equals the target and uses
each given number at most once (as a multiset). Only the expression counts:
"Answer: 23" is wrong unless 23 is one of the numbers, which the generator never allows.

Difficulty = how many numbers are given, `num_numbers` = (2, 3, 4) for easy/medium/hard,
each uniform in [1, max_number] (default 9); the target is the value of a random chain
over all of them, in [1, max_target] (default 99) and not itself one of the numbers.

Regime (docs/studies.md): the number of rejected tries before the "yes" line is uniform in
[0, max_wrong_tries] (default 4; fewer when a 2-number problem has fewer wrong values or
the budget is full), the tries are random wrong chains with distinct values, and
lines are longer with more numbers, so demonstrations grow with difficulty (means at
defaults: easy ~34, medium ~50, hard ~60 chars, max 95). Because the stopping point in
the demonstrations is spread evenly, the model is meant to learn to stop on
"value == target", not after a fixed count: one that cannot find a solution keeps
trying and rejecting candidates until it truncates (truncated = wrong), one that finds
it stops early, so wrong answers run long (the intent; the training side must check
it). Every demonstration fits max_demo_chars (default 95 = a 96-token budget minus EOS);
wrong tries that would overflow it are dropped.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction

from harness.tasks.base import Problem
from harness.tasks.common import Draft, GeneratedTask, check_int, check_sizes, last_answer_text

_TOKEN = re.compile(r"[0-9]+|[-+*/()]")
_MAX_EXPR_CHARS = 64


def random_chain(numbers: Sequence[int], rng: random.Random) -> tuple[str, int]:
    """A random chain over all `numbers` (random order, random op among the valid ones:
    every intermediate stays a positive integer, no "*1" or "/1") as (expression, value)."""
    order = rng.sample(list(numbers), len(numbers))
    text, value, top = str(order[0]), order[0], ""  # top = outermost operator of `text`
    for x in order[1:]:
        valid = (
            ["+"]
            + (["-"] if value > x else [])
            + (["*"] if x > 1 else [])
            + (["/"] if x > 1 and value % x == 0 else [])
        )
        op = rng.choice(valid)
        if op in "*/" and top in ("+", "-"):
            text = f"({text})"
        text, top = f"{text}{op}{x}", op
        value = {"+": value + x, "-": value - x, "*": value * x, "/": value // x}[op]
    return text, value


def evaluate(expression: str) -> tuple[Fraction, list[int]] | None:
    """(exact value, integer literals) of an expression over + - * / ( ) (spaces allowed
    between tokens), None if malformed, too long or dividing by zero."""
    if len(expression) > _MAX_EXPR_CHARS or _TOKEN.sub("", expression).strip(" \t"):
        return None
    tokens, pos, literals = _TOKEN.findall(expression), 0, []

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos == len(tokens):
            raise ValueError("unexpected end")
        pos += 1
        return tokens[pos - 1]

    def factor() -> Fraction:  # factor := INT | "(" expr ")"
        tok = take()
        if tok.isdigit():
            literals.append(int(tok))
            return Fraction(int(tok))
        if tok == "(":
            value = expr()
            if take() == ")":
                return value
        raise ValueError(tok)

    def term() -> Fraction:  # term := factor (("*" | "/") factor)*
        value = factor()
        while peek() in ("*", "/"):
            op, rhs = take(), factor()
            value = value * rhs if op == "*" else value / rhs
        return value

    def expr() -> Fraction:  # expr := term (("+" | "-") term)*
        value = term()
        while peek() in ("+", "-"):
            op, rhs = take(), term()
            value = value + rhs if op == "+" else value - rhs
        return value

    try:
        value = expr()
    except (ValueError, ZeroDivisionError):
        return None
    return (value, literals) if pos == len(tokens) else None


class CountdownTask(GeneratedTask):
    """Reach the target from the given numbers (difficulty = how many numbers)."""

    name = "countdown"
    default_max_demo_chars = 95

    def __init__(
        self,
        *,
        difficulty_mix: Mapping[str, float] | None = None,
        format_weight: float = 0.0,
        eval_fraction: float = 0.25,
        max_demo_chars: int | None = None,
        num_numbers: Sequence[int] = (2, 3, 4),
        max_number: int = 9,
        max_target: int = 99,
        max_wrong_tries: int = 4,
    ) -> None:
        super().__init__(
            difficulty_mix=difficulty_mix,
            format_weight=format_weight,
            eval_fraction=eval_fraction,
            max_demo_chars=max_demo_chars,
        )
        owner = type(self).__name__
        self.num_numbers = check_sizes(owner, "num_numbers", num_numbers, self.difficulties, 2, 6)
        self.max_number = check_int(owner, "max_number", max_number, 2, 10**4)
        self.max_target = check_int(owner, "max_target", max_target, 2, 10**6)
        self.max_wrong_tries = check_int(owner, "max_wrong_tries", max_wrong_tries, 0, 100)

    def _draw(self, difficulty: str, rng: random.Random) -> Draft | None:
        numbers = [rng.randint(1, self.max_number) for _ in range(self.num_numbers[difficulty])]
        solution, target = random_chain(numbers, rng)
        if not 1 <= target <= self.max_target or target in numbers:
            return None
        meta = {"numbers": numbers, "target": target, "solution": solution}
        if len(_finish(solution, target)) > self.max_demo_chars:
            return None
        return Draft(
            key=f"{sorted(numbers)}->{target}",
            answer=str(target),
            meta=meta,
            prompt=f"Make {target} from {' '.join(map(str, numbers))}\n",
        )

    def demonstration(self, problem: Problem, rng: random.Random) -> str:
        """Up to max_wrong_tries wrong chains with distinct values (random count and order),
        then the solution."""
        numbers, target, solution = (problem.meta[k] for k in ("numbers", "target", "solution"))
        finish = _finish(solution, target)
        budget = self.max_demo_chars - len(finish)
        wanted, tries, seen = rng.randint(0, self.max_wrong_tries), [], {target}
        for _ in range(8 * wanted):
            if len(tries) == wanted:
                break
            text, value = random_chain(numbers, rng)
            line = f"{text}={value} no\n"
            if value not in seen and len(line) <= budget:
                tries.append(line)
                seen.add(value)
                budget -= len(line)
        return "".join(tries) + finish

    def parse_answer(self, completion: str) -> str | None:
        """The last Answer line's expression without spaces, None if it does not parse."""
        text = last_answer_text(completion)
        if text is None or evaluate(text) is None:
            return None
        return "".join(_TOKEN.findall(text))

    def is_correct(self, problem: Problem, parsed: str) -> bool:
        value, literals = evaluate(parsed)
        available = Counter(problem.meta["numbers"])
        return value == problem.meta["target"] and not Counter(literals) - available


def _finish(solution: str, target: int) -> str:
    return f"{solution}={target} yes\nAnswer: {solution}"
