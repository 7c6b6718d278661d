"""Stopping at a safe point on SIGTERM / SIGINT (a SLURM time limit or preemption, Ctrl-C).

Inside `StopOnSignal`, the first SIGTERM or SIGINT only records itself; the trainer checks
`requested` at the end of every step, writes a checkpoint and the pending metrics, marks the
MLflow run KILLED and raises StoppedBySignal (the CLI exits 128 + signal: 143, 130). A second
signal aborts at once (StoppedBySignal raised from the handler): the last checkpoint stays
the resume point. Outside the main thread (no handlers can be set there) it does nothing.
"""
from __future__ import annotations

import signal
import threading

from harness.train.run.faults import StoppedBySignal

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopOnSignal:
    def __init__(self):
        self.requested: int | None = None  # the first signal's number
        self._previous: dict = {}

    def __enter__(self) -> "StopOnSignal":
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
            raise StoppedBySignal(f"a second signal ({name}) aborted the run at once; it resumes from its last "
                                  "checkpoint when the same command is rerun", signum)
        self.requested = signum
        print(f"\n[harness] {name} received: stopping at the end of this step (checkpoint + pending metrics); "
              "send it again to abort at once", flush=True)

    def stop(self, step: int, ckpt_name: str) -> StoppedBySignal:
        """The exception that ends the run after `step` was checkpointed as `ckpt_name`."""
        name = signal.Signals(self.requested).name
        return StoppedBySignal(f"stopped by {name} after step {step}: checkpoint {ckpt_name} and the metrics of every "
                               f"finished step are written; rerun the same command to resume at step {step + 1}",
                               self.requested)
