"""Machinery shared by the generated tasks: knob checks, the difficulty mix, the split
router, the answer line, and a `GeneratedTask` base that turns a per-bucket sampler into
`problems()` and a parser + checker into `score()`.

Answer line. The final answer is the LAST line of the form `Answer: <text>` (case of
"answer" ignored; spaces around the colon and at both ends ignored; the line must start
the line, so "... the Answer: 5" mid-sentence does not count). Earlier Answer lines are
ignored, so emitting several answers cannot hedge.

Reward. total = correct + format_weight * format, with correct in {0, 1} and format = 1.0
iff the completion finished (not truncated) and its last Answer line is well formed.
A truncated completion is never correct and gets no format credit. With the default
format_weight = 0 the reward is binary, as the difficulty-bias algebra (docs/studies.md (b))
assumes.

Splits. A problem's canonical key (e.g. "12+7*3") is hashed with sha256 (never Python's
salted `hash`) to u in [0, 1); u < eval_fraction routes it to "eval", else to "train".
The split is a property of the problem, not of the seed, so "train" and "eval" never
share a problem, whatever the seeds, mix or size knobs (only eval_fraction must agree).
Sampling draws a bucket from the mix, then redraws problems of that bucket until one
lands in the requested split. Problems may repeat within a split (small easy buckets).
"""

from __future__ import annotations

import abc
import hashlib
import math
import numbers
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.tasks.base import Problem, RewardBreakdown, Task

SPLITS = ("train", "eval")
_ANSWER_LINE = re.compile(r"^[ \t]*answer[ \t]*:(.*)$", re.IGNORECASE | re.MULTILINE)
_INT = re.compile(r"[+-]?[ \t]*[0-9]{1,30}")


def last_answer_text(completion: str) -> str | None:
    """The stripped text after 'Answer:' on the last answer line, None if there is none."""
    found = _ANSWER_LINE.findall(completion)
    return found[-1].strip() if found else None


def parse_int_answer(completion: str) -> str | None:
    """The last answer line as a canonical integer string ("-07" -> "-7"), else None."""
    text = last_answer_text(completion)
    if text is None or not _INT.fullmatch(text):
        return None
    return str(int(text.replace(" ", "").replace("\t", "")))


def check_int(owner: str, name: str, value, lo: int, hi: int | None = None) -> int:
    """`value` as an int in [lo, hi], else ValueError naming the knob."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok or value < lo or (hi is not None and value > hi):
        bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{owner}: {name} must be an int {bound}, got {value!r}")
    return int(value)


def check_float(owner: str, name: str, value, lo: float, hi: float, open_ends: bool = False) -> float:
    """`value` as a finite float in [lo, hi] ((lo, hi) with open_ends), else ValueError."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    inside = ok and ((lo < value < hi) if open_ends else (lo <= value <= hi))
    if not inside:
        bound = f"in ({lo}, {hi})" if open_ends else f"in [{lo}, {hi}]"
        raise ValueError(f"{owner}: {name} must be a number {bound}, got {value!r}")
    return float(value)


