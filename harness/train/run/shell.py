"""The run shell: everything a training run does around its steps, for every trainer.

    open DIR (refuse another config; a finished run returns its summary) -> trainer checks
    -> seed, task, initial policy, rollout engine -> trainer.prepare (e.g. DPO's round-0 pairs)
    -> resume (newest readable checkpoint: policy, optimizers of every trained module, the
       trainer's own state, pending metrics) -> tracker
    -> for each step the trainer schedules: eval when due, trainer.step, checkpoint when due
       (or when a signal asked to stop: then stop, KILLED), non-finite policy
    -> final record (eval of the trained policy) -> summary.json, FINISHED

A trainer (the RL loop, the DPO trainer) supplies its step and its own extras (`Trainer`,
harness/train/core/trainer.py); the config key `trainer:` (rl | dpo, set by the presets) chooses it
(`make_trainer`).
Crash safety: see harness/train/core/rundir.py (resume without lost or duplicated steps).
Where each part lives: setup.py (open the run directory, build the task and initial policy), resume.py (restore
the newest checkpoint), checkpoints.py (write checkpoints, and the records they carry), summary.py (summary.json);
this module's Shell wires them around the step loop.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from pathlib import Path

import torch

from harness import malloc, parallel, progress, threads
from harness.config import RunConfig
from harness.faults import RunFault, StopOnSignal, StoppedBySignal
from harness.rollout import make_backend
from harness.rollout.sharded import ShardedBackend
from harness.tracking.pending import make_tracker, sync_pending
from harness.train.core.agent import multi_turn
from harness.train.core.collect import eval_problems
from harness.train.core.components import Component, Trained, adamw, build_components
from harness.train.core.rundir import RunDir
from harness.train.core.sharding import shard_trained
from harness.train.core.trainer import RunContext, Trainer
from harness.train.dpo.step import DPOTrainer
from harness.train.eval.evaluate import is_eval_step
from harness.train.rl.step import RLTrainer
from harness.train.run.checkpoints import Checkpoints
from harness.train.run.cuda_allocs import AllocClock
from harness.train.run.eval_cache import eval_at
from harness.train.run.gc_pauses import GcClock
from harness.train.run.hub_record import hub_record
from harness.train.run.ranks import check_same_start, cleanup, own_dir, quiet_config, rank_zero_first
from harness.train.run.resume import read_newest, restore_policy, restore_state
from harness.train.run.setup import open_run, start_run
from harness.train.run.summary import finish


def peak_mem_mb() -> float:
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def ranks_peak_mem() -> dict:
    """On N processes: the largest peak memory of any of them (perf/peak_mem_mb is rank 0's)."""
    if parallel.world() == 1:
        return {}
    return {"perf/peak_mem_mb_ranks": max(parallel.gather_objects(peak_mem_mb()))}


def end_status(err: BaseException) -> str:
    """The MLflow status of a run that `err` ended: a fault's own, FAILED for an error, KILLED otherwise."""
    if isinstance(err, (RunFault, StoppedBySignal)):
        return err.mlflow_status
    return "FAILED" if isinstance(err, (Exception, SystemExit)) else "KILLED"  # sys.exit in user code: FAILED


def make_trainer(cfg: RunConfig) -> Trainer:
    """The trainer `cfg.trainer` names (rl | dpo)."""
    return DPOTrainer(cfg) if cfg.trainer == "dpo" else RLTrainer(cfg)


def run(cfg: RunConfig, out_dir: str | Path) -> dict:
    """Run (or resume) one run with the trainer `cfg.trainer` names; returns the summary written
    to DIR/summary.json. SIGTERM / SIGINT stop it at the end of a step, checkpointed (harness/faults.py).
    Under torchrun (train.nproc > 1) every process calls this; rank 0 writes DIR (harness/train/run/ranks.py)."""
    malloc.tune()  # freed tensors' memory kept for the next step's (harness/malloc.py)
    parallel.init_from_env(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    out, scratch = own_dir(out_dir)
    try:
        with StopOnSignal() as stop:
            return Shell(quiet_config(cfg), make_trainer(cfg), stop).run(out)
    finally:
        cleanup(scratch)


class Shell:
    """One run of `trainer` under `cfg`: start (or resume), the step loop, the end (summary.json, or the status of
    the error or signal that ended it). Its checkpoints and pending records: Checkpoints (checkpoints.py)."""

    def __init__(self, cfg: RunConfig, trainer: Trainer, stop: StopOnSignal):
        self.cfg, self.trainer, self.stop = cfg, trainer, stop
        self.elapsed0 = 0.0
        self.t_run = time.perf_counter()
        self.ckpt = Checkpoints(trainer, self._elapsed)

    def run(self, out_dir: str | Path) -> dict:
        cfg = self.cfg
        run, done = open_run(cfg, out_dir)
        done = parallel.broadcast_object(done)  # rank 0's run directory decides (the others write scratch)
        if done is not None:
            sync_pending(cfg, run.root)  # what MLflow missed while it was down
            return done
        self.trainer.preflight(run)
        ctx, start = self._start(run)
        try:
            self._steps(ctx, start)
        except BaseException as err:
            self.ckpt.drain()
            self.tracker.finish(end_status(err))
            ctx.backend.close()
            raise
        ctx.backend.close()
        wall, task_info = self._elapsed(), getattr(self, "task_info", None)
        return finish(self.cfg, self.trainer, ctx.run, self.tracker, wall, task_info)

    # ------------------------------------------------------------------ start and resume
    def _start(self, run: RunDir) -> tuple[RunContext, int]:
        """Build everything, restore the newest checkpoint; returns (context, first step to run)."""
        cfg, tr = self.cfg, self.cfg.train
        with rank_zero_first():  # rank 0 builds the warm start the others then read from its cache
            su = start_run(run, cfg)
        policy = su.policy
        backend = multi_turn(cfg, make_backend(cfg.rollout, policy, su.tok), su.tok, policy)  # task.tools: turns
        if parallel.world() > 1:  # each process samples its share of the prompts (harness/rollout/sharded.py)
            backend = ShardedBackend(backend, su.pad_id)
        self.task_info = su.task_info  # a dataset task: prompts dropped, pass-rate buckets (-> summary.json)
        ctx = RunContext(
            cfg,
            run,
            su.device,
            su.task,
            su.tok,
            su.render,
            su.pad_id,
            backend,
            Trained("policy", policy, adamw(policy, tr.lr, tr.betas, tr.weight_decay)),
        )
        self.trainer.prepare(ctx)
        ckpt, loaded = read_newest(run, policy)
        if ckpt is not None:  # weights loaded in place: the optimizer and the rollout engine keep `policy`
            restore_policy(policy, ctx.backend, ckpt, loaded)
        ctx.components = self._components(ctx)
        start = 0
        if ckpt is not None:
            state = loaded[1]
            start, self.elapsed0 = restore_state(ctx, self.trainer, ckpt, state)
        self.tracker = make_tracker(cfg, run.root, hub=hub_record(cfg))  # MLflow down: buffered (pending.py)
        self.ckpt.tracker = self.tracker
        if ckpt is not None:  # flush what the checkpoint holds (idempotent: both sinks skip known steps)
            run.flush(state["pending_metrics"], state["pending_samples"])
            self.tracker.log_steps(state["pending_metrics"])
        check_same_start(ctx.model)  # on N processes: one initial policy
        if cfg.train.parallel == "fsdp" and parallel.world() > 1:  # built and restored whole, now sharded
            shard_trained(ctx.trained, self.trainer.frozen_modules())
        self.eval_problems = eval_problems(ctx.task, cfg)
        self.t_run = time.perf_counter()
        return ctx, start

    def _components(self, ctx: RunContext) -> list[Component]:
        return build_components(self.cfg, ctx.model, self.trainer.component_inputs(), ctx.device)

    # ------------------------------------------------------------------ steps
    def _steps(self, ctx: RunContext, start: int) -> None:
        with GcClock() as gc_clock, progress.bar("train", self.trainer.total_steps, start, "step") as bar:  # perf/gc_*
            self._step_loop(ctx, progress.counted(self.trainer.schedule(start), bar), gc_clock)
        final = self.trainer.final_step
        if final >= start:  # the final record holds the eval of the trained policy only
            rec = {"step": final, **self._eval(ctx, final)}
            rec["perf/elapsed_seconds"] = self._elapsed()
            self.ckpt.pending_metrics.append(rec)
            self._checkpoint(ctx, final)
        self.ckpt.wait()

    def _step_loop(self, ctx: RunContext, steps: Iterator[int], gc_clock: GcClock) -> None:
        tr, last_ckpt_seconds = self.cfg.train, 0.0
        allocs = AllocClock(ctx.device)  # perf/cuda_* of each step on CUDA (cuda_allocs.py); nothing on a CPU
        for step in steps:
            t_step = time.perf_counter()
            threads.tick()  # fewer torch threads while another process holds a core (harness/threads.py)
            rec: dict = {"step": step}
            if is_eval_step(self.cfg, step, False):
                rec.update(self._eval(ctx, step))
            samples = self.trainer.step(ctx, step, rec)
            rec.update(
                {
                    "perf/checkpoint_seconds": last_ckpt_seconds,
                    "perf/step_seconds": time.perf_counter() - t_step,
                    "perf/peak_mem_mb": peak_mem_mb(),
                    **ranks_peak_mem(),
                    "perf/elapsed_seconds": self._elapsed(),
                    **threads.governor_metrics(),
                    **gc_clock.take(),
                    **allocs.take(),
                }
            )
            self.ckpt.pending_metrics.append(rec)
            self.ckpt.pending_samples.extend(samples)
            self._print(rec)
            stopping = self._stop_requested()
            due = (step + 1) % tr.checkpoint_every == 0 or self.trainer.checkpoint_due(step) or stopping
            background = tr.checkpoint_background and not stopping  # a stop waits for its checkpoint
            last_ckpt_seconds = self._checkpoint(ctx, step, background) if due else 0.0
            if stopping:
                raise self.stop.stop(step, ctx.last_ckpt)

    def _stop_requested(self) -> bool:
        """A stop signal (SIGTERM, SIGINT) received by this process, or on N processes by any of them: all stop
        after the same step."""
        signals = [s for s in parallel.gather_objects(self.stop.requested) if s is not None]
        if signals and self.stop.requested is None:
            self.stop.requested = signals[0]  # another rank's signal
        return bool(signals)

    def _eval(self, ctx: RunContext, step: int) -> dict:
        """pass@k on the held-out prompts (step 0: the warm start's, cached) and the trainer's eval extras.
        The rollout engine gets the policy's weights first (a no-op when they are the same module)."""
        t0 = time.perf_counter()
        ctx.backend.sync_weights(ctx.model)
        out = eval_at(ctx.task, ctx.backend, ctx.render, self.eval_problems, self.cfg, step, ctx.run.root)
        out.update(self.trainer.eval_extras(ctx, step))
        out["perf/eval_seconds"] = time.perf_counter() - t0
        return out

    def _elapsed(self) -> float:
        return self.elapsed0 + time.perf_counter() - self.t_run

    def _checkpoint(self, ctx: RunContext, step: int, background: bool = False) -> float:
        """The checkpoint of `step` and the records pending (checkpoints.py); the seconds the step loop spent on it."""
        return self.ckpt.save(ctx, step, background)

    def _print(self, rec: dict) -> None:
        if not parallel.is_main():
            return
        parts = [f"{short}={rec[k]:.3f}" for k, short in self.trainer.print_keys if k in rec]
        print(f"[harness] {self.trainer.label} {rec['step']:4d} " + " ".join(parts), flush=True)
