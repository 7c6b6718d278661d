"""Helpers for the dataset-task tests: small data files in every format, and a task from a data mapping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def gsm8k_rows(n: int = 40, start: int = 0) -> list[dict]:
    return [
        {
            "question": f"Tom has {i} apples and buys {i + 1} more. How many apples?",
            "answer": f"Tom has {i}+{i + 1} = <<{i}+{i + 1}={2 * i + 1}>>{2 * i + 1} apples.\n#### {2 * i + 1}",
            "difficulty": ["easy", "medium", "hard"][i % 3],
        }
        for i in range(start, start + n)
    ]


@pytest.fixture
def gsm8k_file(tmp_path):
    return write_jsonl(tmp_path / "gsm8k.jsonl", gsm8k_rows())


from tests.models.hub_cache import hub_cache, tiny_folder  # noqa: E402, F401 -- fixtures: a Hub cache, a tiny model folder
