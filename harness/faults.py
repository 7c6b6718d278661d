"""Why a run stops: the faults it stops on, each with a message that says what happened and what
to do, and the stop a signal asks for.

The CLI prints a RunFault as one paragraph (no traceback unless --debug) and exits with its
`exit_code`: 1 for a fault, 128 + signal number for a stop requested by a signal (143 for
SIGTERM, 130 for SIGINT), as a shell reports a process killed by that signal.

Stopping at a safe point on SIGTERM / SIGINT (a SLURM time limit or preemption, Ctrl-C).
Inside `StopOnSignal`, the first SIGTERM or SIGINT only records itself; the trainer checks
`requested` at the end of every step, writes a checkpoint and the pending metrics, marks the
MLflow run KILLED and raises StoppedBySignal (the CLI exits 128 + signal: 143, 130). A second
signal aborts at once (StoppedBySignal raised from the handler): the last checkpoint stays
the resume point. Outside the main thread (no handlers can be set there) it does nothing.
"""

from __future__ import annotations

import signal
import threading


class RunFault(RuntimeError):
    """A run stopped on a fault; the message is complete and meant for the user."""

    exit_code = 1
    mlflow_status = "FAILED"


class CheckpointWriteError(RunFault):
    """Writing a checkpoint failed (e.g. the disk is full); the previous one is intact."""


class NoReadableCheckpoint(RunFault):
    """The run directory holds checkpoints, none of which loads."""


class OrphanMetrics(RunFault):
    """metrics.jsonl holds steps but no checkpoint is left to resume them from."""


class NonFiniteError(RunFault):
    """NaN or inf in a loss, reward or gradient (train.nan_policy=stop)."""


class UserCodeExit(RunFault):
    """Code the harness calls (a plugin, a reward function) called sys.exit: an error of that code, never a
    success (a SystemExit that reached the CLI; `user_exit` builds it)."""


def user_exit(err: SystemExit, command: str) -> UserCodeExit:
    """The fault for a SystemExit raised inside `harness COMMAND`, naming where it was raised (the deepest frame:
    the code that called sys.exit or raised SystemExit)."""
    tb, where = err.__traceback__, "an unknown place"
    while tb is not None:
        code = tb.tb_frame.f_code
        where, tb = f"{code.co_filename}:{tb.tb_lineno} (in {code.co_name})", tb.tb_next
    called = f"sys.exit({'' if err.code is None else repr(err.code)})"
    return UserCodeExit(
        f"{called} was called at {where} inside `harness {command}`: code the harness calls (a plugin, a reward "
        "function) must raise an exception or return, not exit; the command stopped, not a success. Fix it, "
        "then rerun the same command (a run resumes from its last checkpoint)"
    )


class StoppedBySignal(BaseException):
    """SIGTERM / SIGINT: the run stopped at the end of a step, checkpointed. A BaseException,
    like KeyboardInterrupt, so that a caller's `except Exception` (a benchmark case loop, a
    study driver) does not swallow the stop request."""

    mlflow_status = "KILLED"

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopOnSignal:
    """Within it, SIGTERM / SIGINT ask the run to stop at the end of its step (see the module docstring)."""

    def __init__(self):
        self.requested: int | None = None  # the first signal's number
        self._previous: dict = {}

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _handle(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if self.requested is not None:
            raise StoppedBySignal(
                f"a second signal ({name}) aborted the run at once; it resumes from its last "
                "checkpoint when the same command is rerun",
                signum,
            )
        self.requested = signum
        print(
            f"\n[harness] {name} received: stopping at the end of this step (checkpoint + pending metrics); "
            "send it again to abort at once",
            flush=True,
        )

    def stop(self, step: int, ckpt_name: str) -> StoppedBySignal:
        """The exception that ends the run after `step` was checkpointed as `ckpt_name`."""
        name = signal.Signals(self.requested).name
        return StoppedBySignal(
            f"stopped by {name} after step {step}: checkpoint {ckpt_name} and the metrics of every "
            f"finished step are written; rerun the same command to resume at step {step + 1}",
            self.requested,
        )
