"""The sample dataset the project writes itself (harness/tasks/sample_data.py): deterministic,
GSM8K's and MATH's layouts, a third of each difficulty, train and test disjoint, and every
reference answer read as correct by the verifiers its recipes name."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from harness.cli import main
from harness.tasks.rewards.verifiers import VERIFIERS
from harness.tasks.sample_data import generate, write_samples


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_written_files_are_the_same_every_time(tmp_path):
    a = write_samples(tmp_path / "a")
    b = write_samples(tmp_path / "b")
    digest = lambda ps: [hashlib.sha256(p.read_bytes()).hexdigest() for p in ps]  # noqa: E731
    assert digest(a) == digest(b) and [p.relative_to(tmp_path / "a") for p in a] == [
        p.relative_to(tmp_path / "b") for p in b
    ]


def test_layouts_and_difficulty(tmp_path):
    write_samples(tmp_path)
    train, test = _rows(tmp_path / "gsm8k_sample/train.jsonl"), _rows(tmp_path / "gsm8k_sample/test.jsonl")
    assert len(train) + len(test) == 4000 and 350 < len(test) < 650
    assert set(train[0]) == {"question", "answer", "difficulty"}
    assert not {r["question"] for r in train} & {r["question"] for r in test}
    counts = Counter(r["difficulty"] for r in train + test)
    assert set(counts) == {"easy", "medium", "hard"} and max(counts.values()) - min(counts.values()) <= 1
    m_train = _rows(tmp_path / "math_sample/train.jsonl")
    assert set(m_train[0]) == {"problem", "solution", "answer", "level"} and len(m_train) == len(train)
    assert {r["level"] for r in m_train} == {"Level 1", "Level 2", "Level 3"}


def test_steps_follow_difficulty_and_answers_check_out():
    for p in generate(300):
        assert len(p["gsm8k"]) == p["level"] and 0 <= p["answer"] < 1000
        for line in p["gsm8k"]:  # every calculator annotation <<a op b=c>> is right
            expr, value = line.split("<<")[1].split(">>")[0].split("=")
            assert eval(expr) == int(value)  # noqa: S307 -- our own generated arithmetic
        assert p["gsm8k"][-1].split(">>")[1].startswith(str(p["answer"]))


def test_references_read_as_correct_by_the_recipes_verifiers(tmp_path):
    write_samples(tmp_path)
    for r in _rows(tmp_path / "gsm8k_sample/test.jsonl")[:200]:
        for v in ("gsm8k", "number", "math"):
            assert VERIFIERS[v](r["answer"], r["answer"], {}).correct, (v, r)
    for r in _rows(tmp_path / "math_sample/test.jsonl")[:200]:
        assert VERIFIERS["math"](r["solution"], r["answer"], {}).correct, r
        assert VERIFIERS["math"](r["solution"], r["solution"], {}).correct, r


def test_cli(tmp_path, capsys):
    assert main(["sample-data", "--out", str(tmp_path), "--rows", "30"]) == 0
    printed = capsys.readouterr().out.split()
    assert (
        len(printed) == 4
        and len(_rows(tmp_path / "gsm8k_sample/train.jsonl")) + len(_rows(tmp_path / "gsm8k_sample/test.jsonl")) == 30
    )
