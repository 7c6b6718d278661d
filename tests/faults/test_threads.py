"""The OpenMP wait policy default (harness/threads.py) and `harness bench --busy N`. Correctness
only: the timings are measured by the commands in docs/faults.md, on a quiet machine."""
from __future__ import annotations

import os
import subprocess
import sys

from harness.bench.load import busy_processes, describe_policy, wait_policy_env
from harness.cli import main
from harness.threads import default_omp_wait_policy


def test_passive_unless_the_user_chose():
    env = {}
    assert default_omp_wait_policy(env) == "PASSIVE" and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert default_omp_wait_policy(env) is None and env == {"OMP_WAIT_POLICY": "ACTIVE"}
    env = {"GOMP_SPINCOUNT": "10000"}
    assert default_omp_wait_policy(env) is None and "OMP_WAIT_POLICY" not in env


def test_set_before_torch_loads_in_a_harness_process():
    """`import harness` (every entry point: the CLI, bench cases) sets it before torch is imported."""
    code = ("import sys, os; import harness; assert 'torch' not in sys.modules; import torch; "
            "print(os.environ.get('OMP_WAIT_POLICY'))")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "PASSIVE"
    out = subprocess.run([sys.executable, "-c", code], env={**env, "OMP_WAIT_POLICY": "active"},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "active"


def test_wait_policy_env_for_bench_cases():
    base = {"OMP_WAIT_POLICY": "PASSIVE", "X": "1"}
    assert wait_policy_env("inherit", base) == base
    assert wait_policy_env("active", base) == {"OMP_WAIT_POLICY": "ACTIVE", "X": "1"}
    unset = wait_policy_env("unset", base)
    assert "OMP_WAIT_POLICY" not in unset and unset["GOMP_SPINCOUNT"] == "300000"
    assert default_omp_wait_policy(dict(unset)) is None  # the case's own `import harness` leaves it alone
    assert describe_policy(unset).startswith("libgomp default")


def test_busy_processes_run_and_are_stopped():
    with busy_processes(2) as pids:
        assert len(pids) == 2
        for pid in pids:
            os.kill(pid, 0)  # alive
            assert open(f"/proc/{pid}/stat").read().split()[2] in "RS"
    for pid in pids:
        try:
            state = open(f"/proc/{pid}/stat").read().split()[2]
        except FileNotFoundError:
            continue
        assert state == "Z" or state == "X", state  # reaped or exiting


def test_bench_busy_flag(tmp_path, capsys):
    rc = main(["bench", "--models", "tiny-dense", "--backends", "hf", "--steps", "1", "--no-trl", "--threads", "1",
               "--prompts", "2", "--group-size", "2", "--max-new-tokens", "8", "--out-dir", str(tmp_path),
               "--in-process", "--busy", "1"])
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
