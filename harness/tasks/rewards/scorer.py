"""Scoring completions with several rewards: built-in verifiers and the user's functions, weighted.

    scorer = Scorer([RewardSpec("correct", 1.0, verifier="gsm8k"),
                     RewardSpec("brevity", 0.1, function="my_rewards:brevity")],
                    correct="correct", timeout=5.0, workers=0)
    scored = scorer.score_many([Item(prompt, completion, answer, row, truncated, "train row 3"), ...])

Total reward = sum_k weight_k * reward_k. A verifier's reward is 1.0 when its verdict is correct,
else 0.0; a function's is what it returns (functions.py). "Correct" (reward/accuracy, pass@k,
length/correct, dynamic sampling, DPO's chosen answers) is the verdict of ONE reward, `correct`:
a verifier's verdict, a function's `correct` key, or its reward > 0. A truncated completion is
never correct, and every verifier scores it 0.

Time limit: each (reward, completion) call runs under `timeout` seconds (a SIGALRM timer, in the
main thread of this process or of a worker); a call that runs over scores 0, not correct, and is
counted (`ItemRewards.timed_out`, the metric reward/timeouts). Math-verify on adversarial LaTeX and a
catastrophic regex are what this is for.

Workers: with workers > 0 the completions are scored in that many worker processes (spawned once
and kept; they import only this package, the verifiers and the user's modules), in chunks. The
parent waits at most (calls per worker x timeout + 30 s): a worker stuck in C code that the
timer cannot interrupt is killed with its pool, and its unfinished completions count as timed out
(Python's `re` does let the timer in: a catastrophic regex is stopped by the timer itself).

A function that exits is an error of that function, never a 0 (exits.py): sys.exit and os._exit
stop the run with one line naming the function, the row and the completion; a worker process that
dies anyway (killed, a crash in C code, out of memory) stops it with one line naming the reward
functions and the worker's exit status. A dead worker is not a timeout.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing
import signal
import threading
from dataclasses import dataclass, field
from typing import Any

from harness.tasks.rewards.exits import dead_workers
from harness.tasks.rewards.functions import RewardFunctionError, load_function, read_result
from harness.tasks.rewards.verifiers import VERIFIERS
from harness.user_exits import CalledOsExit, no_os_exit, what_it_did


@dataclass(frozen=True)
class RewardSpec:
    """One reward: a built-in verifier (with its options), a function `module.path:function`, or a reward
    model folder (scored by the task in the trainer's process, never here: reward_model.py)."""

    name: str
    weight: float = 1.0
    verifier: str | None = None
    function: str | None = None
    options: dict = field(default_factory=dict)
    model: str | None = None  # a sequence-classification folder (num_labels 1)
    micro_batch_size: int = 8  # a reward model's rows per forward
    normalize: str = "none"  # none | batch | running, before the weighted sum (normalize.py)


@dataclass(frozen=True)
class Item:
    """One completion to score, with its problem."""

    prompt: str
    completion: str
    answer: str
    row: dict
    truncated: bool
    where: str  # the row, for messages ("train row 17")


@dataclass(frozen=True)
class ItemRewards:
    rewards: dict[str, float]  # reward name -> unweighted value
    total: float  # sum of weight * value
    correct: bool  # the `correct` reward's verdict (False when truncated)
    parsed: str | None  # the answer the `correct` reward's verifier read, if it is a verifier
    timed_out: int = 0  # calls that ran over the time limit


class ScoreTimeout(BaseException):
    """A reward call ran over its time limit (a BaseException: `except Exception` in a verifier or a
    user function does not swallow it)."""


def _on_alarm(signum, frame):
    raise ScoreTimeout()


def call_with_timeout(fn, seconds: float, *args):
    """fn(*args), or ScoreTimeout after `seconds` (only in the main thread; elsewhere no limit)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        return fn(*args)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _clip(text: str, n: int = 80) -> str:
    text = repr(text)
    return text if len(text) <= n else text[: n - 5] + "...'" + f" ({len(text)} chars)"


class Rewards:
    """The rewards of a task, resolved (functions imported) in this process."""

    def __init__(self, specs: list[RewardSpec], correct: str, timeout: float):
        self.specs, self.correct, self.timeout = list(specs), correct, float(timeout)
        self.fns = {s.name: load_function(s.function) for s in self.specs if s.function}

    def score(self, item: Item) -> ItemRewards:
        values: dict[str, float] = {}
        correct, parsed, timed_out = False, None, 0
        for spec in self.specs:
            try:
                value, verdict, read = self._one(spec, item)
            except ScoreTimeout:
                value, verdict, read = 0.0, False, None
                timed_out += 1
            values[spec.name] = value
            if spec.name == self.correct:
                correct, parsed = bool(verdict) and not item.truncated, read
        total = math.fsum(s.weight * values[s.name] for s in self.specs)
        return ItemRewards(values, total, correct, parsed, timed_out)

    def _one(self, spec: RewardSpec, item: Item) -> tuple[float, bool, str | None]:
        if spec.verifier:
            if item.truncated:
                return 0.0, False, None
            v = call_with_timeout(VERIFIERS[spec.verifier], self.timeout, item.completion, item.answer, spec.options)
            return float(v.correct), v.correct, v.parsed
        fn = self.fns[spec.name]
        try:
            with no_os_exit():  # os._exit in the function: an error of the function, not a dead process (exits.py)
                out = call_with_timeout(fn, self.timeout, item.prompt, item.completion, item.answer, item.row)
        except ScoreTimeout:
            raise
        except (Exception, SystemExit, CalledOsExit) as err:  # noqa: BLE001 -- the user's function: stop, naming it
            raise RewardFunctionError(
                f"reward function {spec.function} (task.rewards {spec.name!r}) {what_it_did(err)} on {item.where}, "
                f"completion {_clip(item.completion)}"
            ) from None
        try:
            value, correct = read_result(out)
        except ValueError as err:
            raise RewardFunctionError(
                f"reward function {spec.function} (task.rewards {spec.name!r}) {err} on "
                f"{item.where}, completion {_clip(item.completion)}"
            ) from None
        return value, (value > 0 if correct is None else correct), None


# ----------------------------------------------------------------------------- worker processes

_WORKER: Rewards | None = None


def _init_worker(specs: list[RewardSpec], correct: str, timeout: float) -> None:
    global _WORKER
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle
    _WORKER = Rewards(specs, correct, timeout)


def _score_chunk(items: list[Item]) -> list[Any]:
    out = []
    for item in items:
        try:
            out.append(_WORKER.score(item))
        except RewardFunctionError as err:
            return out + [("error", str(err))]
    return out


class Scorer(Rewards):
    """Rewards plus worker processes for `score_many` (workers = 0: in this process)."""

    def __init__(self, specs: list[RewardSpec], correct: str, timeout: float, workers: int = 0):
        super().__init__(specs, correct, timeout)
        self.workers = int(workers)
        self._pool: cf.ProcessPoolExecutor | None = None
        self.killed_pools = 0
        self.grace = 30.0  # seconds the parent waits past every timer before it kills the pool

    def score_many(self, items: list[Item]) -> list[ItemRewards]:
        if self.workers <= 0 or len(items) < 2:
            return [self.score(i) for i in items]
        pool = self._get_pool()
        size = max(1, math.ceil(len(items) / (4 * self.workers)))
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        futures = [pool.submit(_score_chunk, c) for c in chunks]
        processes = list(getattr(pool, "_processes", {}).values())  # spawned by now: their exit codes if one dies
        per_worker = math.ceil(len(chunks) / self.workers) * size * max(1, len(self.specs))
        done, pending = cf.wait(futures, timeout=per_worker * self.timeout + self.grace)
        results: list[ItemRewards] = []
        for chunk, fut in zip(chunks, futures):
            if fut in done and fut.exception() is None:
                part = fut.result()
                if part and isinstance(part[-1], tuple):
                    self.close()
                    raise RewardFunctionError(part[-1][1])
                results.extend(part)
            elif fut in done:  # a worker died (or could not score): the user's code is named, never a silent 0
                self._kill_pool()
                raise RewardFunctionError(self._death(fut.exception(), processes, chunk))
            else:  # stuck past every timer: its completions count as timed out
                results.extend(
                    ItemRewards({s.name: 0.0 for s in self.specs}, 0.0, False, None, len(self.specs)) for _ in chunk
                )
        if pending:
            self._kill_pool()
        return results

    def _death(self, err: BaseException, processes: list, chunk: list[Item]) -> str:
        """The one line for a batch whose worker process died (BrokenProcessPool) or failed otherwise."""
        functions = [f"{s.function} (task.rewards {s.name!r})" for s in self.specs if s.function]
        who = " or ".join(functions) if functions else "a verifier"
        if isinstance(err, cf.process.BrokenProcessPool):
            what = f"a reward worker process died ({dead_workers(processes)})"
        else:
            what = f"a reward worker process failed ({type(err).__name__}: {' '.join(str(err).split())})"
        return (
            f"{what} while scoring a batch of completions (among them {chunk[0].where}) with reward function "
            f"{who}: the function killed its process (os.kill, os.abort, a crash in C code) or the machine ran out "
            "of memory; no reward of the batch was used and the step made no update. Fix it, then rerun the same "
            "command to resume from the last checkpoint"
        )

    def _get_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(self.specs, self.correct, self.timeout),
            )
        return self._pool

    def _kill_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        self.killed_pools += 1
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __getstate__(self):  # a task is pickled into DPO/probe helpers at most: never its pool
        state = dict(self.__dict__)
        state["_pool"] = None
        return state
