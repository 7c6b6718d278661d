"""The run's checkpoints and the records they carry: what trainer_state.pt holds, and when the records reach the logs.

    ckpt = Checkpoints(trainer, elapsed)     # elapsed(): the run's wall seconds so far (a resumed run's included)
    ckpt.pending_metrics.append(rec)         # the step loop's records wait here for the next checkpoint
    ckpt.tracker = tracker                   # the run's MLflow sink, once it exists
    seconds = ckpt.save(ctx, step, background)

A checkpoint holds the step, the policy's optimizer, the trainer's own state, every component's, the pending
records and the wall seconds; on N processes with FSDP every rank gathers the whole tensors and rank 0 writes
them, as a 1-process run does (any process count resumes from them). The records pending since the last
checkpoint reach metrics.jsonl, samples.jsonl and MLflow only after the checkpoint holding them is on disk (the
crash-safety order of harness/train/core/rundir.py); with train.checkpoint_background both are written by a
thread on a snapshot (ckpt_writer.py), one write at a time, its error raised at the next wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from harness import parallel
from harness.train.core.policy_module import policy_checkpoint_state
from harness.train.core.trainer import RunContext, Trainer
from harness.train.run.ckpt_writer import BackgroundWriter, snapshot


class Checkpoints:
    """trainer: whose state_dict the checkpoint holds; elapsed: the run's wall seconds so far, read at each save."""

    def __init__(self, trainer: Trainer, elapsed: Callable[[], float]):
        self.trainer, self.elapsed = trainer, elapsed
        self.pending_metrics: list[dict] = []
        self.pending_samples: list[dict] = []
        self.tracker = None  # the run's tracker (harness/tracking/pending.py), set once the run has one
        self.writer = BackgroundWriter()  # train.checkpoint_background's writer thread

    def save(self, ctx: RunContext, step: int, background: bool = False) -> float:
        """Write the checkpoint of `step`, then flush the pending records; with `background` both happen in the
        writer thread on a snapshot (train.checkpoint_background: harness/train/run/ckpt_writer.py). Returns the
        seconds the step loop spent on it (the snapshot, and waiting for the previous write)."""
        t0 = time.perf_counter()
        self.writer.wait()  # one write at a time; a background write's error is raised here
        name = f"step_{step:06d}"
        sharded = any(parallel.is_sharded(t.module) for t in ctx.trained)  # FSDP: every rank gathers the state
        state, weights = self._state(ctx, step, sharded)
        metrics, samples = self.pending_metrics, self.pending_samples
        self.pending_metrics, self.pending_samples = [], []
        ctx.last_ckpt = name
        if state is None:  # rank 0 writes the checkpoints and records (all hold the same)
            return 0.0
        if background:
            state = snapshot(state)
            weights = snapshot(weights if weights is not None else ctx.model.state_dict(keep_vars=True))
            self.writer.submit(lambda: self._write(ctx, step, state, weights, metrics, samples), name)
        else:
            self._write(ctx, step, state, weights, metrics, samples)
        return time.perf_counter() - t0

    def wait(self) -> None:
        """The write in flight finished (its error raised here)."""
        self.writer.wait()

    def drain(self) -> None:
        """The run ends by an error: the write in flight finishes first (its checkpoint and records kept), and its
        own error, if it has one, is printed (the run's error is the one raised)."""
        try:
            self.writer.wait()
        except BaseException as err:  # noqa: BLE001 -- reported; the run's own error follows
            print(f"[harness] the background checkpoint write failed too: {type(err).__name__}: {err}", flush=True)

    def _state(self, ctx: RunContext, step: int, sharded: bool) -> tuple[dict | None, dict | None]:
        """(what trainer_state.pt holds, the model's whole weights when FSDP shards them else None); (None, None)
        on a process that writes nothing."""
        if not parallel.is_main() and not sharded:
            return None, None
        state = {
            "step": step,
            "optimizer": ctx.policy.optimizer.state_dict(),
            **self.trainer.state_dict(),
            "elapsed": self.elapsed(),
            "pending_metrics": self.pending_metrics,
            "pending_samples": self.pending_samples,
            **policy_checkpoint_state(ctx.model),
        }
        for c in ctx.components:
            state.update(c.state())
        if not sharded:
            return state, None
        # the whole tensors, as a 1-process run saves them (any process count resumes from them)
        state = parallel.full_state(state, keep=parallel.is_main())
        weights = parallel.full_state(ctx.model.state_dict(keep_vars=True), keep=parallel.is_main())  # ties kept
        return (state, weights) if parallel.is_main() else (None, None)

    def _write(self, ctx: RunContext, step: int, state: dict, weights, metrics: list, samples: list) -> None:
        """The checkpoint on disk, then the records it holds flushed (metrics.jsonl, samples.jsonl, MLflow)."""
        ctx.run.save_checkpoint(step, ctx.model, state, ctx.tok, weights)
        ctx.run.flush(metrics, samples)
        self.tracker.log_steps(metrics)
