"""The thread governor (harness/threads.py) and `harness bench --busy N`. Correctness
only: the timings are measured by the commands in docs/faults.md, on a quiet machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from harness.bench.load import BUSY_LOOP, busy_processes, describe_policy, wait_policy_env
from harness.cli import main
from harness.threads import CLK_TCK, ThreadGovernor, cpu_busy_seconds, governor_enabled, own_cpu_seconds, target_threads

STAT = """cpu  900 0 300 5000 10 0 0 0 0 0
cpu0 400 0 100 2000 5 0 0 0 0 0
cpu1 500 0 200 3000 5 0 0 0 0 0
cpu2 7 0 3 90 0 1 1 2 0 0
intr 1 2 3
"""


def test_cpu_busy_seconds_sums_the_allowed_cpus_only():
    # cpu0: user 400 + system 100 = 500 ticks; cpu2: 7 + 3 + irq 1 + softirq 1 + steal 2 = 14 ticks
    assert cpu_busy_seconds({0}, STAT) == pytest.approx(500 / CLK_TCK)
    assert cpu_busy_seconds({0, 2}, STAT) == pytest.approx(514 / CLK_TCK)
    assert cpu_busy_seconds({5}, STAT) == 0.0


@pytest.mark.parametrize(
    "current, others, expected",
    [
        (2, 0.05, 2),  # quiet: free 1.95 -> floor(2.25) = 2, stay
        (2, 0.9, 1),  # one busy process: free 1.1 -> floor(1.4) = 1, drop to one thread
        (2, 0.65, 1),  # free 1.35 -> floor(1.65) = 1
        (2, 0.25, 2),  # free 1.75 -> floor(2.05) = 2 (below the drop margin: stay)
        (1, 0.25, 1),  # free 1.75 -> up needs floor(1.9) = 1: stay at one (hysteresis)
        (1, 0.1, 2),  # free 1.9 -> floor(2.05) = 2: threads back
        (1, 1.9, 1),  # never below one
    ],
)
def test_target_threads_on_two_cores(current, others, expected):
    assert target_threads(current, ceiling=2, allowed=2, others=others) == expected


def test_target_threads_never_above_the_ceiling():
    assert target_threads(2, ceiling=2, allowed=16, others=0.0) == 2
    assert target_threads(8, ceiling=8, allowed=16, others=10.0) == 6  # free 6 -> floor(6.3)


def test_governor_drops_to_one_thread_when_another_process_takes_a_core_and_comes_back():
    # samples: (wall s, busy s of the allowed cores, this process tree's CPU s)
    samples = iter(
        [
            (0.0, 0.0, 0.0),
            (2.0, 4.0, 2.2),  # 2 s: cores busy 4 s, ours 2.2 -> others 0.9 cores -> 1 thread
            (4.0, 8.0, 4.2),  # others (4 - 2) / 2 = 1.0 -> stay at 1
            (6.0, 10.2, 6.2),
        ]
    )  # others (2.2 - 2.0) / 2 = 0.1 -> back to 2
    clock = [0.0]
    set_to, said = [], []
    gov = ThreadGovernor(
        ceiling=2,
        set_threads=set_to.append,
        sample=lambda: next(samples),
        allowed=2,
        clock=lambda: clock[0],
        report=said.append,
    )
    assert gov.tick() == 2  # first sample
    clock[0] = 0.5
    assert gov.tick() == 2  # under MIN_INTERVAL_S: no sample taken
    for t, threads in ((2.0, 1), (4.0, 1), (6.0, 2)):
        clock[0] = t
        assert gov.tick() == threads
    assert set_to == [1, 2] and gov.changes == 2 and gov.others == pytest.approx(0.1)
    assert said[0] == "[harness] torch threads 2 -> 1 (other processes used 0.90 of 2 cores over the last 2.0 s)"


def test_governor_is_off_when_asked_or_when_the_user_chose_a_wait_policy():
    assert governor_enabled({}) is True
    assert governor_enabled({"HARNESS_THREAD_GOVERNOR": "off"}) is False
    assert governor_enabled({"OMP_WAIT_POLICY": "PASSIVE"}) is False
    assert governor_enabled({"GOMP_SPINCOUNT": "300000"}) is False


def test_own_cpu_seconds_counts_a_busy_child():
    before = own_cpu_seconds()
    child = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])  # this run's work, e.g. a vLLM worker
    try:
        deadline = time.monotonic() + 10.0  # a loaded machine may give the child little CPU at first
        while (during := own_cpu_seconds()) - before <= 0.3 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        child.kill()
        child.wait()
    assert during - before > 0.3  # the child's CPU time, not just ours (we sleep)


def test_bench_busy_loops_count_as_other_processes():
    """`harness bench --in-process --busy N` starts its busy loops as children of the run: the governor
    must see them as another job's load, not as this run's CPU."""
    with busy_processes(1) as (pid,):
        busy0, own0 = _cpu_of(pid), own_cpu_seconds()
        deadline = time.monotonic() + 10.0  # a loaded machine may give the loop little CPU at first
        while _cpu_of(pid) - busy0 <= 0.3 and time.monotonic() < deadline:
            time.sleep(0.2)
        busy, own = _cpu_of(pid) - busy0, own_cpu_seconds() - own0
    assert busy > 0.3
    assert own < 0.5 * busy  # we sleep: the loop's CPU is not counted as ours


def _cpu_of(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def test_no_wait_policy_is_set_by_import_harness():
    """`import harness` leaves the OpenMP wait policy to libgomp (the governor handles sharing)."""
    code = "import os, harness, torch; print(os.environ.get('OMP_WAIT_POLICY'))"
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"


def test_wait_policy_env_for_bench_cases():
    base = {"OMP_WAIT_POLICY": "PASSIVE", "X": "1"}
    assert wait_policy_env("inherit", base) == base
    assert wait_policy_env("active", base) == {"OMP_WAIT_POLICY": "ACTIVE", "X": "1"}
    unset = wait_policy_env("unset", base)
    assert "OMP_WAIT_POLICY" not in unset and unset["GOMP_SPINCOUNT"] == "300000"
    assert governor_enabled(unset) is False  # `unset` measures libgomp's spin without the governor
    assert describe_policy(unset).startswith("libgomp default")


def test_busy_processes_run_and_are_stopped():
    with busy_processes(2) as pids:
        assert len(pids) == 2
        for pid in pids:
            os.kill(pid, 0)  # alive
            assert open(f"/proc/{pid}/stat").read().split()[2] in "RSD"  # D: a moment of disk wait on a loaded machine
    for pid in pids:
        try:
            state = open(f"/proc/{pid}/stat").read().split()[2]
        except FileNotFoundError:
            continue
        assert state == "Z" or state == "X", state  # reaped or exiting


def test_bench_busy_flag(tmp_path, capsys):
    rc = main(
        [
            "bench",
            "--models",
            "tiny-dense",
            "--backends",
            "hf",
            "--steps",
            "1",
            "--no-trl",
            "--threads",
            "1",
            "--prompts",
            "2",
            "--group-size",
            "2",
            "--max-new-tokens",
            "8",
            "--out-dir",
            str(tmp_path),
            "--in-process",
            "--busy",
            "1",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0, captured.out + captured.err
    assert "1 busy-loop process(es) beside the benchmark" in captured.err
    assert "1 busy-loop processes beside" in captured.out and "OMP wait policy" in captured.out
    import json

    (path,) = tmp_path.glob("*.json")
    assert json.loads(path.read_text())["meta"]["busy_processes"] == 1


def test_bench_rejects_bad_busy(capsys):
    assert main(["bench", "--models", "tiny-dense", "--no-trl", "--busy", "-1"]) == 2
    assert "--busy" in capsys.readouterr().err


def test_fixed_holds_the_thread_count_whatever_the_governor_sees(monkeypatch):
    """threads.fixed(n) (the SFT warm start): exactly n torch threads inside, the governor's ticks do nothing, the
    previous count after."""
    import torch

    import harness.threads as th

    calls = []
    monkeypatch.setattr(th, "_STARTED", True)
    monkeypatch.setattr(th, "_GOVERNOR", type("G", (), {"tick": lambda self: calls.append(1) or 1})())
    before = torch.get_num_threads()
    with th.fixed(3):
        assert torch.get_num_threads() == 3 and th.tick() is None and not calls
    assert torch.get_num_threads() == before and th.tick() == 1 and calls == [1]
