"""harness/train/run/ckpt_writer.py: what the snapshot copies and keeps, and the writer's one-at-a-time order and
its error raised at the wait (the runs themselves: tests/faults/test_checkpoint_background.py)."""

from __future__ import annotations

import threading

import pytest
import torch

from harness.train.run.ckpt_writer import BackgroundWriter, snapshot


def test_snapshot_copies_trained_tensors_once_and_keeps_frozen_ones():
    trained = torch.nn.Parameter(torch.ones(3))
    frozen = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
    moment = torch.full((3,), 0.5)
    state = {"w": trained, "tied": trained, "base": frozen, "opt": {0: {"exp_avg": moment, "step": 3}}, "n": [1, 2]}
    snap = snapshot(state)
    assert snap["w"] is snap["tied"] and snap["w"] is not trained  # one copy of a tied weight
    assert snap["base"] is frozen  # a frozen parameter changes in no step: kept
    with torch.no_grad():
        trained.add_(1.0)
    moment.mul_(2.0)
    state["n"].append(3)
    assert torch.equal(snap["w"], torch.ones(3)) and not snap["w"].requires_grad
    assert torch.equal(snap["opt"][0]["exp_avg"], torch.full((3,), 0.5)) and snap["opt"][0]["step"] == 3
    assert snap["n"] == [1, 2]


def test_writer_runs_one_write_at_a_time_and_raises_its_error_at_the_wait():
    writer, order, release = BackgroundWriter(), [], threading.Event()

    def first():
        release.wait(5)
        order.append("first")

    writer.submit(first, "a")
    assert writer.busy
    release.set()
    writer.submit(lambda: order.append("second"), "b")  # waits for the first
    writer.wait()
    assert order == ["first", "second"] and not writer.busy

    def full_disk():
        raise OSError(28, "No space left on device")

    writer.submit(full_disk, "c")
    with pytest.raises(OSError, match="No space left"):
        writer.wait()
    writer.wait()  # raised once; nothing in flight now
