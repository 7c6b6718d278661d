"""`harness score CONFIG COMPLETIONS.jsonl`: score given completions with a dataset task's rewards.

Each line of the completions file is a JSON object with "completion" (text) and which problem it
answers, one of:
    {"uid": "train:17", ...}            the problem uid (task.data.id_key's value, or <file>:<row>)
    {"row": 17, "file": "eval", ...}     a row index of the train (default) or eval file
    {"answer": "72", ...}                a reference answer given inline ("prompt" and "row" fields optional)
and optionally "truncated": true (a completion cut at max_new_tokens: never correct). Rows are
looked up among all rows of the files (task.data.where applies; the row limits do not).

Output: one JSON line per completion on stdout ({line, uid, correct, reward, rewards, parsed,
truncated, timeouts}) and a summary on stderr, so `> scored.jsonl` keeps only the records.
A malformed line or an unknown uid is a one-line error (exit 2) before anything is scored.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.tasks.base import Problem
from harness.tasks.dataset.read import not_a_file


class ScoreFileError(ValueError):
    """A completions file or line is wrong; the message names the file and line."""


def read_completions(path: str | Path) -> list[dict]:
    p = Path(path)
    if (kind := not_a_file(p, folder_ok=True)) is not None:  # stat-ed, not opened: a named pipe waits for a writer
        raise ScoreFileError(f"completions file {str(p)!r} is {kind}, not a regular file; allowed: a JSONL file")
    if not p.is_file():
        what = "is a folder, not a file" if p.is_dir() else "does not exist"
        raise ScoreFileError(f"completions file {str(p)!r} {what}")
    out = []
    for n, raw in enumerate(p.read_bytes().splitlines(), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ScoreFileError(
                f"{p}:{n}: not UTF-8 text (byte {raw[err.start]:#04x} at column {err.start + 1}); save the file as UTF-8"
            ) from None
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as err:
            raise ScoreFileError(f"{p}:{n}: not a JSON object ({err})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("completion"), str):
            raise ScoreFileError(f'{p}:{n}: each line needs "completion" (text) and one of "uid", "row" or "answer"')
        if isinstance(rec.get("truncated", False), bool) is False:
            raise ScoreFileError(f'{p}:{n}: "truncated" must be true or false')
        out.append({**rec, "_line": n})
    if not out:
        raise ScoreFileError(f"{p}: holds no completions")
    return out


def resolve(task, records: list[dict], path: str | Path) -> list[Problem]:
    """The problem each record answers (ConfigError-worthy ScoreFileError naming the line otherwise)."""
    by_uid = {p.uid: p for split in ("train", "eval") for p in task.rows(split)}
    by_row = {(p.meta["file"], p.meta["row"]): p for p in by_uid.values()}
    out = []
    for rec in records:
        where = f"{path}:{rec['_line']}"
        if "uid" in rec:
            p = by_uid.get(str(rec["uid"]))
            if p is None:
                raise ScoreFileError(
                    f"{where}: uid {rec['uid']!r} is not a row of the task (uids look like {next(iter(by_uid))!r})"
                )
        elif "answer" in rec:
            prompt = str(rec.get("prompt", ""))
            fields = rec.get("row") if isinstance(rec.get("row"), dict) else {}
            p = Problem(
                uid=f"line:{rec['_line']}",
                prompt=prompt,
                answer=str(rec["answer"]),
                difficulty="all",
                meta={"file": "line", "row": rec["_line"], "fields": fields, "messages": None, "system": None},
            )
        elif "row" in rec:
            file = rec.get("file", "train")
            p = by_row.get((file, rec["row"]))
            if p is None:
                raise ScoreFileError(
                    f"{where}: {file} row {rec['row']!r} is not a row of the task (a row index of "
                    'task.data.train, or of task.data.eval with "file": "eval"; task.data.where '
                    "applies)"
                )
        else:
            raise ScoreFileError(f'{where}: name the problem with "uid", "row" (+ "file") or "answer"')
        out.append(p)
    return out


def score_file(task, path: str | Path) -> dict:
    """Score every completion of the file; JSON lines to stdout, the summary to stderr; -> the summary."""
    records = read_completions(path)
    problems = resolve(task, records, path)
    truncated = [bool(r.get("truncated", False)) for r in records]
    scores = task.score_batch(problems, [r["completion"] for r in records], truncated)
    for rec, p, s, t in zip(records, problems, scores, truncated):
        parts = {k: v for k, v in s.parts.items() if k != "timeouts"}
        print(
            json.dumps(
                {
                    "line": rec["_line"],
                    "uid": p.uid,
                    "correct": s.correct,
                    "reward": s.total,
                    "rewards": parts,
                    "parsed": s.parsed,
                    "truncated": t,
                    "timeouts": int(s.parts.get("timeouts", 0)),
                }
            ),
            flush=True,
        )
    n = len(scores)
    names = [k for k in scores[0].parts if k != "timeouts"]
    summary = {
        "completions": n,
        "correct": sum(s.correct for s in scores),
        "mean_reward": sum(s.total for s in scores) / n,
        "mean_by_reward": {k: sum(s.parts[k] for s in scores) / n for k in names},
        "no_answer_read": sum(s.parsed is None for s in scores),
        "timeouts": int(sum(s.parts.get("timeouts", 0) for s in scores)),
        "correct_defined_by": task.correct,
    }
    by = ", ".join(f"{k} {v:.3f}" for k, v in summary["mean_by_reward"].items())
    print(
        f"harness score: {n} completions, {summary['correct']} correct ({summary['correct'] / n:.3f}, by reward "
        f"{task.correct!r}); mean reward {summary['mean_reward']:.3f} ({by}); no answer read in "
        f"{summary['no_answer_read']}; {summary['timeouts']} timed out",
        file=sys.stderr,
    )
    return summary
