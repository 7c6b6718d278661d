"""Under `harness train --nproc N` (torchrun, gloo) a rank's failure reaches the user as the one line a 1-process run
prints, with its exit status: not buried under torchrun's ChildFailedError traceback or the other ranks'
'Connection closed by peer'; the other ranks stop within seconds (harness/train/run/launch.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from harness.train.run import launch as launcher
from harness.train.run.launch import failure_line

SAMPLE = "results/data/gsm8k_sample"


def test_a_reward_that_raises_on_one_rank_is_one_line(tmp_path):
    """Rank 1's reward raises; rank 0 waits in its next collective, loses its peer and is stopped by torchrun."""
    data = {"train": f"{SAMPLE}/train.jsonl", "prompt_key": "question", "max_train_rows": 16, "eval_fraction": 0.2}
    cmd = [sys.executable, "-m", "harness.cli", "train", "experiments/runs/smoke.yaml", "task.name=dataset"]
    cmd += [
        f"task.data={json.dumps(data)}",
        "task.rewards=[gsm8k, {function: tests.tasks.user_rewards:boom_on_rank_1}]",
    ]
    cmd += ["task.reward_workers=0", "warm_start.enabled=false", "train.steps=2", "train.prompts_per_step=2"]
    cmd += ["train.group_size=2", "train.mini_batches=1", "train.threads=1", "rollout.max_new_tokens=8"]
    cmd += ["rollout.seeding=prompt", "eval.every=0", "eval.num_prompts=2", "eval.n_samples=1", "eval.ks=[1]"]
    cmd += ["tracking.mlflow=false", "--out", str(tmp_path / "run"), "--nproc", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    both = done.stdout + done.stderr
    line = (
        "harness: RewardFunctionError: reward function tests.tasks.user_rewards:boom_on_rank_1 (task.rewards "
        "'boom_on_rank_1') raised ValueError: rank 1's bad reward on train row"
    )
    assert done.returncode == 1, both[-3000:]
    assert done.stderr.strip().splitlines()[-1].startswith(line), both[-3000:]
    assert both.count(line) == 1 and "Traceback" not in both and "ChildFailedError" not in both, both[-3000:]


def failure(rank: int, exitcode: int) -> ProcessFailure:
    return ProcessFailure(local_rank=rank, pid=1000 + rank, exitcode=exitcode, error_file="<N/A>")


def report(rank: int, t: float, line: str | None, code: int = 1, tb: str | None = None) -> dict:
    return {"rank": rank, "time": t, "line": line, "exit_code": code, "traceback": tb}


def test_which_rank_s_end_is_told():
    now = time.time()
    err = ChildFailedError("harness.cli", {0: failure(0, -15), 1: failure(1, 1)})
    peer = report(0, now, None, tb="Traceback ...\nRuntimeError: Connection closed by peer\n")
    fault = report(1, now + 1, "harness: RewardFunctionError: x")
    stop = report(0, now, "harness: StoppedBySignal: stopped by SIGTERM after step 1", 143)
    assert failure_line(err, [peer, fault]) == ("harness: RewardFunctionError: x", 1)  # its own fault, not the peer's
    assert failure_line(err, [stop, fault]) == ("harness: RewardFunctionError: x", 1)  # nor torchrun's SIGTERM
    killed = ChildFailedError("harness.cli", {0: failure(0, 143), 1: failure(1, -9)})
    line, code = failure_line(killed, [stop])  # rank 1 SIGKILLed: no report; rank 0 stopped by torchrun's SIGTERM
    assert code == 1 and line.startswith("harness: rank 1 (local_rank 1, pid 1001) died: killed by SIGKILL"), line
    both = ChildFailedError("harness.cli", {0: failure(0, 143), 1: failure(1, 143)})
    assert failure_line(both, [stop, {**stop, "rank": 1}]) == (stop["line"], 143)  # SIGTERM to a rank: all stop


def test_a_rank_s_own_traceback_is_shown_once(capsys):
    err = ChildFailedError("harness.cli", {0: failure(0, 1), 1: failure(1, -15)})
    bug = report(0, time.time(), None, tb="Traceback (most recent call last):\nKeyError: 'x'\n")
    assert failure_line(err, [bug]) == (
        "harness: rank 0 failed with the error above; torchrun stopped the other ranks",
        1,
    )
    assert capsys.readouterr().err == bug["traceback"]


def test_the_launcher_stopped_by_a_signal_says_the_ranks_line(monkeypatch, capsys):
    """SIGTERM to `harness train --nproc 2`: torchrun passes it on, the ranks stop (checkpointed) and the launcher
    exits 143 with their line (it used to end in torchrun's SignalException traceback)."""

    def ranks_stop(args):
        monkeypatch.setenv("RANK", "1")  # as in a rank
        launcher.report_rank("harness: StoppedBySignal: stopped by SIGTERM after step 3: ...", 143)
        monkeypatch.delenv("RANK")
        raise SignalException("Process 1 got signal: 15", sigval=signal.SIGTERM)

    monkeypatch.setattr(launcher, "torchrun", ranks_stop)
    assert launcher.launch(2, ["experiments/runs/smoke.yaml", "--out", "x"]) == 143
    assert capsys.readouterr().err.strip() == "harness: StoppedBySignal: stopped by SIGTERM after step 3: ..."
