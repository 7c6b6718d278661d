"""The checkpoint written off the step's critical path (train.checkpoint_background).

The step loop takes a snapshot of what the checkpoint holds (every tensor copied: the next step changes the
weights and the optimizer's moments in place) and hands it, with the records pending since the last checkpoint,
to one writer thread, which writes the checkpoint exactly as the synchronous path does (under a temp name, with
its manifest, then renamed: harness/train/core/rundir.py) and only then flushes those records to metrics.jsonl
and MLflow. The crash-safety order is the same: a record reaches the logs only once a checkpoint on disk holds
it, so a run killed at any moment resumes from the newest complete checkpoint and redoes the steps after it.

One write at a time: the loop waits for the previous write before it starts the next, before it stops on a
signal, before the final checkpoint and when the run ends by an error; a write's error (a full disk:
CheckpointWriteError) is raised in the loop at that wait, a step or more after the step it belongs to.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable

import torch

from harness.parallel import map_tensors


def snapshot(obj):
    """`obj` (a state dict, an optimizer's, nested dicts, lists and tuples) with every tensor copied, detached,
    once (map_tensors: a tied weight gives one copy, so that save_pretrained still sees the tie). A frozen
    parameter (requires_grad False: a LoRA policy's base) is kept, not copied: no step changes it. Whatever is not
    a tensor or a container is deep-copied."""

    def copied(t: torch.Tensor) -> torch.Tensor:
        return t if isinstance(t, torch.nn.Parameter) and not t.requires_grad else t.detach().clone()

    return map_tensors(obj, copied, other=copy.deepcopy)


class BackgroundWriter:
    """Runs one write at a time in a thread; `wait` joins it and raises what it raised."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def busy(self) -> bool:
        return self._thread is not None

    def submit(self, write: Callable[[], None], name: str) -> None:
        """Start `write` in the writer thread, after the previous write has ended (its error raised here)."""
        self.wait()

        def run() -> None:
            try:
                write()
            except BaseException as err:  # noqa: BLE001 -- handed to the loop's wait, which raises it
                self._error = err

        self._thread = threading.Thread(target=run, name=f"checkpoint {name}", daemon=False)
        self._thread.start()

    def wait(self) -> None:
        """Join the write in flight, if any; raise its error."""
        if self._thread is None:
            return
        self._thread.join()
        self._thread, err, self._error = None, self._error, None
        if err is not None:
            raise err
