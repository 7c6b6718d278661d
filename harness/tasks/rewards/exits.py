"""A reward function that exits instead of returning: an error of that function, never a success or a silent 0.

    with no_os_exit():          # around each call of a user's function (in the trainer or a worker)
        out = fn(prompt, completion, answer, row)
    # sys.exit(n) -> SystemExit, os._exit(n) -> CalledOsExit: the scorer names the function, the row
    # and the completion (RewardFunctionError), as for a function that raises.

`os._exit` ends a process at once, with no exception to catch: called in a reward worker it killed the
worker, and the pool's other completions with it. `no_os_exit` turns it into an exception for the
duration of the call, in this process only (a process the function forks exits as it asks; harness/user_exits.py). A worker
that dies anyway (SIGKILL from the out-of-memory killer, a crash in C code, `os.kill(os.getpid(), ...)`)
is described by `dead_workers` from its exit status.
"""

from __future__ import annotations

import signal
import time


def exit_status(code: int | None) -> str:
    """A process's exit code in words: 'exit code 3', 'killed by SIGKILL (out of memory?)'."""
    if code is None or code >= 0:
        return f"exit code {code}"
    name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
    return f"killed by {name}" + (" (out of memory?)" if -code == signal.SIGKILL else "")


def dead_workers(processes: list) -> str:
    """The exit status of the worker processes that died (multiprocessing.Process objects), in words.
    Those the pool terminated after the first death (SIGTERM) are left out when another one died."""
    deadline = time.monotonic() + 2.0  # a dead process's pipe closes a moment before its exit status is there
    for p in processes:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    # The pool's own thread reaps its dead workers too (is_alive, join): while it holds a status the kernel gave
    # it and has not yet stored on the Process, our join finds no child (ECHILD) and the exit code reads None;
    # the pool's thread stores it a moment later.
    while any(p.exitcode is None for p in processes) and time.monotonic() < deadline:
        time.sleep(0.01)
    ended = [p.exitcode for p in processes if p.exitcode is not None]
    first = [c for c in ended if c != -signal.SIGTERM] or ended
    return ", ".join(exit_status(c) for c in dict.fromkeys(first)) or "exit status unknown"
