"""The reward-function contract (harness/tasks/rewards/functions.py, scorer.py): signature, return
values, several weighted rewards, which one says "correct", the time limit, worker processes, and
a function that raises stopping the run with one line naming it, the row and the completion."""

from __future__ import annotations

import signal
import time

import pytest

from harness.tasks import DatasetTask
from harness.tasks.rewards import RewardFunctionError, RewardSpec, Scorer, reward_specs
from harness.tasks.rewards.exits import dead_workers
from harness.tasks.rewards.scorer import Item

M = "tests.tasks.user_rewards"


def item(completion, answer="7", truncated=False, row=None):
    return Item(
        "What is 3+4?", completion, answer, row or {"difficulty": "easy"}, truncated, "train row 3 (uid train:3)"
    )


def scorer(*specs, correct=None, timeout=5.0, workers=0):
    specs = list(specs)
    return Scorer(specs, correct or specs[0].name, timeout, workers)


def test_weighted_sum_and_named_parts():
    s = scorer(
        RewardSpec("number", 1.0, verifier="number"),
        RewardSpec("brevity", 0.5, function=f"{M}:brevity"),
        RewardSpec("easy", 0.25, function=f"{M}:uses_row"),
    )
    out = s.score(item("It is 7"))
    assert out.rewards == {"number": 1.0, "brevity": 1.0, "easy": 1.0} and out.total == 1.75 and out.correct
    out = s.score(item("Well, I believe it is 8 in the end", row={"difficulty": "hard"}))
    assert out.rewards == {"number": 0.0, "brevity": 0.0, "easy": 0.0} and out.total == 0.0 and not out.correct


def test_which_reward_defines_correct():
    specs = (RewardSpec("number", verifier="number"), RewardSpec("exact", function=f"{M}:exact_dict"))
    assert scorer(*specs, correct="exact").score(item("7")).correct  # the dict's own "correct"
    assert not scorer(*specs, correct="exact").score(item("so 7")).correct
    assert scorer(*specs, correct="number").score(item("so 7")).correct
    assert scorer(RewardSpec("b", function=f"{M}:brevity")).score(item("7")).correct  # a float: correct when > 0
    assert scorer(RewardSpec("e", function=f"{M}:exact_dict")).score(item("x")).total == -1.0


def test_a_truncated_completion_is_never_correct():
    s = scorer(RewardSpec("number", verifier="number"), RewardSpec("b", function=f"{M}:brevity"))
    out = s.score(item("It is 7", truncated=True))
    assert not out.correct and out.rewards["number"] == 0.0 and out.rewards["b"] == 1.0  # functions still run


@pytest.mark.parametrize(
    "fn, needle",
    [
        ("boom", "raised ZeroDivisionError: division by zero"),
        ("returns_text", "returned 'one' (a str); allowed: a number"),
        ("returns_nan", "returned nan (not finite)"),
        ("returns_bad_dict", "returned a dict with keys ['score']"),
    ],
)
def test_a_bad_function_stops_with_one_line(fn, needle):
    with pytest.raises(RewardFunctionError) as e:
        scorer(RewardSpec("mine", function=f"{M}:{fn}")).score(item("It is 7"))
    msg = str(e.value)
    assert needle in msg and f"{M}:{fn}" in msg and "train row 3 (uid train:3)" in msg and "'It is 7'" in msg
    assert "\n" not in msg


def test_a_bad_function_in_a_worker_stops_the_batch_too():
    s = scorer(RewardSpec("mine", function=f"{M}:boom"), workers=1)
    try:
        with pytest.raises(RewardFunctionError, match="raised ZeroDivisionError.*train row 3"):
            s.score_many([item("a"), item("b")])
    finally:
        s.close()


def test_long_completions_are_clipped_in_the_message():
    with pytest.raises(RewardFunctionError) as e:
        scorer(RewardSpec("mine", function=f"{M}:boom")).score(item("x" * 500))
    assert "(502 chars)" in str(e.value) and len(str(e.value)) < 400


