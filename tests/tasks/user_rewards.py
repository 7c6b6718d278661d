"""Reward functions of a user's own, for the contract tests (imported as tests.tasks.user_rewards:NAME)."""

import time


def brevity(prompt, completion, answer, row):
    return 1.0 if len(completion) <= 20 else 0.0


def exact_dict(prompt, completion, answer, row):
    ok = completion.strip() == answer
    return {"reward": 2.0 if ok else -1.0, "correct": ok}


def uses_row(prompt, completion, answer, row):
    return float(row["difficulty"] == "easy")


def boom(prompt, completion, answer, row):
    raise ZeroDivisionError("division by zero")


def returns_text(prompt, completion, answer, row):
    return "one"


def returns_nan(prompt, completion, answer, row):
    return float("nan")


def returns_bad_dict(prompt, completion, answer, row):
    return {"score": 1.0}


def sleeps(prompt, completion, answer, row):
    if "slow" in completion:
        time.sleep(30)
    return 1.0


def sleeps_uninterruptibly(prompt, completion, answer, row):
    if "stuck" in completion:  # as a call stuck in C code that never lets the timer's signal in
        import signal

        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(60)
    return 1.0


def backtracks(prompt, completion, answer, row):
    import re

    return float(bool(re.match(r"(a+)+$", completion)))  # catastrophic on "aaaa...b"; re checks for signals


def two_args(prompt, completion):
    return 0.0


NOT_CALLABLE = 3


def exits(prompt, completion, answer, row):
    import sys

    if "exit" in completion:
        sys.exit(3)
    return 1.0


def exits_zero(prompt, completion, answer, row):
    import sys

    sys.exit(0)


def kills_its_process(prompt, completion, answer, row):
    import os

    if "exit" in completion:
        os._exit(3)
    return 1.0


def sigkills_its_process(prompt, completion, answer, row):
    import os
    import signal

    if "exit" in completion:
        os.kill(os.getpid(), signal.SIGKILL)
    return 1.0


def hangs(prompt, completion, answer, row):
    time.sleep(30)
    return 1.0


def kills_after_budget(prompt, completion, answer, row):
    """os._exit(3) once called more than HARNESS_TEST_CALLS times (counted in the file HARNESS_TEST_COUNTER)."""
    import os

    path = os.environ.get("HARNESS_TEST_COUNTER")
    if path:
        with open(path, "a") as f:
            f.write("x")
        if os.path.getsize(path) > int(os.environ["HARNESS_TEST_CALLS"]):
            os._exit(3)
    return 0.5


def always_exits(prompt, completion, answer, row):
    import sys

    sys.exit(3)


def boom_on_rank_1(prompt, completion, answer, row):
    """Raises on rank 1 of a `--nproc 2` run only (rank 0 goes on to its next collective and waits there)."""
    import os

    if os.environ.get("RANK") == "1":
        raise ValueError("rank 1's bad reward")
    return 1.0
