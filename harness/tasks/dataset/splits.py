"""The dataset task's train and eval splits: files -> rows -> problems, checked, split, shuffled, cut.

    splits = load_splits(data)   # data: task.data with its defaults -> {"train": [Problem], "eval": [Problem]}

With task.data.eval a second file holds the held-out rows; without it, the rows of the train file are split
by a stable hash (sha256) of their prompt, eval_fraction of them held out (common.split_of): the same prompt
always lands on the same side. Rows not matching `where` are dropped; every field the task reads must exist
(fields_read) and id_key's ids be unique within a file. Each split is shuffled with shuffle_seed, then cut
to max_train_rows / max_eval_rows; an empty split, or train rows whose prompt is in the eval file (overlap:
error | drop | allow), is a ValueError naming the task.data key.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from harness.tasks.base import Problem
from harness.tasks.common import split_of
from harness.tasks.dataset.fields import _MISSING, lookup, missing_field, template_fields
from harness.tasks.dataset.hub import hub_rows, is_hub_dataset
from harness.tasks.dataset.problem import problem_of
from harness.tasks.dataset.read import read_rows

TASK = "dataset"  # the hash split's salt: the task's name


def load_splits(d: Mapping[str, Any]) -> dict[str, list[Problem]]:
    """{"train": problems, "eval": problems} of task.data `d` (its defaults filled in)."""
    train = _problems_of(d, "train", "task.data.train", d["train_split"], "task.data.train_split")
    if d["eval"]:
        evals = _problems_of(d, "eval", "task.data.eval", d["eval_split"], "task.data.eval_split")
    else:
        both = train
        train = [p for p in both if split_of(TASK, p.meta["key"], d["eval_fraction"]) == "train"]
        evals = [p for p in both if split_of(TASK, p.meta["key"], d["eval_fraction"]) == "eval"]
    train, evals = _shuffled(d, train, "train", d["max_train_rows"]), _shuffled(d, evals, "eval", d["max_eval_rows"])
    for split, rows in (("train", train), ("eval", evals)):
        if not rows:
            _empty(d, split)
    if d["eval"]:
        train = _overlap(d, train, evals)
    return {"train": train, "eval": evals}


def fields_read(d: Mapping[str, Any]) -> dict[str, str]:
    """task.data key -> the dotted field it reads (every one must exist)."""
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


def _shuffled(d: Mapping[str, Any], rows: list[Problem], split: str, limit: int | None) -> list[Problem]:
    rows = list(rows)
    random.Random(f"dataset|{split}|{d['shuffle_seed']}").shuffle(rows)
    return rows[:limit] if limit is not None else rows


def _empty(d: Mapping[str, Any], split: str) -> None:
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


def _overlap(d: Mapping[str, Any], train: list[Problem], evals: list[Problem]) -> list[Problem]:
    held = {p.meta["key"] for p in evals}
    shared = [p for p in train if p.meta["key"] in held]
    if not shared or d["overlap"] == "allow":
        return train
    n_prompts = len({p.meta["key"] for p in shared})
    if d["overlap"] == "error":
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
        _empty(d, "train")
    return kept


def _problems_of(d: Mapping[str, Any], file: str, key: str, split: str, split_key: str) -> list[Problem]:
    if is_hub_dataset(d[file]):  # a Hugging Face Hub id: its snapshot's config and split (hub.py)
        rows, columns, _ = hub_rows(d[file], d["config"], d["revision"], split, key, split_key)
    else:
        rows, columns = read_rows(d[file], d["format"], split, key, split_key)
    _check_fields(d, rows, columns, key)
    out = [problem_of(d, file, index, row) for index, row in enumerate(rows) if not d["where"] or _where(d, row)]
    if d["id_key"] is not None:
        _unique_ids(d, out, key)
    return out


def _unique_ids(d: Mapping[str, Any], problems: list[Problem], key: str) -> None:
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
        f"task.data.id_key={d['id_key']!r}: {key}={d[key.rsplit('.', 1)[1]]!r} rows {shown} "
        f"share the id {uid.split(':', 1)[1]!r} ({len(repeats)} id(s) repeat); ids must be unique within a "
        "file: fix them, or drop id_key (each row is then identified by its index)"
    )


def _where(d: Mapping[str, Any], row: dict) -> bool:
    for path, want in d["where"].items():
        value = lookup(row, path)
        if value is _MISSING or value not in (want if isinstance(want, list) else [want]):
            return False
    return True


def _check_fields(d: Mapping[str, Any], rows: list[dict], columns: list[str], file_key: str) -> None:
    if not rows:
        return
    for key, path in fields_read(d).items():
        why = missing_field(rows[0], path, columns)
        if why:
            raise ValueError(f"{key}={path!r}: {why} (in {file_key}={d[file_key.rsplit('.', 1)[1]]!r})")
