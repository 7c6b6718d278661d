"""CPU threads under load: the thread governor, and the OpenMP wait policy it relies on.

OpenMP threads spin while they wait for a sibling. On an unshared machine the spin is what
makes the tiny models fast (many small parallel regions; a sleeping thread pays the wake-up
in each); when another process holds one of the cores (a second job, the MLflow UI, a
browser), the spinning thread burns the time slice its descheduled sibling needs and a step
gets 3-4x slower. `OMP_WAIT_POLICY=PASSIVE` avoids that cliff but costs about 35% on the
quiet machine; no spin count gets both (benchmarks/README.md, "A shared core").

So the harness keeps libgomp's spinning default and, between units of work (a training step,
a generate call, a block of SFT steps), asks the governor: how much CPU did OTHER processes
take on the cores this process may run on, since the last look? When other work holds a core,
torch runs on fewer threads (a single thread has no sibling to wait for); when the cores are
free again, it gets its threads back. docs/faults.md, "Threads under load".

    free = allowed cores - cores used by others      (mean over the last interval)
    down to  max(1, floor(free + 0.3))   when fewer than now; up to floor(free + 0.15) when more
    (never above the configured count, train.threads or torch's default)

`HARNESS_THREAD_GOVERNOR=off` disables it; setting OMP_WAIT_POLICY or GOMP_SPINCOUNT yourself
is respected (`OMP_WAIT_POLICY=PASSIVE` is then the static alternative).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
MIN_INTERVAL_S = 1.0  # a look costs ~0.1 ms; closer looks are too noisy to act on
DOWN_MARGIN, UP_MARGIN = 0.3, 0.15  # hysteresis, in cores


def cpu_busy_seconds(cpus: set[int], stat_text: str) -> float:
    """Busy (non-idle, non-iowait) CPU seconds of `cpus` from /proc/stat's per-cpu lines."""
    total = 0
    for line in stat_text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        if int(name[3:]) not in cpus:
            continue
        v = [int(x) for x in fields]
        # user nice system idle iowait irq softirq steal (guest* are inside user/nice)
        total += v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    return total / CLK_TCK


# child processes that are not this run's work (`harness bench --busy N`'s busy loops, started by the
# benchmark in its own process with --in-process): counted as other processes, not as this one's
FOREIGN: set[int] = set()


def _descendants(pid: int) -> list[int]:
    """Live descendants of pid, leaving out FOREIGN processes (and theirs)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                kids = [int(k) for k in open(f"/proc/{p}/task/{tid}/children").read().split() if int(k) not in FOREIGN]
            except OSError:
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def own_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its live descendants (a vLLM worker)."""
    pid = os.getpid()
    total = 0
    for p in [pid, *_descendants(pid)]:
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime stime (fields 14, 15 of proc(5))
    return total / CLK_TCK


def sample_cpu(cpus: set[int]) -> tuple[float, float, float]:
    """(wall seconds, busy seconds of `cpus`, this process tree's CPU seconds), now."""
    with open("/proc/stat") as f:
        stat = f.read()
    return time.monotonic(), cpu_busy_seconds(cpus, stat), own_cpu_seconds()


def target_threads(current: int, ceiling: int, allowed: int, others: float) -> int:
    """Threads to run with when other processes used `others` cores (mean) of `allowed`."""
    free = allowed - others
    down, up = max(1, math.floor(free + DOWN_MARGIN)), max(1, math.floor(free + UP_MARGIN))
    if down < current:
        return min(ceiling, down)
    if up > current:
        return min(ceiling, up)
    return min(current, ceiling)


@dataclass
class ThreadGovernor:
    """Call `tick()` between units of work, in the thread that runs torch (torch's thread count
    is that thread's OpenMP setting). Returns the thread count in use."""

    ceiling: int
    set_threads: Callable[[int], None]
    sample: Callable[[], tuple[float, float, float]]
    allowed: int
    clock: Callable[[], float] = time.monotonic  # the wall clock `sample` uses
    report: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True)
    current: int = 0
    last: tuple[float, float, float] | None = None
    others: float = 0.0  # cores other processes used over the last interval (a metric)
    changes: int = 0

    def __post_init__(self):
        self.current = self.current or self.ceiling

    def tick(self) -> int:
        if self.ceiling <= 1 or (self.last is not None and self.clock() - self.last[0] < MIN_INTERVAL_S):
            return self.current
        now = self.sample()
        if self.last is None:
            self.last = now
            return self.current
        wall = now[0] - self.last[0]
        self.others = max(0.0, ((now[1] - self.last[1]) - (now[2] - self.last[2])) / wall)
        self.last = now
        want = target_threads(self.current, self.ceiling, self.allowed, self.others)
        if want != self.current:
            self.report(
                f"[harness] torch threads {self.current} -> {want} (other processes used "
                f"{self.others:.2f} of {self.allowed} cores over the last {wall:.1f} s)"
            )
            self.set_threads(want)
            self.current, self.changes = want, self.changes + 1
        return self.current


_GOVERNOR: ThreadGovernor | None = None


def governor_enabled(environ=os.environ) -> bool:
    if environ.get("HARNESS_THREAD_GOVERNOR", "on").lower() in ("0", "off", "false", "no"):
        return False
    # a user-chosen wait policy is a choice about sharing: leave the threads alone
    return "OMP_WAIT_POLICY" not in environ and "GOMP_SPINCOUNT" not in environ and os.path.exists("/proc/stat")


def start_governor(threads: int | None = None) -> ThreadGovernor | None:
    """Set torch's thread count (when given) and govern it from now on; None when disabled."""
    import torch

    global _GOVERNOR, _STARTED
    _STARTED = True
    if threads:
        torch.set_num_threads(threads)
    if not governor_enabled():
        _GOVERNOR = None
        return None
    cpus = os.sched_getaffinity(0)
    _GOVERNOR = ThreadGovernor(
        ceiling=torch.get_num_threads(),
        set_threads=torch.set_num_threads,
        sample=lambda: sample_cpu(cpus),
        allowed=len(cpus),
    )
    _GOVERNOR.tick()  # the first sample
    return _GOVERNOR


_STARTED = False
_PAUSED = False  # inside `fixed`: the thread count is held


def tick() -> int | None:
    """Let the process's governor adjust the thread count; the first call in a process that
    never called `start_governor` starts one at torch's current thread count. None: disabled (or held
    by `fixed`)."""
    if _PAUSED:
        return None
    if not _STARTED:
        start_governor()
    return _GOVERNOR.tick() if _GOVERNOR is not None else None


def governor_metrics() -> dict[str, float]:
    """perf/threads and perf/other_cores (the cores other processes used, last interval)."""
    if _GOVERNOR is None:
        return {}
    return {"perf/threads": float(_GOVERNOR.current), "perf/other_cores": _GOVERNOR.others}


@contextmanager
def fixed(n: int):
    """Run the block on exactly n torch threads, whatever the load: the governor holds still (its ticks do
    nothing) and the previous count comes back after. For what must come out the same each time it is
    built (the SFT warm start, a cached artifact: on an AMD EPYC with AVX512 a 200-step tiny-moe SFT on 1
    and on 2 threads ends with other weights, so a thread count that follows the load makes it depend on
    what else the machine ran)."""
    import torch

    global _PAUSED
    before, paused = torch.get_num_threads(), _PAUSED
    _PAUSED = True
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
        _PAUSED = paused