@pytest.mark.parametrize(
    "entry, needle",
    [
        ({"function": "no_such_module_xyz:f"}, "module 'no_such_module_xyz' does not import"),
        ({"function": f"{M}:missing"}, f"module '{M}' has no 'missing'; its callables:"),
        ({"function": f"{M}:NOT_CALLABLE"}, "is a int, not a function"),
        (
            {"function": f"{M}:two_args"},
            "has signature two_args(prompt, completion); a reward function takes (prompt, completion, answer, row)",
        ),
        ({"function": "justaname"}, "must look like module.path:function"),
        ({"verifier": "gsm8k", "function": f"{M}:brevity"}, "give exactly one of verifier"),
        ({"verifier": "maths"}, "task.rewards[0].verifier='maths' is unknown"),
        ({"verifier": "gsm8k", "name": "mean"}, "task.rewards[0].name='mean' is taken"),
        ({"function": f"{M}:brevity", "options": {"x": 1}}, "a function takes no options"),
    ],
)
def test_reward_specs_errors(entry, needle):
    with pytest.raises(ValueError) as e:
        reward_specs([entry])
    assert needle in str(e.value) and str(e.value).startswith("task.rewards[0]"), str(e.value)


def test_reward_specs_names_and_duplicates():
    specs = reward_specs([{"verifier": "gsm8k"}, {"function": f"{M}:brevity", "weight": 0.1}])
    assert [(s.name, s.weight) for s in specs] == [("gsm8k", 1.0), ("brevity", 0.1)]
    with pytest.raises(ValueError, match=r"task.rewards\[1\]: name 'gsm8k' is also task.rewards\[0\]'s"):
        reward_specs([{"verifier": "gsm8k"}, {"verifier": "gsm8k"}])


def test_time_limit_in_process():
    s = scorer(RewardSpec("slow", function=f"{M}:sleeps"), RewardSpec("n", verifier="number"), correct="n", timeout=0.2)
    out = s.score(item("slow 7"))
    assert out.timed_out == 1 and out.rewards == {"slow": 0.0, "n": 1.0} and out.correct


def test_workers_score_as_this_process_does():
    specs = (RewardSpec("number", verifier="number"), RewardSpec("b", 0.5, function=f"{M}:brevity"))
    items = [item(f"It is {i}", truncated=i == 5) for i in range(12)]
    here = scorer(*specs).score_many(items)
    s = scorer(*specs, workers=2)
    try:
        there = s.score_many(items)
    finally:
        s.close()
    assert there == here and [x.correct for x in there] == [i == 7 for i in range(12)]


def test_a_catastrophic_regex_times_out():
    out = scorer(RewardSpec("re", function=f"{M}:backtracks"), timeout=0.3).score(item("a" * 40 + "b"))
    assert out.timed_out == 1 and out.total == 0.0


def test_a_worker_stuck_in_c_code_is_killed():
    s = scorer(RewardSpec("stuck", function=f"{M}:sleeps_uninterruptibly"), timeout=0.5, workers=1)
    try:
        # A pool's cold start (spawn, then torch and the module imported) takes 3-4 s on a 2-core AMD EPYC (Zen 3)
        # with another job running, so the parent's slack past the timers is short only while the pool is warm.
        s.grace = 60.0
        assert [x.total for x in s.score_many([item("warm"), item("up")])] == [1.0, 1.0]
        s.grace = 2.0
        out = s.score_many([item("fine"), item("stuck")])
        assert s.killed_pools == 1 and out[0].total == 1.0 and out[1].timed_out  # the stuck chunk counts as timed out
        s.grace = 60.0
        again = s.score_many([item("fine"), item("fine too")])  # a fresh pool, started cold
        assert [x.total for x in again] == [1.0, 1.0]
    finally:
        s.close()


def test_dataset_task_reports_named_rewards(gsm8k_file):
    t = DatasetTask(
        data={"train": str(gsm8k_file), "prompt_key": "question", "eval_fraction": 0.25},
        rewards=reward_specs(["gsm8k", {"function": f"{M}:brevity", "weight": 0.5}]),
        reward_workers=0,
    )
    p = t.rows("train")[0]
    right = f"#### {p.answer.split('#### ')[1]}"
    out = t.score_batch([p, p, p], [right, right, "no idea at all, sorry friend"], [False, True, False])
    assert [b.correct for b in out] == [True, False, False]
    assert out[0].parts == {"gsm8k": 1.0, "brevity": 1.0, "timeouts": 0.0} and out[0].total == 1.5
    assert [b.format for b in out] == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("fn, needle", [("exits", "called sys.exit(3)"), ("kills_its_process", "called os._exit(3)")])
def test_a_function_that_exits_is_an_error_of_that_function(fn, needle, workers):
    """sys.exit / os._exit in a reward function: one line naming it, the row and the completion, in the
    trainer's process (which os._exit would otherwise end) and in a worker (which it would otherwise kill: every
    reward 0)."""
    s = scorer(RewardSpec("number", verifier="number"), RewardSpec("mine", function=f"{M}:{fn}"), workers=workers)
    try:
        with pytest.raises(RewardFunctionError) as e:
            s.score_many([item("It is 7"), item("exit now")])
    finally:
        s.close()
    msg = str(e.value)
    assert f"reward function {M}:{fn} (task.rewards 'mine') {needle} on train row 3" in msg, msg
    assert "'exit now'" in msg and "\n" not in msg


def test_a_worker_that_dies_stops_the_batch_naming_the_function():
    """A worker killed outright (SIGKILL: no exception to catch) is not a timeout: one line naming the reward
    function and the worker's exit status; no reward of the batch is used, and the next batch gets a fresh pool."""
    s = scorer(RewardSpec("number", verifier="number"), RewardSpec("mine", function=f"{M}:sigkills_its_process"))
    s.workers = 1
    try:
        with pytest.raises(RewardFunctionError) as e:
            s.score_many([item("It is 7"), item("exit now")])
        msg = str(e.value)
        # the pool's thread may reap the dead process first (on a loaded machine): its status is read all the same
        # (test_a_dead_workers_status_reaped_by_the_pools_thread_is_read)
        assert msg.startswith("a reward worker process died (killed by SIGKILL (out of memory?))"), msg
        assert "timed out" not in msg, msg
        assert f"reward function {M}:sigkills_its_process (task.rewards 'mine')" in msg and "\n" not in msg
        assert [x.total for x in s.score_many([item("It is 7"), item("7")])] == [2.0, 2.0]  # a fresh pool
    finally:
        s.close()


class _ReapedElsewhere:
    """A dead worker whose status the pool's own thread has taken from the kernel and stores `after` seconds
    later: meanwhile join() returns at once (no child left to wait for) and exitcode reads None."""

    def __init__(self, code: int, after: float):
        self.code, self.at = code, time.monotonic() + after

    def join(self, timeout=None):
        return None

    @property
    def exitcode(self):
        return self.code if time.monotonic() >= self.at else None


def test_a_dead_workers_status_reaped_by_the_pools_thread_is_read():
    """The status of a worker the pool reaps first is read once the pool stores it (within the 2 s wait), not
    reported as 'exit status unknown' (the race behind the dead-worker test's failures under load)."""
    assert dead_workers([_ReapedElsewhere(-signal.SIGKILL, 0.1)]) == "killed by SIGKILL (out of memory?)"
    assert dead_workers([_ReapedElsewhere(-signal.SIGKILL, 0.05), _ReapedElsewhere(-signal.SIGTERM, 0.15)]) == (
        "killed by SIGKILL (out of memory?)"
    )  # the one the pool terminated after the first death is left out
