"""`harness score CONFIG COMPLETIONS.jsonl`: one JSON line per completion with its breakdown on stdout,
a summary on stderr; a bad file or line is one message, exit 2, before anything is scored."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from tests.tasks.conftest import gsm8k_rows, write_jsonl


@pytest.fixture
def setup(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", gsm8k_rows(30))
    write_jsonl(tmp_path / "test.jsonl", gsm8k_rows(5, start=100))
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"""
model: {{name: tiny-dense}}
warm_start: {{enabled: false}}
task:
  name: dataset
  data: {{train: {tmp_path / "train.jsonl"}, eval: {tmp_path / "test.jsonl"}, prompt_key: question, max_train_rows: 3}}
  rewards: [gsm8k, {{function: tests.tasks.user_rewards:brevity, weight: 0.5}}]
  reward_workers: 0
""")
    return tmp_path, cfg


def run(cfg, lines, tmp_path, capsys):
    path = tmp_path / "completions.jsonl"
    path.write_text("".join((json.dumps(x) if not isinstance(x, str) else x) + "\n" for x in lines))
    code = main(["score", str(cfg), str(path)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_scores_each_line(setup, capsys):
    tmp_path, cfg = setup
    lines = [
        {"row": 20, "completion": "#### 41"},  # row 20's answer is 2*20+1; beyond max_train_rows
        {"row": 20, "completion": "#### 41", "truncated": True},
        {"uid": "eval:1", "completion": "#### 203, I am quite sure about it"},
        {"answer": "1000", "completion": "#### 1,000"},
    ]
    code, out, err = run(cfg, lines, tmp_path, capsys)
    assert code == 0, err
    recs = [json.loads(x) for x in out.splitlines()]
    assert [r["correct"] for r in recs] == [True, False, True, True]
    assert recs[0] == {
        "line": 1,
        "uid": "train:20",
        "correct": True,
        "reward": 1.5,
        "rewards": {"gsm8k": 1.0, "brevity": 1.0},
        "parsed": "41",
        "truncated": False,
        "timeouts": 0,
    }
    assert recs[2]["rewards"] == {"gsm8k": 1.0, "brevity": 0.0} and recs[1]["parsed"] is None
    assert "4 completions, 3 correct (0.750, by reward 'gsm8k')" in err and "no answer read in 1" in err


@pytest.mark.parametrize(
    "lines, needle",
    [
        (["{not json"], "completions.jsonl:1: not a JSON object"),
        ([{"row": 1}], 'completions.jsonl:1: each line needs "completion"'),
        ([{"completion": "x"}], 'name the problem with "uid", "row"'),
        ([{"uid": "train:999", "completion": "x"}], "uid 'train:999' is not a row of the task"),
        ([{"row": 7, "file": "eval", "completion": "x"}], "eval row 7 is not a row of the task"),
        ([{"row": 1, "completion": "x", "truncated": "yes"}], '"truncated" must be true or false'),
    ],
)
def test_bad_lines(setup, capsys, lines, needle):
    tmp_path, cfg = setup
    code, out, err = run(cfg, lines, tmp_path, capsys)
    assert code == 2 and needle in err and not out and "Traceback" not in err


def test_a_bad_function_is_one_line_exit_1(setup, capsys):
    tmp_path, cfg = setup
    cfg.write_text(cfg.read_text().replace("user_rewards:brevity", "user_rewards:returns_text"))
    code, out, err = run(cfg, [{"row": 1, "completion": "#### 3"}], tmp_path, capsys)
    assert code == 1 and not out and "\n" not in err.strip() and "Traceback" not in err
    assert "RewardFunctionError: reward function tests.tasks.user_rewards:returns_text" in err
    assert "returned 'one' (a str)" in err and "train row 1 (uid train:1)" in err and "'#### 3'" in err


def test_needs_a_dataset_task(capsys):
    assert main(["score", "experiments/runs/smoke.yaml", "x.jsonl"]) == 2
    assert "harness score scores a dataset task's completions" in capsys.readouterr().err
