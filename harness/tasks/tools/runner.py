"""Running the model's tool calls: each under a time limit, an error of the tool never a crash of the run.

    runner = ToolRunner(tools, timeout=5.0, workers=0)
    answers = runner.run_many([Call("calculator", {"expression": "12*34"}), BadCall(...)])  # [ToolAnswer, ...]

Isolation is the reward functions' (harness/tasks/rewards/scorer.py, exits.py): a call runs under a SIGALRM
timer (`call_with_timeout`) with os._exit turned into an exception (`no_os_exit`); with workers > 0 the calls
run in that many spawned worker processes, and one that dies (os.kill, a crash in C code, out of memory) or
stays stuck past every timer has its pool killed and started afresh. Each of these, a call that raises, exits,
returns something that is not a string, or did not parse (parse.py BadCall), is a ToolAnswer with error=True
whose text the model reads back ("error: ..."), counted by the rollout's tool/errors metric.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import inspect
import multiprocessing
import signal
from dataclasses import dataclass

from harness.tasks.rewards.exits import dead_workers
from harness.tasks.rewards.scorer import ScoreTimeout, call_with_timeout
from harness.tasks.tools.parse import BadCall, Call
from harness.tasks.tools.schema import Tool, tool_function
from harness.user_exits import CalledOsExit, no_os_exit, what_it_did


@dataclass(frozen=True)
class ToolAnswer:
    text: str  # what the model reads back
    error: bool


def run_call(fns: dict, call: Call, timeout: float) -> ToolAnswer:
    """One call of a loaded tool (fns: name -> function), in this process."""
    fn = fns[call.name]
    try:
        inspect.signature(fn).bind(**call.arguments)
    except TypeError as err:
        return ToolAnswer(f"error: {call.name}: {err}", True)
    try:
        with no_os_exit():
            out = call_with_timeout(functools.partial(fn, **call.arguments), timeout)
    except ScoreTimeout:
        return ToolAnswer(f"error: {call.name} ran over its time limit ({timeout:g} s)", True)
    except (Exception, SystemExit, CalledOsExit) as err:  # noqa: BLE001 -- the tool's own failure: the model reads it
        return ToolAnswer(f"error: {call.name} {what_it_did(err)}", True)
    if not isinstance(out, str):
        return ToolAnswer(f"error: {call.name} returned a {type(out).__name__}, not a string", True)
    return ToolAnswer(out, False)


_FNS: dict | None = None  # a worker's tools


def _init_worker(specs: list[str]) -> None:
    global _FNS
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle
    _FNS = {}
    for spec in specs:
        fn = tool_function(spec)
        _FNS[fn.__name__] = fn


def _run_in_worker(call: Call, timeout: float) -> ToolAnswer:
    return run_call(_FNS, call, timeout)


class ToolRunner:
    """The task's tools, called in this process (workers=0) or in worker processes."""

    def __init__(self, tools: list[Tool], timeout: float, workers: int = 0):
        self.tools, self.timeout, self.workers = list(tools), float(timeout), int(workers)
        self.fns = {t.name: tool_function(t.spec) for t in self.tools}
        self.grace = 30.0  # seconds the parent waits past every timer before it kills the pool
        self._pool: cf.ProcessPoolExecutor | None = None

    def run_many(self, calls: list[Call | BadCall]) -> list[ToolAnswer]:
        """Each call's answer, in order (a BadCall's: its reason)."""
        good = [c for c in calls if isinstance(c, Call)]
        if self.workers <= 0 or len(good) < 2:
            done = {id(c): run_call(self.fns, c, self.timeout) for c in good}
        else:
            done = dict(zip(map(id, good), self._in_workers(good)))
        return [done[id(c)] if isinstance(c, Call) else ToolAnswer(f"error: {c.reason}", True) for c in calls]

    def _in_workers(self, calls: list[Call]) -> list[ToolAnswer]:
        pool = self._get_pool()
        futures = [pool.submit(_run_in_worker, c, self.timeout) for c in calls]
        processes = list(getattr(pool, "_processes", {}).values())
        rounds = -(-len(calls) // self.workers)
        done, pending = cf.wait(futures, timeout=rounds * self.timeout + self.grace)
        out = []
        for call, fut in zip(calls, futures):
            if fut in done and fut.exception() is None:
                out.append(fut.result())
            elif fut in done:  # its worker died: the pool is started afresh for the next calls
                out.append(ToolAnswer(f"error: {call.name} killed its process ({dead_workers(processes)})", True))
            else:
                out.append(ToolAnswer(f"error: {call.name} ran over its time limit ({self.timeout:g} s)", True))
        if pending or any(fut.exception() is not None for fut in done):  # a dead or stuck worker
            self.close(kill=True)
        return out

    def _get_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=([t.spec for t in self.tools],),
            )
        return self._pool

    def close(self, kill: bool = False) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if kill:
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def __getstate__(self):  # never its pool
        return {**self.__dict__, "_pool": None}
