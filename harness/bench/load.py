"""The shared-core case: busy-loop processes beside the benchmark (`harness bench --busy N`),
and the OpenMP wait policy of the cases (`--omp-wait-policy`), to measure the cliff of
harness/threads.py: with a core taken by another process, OpenMP threads that spin while
waiting for a descheduled sibling slow a step down several times. `inherit` runs the cases as
a user's run goes (libgomp's spin with the thread governor); `passive`, `active` and `unset`
set a policy and thereby turn the governor off (`unset`: libgomp's spin alone)."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager

from harness import threads
from harness.threads import governor_enabled

BUSY_LOOP = "while True:\n    pass\n"
# libgomp's own spin when OMP_WAIT_POLICY is unset; set explicitly so harness/threads.py keeps out of it
LIBGOMP_DEFAULT_SPIN = "300000"
WAIT_POLICIES = ("inherit", "passive", "active", "unset")


@contextmanager
def busy_processes(n: int):
    """Start n CPU-bound processes (pure Python busy loops); yields their pids; stops them after."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BUSY_LOOP],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]
    pids = {p.pid for p in procs}
    threads.FOREIGN.update(pids)  # another job's load to the governor, also when the case runs in this process
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
        threads.FOREIGN.difference_update(pids)


def wait_policy_env(policy: str, env: dict) -> dict:
    """env for the benchmark's cases under --omp-wait-policy (inherit: unchanged, i.e. the
    thread governor unless the user set a policy; unset: libgomp's default spin, no governor)."""
    env = dict(env)
    if policy == "inherit":
        return env
    env.pop("OMP_WAIT_POLICY", None)
    env.pop("GOMP_SPINCOUNT", None)
    if policy == "unset":
        env["GOMP_SPINCOUNT"] = LIBGOMP_DEFAULT_SPIN
    else:
        env["OMP_WAIT_POLICY"] = policy.upper()
    return env


def describe_policy(env=os.environ) -> str:
    if governor_enabled(env):
        return "libgomp default + thread governor (harness/threads.py)"
    if "OMP_WAIT_POLICY" in env:
        return env["OMP_WAIT_POLICY"]
    return f"libgomp default (GOMP_SPINCOUNT={env['GOMP_SPINCOUNT']})" if "GOMP_SPINCOUNT" in env else "libgomp default"
