"""One row of the user's file -> one Problem, every field it reads checked (task.data keys).

    problem_of(data, "train", 7, row)   # data: task.data with its defaults; "train" | "eval": the file

The prompt is a field (prompt_key, a dotted path) or a template over several (prompt_template); a
prompt field holding a list of chat messages is used as the messages (the text is the last user
message, the dedup key the messages as JSON). answer_key must give text or a number; difficulty_key
(optional) the row's bucket label (else "all"); solution_key (optional) the SFT target of a warm
start; id_key (optional) the row's id: uid "<file>:<id>", else "<file>:<index>". A row with a field
wrong is a ValueError naming the task.data key and the row.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from harness.tasks.base import Problem
from harness.tasks.dataset.fields import _MISSING, as_messages, lookup, render_template

NO_DIFFICULTY = "all"
_LABEL = re.compile(r"[^A-Za-z0-9_ .:/-]")  # MLflow metric names (eval/pass_at_1/<bucket>) allow no other characters


def label(value: Any) -> str:
    """A difficulty value as a bucket label that MLflow accepts in a metric name."""
    text = _LABEL.sub("_", str(value)).strip() or "_"
    return text[:40]


def json_safe(value: Any) -> Any:
    """A row as JSON-serialisable data (dates, bytes, numpy values -> str)."""
    return json.loads(json.dumps(value, default=str))


def prompt_of(d: Mapping[str, Any], row: dict, where: str) -> tuple[str, str, list[dict] | None]:
    """(the prompt's text (its last user message), its dedup key, its chat messages or None) of a row."""
    value = (
        render_template(d["prompt_template"], row) if d["prompt_template"] is not None else lookup(row, d["prompt_key"])
    )
    prompt_key = (
        "task.data.prompt_template" if d["prompt_template"] is not None else f"task.data.prompt_key={d['prompt_key']!r}"
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
        return users[-1], json.dumps(messages, sort_keys=True), messages
    if isinstance(value, str) and value.strip():
        return value, value, None
    what = "empty" if value in (None, "") or value is _MISSING else f"a {type(value).__name__} ({value!r:.60})"
    raise ValueError(f"{prompt_key}: {where}'s prompt is {what}; a prompt is text or a list of chat messages")


def answer_of(d: Mapping[str, Any], row: dict, where: str) -> str:
    """The row's reference answer (answer_key) as text; a missing, empty or nested one is refused."""
    answer = lookup(row, d["answer_key"])
    if answer is _MISSING or answer is None or isinstance(answer, (dict, list)) or str(answer).strip() == "":
        what = "missing" if answer is _MISSING else ("empty" if answer in (None, "") else f"a {type(answer).__name__}")
        hint = " (name one element, e.g. answers.0)" if isinstance(answer, list) else ""
        raise ValueError(f"task.data.answer_key={d['answer_key']!r}: {where}'s answer is {what}{hint}")
    return str(answer)


def difficulty_of(d: Mapping[str, Any], row: dict, where: str) -> str:
    """The row's bucket label (difficulty_key), or NO_DIFFICULTY without one."""
    if d["difficulty_key"] is None:
        return NO_DIFFICULTY
    raw = lookup(row, d["difficulty_key"])
    if raw is _MISSING or raw is None:
        raise ValueError(f"task.data.difficulty_key={d['difficulty_key']!r}: {where} has no difficulty")
    return label(raw)


def solution_of(d: Mapping[str, Any], row: dict, where: str) -> str | None:
    """The row's worked solution (solution_key: a warm start's SFT target), or None without one."""
    if d["solution_key"] is None:
        return None
    raw = lookup(row, d["solution_key"])
    if raw is _MISSING or not isinstance(raw, str) or not raw.strip():
        raise ValueError(f"task.data.solution_key={d['solution_key']!r}: {where}'s solution is not text")
    return raw


def uid_of(d: Mapping[str, Any], row: dict, file: str, index: int, where: str) -> str:
    """The uid: "<file>:<id>" (id_key's value), or "<file>:<index>" without id_key."""
    if d["id_key"] is None:
        return f"{file}:{index}"
    raw = lookup(row, d["id_key"])
    if raw is _MISSING or raw is None:
        raise ValueError(f"task.data.id_key={d['id_key']!r}: {where} has no id")
    if isinstance(raw, (dict, list)):
        raise ValueError(
            f"task.data.id_key={d['id_key']!r}: {where}'s id is a {type(raw).__name__} ({raw!r:.60}); "
            "an id is text or a number"
        )
    return f"{file}:{raw}"


def problem_of(d: Mapping[str, Any], file: str, index: int, row: dict) -> Problem:
    """Row `index` of `file` ("train" | "eval") as a Problem; meta keeps what scoring and `harness score` read."""
    where = f"{file} row {index}"
    text, key, messages = prompt_of(d, row, where)
    answer = answer_of(d, row, where)
    difficulty = difficulty_of(d, row, where)
    solution = solution_of(d, row, where)
    uid = uid_of(d, row, file, index, where)
    meta = {
        "file": file,
        "row": index,
        "key": key,
        "messages": messages,
        "system": d["system_prompt"],
        "solution": solution,
        "fields": json_safe(row),
    }
    return Problem(uid=uid, prompt=text, answer=answer, difficulty=difficulty, meta=meta)
