"""The contract between a verifiable-reward task and the rest of the harness.

A task owns three things and nothing else: a seeded problem generator (with a
difficulty label on every problem), a demonstration writer for the SFT warm start,
and a pure verifier that returns a reward breakdown. The loss never sees the task.
"""

from __future__ import annotations

import abc
import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    """One prompt with its verifiable answer.

    uid: stable id (same seed + split + index -> same uid).
    prompt: the question text, WITHOUT any model template (the model side renders it).
    answer: the reference answer, as the verifier compares it.
    difficulty: bucket label, one of the task's `difficulties` (e.g. "easy", "medium", "hard").
    meta: task-specific fields (operands, target, ...), JSON-serialisable.
    """

    uid: str
    prompt: str
    answer: str
    difficulty: str
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RewardBreakdown:
    """Reward of one completion. total = correct + format_weight * format (the overlong
    penalty is added by the trainer from the objective's overlong knobs, not by the task)."""

    total: float
    correct: bool
    format: float  # 1.0 if the completion has the expected answer format, else 0.0
    parsed: str | None  # the answer the parser extracted, None if none
    parts: dict = field(default_factory=dict)  # named rewards of a dataset task (logged as reward/<name>), unweighted
    # (name, weight, unweighted value) of every reward the total sums (task.reward_combine normalises each
    # within its group: GDPO); empty for a task that does not say
    terms: tuple[tuple[str, float, float], ...] = ()


class Task(abc.ABC):
    """A verifiable-reward task. Subclasses are registered in harness.tasks.TASKS."""

    name: str = ""
    difficulties: tuple[str, ...] = ()

    @abc.abstractmethod
    def problems(self, n: int, seed: int, split: str = "train") -> list[Problem]:
        """n problems drawn with `seed`; split "train" and "eval" never share a problem."""

    @abc.abstractmethod
    def demonstration(self, problem: Problem, rng: random.Random) -> str:
        """A target completion for the SFT warm start (ends with the final answer line)."""

    @abc.abstractmethod
    def score(self, problem: Problem, completion: str, truncated: bool) -> RewardBreakdown:
        """Pure verifier. A truncated completion is never correct."""

    def score_batch(
        self, problems: list[Problem], completions: list[str], truncated: list[bool], train: bool = False
    ) -> list[RewardBreakdown]:
        """score() of each (problem, completion, truncated); a task may score them in parallel. train: a
        training batch (a dataset task's running reward normaliser learns from it)."""
        return [self.score(p, c, bool(t)) for p, c, t in zip(problems, completions, truncated)]

    def place(self, device, map_rows=None) -> None:
        """The run's device, for a task that scores with a model of its own (a dataset task's reward models);
        map_rows(fn, rows) scores a training batch's rows on each process (harness/parallel.py map_shards)."""
        return None  # a generated task scores with rules alone
