"""The progress line (harness/progress.py): drawn on a terminal only (a fake TTY here), with done / total;
nothing on stderr otherwise. The slow test trains a tiny run: the warm start's, the steps' and an eval's
lines on a terminal; without one, stderr is what the run printed before progress lines existed."""

from __future__ import annotations

import contextlib
import io
import re
import sys

import pytest

from harness import progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def fake_tty(monkeypatch) -> FakeTTY:
    """stderr a terminal, from the test's body (pytest's capture sets sys.stderr again once a test starts)."""
    err = FakeTTY()
    monkeypatch.setattr(sys, "stderr", err)
    return err


def test_a_terminal_gets_done_over_total_rate_and_eta(monkeypatch, capsys):
    tty = fake_tty(monkeypatch)
    with progress.bar("train", total=4, initial=1, unit="step") as bar:
        for _ in range(3):
            print("[harness] a step line")
            bar.update()
    shown = tty.getvalue()
    assert "train:" in shown and "4/4" in shown and "step" in shown
    assert "1/4 [" in shown and "<" in shown  # from a resumed step 1, with an ETA once a step ran
    assert "\r" in shown and shown.count("\n") == 1  # rewritten in place; the finished line stays
    assert capsys.readouterr().out == "[harness] a step line\n" * 3  # stdout's lines as they were


def test_advance_moves_an_eval_bar_only(monkeypatch):
    tty = fake_tty(monkeypatch)
    with progress.bar("train", total=2, unit="step") as outer:
        progress.advance(8)  # a training step's rollouts
        assert outer.n == 0
        with progress.bar("eval step 1", total=16, unit="sample", fed=True) as inner:
            progress.advance(8)
            progress.advance(8)
            assert inner.n == 16
    assert "eval step 1:" in tty.getvalue() and "0/16" in tty.getvalue()  # drawn at most every 0.1 s, then erased
    progress.advance(3)  # no bar open: nothing happens


def test_no_terminal_no_line(capsys, monkeypatch):
    monkeypatch.setattr(progress, "tqdm", None)  # a bar built anyway would fail here
    with progress.bar("train", total=3) as bar:
        bar.update()
        progress.advance(2)
    assert bar is progress.OFF
    assert capsys.readouterr().err == ""


def test_other_ranks_draw_nothing(monkeypatch):
    tty = fake_tty(monkeypatch)
    monkeypatch.setenv("RANK", "1")
    with progress.bar("train", total=3) as bar:
        bar.update()
    assert bar is progress.OFF and tty.getvalue() == ""


# ----------------------------------------------------------------------------- a tiny run
TINY = [
    "warm_start.steps=4",
    "train.steps=3",
    "train.prompts_per_step=4",
    "train.group_size=4",
    "rollout.max_new_tokens=16",
    "eval.every=2",
    "eval.num_prompts=8",
    "eval.n_samples=4",
    "eval.ks=[1,4]",
    "tracking.mlflow=false",
]
TIMING = re.compile(r"\d+\.\d+(it|s)/s|\d+\.\d+s/it|\[\d\d:\d\d<[^\]]*\]|s=\d+\.\d+")  # rates, clocks, step seconds


@contextlib.contextmanager
def _no_progress():
    """harness.progress.bar as if it did not exist: the run as it printed before progress lines."""

    @contextlib.contextmanager
    def absent(*args, **kwargs):
        yield progress.OFF

    real = progress.bar
    progress.bar = absent
    try:
        yield
    finally:
        progress.bar = real


@pytest.mark.slow
def test_a_run_shows_its_progress_on_a_terminal_only(tmp_path, capsys, monkeypatch):
    from harness.config import load_config
    from harness.train import train
    from harness.train.run.warmstart import ensure_warm_start

    cfg = load_config("experiments/runs/smoke.yaml", [*TINY, f"warm_start.cache_dir={tmp_path / 'ws'}"])
    with monkeypatch.context() as m:
        m.setattr(sys, "stderr", FakeTTY())
        ensure_warm_start(cfg)
        warm = sys.stderr.getvalue()
        train(cfg, tmp_path / "tty")
        shown = sys.stderr.getvalue()[len(warm) :]
    assert "warm start:" in warm and "4/4" in warm  # the SFT steps
    assert "warm start eval:" in warm and "/512 [" in warm  # its accuracy: 128 prompts x 4 samples
    assert "train:" in shown and "3/3" in shown and ("step/s" in shown or "s/step" in shown)
    assert "eval step 2:" in shown and "/32 [" in shown  # the eval at step 2 (8 prompts x 4) and the final one
    assert "eval step 3:" in shown
    capsys.readouterr()

    with _no_progress():
        train(cfg, tmp_path / "before")
    before = capsys.readouterr()
    train(cfg, tmp_path / "now")
    now = capsys.readouterr()
    assert TIMING.sub("T", now.err) == TIMING.sub("T", before.err)  # no terminal: nothing more on stderr
    assert "train:" not in now.err and "eval step" not in now.err
    assert TIMING.sub("T", now.out).replace("now", "before") == TIMING.sub("T", before.out)
