"""Faults a run stops on, each with a message that says what happened and what to do.

The CLI prints a RunFault as one paragraph (no traceback unless --debug) and exits with its
`exit_code`: 1 for a fault, 128 + signal number for a stop requested by a signal (143 for
SIGTERM, 130 for SIGINT), as a shell reports a process killed by that signal.
"""
from __future__ import annotations


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


class StoppedBySignal(BaseException):
    """SIGTERM / SIGINT: the run stopped at the end of a step, checkpointed. A BaseException,
    like KeyboardInterrupt, so that a caller's `except Exception` (a benchmark case loop, a
    study driver) does not swallow the stop request."""

    mlflow_status = "KILLED"

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum
