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
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from harness.tasks.base import Problem, RewardBreakdown, Task
from harness.tasks.common import split_of
from harness.tasks.dataset.fields import _MISSING, as_messages, lookup, missing_field, render_template, template_fields
from harness.tasks.dataset.read import read_rows
from harness.tasks.rewards.normalize import Normalizer
from harness.tasks.rewards.reward_model import RewardModel, conversation
from harness.tasks.rewards.scorer import Item, RewardSpec, Scored, Scorer

DEFAULTS: dict[str, Any] = {
    "train": None,
    "eval": None,
    "format": "auto",
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
NO_DIFFICULTY = "all"
_LABEL = re.compile(r"[^A-Za-z0-9_ .:/-]")  # MLflow metric names (eval/pass_at_1/<bucket>) allow no other characters
HINTS = {
    "gsm8k": "it reads the number after the last '####'",
    "number": "it reads the last number",
    "math": "it reads the last \\boxed{} or else the last expression (math-verify)",
    "exact": "it compares the final answer text (last \\boxed{}, 'answer:' line or last line) as a string",
    "choice": "it reads a choice letter",
    "regex": "it reads the last match of its pattern",
}


def label(value: Any) -> str:
    """A difficulty value as a bucket label that MLflow accepts in a metric name."""
    text = _LABEL.sub("_", str(value)).strip() or "_"
    return text[:40]


def json_safe(value: Any) -> Any:
    """A row as JSON-serialisable data (dates, bytes, numpy values -> str)."""
    return json.loads(json.dumps(value, default=str))


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
        self.specs = list(rewards)
        names = [s.name for s in self.specs]
        if correct is not None and correct not in names:
            raise ValueError(f"task.correct={correct!r} is not one of the rewards; their names: {names}")
        self.correct = correct or next(
            (s.name for s in self.specs if s.verifier), next((s.name for s in self.specs if s.function), names[0])
        )
        rules = [s for s in self.specs if s.model is None]  # verifiers and functions: the scorer (and its workers)
        self.scorer = Scorer(rules, self.correct, reward_timeout, reward_workers)
        self.reward_models = {s.name: RewardModel(s.model, s.micro_batch_size) for s in self.specs if s.model}
        self.normalizers = {s.name: Normalizer(s.normalize) for s in self.specs}
        self._map_rows = None  # place(): each process scores its own rows with a reward model
        self._splits: dict[str, list[Problem]] = {}
        self._load()

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        d = self.data
        train = self._problems_of("train", "task.data.train", d["train_split"], "task.data.train_split")
        if d["eval"]:
            evals = self._problems_of("eval", "task.data.eval", d["eval_split"], "task.data.eval_split")
        else:
            both = train
            train = [p for p in both if split_of(self.name, p.meta["key"], d["eval_fraction"]) == "train"]
            evals = [p for p in both if split_of(self.name, p.meta["key"], d["eval_fraction"]) == "eval"]
        train, evals = (
            self._shuffled(train, "train", d["max_train_rows"]),
            self._shuffled(evals, "eval", d["max_eval_rows"]),
        )
        for split, rows in (("train", train), ("eval", evals)):
            if not rows:
                self._empty(split)
        if d["eval"]:
            train = self._overlap(train, evals)
        self._splits = {"train": train, "eval": evals}

    def _shuffled(self, rows: list[Problem], split: str, limit: int | None) -> list[Problem]:
        rows = list(rows)
        random.Random(f"dataset|{split}|{self.data['shuffle_seed']}").shuffle(rows)
        return rows[:limit] if limit is not None else rows

    def _empty(self, split: str) -> None:
        d = self.data
        where = f" after task.data.where={d['where']!r}" if d["where"] else ""
        if split == "eval" and not d["eval"]:
            raise ValueError(
                f"task.data.eval_fraction={d['eval_fraction']} leaves no eval rows{where} (the train file "
                "is split by a hash of each prompt); raise it, or give task.data.eval"
            )
        key = f"task.data.{split}"
        raise ValueError(
            f"{key}={d[split]!r} holds no rows{where}"
            f"{'' if d['eval'] or split == 'eval' else ' for the train split (task.data.eval_fraction=' + str(d['eval_fraction']) + ')'}"
        )

    def _overlap(self, train: list[Problem], evals: list[Problem]) -> list[Problem]:
        held = {p.meta["key"] for p in evals}
        shared = [p for p in train if p.meta["key"] in held]
        if not shared or self.data["overlap"] == "allow":
            return train
        n_prompts = len({p.meta["key"] for p in shared})
        if self.data["overlap"] == "error":
            raise ValueError(
                f"task.data.train and task.data.eval share {n_prompts} prompt(s) ({len(shared)} train rows, "
                f"e.g. {shared[0].uid} {shared[0].prompt[:60]!r}); held-out pass@k would be measured on "
                "trained prompts. Set task.data.overlap=drop (drop them from train) or allow"
            )
        print(
            f"[harness] task.data.overlap=drop: dropped {len(shared)} train rows whose prompt is in the eval file "
            f"({n_prompts} prompts)",
            flush=True,
        )
        kept = [p for p in train if p.meta["key"] not in held]
        if not kept:
            self._empty("train")
        return kept

    def _problems_of(self, file: str, key: str, split: str, split_key: str) -> list[Problem]:
        d = self.data
        rows, columns = read_rows(d[file], d["format"], split, key, split_key)
        self._check_fields(rows, columns, key)
        out = []
        for index, row in enumerate(rows):
            if d["where"] and not self._where(row):
                continue
            out.append(self._problem(file, index, row))
        if d["id_key"] is not None:
            self._unique_ids(out, key)
        return out

    def _unique_ids(self, problems: list[Problem], key: str) -> None:
        """task.data.id_key: every row's id is its own (the long-prompt filter, pass-rate buckets and `harness
        score` look rows up by uid: two rows sharing one would take each other's place)."""
        rows: dict[str, list[int]] = {}
        for p in problems:
            rows.setdefault(p.uid, []).append(p.meta["row"])
        repeats = {uid: r for uid, r in rows.items() if len(r) > 1}
        if not repeats:
            return
        uid, first = next(iter(repeats.items()))
        shown = ", ".join(str(r) for r in first[:5]) + (", ..." if len(first) > 5 else "")
        raise ValueError(
            f"task.data.id_key={self.data['id_key']!r}: {key}={self.data[key.rsplit('.', 1)[1]]!r} rows {shown} "
            f"share the id {uid.split(':', 1)[1]!r} ({len(repeats)} id(s) repeat); ids must be unique within a "
            "file: fix them, or drop id_key (each row is then identified by its index)"
        )

    def _where(self, row: dict) -> bool:
        for path, want in self.data["where"].items():
            value = lookup(row, path)
            if value is _MISSING or value not in (want if isinstance(want, list) else [want]):
                return False
        return True

    def fields_read(self) -> dict[str, str]:
        """task.data key -> the dotted field it reads (every one must exist)."""
        d = self.data
        out = {"task.data.answer_key": d["answer_key"]}
        if d["prompt_template"] is not None:
            try:
                for f in template_fields(d["prompt_template"]):
                    out[f"task.data.prompt_template ({{{f}}})"] = f
            except ValueError as err:
                raise ValueError(f"task.data.prompt_template={d['prompt_template']!r} {err}") from None
        else:
            out["task.data.prompt_key"] = d["prompt_key"]
        for k in ("difficulty_key", "solution_key", "id_key"):
            if d[k] is not None:
                out[f"task.data.{k}"] = d[k]
        for path in d["where"]:
            out[f"task.data.where ({path})"] = path
        return out

    def _check_fields(self, rows: list[dict], columns: list[str], file_key: str) -> None:
        if not rows:
            return
        for key, path in self.fields_read().items():
            why = missing_field(rows[0], path, columns)
            if why:
                raise ValueError(f"{key}={path!r}: {why} (in {file_key}={self.data[file_key.rsplit('.', 1)[1]]!r})")

    def _prompt(self, row: dict, where: str) -> tuple[str, str, list[dict] | None]:
        """(the prompt's text (its last user message), its dedup key, its chat messages or None) of a row."""
        d = self.data
        value = (
            render_template(d["prompt_template"], row)
            if d["prompt_template"] is not None
            else lookup(row, d["prompt_key"])
        )
        prompt_key = (
            "task.data.prompt_template"
            if d["prompt_template"] is not None
            else f"task.data.prompt_key={d['prompt_key']!r}"
        )
        try:
            messages = as_messages(value)
        except ValueError as err:
            raise ValueError(f"{prompt_key}: {where}: {err}") from None
        if messages is not None:
            users = [m["content"] for m in messages if m["role"] == "user"]
            if not users:
                raise ValueError(f"{prompt_key}: {where}'s messages have no user message")
            if d["system_prompt"] is not None and any(m["role"] == "system" for m in messages):
                raise ValueError(
                    f"task.data.system_prompt is set, but {where}'s prompt messages already hold a system "
                    "message; drop task.data.system_prompt (or the file's system messages)"
                )
            text, key = users[-1], json.dumps(messages, sort_keys=True)
        elif isinstance(value, str) and value.strip():
            text, key = value, value
        else:
            what = "empty" if value in (None, "") or value is _MISSING else f"a {type(value).__name__} ({value!r:.60})"
            raise ValueError(f"{prompt_key}: {where}'s prompt is {what}; a prompt is text or a list of chat messages")
        return text, key, messages

    def _problem(self, file: str, index: int, row: dict) -> Problem:
        d = self.data
        where = f"{file} row {index}"
        text, key, messages = self._prompt(row, where)
        answer = lookup(row, d["answer_key"])
        if answer is _MISSING or answer is None or isinstance(answer, (dict, list)) or str(answer).strip() == "":
            what = (
                "missing" if answer is _MISSING else ("empty" if answer in (None, "") else f"a {type(answer).__name__}")
            )
            hint = " (name one element, e.g. answers.0)" if isinstance(answer, list) else ""
            raise ValueError(f"task.data.answer_key={d['answer_key']!r}: {where}'s answer is {what}{hint}")
        difficulty = NO_DIFFICULTY
        if d["difficulty_key"] is not None:
            raw = lookup(row, d["difficulty_key"])
            if raw is _MISSING or raw is None:
                raise ValueError(f"task.data.difficulty_key={d['difficulty_key']!r}: {where} has no difficulty")
            difficulty = label(raw)
        solution = None
        if d["solution_key"] is not None:
            raw = lookup(row, d["solution_key"])
            if raw is _MISSING or not isinstance(raw, str) or not raw.strip():
                raise ValueError(f"task.data.solution_key={d['solution_key']!r}: {where}'s solution is not text")
            solution = raw
        uid = f"{file}:{index}"
        if d["id_key"] is not None:
            raw = lookup(row, d["id_key"])
            if raw is _MISSING or raw is None:
                raise ValueError(f"task.data.id_key={d['id_key']!r}: {where} has no id")
            if isinstance(raw, (dict, list)):
                raise ValueError(
                    f"task.data.id_key={d['id_key']!r}: {where}'s id is a {type(raw).__name__} ({raw!r:.60}); "
                    "an id is text or a number"
                )
            uid = f"{file}:{raw}"
        meta = {
            "file": file,
            "row": index,
            "key": key,
            "messages": messages,
            "system": d["system_prompt"],
            "solution": solution,
            "fields": json_safe(row),
        }
        return Problem(uid=uid, prompt=text, answer=str(answer), difficulty=difficulty, meta=meta)

    # ------------------------------------------------------------------ the Task contract
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

    def item(self, problem: Problem, completion: str, truncated: bool) -> Item:
        where = f"{problem.meta['file']} row {problem.meta['row']} (uid {problem.uid})"
        return Item(problem.prompt, completion, problem.answer, problem.meta["fields"], bool(truncated), where)

    def breakdown(self, scored, truncated: bool) -> RewardBreakdown:
        """format = 1 when the completion finished and the `correct` reward's verifier read an answer
        (a function defining correctness reads no answer: any finished completion)."""
        spec = next(s for s in self.specs if s.name == self.correct)
        fmt = 0.0 if truncated or (spec.verifier and scored.parsed is None) else 1.0
        parts = {**scored.rewards, "timeouts": float(scored.timed_out)}
        terms = tuple((sp.name, sp.weight, scored.rewards[sp.name]) for sp in self.specs)
        return RewardBreakdown(
            total=scored.total, correct=scored.correct, format=fmt, parsed=scored.parsed, parts=parts, terms=terms
        )

    def score(self, problem: Problem, completion: str, truncated: bool) -> RewardBreakdown:
        if self._mixed():
            return self.score_batch([problem], [completion], [truncated])[0]
        return self.breakdown(self.scorer.score(self.item(problem, completion, truncated)), bool(truncated))

    def score_batch(
        self, problems: list[Problem], completions: list[str], truncated: list[bool], train: bool = False
    ) -> list[RewardBreakdown]:
        """train: a training batch (a running normaliser learns from it; each process scores its own rows
        with a reward model)."""
        items = [self.item(p, c, t) for p, c, t in zip(problems, completions, truncated)]
        scored = self.scorer.score_many(items)
        if self._mixed():
            models = {n: self._model_scores(rm, problems, completions, train) for n, rm in self.reward_models.items()}
            scored = self._combine(scored, models, truncated, train)
        return [self.breakdown(s, bool(t)) for s, t in zip(scored, truncated)]

    # ------------------------------------------------------------------ reward models, normalisation
    def _mixed(self) -> bool:
        """Whether a reward model or a normaliser takes part (else the scorer's weighted sum is the total)."""
        return bool(self.reward_models) or any(n.mode != "none" for n in self.normalizers.values())

    def place(self, device, map_rows: Callable | None = None) -> None:
        """The run's device for the reward models; map_rows(fn, rows): fn over this process's rows, the
        results of every process gathered (harness/parallel.py map_shards), for a training batch."""
        for rm in self.reward_models.values():
            rm.to(device)
        self._map_rows = map_rows

    def messages(self, problem: Problem) -> list[dict]:
        """The prompt as chat messages (its system prompt, then its own messages or one user message)."""
        meta = problem.meta
        msgs = list(meta["messages"]) if meta.get("messages") else [{"role": "user", "content": problem.prompt}]
        return [{"role": "system", "content": meta["system"]}, *msgs] if meta.get("system") is not None else msgs

    def _model_scores(self, rm: RewardModel, problems: list[Problem], completions: list[str], train: bool):
        convs = [conversation(self.messages(p), c) for p, c in zip(problems, completions)]
        if train and self._map_rows is not None:
            return self._map_rows(rm.score, convs)
        return rm.score(convs)

    def _combine(self, scored: list[Scored], models: dict[str, list[float]], truncated, train: bool) -> list[Scored]:
        """Each reward's raw values (logged as reward/<name>), normalised, then weighted and summed; `correct`
        from a reward model is its raw score > 0."""
        raw = {s.name: models[s.name] if s.model else [x.rewards[s.name] for x in scored] for s in self.specs}
        normed = {name: self.normalizers[name](values, update=train) for name, values in raw.items()}
        out = []
        for i, x in enumerate(scored):
            total = math.fsum(s.weight * normed[s.name][i] for s in self.specs)
            correct = raw[self.correct][i] > 0 and not truncated[i] if self.correct in models else x.correct
            out.append(Scored({s.name: raw[s.name][i] for s in self.specs}, total, correct, x.parsed, x.timed_out))
        return out

    def reward_state(self) -> dict:
        """The running normalisers' statistics (a checkpoint's; {} without one)."""
        return {n: z.state_dict() for n, z in self.normalizers.items() if z.mode == "running"}

    def load_reward_state(self, state: dict) -> None:
        for name, z in (state or {}).items():
            self.normalizers[name].load_state_dict(z)

    # ------------------------------------------------------------------ after the tokenizer / policy
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
