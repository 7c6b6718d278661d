"""A task whose problems are the rows of the user's dataset (task.name: dataset).

    task = DatasetTask(data={"train": "data/gsm8k/train.jsonl", "eval": "data/gsm8k/test.jsonl",
                             "prompt_key": "question", "answer_key": "answer"},
                       rewards=[RewardSpec("correct", 1.0, verifier="gsm8k")], correct="correct")
    task.problems(16, seed=3, split="train")      # 16 rows drawn with seed 3
    task.score_batch(problems, completions, truncated)

Rows -> problems. The prompt is a field (task.data.prompt_key, a dotted path), or a template
over several (prompt_template, "{question}\\n{choices}"); a prompt field that holds a list of chat
messages (verl's parquet, TRL's conversational JSONL) is used as the messages. The answer is
answer_key (dotted: reward_model.ground_truth); difficulty_key (optional) labels the difficulty
bucket of each row (else "all"); solution_key (optional) is the SFT target of a warm start;
id_key (optional) names a field that identifies the row: the uid is "<train|eval>:<id>", the id
being that field's value or else the row's index in its file.

Splits. With task.data.eval a second file holds the held-out rows; without it, the rows of the
train file are split by a stable hash (sha256) of their prompt, task.data.eval_fraction of them
held out, as the generated tasks split (common.split_of): the same prompt always lands on the same
side. Each split is shuffled with shuffle_seed, then cut to max_train_rows / max_eval_rows.

Drawing. problems(n, seed, "train") draws n rows without replacement (the whole split again when
n exceeds it), seeded; problems(n, seed, "eval") gives min(n, rows) held-out rows, the same for the
same seed (every eval of every run sees the same prompts).

Every problem with the data wrong (a missing field, an empty split, a prompt that is neither
text nor messages, an overlap of train and eval) is a ValueError naming the task.data key
(harness/config/ turns it into a one-line error before any model loads).

Where each part lives: splits.py (files -> checked, split, shuffled problems), problem.py (one row -> a
Problem: prompt rendering and the answer, difficulty, solution and id checks), rewards.py (scoring: the
rule scorer, reward models, normalisers). This class holds task.data's defaults and checks, the splits,
the drawing, and the Task contract, handing scoring to its DatasetRewards.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from harness.tasks.base import Problem, RewardBreakdown, Task
from harness.tasks.dataset.rewards import DatasetRewards, item, messages
from harness.tasks.dataset.splits import fields_read, load_splits
from harness.tasks.rewards.scorer import Item, ItemRewards, RewardSpec

DEFAULTS: dict[str, Any] = {
    "train": None,
    "eval": None,
    "format": "auto",
    "config": None,
    "revision": "main",
    "train_split": "train",
    "eval_split": "test",
    "eval_fraction": 0.1,
    "prompt_key": "prompt",
    "prompt_template": None,
    "answer_key": "answer",
    "difficulty_key": None,
    "solution_key": None,
    "id_key": None,
    "system_prompt": None,
    "where": {},
    "max_train_rows": None,
    "max_eval_rows": None,
    "shuffle_seed": 0,
    "overlap": "error",
    "check_answers": 8,
}
HINTS = {
    "gsm8k": "it reads the number after the last '####'",
    "number": "it reads the last number",
    "math": "it reads the last \\boxed{} or else the last expression (math-verify)",
    "exact": "it compares the final answer text (last \\boxed{}, 'answer:' line or last line) as a string",
    "choice": "it reads a choice letter",
    "regex": "it reads the last match of its pattern",
}


class DatasetTask(Task):
    name = "dataset"

    def __init__(
        self,
        *,
        data: Mapping[str, Any],
        rewards: list[RewardSpec],
        correct: str | None = None,
        reward_timeout: float = 5.0,
        reward_workers: int = 0,
    ) -> None:
        unknown = set(data) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"task.data: unknown keys {sorted(unknown)}; allowed: {sorted(DEFAULTS)}")
        self.data = {**DEFAULTS, **{k: v for k, v in data.items() if v is not None}}
        if not self.data["train"]:
            raise ValueError(
                "task.data.train: the dataset task needs a file or folder of rows (JSONL, Parquet, CSV "
                "or a save_to_disk folder)"
            )
        if not rewards:
            raise ValueError(
                "task.rewards: name at least one reward, e.g. [{verifier: gsm8k}] or [{function: my_rewards:accuracy}]"
            )
        names = [s.name for s in rewards]
        if correct is not None and correct not in names:
            raise ValueError(f"task.correct={correct!r} is not one of the rewards; their names: {names}")
        correct = correct or next(
            (s.name for s in rewards if s.verifier), next((s.name for s in rewards if s.function), names[0])
        )
        self.rewards = DatasetRewards(rewards, correct, reward_timeout, reward_workers)
        r = self.rewards  # its parts by the names the reference-answer check and the hacking probe read
        self.specs, self.correct, self.scorer = r.specs, r.correct, r.scorer
        self.reward_models, self.normalizers = r.reward_models, r.normalizers
        self._splits: dict[str, list[Problem]] = load_splits(self.data)

    def fields_read(self) -> dict[str, str]:
        """task.data key -> the dotted field it reads (every one must exist)."""
        return fields_read(self.data)

    # ------------------------------------------------------------------ the splits
    @property
    def difficulties(self) -> tuple[str, ...]:
        return tuple(sorted({p.difficulty for rows in self._splits.values() for p in rows}))

    def rows(self, split: str) -> list[Problem]:
        """Every problem of a split, in its (shuffled, limited) order."""
        return list(self._splits[split])

    def problems(self, n: int, seed: int, split: str = "train") -> list[Problem]:
        if split not in self._splits:
            raise ValueError(f"DatasetTask: split must be one of {sorted(self._splits)}, got {split!r}")
        rows = self._splits[split]
        rng = random.Random(f"dataset|{split}|{seed}")
        if split == "eval":
            return rng.sample(rows, min(n, len(rows)))
        out: list[Problem] = []
        while len(out) < n:
            out += rng.sample(rows, min(n - len(out), len(rows)))
        return out

    def demonstration(self, problem: Problem, rng: random.Random) -> str:
        """The row's solution (task.data.solution_key): the SFT target of a warm start."""
        if problem.meta.get("solution") is None:
            raise ValueError("a warm start of a dataset task trains on its solutions: set task.data.solution_key")
        return problem.meta["solution"]

    # after the tokenizer / policy
    def keep(self, predicate: Callable[[Problem], bool]) -> dict[str, int]:
        """Drop the problems for which predicate is False; -> dropped count per split."""
        dropped = {}
        for split, rows in self._splits.items():
            kept = [p for p in rows if predicate(p)]
            dropped[split] = len(rows) - len(kept)
            self._splits[split] = kept
        return dropped

    def relabel(self, labels: Mapping[str, str]) -> None:
        """Set each problem's difficulty from uid -> label (problems not in `labels` keep theirs)."""
        for split, rows in self._splits.items():
            self._splits[split] = [dataclasses.replace(p, difficulty=labels.get(p.uid, p.difficulty)) for p in rows]

    def bucket_counts(self) -> dict[str, dict[str, int]]:
        return {s: dict(sorted(Counter(p.difficulty for p in rows).items())) for s, rows in self._splits.items()}

    # ------------------------------------------------------------------ scoring: the DatasetRewards (rewards.py)
    def item(self, problem: Problem, completion: str, truncated: bool) -> Item:
        return item(problem, completion, truncated)

    def messages(self, problem: Problem) -> list[dict]:
        """The prompt as chat messages (its system prompt, then its own messages or one user message)."""
        return messages(problem)

    def breakdown(self, scored: ItemRewards, truncated: bool) -> RewardBreakdown:
        return self.rewards.breakdown(scored, truncated)

    def score(self, problem: Problem, completion: str, truncated: bool) -> RewardBreakdown:
        return self.rewards.score(problem, completion, truncated)

    def score_batch(
        self, problems: list[Problem], completions: list[str], truncated: list[bool], train: bool = False
    ) -> list[RewardBreakdown]:
        return self.rewards.score_batch(problems, completions, truncated, train)

    def _mixed(self) -> bool:
        return self.rewards.mixed()

    def place(self, device, map_rows: Callable | None = None) -> None:
        self.rewards.place(device, map_rows)

    def reward_state(self) -> dict:
        """The running normalisers' statistics (a checkpoint's; {} without one)."""
        return self.rewards.state_dict()

    def load_reward_state(self, state: dict) -> None:
        self.rewards.load_state_dict(state)
