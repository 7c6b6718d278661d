"""`harness train-rm` refuses bad input with one line naming the option or file, row, value and what is
allowed, exit status 2, before any model loads."""

import json

import pytest

from harness.cli import main
from harness.rm import train as rm_train


@pytest.fixture
def no_model(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(rm_train, "build_reward_model", refuse)


def _refused(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def _pairs(tmp_path, rows, name="p.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


GOOD = [{"prompt": f"q{i}", "chosen": "yes", "rejected": "no"} for i in range(10)]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--lr", "0"], "--lr=0.0; allowed: a number > 0"),
        (["--lr", "nan"], "--lr=nan; allowed: a number > 0"),
        (["--epochs", "-1"], "--epochs=-1.0; allowed: a number > 0"),
        (["--eval-fraction", "1"], "--eval-fraction=1.0; allowed: a number in [0, 1)"),
        (["--center-rewards-coefficient", "-0.1"], "--center-rewards-coefficient=-0.1; allowed: a number >= 0"),
        (["--max-grad-norm", "0"], "--max-grad-norm=0.0; allowed: a number > 0"),
        (["--base", "no-such-model"], "--base='no-such-model': not a model name (tiny-dense, tiny-moe"),
        (["--max-length", "100000"], "--max-length=100000; allowed: at most the base's 512 positions"),
        (["--max-length", "3"], "--max-length=3: all 9 train pairs are longer"),
    ],
)
def test_bad_options_are_refused(tmp_path, capsys, no_model, extra, message):
    err = _refused(capsys, ["train-rm", "--pairs", _pairs(tmp_path, GOOD), "--out", str(tmp_path / "o"), *extra])
    assert err.startswith("harness: train-rm: ") and message in err
    assert not (tmp_path / "o" / "rm_report.json").exists()


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"prompt": "a", "chosen": "b"}], "p.jsonl, row 1: field 'rejected' is missing"),
        ([*GOOD, {"prompt": "a", "chosen": "b", "rejected": "b"}], "row 11: field 'rejected' equals field 'chosen'"),
        ([{"prompt": "a", "chosen": ["x"], "rejected": "c"}], "row 1: field 'chosen' is ['x']; allowed:"),
        ([], "p.jsonl' is empty: no rows"),  # was: "does not parse as JSON Lines / JSON (StopIteration: )"
    ],
)
def test_bad_pairs_files_are_refused(tmp_path, capsys, no_model, rows, message):
    err = _refused(capsys, ["train-rm", "--pairs", _pairs(tmp_path, rows), "--out", str(tmp_path / "o")])
    assert message in err


def test_an_out_folder_that_holds_something_else_is_refused(tmp_path, capsys, no_model):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "config.yaml").write_text("a run's")
    err = _refused(capsys, ["train-rm", "--pairs", _pairs(tmp_path, GOOD), "--out", str(tmp_path / "o")])
    assert "--out=" in err and "allowed: a new or empty folder, or one `harness train-rm` wrote" in err
    assert (tmp_path / "o" / "config.yaml").read_text() == "a run's"


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="refused only where torch sees no CUDA device")
def test_cuda_without_a_gpu_is_refused(tmp_path, capsys, no_model):
    err = _refused(
        capsys, ["train-rm", "--pairs", _pairs(tmp_path, GOOD), "--out", str(tmp_path / "o"), "--device", "cuda"]
    )
    assert "--device='cuda'; allowed: auto or cpu" in err


def test_bad_sources_are_refused(tmp_path, capsys, no_model):
    out = ["--out", str(tmp_path / "o")]
    assert "no such file" in _refused(capsys, ["train-rm", "--pairs", str(tmp_path / "none.jsonl"), *out])
    (tmp_path / "p.txt").write_text("{}")
    assert "allowed: .jsonl" in _refused(capsys, ["train-rm", "--pairs", str(tmp_path / "p.txt"), *out])
    assert "no samples in" in _refused(capsys, ["train-rm", "--run", str(tmp_path), *out])
    one_prompt = _pairs(tmp_path, GOOD[:1])
    assert "leaves none to train on" in _refused(
        capsys, ["train-rm", "--pairs", one_prompt, "--eval-fraction", "0.5", *out]
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--out", "o"], "one of the arguments --pairs --run is required"),
        (["--pairs", "a.jsonl", "--run", "r", "--out", "o"], "not allowed with argument"),
        (["--pairs", "a.jsonl", "--out", "o", "--steps", "0"], "argument --steps: must be >= 1"),
        (["--pairs", "a.jsonl", "--out", "o", "--steps", "3", "--epochs", "2"], "not allowed with argument"),
        (["--pairs", "a.jsonl", "--out", "o", "--lr", "fast"], "argument --lr: 'fast' is not a number"),
    ],
)
def test_bad_command_lines_are_refused_by_argparse(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main(["train-rm", *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
