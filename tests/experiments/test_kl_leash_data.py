"""The kl_leash study's committed data is what experiments/data/kl_leash/make.py writes, and its reward-model
pairs carry the flaw the study is about: every chosen answer is correct AND longer than its rejected one."""

from __future__ import annotations

import importlib.util
import json

from study_helpers import REPO

from harness.tasks.arithmetic import ArithmeticTask

FOLDER = REPO / "experiments" / "data" / "kl_leash"


def _make():
    spec = importlib.util.spec_from_file_location("kl_leash_make", FOLDER / "make.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_files_are_the_scripts_output(tmp_path):
    _make().main(tmp_path)
    for name in ("train.jsonl", "eval.jsonl", "rm_pairs.jsonl"):
        assert (tmp_path / name).read_text() == (FOLDER / name).read_text(), name


def test_chosen_is_correct_and_longer_rejected_is_wrong():
    task = ArithmeticTask()
    rows = [json.loads(x) for x in (FOLDER / "rm_pairs.jsonl").read_text().splitlines()]
    assert len(rows) == 2000
    for r in rows:
        assert len(r["chosen"]) >= len(r["rejected"]) + 2
        value = str(eval(r["prompt"].split("=")[0]))  # noqa: S307 -- the task's own digits and + - *
        assert task.parse_answer(r["chosen"]) == value and task.parse_answer(r["rejected"]) != value
    train = {json.loads(x)["prompt"] for x in (FOLDER / "train.jsonl").read_text().splitlines()}
    held = {json.loads(x)["prompt"] for x in (FOLDER / "eval.jsonl").read_text().splitlines()}
    assert not train & held  # the task's own split
