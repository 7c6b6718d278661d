"""A data path that exists but is not a regular file (a named pipe, a character device such as /dev/zero) is
refused from os.stat, never opened: opening a named pipe waits for a writer forever and /dev/zero never ends.
Every reader of a user's data file is tried (task.data.train / eval, `harness train-rm --pairs` and `--run`,
dpo.pairs, `harness score`'s completions), each in a thread given a deadline, so a regression fails here
instead of hanging the suite."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from harness.cli import main
from harness.config.dpo import DpoSection
from harness.rm.pairs import PairsError, pairs_from_run, read_pairs_file
from harness.tasks.dataset.read import read_rows
from harness.tasks.dataset.score_file import ScoreFileError, read_completions
from harness.train.dpo.pairs import PairsFileError, read_pairs

DEADLINE_S = 30


def _unblock(fifo: Path) -> None:
    """Let a reader stuck opening `fifo` go on: open its writing end (non-blocking, as a reader waits)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def raised_within(fn, fifo: Path | None = None) -> BaseException | None:
    """What fn() raised (None if nothing), failing the test when it has not returned within DEADLINE_S."""
    out: dict = {}

    def call():
        try:
            fn()
        except BaseException as err:  # noqa: BLE001 -- handed back to the test
            out["err"] = err

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(DEADLINE_S)
    if t.is_alive():
        if fifo is not None:
            _unblock(fifo)
        pytest.fail(f"still waiting after {DEADLINE_S} s: the path was opened instead of refused")
    return out.get("err")


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "rows.jsonl"
    os.mkfifo(path)
    return path


@pytest.fixture
def zero(tmp_path) -> Path:
    """/dev/zero under a name that says JSON Lines (a symlink: os.stat follows it to the device)."""
    path = tmp_path / "zero.jsonl"
    path.symlink_to("/dev/zero")
    return path


def test_a_named_pipe_as_task_data_is_refused_naming_the_key(fifo):
    err = raised_within(lambda: read_rows(str(fifo), "auto", "train", "task.data.train", "x"), fifo)
    assert isinstance(err, ValueError)
    assert str(err) == (
        f"task.data.train={str(fifo)!r} is a named pipe, not a regular file; allowed: a regular file or a folder"
    )


def test_a_character_device_as_task_data_is_refused(zero):
    err = raised_within(lambda: read_rows([str(zero)], "json", "train", "task.data.eval", "x"))
    assert isinstance(err, ValueError)
    assert f"task.data.eval={str(zero)!r} is a character device, not a regular file" in str(err)


def test_harness_config_refuses_a_named_pipe_as_the_eval_file(fifo, tmp_path, capsys):
    rows = tmp_path / "train.jsonl"
    rows.write_text(json.dumps({"question": "1+1=?", "answer": "#### 2"}) + "\n")
    data = json.dumps({"train": str(rows), "eval": str(fifo), "prompt_key": "question"})
    argv = ["config", "experiments/runs/smoke.yaml", "warm_start.enabled=false", "task.name=dataset"]
    argv += ["task.rewards=[gsm8k]", f"task.data={data}"]
    out: dict = {}
    assert raised_within(lambda: out.setdefault("rc", main(argv)), fifo) is None
    assert out["rc"] == 2
    assert f"task.data.eval={str(fifo)!r} is a named pipe, not a regular file" in capsys.readouterr().err


def test_train_rm_refuses_a_named_pipe_as_pairs_or_samples(fifo, tmp_path):
    err = raised_within(lambda: read_pairs_file(fifo), fifo)
    assert isinstance(err, PairsError) and f"--pairs={str(fifo)!r} is a named pipe" in str(err)
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "samples.jsonl")
    err = raised_within(lambda: pairs_from_run(run), run / "samples.jsonl")
    assert isinstance(err, PairsError) and "samples.jsonl is a named pipe, not a regular file" in str(err)


def test_dpo_pairs_a_named_pipe_is_refused_by_the_config_and_the_reader(fifo, zero):
    err = raised_within(lambda: DpoSection(pairs=str(fifo)), fifo)
    assert "a named pipe, not a regular file; allowed: 'generate' or a JSONL file" in str(err)
    err = raised_within(lambda: read_pairs(zero))
    assert isinstance(err, PairsFileError)
    assert f"dpo.pairs={str(zero)!r} is a character device, not a regular file" in str(err)


def test_score_refuses_a_named_pipe_as_the_completions_file(fifo):
    err = raised_within(lambda: read_completions(fifo), fifo)
    assert isinstance(err, ScoreFileError)
    assert f"completions file {str(fifo)!r} is a named pipe, not a regular file" in str(err)
