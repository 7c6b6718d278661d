"""train.checkpoint_background: the checkpoint written in a thread while the next steps run.

A run with it is the same run (every record but the timings, every checkpoint's weights and optimizer state,
bit for bit), even when each write is slowed down so that the next step's update lands while the previous
checkpoint is being written (the snapshot, not the live weights, is written); the step loop really runs
during a write (the order of the events says so); a LoRA run's checkpoints hold its adapters alike; a run
resumes with the knob on or off. The kills and the full disk of test_kill_phases.py and test_disk_full.py run
with it too (parametrized there)."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from faults_helpers import BACKGROUND, Killed, assert_complete, tiny
from safetensors.torch import load_file

from harness.jsonl import read_jsonl
from harness.train.core.rundir import RunDir

# the tiny model never answers right (every advantage 0): an entropy bonus gives every step a gradient, so the
# weights a step later differ from the checkpoint's
MOVING = "objective.entropy_coef=0.01"


def _records(run) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in read_jsonl(run / "metrics.jsonl")]


def _read_checkpoint(folder) -> tuple[dict, dict]:
    """(weights, optimizer state) of a checkpoint folder."""
    weights = {}
    for f in sorted(folder.glob("*.safetensors")):
        weights.update(load_file(f))
    state = torch.load(folder / "trainer_state.pt", weights_only=False)
    return weights, state["optimizer"]["state"]


def _slow_writes(monkeypatch, events: list[str], written: dict, seconds: float = 0.3) -> None:
    """Each checkpoint write starts `seconds` late and records its start and end in `events`, and what it wrote
    in `written` (step -> (weights, optimizer state); only the newest two checkpoints stay on disk)."""
    real = RunDir.save_checkpoint

    def save_checkpoint(self, step, *args, **kwargs):
        events.append(f"write {step} start")
        time.sleep(seconds)
        out = real(self, step, *args, **kwargs)
        written[step] = _read_checkpoint(out)
        events.append(f"write {step} end")
        return out

    monkeypatch.setattr(RunDir, "save_checkpoint", save_checkpoint)


def _record_steps(monkeypatch, events: list[str]) -> None:
    import harness.train.rl.step as loop

    real = loop.policy_update

    def policy_update(*args, **kwargs):
        events.append(f"update on {threading.current_thread().name}")
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "policy_update", policy_update)


@pytest.mark.parametrize("extra", [(), ("model.lora={r: 4, alpha: 8}",)], ids=["full", "lora"])
def test_a_background_run_is_the_same_run(extra, tmp_path, mlflow_uri, monkeypatch):
    from harness.train import train

    sync, bg = tmp_path / "sync", tmp_path / "background"
    events: list[str] = []
    written: dict[str, dict] = {"sync": {}, "background": {}}
    with monkeypatch.context() as m:
        _slow_writes(m, [], written["sync"], seconds=0.0)
        train(tiny(MOVING, *extra), sync)
    with monkeypatch.context() as m:
        _slow_writes(m, events, written["background"])
        _record_steps(m, events)
        train(tiny(MOVING, BACKGROUND, *extra), bg)
    assert _records(bg) == _records(sync)
    assert sorted(written["background"]) == sorted(written["sync"]) == [0, 1, 2, 3]
    for step in range(4):
        (w_bg, opt_bg), (w_sync, opt_sync) = written["background"][step], written["sync"][step]
        assert w_bg.keys() == w_sync.keys() and all(torch.equal(w_bg[k], w_sync[k]) for k in w_sync), step
        assert opt_bg.keys() == opt_sync.keys()
        for i in opt_sync:
            assert all(torch.equal(opt_bg[i][k], opt_sync[i][k]) for k in opt_sync[i]), (step, i)
    w0, w1 = written["sync"][0][0], written["sync"][1][0]
    assert any(not torch.equal(w0[k], w1[k]) for k in w1)  # a step moves the weights (else the above is void)
    # the next step's update ran while step 0's checkpoint was being written
    assert events.index("write 0 start") < events.index("update on MainThread", events.index("write 0 start"))
    assert events.index("update on MainThread", events.index("write 0 start")) < events.index("write 0 end")
    assert_complete(mlflow_uri, bg)


def test_without_it_the_loop_waits_for_each_write(tmp_path, mlflow_uri, monkeypatch):
    """The order check above can fail: written synchronously, no update runs during a write."""
    from harness.train import train

    events: list[str] = []
    _slow_writes(monkeypatch, events, {}, seconds=0.05)
    _record_steps(monkeypatch, events)
    train(tiny(), tmp_path / "run")
    for step in range(3):
        start, end = events.index(f"write {step} start"), events.index(f"write {step} end")
        assert not [e for e in events[start:end] if e.startswith("update")], events


def test_a_run_resumes_with_the_checkpoint_written_either_way(tmp_path, mlflow_uri, monkeypatch):
    """It changes how the run goes, not what it computes: a run killed with it off resumes with it on."""
    import harness.train.rl.step as loop
    from harness.train import train

    run = tmp_path / "run"
    real, calls = loop.policy_update, {"n": 0}

    def killed_at_step_2(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise Killed("step 2's update")
        return real(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(loop, "policy_update", killed_at_step_2)
        with pytest.raises(Killed):
            train(tiny(), run)
    train(tiny(BACKGROUND), run)
    assert_complete(mlflow_uri, run)
