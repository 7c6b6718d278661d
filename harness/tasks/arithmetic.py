"""Synthetic arithmetic: evaluate an integer expression with + - * and usual precedence.

Formats (char-level friendly; the model side prepends BOS and appends EOS, no template):
    prompt         "7*8-6*9=?\\n"
    demonstration  "7*8-6*9=56-6*9=56-54=2\\nAnswer: 2"
The working reduces ONE operation per step (leftmost "*" first, then "+"/"-" left to
right), so a negative number can only appear leftmost ("3-9+5=-6+5=-1"). The verifier
reads only the last "Answer: <int>" line (see common.py) and compares integers.

Difficulty = number of operands, `num_operands` = (2, 3, 4) for easy/medium/hard, each
operand uniform in [0, max_operand] (default 9, single digits), operators drawn uniformly
from `ops`; problems with any intermediate |value| > max_value are redrawn. Easy is a
single table fact, hard chains three facts and three copies of the rest of the line.

Regime (docs/studies.md): the working has (operands - 1) steps, so demonstrations grow with
difficulty (means at defaults: easy ~16, medium ~23, hard ~32 chars, max 38). The
intent (not measured here; the training side must check it): after a short SFT a tiny
model solves most easy and few hard problems, its failures sit in the buckets with the
long working, so wrong answers run longer than right ones, and a model that loses track
keeps emitting "=..." steps until it truncates (truncated = wrong).
Countdown has the stronger long-failure mode (a search trace); arithmetic is the cleaner
difficulty-bias task. max_demo_chars (default 63 = a 64-token budget minus EOS) bounds
every demonstration; problems whose working would exceed it are redrawn.

calculator=True (the tools example: task.tools [harness.tasks.tools.examples:calculator], docs/tasks.md,
"Tools and environments"): the demonstration calls the calculator instead of working, in the plain tool format,
with the answer the tool gives:
    "<call>calculator 7*8-6*9</call><result>2</result>\nAnswer: 2"
(the warm start learns the call and the copy; in a rollout the model's turn ends at </call> and the result is
the tool's). With long operands (max_operand: 999) the working is what a tiny model gets wrong, the copy is not.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from harness.tasks.base import Problem
from harness.tasks.common import Draft, GeneratedTask, check_int, check_sizes, parse_int_answer

_APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def render(operands: Sequence[int], ops: Sequence[str]) -> str:
    """[12, 7, 3], ["+", "*"] -> "12+7*3"."""
    return str(operands[0]) + "".join(op + str(x) for op, x in zip(ops, operands[1:]))


def reduction_steps(operands: Sequence[int], ops: Sequence[str]) -> tuple[list[str], list[int]]:
    """Every line of the working (expression ... value), one operation a step, and the
    result of each operation (the last one is the value)."""
    nums, ops = list(operands), list(ops)
    steps, results = [render(nums, ops)], []
    while ops:
        i = ops.index("*") if "*" in ops else 0
        nums[i : i + 2] = [_APPLY[ops.pop(i)](nums[i], nums[i + 1])]
        steps.append(render(nums, ops))
        results.append(nums[i])
    return steps, results


class ArithmeticTask(GeneratedTask):
    """Evaluate "a op b op c ..." (difficulty = number of operands)."""

    name = "arithmetic"
    default_max_demo_chars = 63

    def __init__(
        self,
        *,
        difficulty_mix: Mapping[str, float] | None = None,
        format_weight: float = 0.0,
        eval_fraction: float = 0.25,
        max_demo_chars: int | None = None,
        num_operands: Sequence[int] = (2, 3, 4),
        max_operand: int = 9,
        max_value: int = 999,
        ops: str = "+-*",
        calculator: bool = False,
    ) -> None:
        super().__init__(
            difficulty_mix=difficulty_mix,
            format_weight=format_weight,
            eval_fraction=eval_fraction,
            max_demo_chars=max_demo_chars,
        )
        owner = type(self).__name__
        self.num_operands = check_sizes(owner, "num_operands", num_operands, self.difficulties, 2, 8)
        self.max_operand = check_int(owner, "max_operand", max_operand, 1, 10**6)
        self.max_value = check_int(owner, "max_value", max_value, self.max_operand)
        if not isinstance(ops, str) or not ops or set(ops) - set(_APPLY) or len(set(ops)) != len(ops):
            raise ValueError(f"{owner}: ops must be a non-empty string of distinct operators from '+-*', got {ops!r}")
        self.ops = ops
        if not isinstance(calculator, bool):
            raise ValueError(f"{owner}: calculator must be true or false, got {calculator!r}")
        self.calculator = calculator

    def _draw(self, difficulty: str, rng: random.Random) -> Draft | None:
        k = self.num_operands[difficulty]
        operands = [rng.randint(0, self.max_operand) for _ in range(k)]
        ops = [rng.choice(self.ops) for _ in range(k - 1)]
        steps, results = reduction_steps(operands, ops)
        if any(abs(v) > self.max_value for v in results) or len(_demo(steps)) > self.max_demo_chars:
            return None
        return Draft(
            key=steps[0],
            prompt=f"{steps[0]}=?\n",
            answer=steps[-1],
            meta={"operands": operands, "ops": ops, "expression": steps[0]},
        )

    def demonstration(self, problem: Problem, rng: random.Random) -> str:
        """The full reduction, or with calculator=True the calculator's call and answer (deterministic; `rng`
        unused)."""
        steps = reduction_steps(problem.meta["operands"], problem.meta["ops"])[0]
        if self.calculator:
            return f"<call>calculator {steps[0]}</call><result>{steps[-1]}</result>\nAnswer: {steps[-1]}"
        return _demo(steps)

    def parse_answer(self, completion: str) -> str | None:
        return parse_int_answer(completion)

    def is_correct(self, problem: Problem, parsed: str) -> bool:
        return int(parsed) == int(problem.answer)


def _demo(steps: list[str]) -> str:
    return "=".join(steps) + f"\nAnswer: {steps[-1]}"