def check_sizes(owner: str, name: str, value, buckets: tuple[str, ...], lo: int, hi: int) -> dict[str, int]:
    """One int in [lo, hi] per bucket, strictly increasing with difficulty, as bucket -> size."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != len(buckets):
        raise ValueError(f"{owner}: {name} must be {len(buckets)} ints ({', '.join(buckets)}), got {value!r}")
    sizes = [check_int(owner, name, k, lo, hi) for k in value]
    if any(a >= b for a, b in zip(sizes, sizes[1:])):
        raise ValueError(f"{owner}: {name} must increase with difficulty ({' < '.join(buckets)}), got {value!r}")
    return dict(zip(buckets, sizes))


def check_mix(owner: str, mix, buckets: tuple[str, ...]) -> dict[str, float]:
    """Validated difficulty_mix as normalised weights over all buckets (None -> uniform).
    Missing buckets get weight 0; unknown buckets, negative or all-zero weights are errors."""
    allowed = ", ".join(buckets)
    if mix is None:
        return {b: 1.0 / len(buckets) for b in buckets}
    if not isinstance(mix, Mapping):
        raise ValueError(f"{owner}: difficulty_mix must be a dict bucket -> weight over {{{allowed}}}, got {mix!r}")
    for bucket, weight in mix.items():
        if bucket not in buckets:
            raise ValueError(f"{owner}: difficulty_mix has unknown bucket {bucket!r}; allowed buckets: {allowed}")
        bad = isinstance(weight, bool) or not isinstance(weight, numbers.Real)
        if bad or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"{owner}: difficulty_mix[{bucket!r}] must be a finite number >= 0, got {weight!r}")
    total = float(sum(mix.values()))
    if total <= 0:
        raise ValueError(f"{owner}: difficulty_mix weights are all zero; give one of {allowed} a positive weight")
    return {b: float(mix.get(b, 0.0)) / total for b in buckets}


def split_of(task_name: str, key: str, eval_fraction: float) -> str:
    """ "eval" if sha256(task_name|key) maps below eval_fraction, else "train"."""
    digest = hashlib.sha256(f"{task_name}|{key}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2.0**64
    return "eval" if u < eval_fraction else "train"


@dataclass(frozen=True)
class Draft:
    """A sampled problem before routing: canonical key (for the split), prompt, answer, meta."""

    key: str
    prompt: str
    answer: str
    meta: dict


class GeneratedTask(Task):
    """A Task whose problems come from a seeded per-bucket sampler (`_draw`)."""

    difficulties = ("easy", "medium", "hard")
    default_max_demo_chars = 64
    _max_redraws = 10_000

    def __init__(
        self,
        *,
        difficulty_mix: Mapping[str, float] | None = None,
        format_weight: float = 0.0,
        eval_fraction: float = 0.25,
        max_demo_chars: int | None = None,
    ) -> None:
        owner = type(self).__name__
        self.difficulty_mix = check_mix(owner, difficulty_mix, self.difficulties)
        self.format_weight = check_float(owner, "format_weight", format_weight, 0.0, 1e6)
        self.eval_fraction = check_float(owner, "eval_fraction", eval_fraction, 0.0, 1.0, open_ends=True)
        demo = self.default_max_demo_chars if max_demo_chars is None else max_demo_chars
        self.max_demo_chars = check_int(owner, "max_demo_chars", demo, 16, 100_000)

    # -- subclass hooks ---------------------------------------------------------------
    @abc.abstractmethod
    def _draw(self, difficulty: str, rng: random.Random) -> Draft | None:
        """One problem of `difficulty` (None = rejected, redraw); its demo must fit max_demo_chars."""

    @abc.abstractmethod
    def parse_answer(self, completion: str) -> str | None:
        """The canonical answer of the last well-formed Answer line, None if there is none."""

    @abc.abstractmethod
    def is_correct(self, problem: Problem, parsed: str) -> bool:
        """Whether a parsed answer solves the problem."""

    # -- Task -------------------------------------------------------------------------
    def problems(self, n: int, seed: int, split: str = "train") -> list[Problem]:
        owner = type(self).__name__
        n = check_int(owner, "n", n, 0)
        seed = check_int(owner, "seed", seed, -(2**63))
        if split not in SPLITS:
            raise ValueError(f"{owner}: split must be one of {', '.join(SPLITS)}, got {split!r}")
        rng = random.Random(f"{self.name}|{split}|{seed}")  # str seeds are hashed with sha512: stable
        buckets = [b for b, w in self.difficulty_mix.items() if w > 0]
        weights = [self.difficulty_mix[b] for b in buckets]
        out = []
        for i in range(n):
            difficulty = rng.choices(buckets, weights)[0]
            for _ in range(self._max_redraws):
                draft = self._draw(difficulty, rng)
                if draft is not None and split_of(self.name, draft.key, self.eval_fraction) == split:
                    break
            else:
                raise RuntimeError(
                    f"{owner}: no {difficulty} {split} problem in {self._max_redraws} draws; "
                    "loosen the size knobs or max_demo_chars"
                )
            out.append(
                Problem(
                    uid=f"{self.name}-{split}-{seed}-{i}",
                    prompt=draft.prompt,
                    answer=draft.answer,
                    difficulty=difficulty,
                    meta=draft.meta,
                )
            )
        return out

    def score(self, problem: Problem, completion: str, truncated: bool) -> RewardBreakdown:
        parsed = self.parse_answer(completion)
        fmt = 1.0 if parsed is not None and not truncated else 0.0
        correct = bool(fmt) and self.is_correct(problem, parsed)
        return RewardBreakdown(
            total=float(correct) + self.format_weight * fmt,
            correct=correct,
            format=fmt,
            parsed=parsed,
            terms=(("correct", 1.0, float(correct)), ("format", self.format_weight, fmt)),
        )
