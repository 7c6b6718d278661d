"""The RL step's measurements, out of the training functions: the spine (harness/train/rl/step.py) notifies
them at its phase edges and logs what they return; none of them changes what the step computes.
`train.observers: false` runs the step without them, and takes the same update bit for bit
(tests/train/test_observers.py).

    mismatch()                    the step's rollout/train mismatch observer, fed by pi_old's forward
    scored(sc, step, ep, batch)   before the update: per-group records (groups.jsonl), the EOS weight shares
                                  (length bias), every train.grad_share_every steps the extreme groups'
                                  gradient share (one extra forward/backward, its gradient dropped)
    updated(sc, batch)            after it: an MoE's routing old -> new (router/disagree_old_new), a critic's
                                  explained variance
    mismatch_records(sc)          the mismatch, reduced over the processes (each saw its rows' forwards)

The clock of the phases (`PhaseClock`) is here too: it reads the time at each edge, after the device's
queued work, so a phase's perf/*_seconds is the work it launched.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch

from harness.models.logprobs import padded_widths
from harness.objective import explained_variance
from harness.train.core.batch import Batch
from harness.train.core.episode import Episode
from harness.train.core.mismatch import MismatchStats, router_old_new
from harness.train.core.step_context import StepContext
from harness.train.diagnostics.group_stats import extreme_grad_share, group_records
from harness.train.diagnostics.metrics import eos_weight_shares


class PhaseClock:
    """time.perf_counter() at the phase edges of one step, after the device's queued work (torch.cuda.synchronize
    on CUDA; nothing on a CPU): one reading an edge, the end of a phase being the start of the next."""

    def __init__(self, device: torch.device):
        self.device = device
        self.last = self.now()

    def now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def edge(self) -> float:
        """Seconds since the previous edge."""
        previous, self.last = self.last, self.now()
        return self.last - previous

    @staticmethod
    @contextmanager
    def host(key: str, out: dict):
        """out[key] = the host seconds of the block (no device wait added: which part of a phase spent where)."""
        t0 = time.perf_counter()
        yield
        out[key] = time.perf_counter() - t0


def batch_explained_variance(batch: Batch) -> float:
    """1 - Var[R - V] / Var[R] over the whole step's response tokens, V the critic's predictions before the
    update (old_values; as CleanRL and Stable-Baselines log it): one number for the batch, whatever the
    micro-batches or the number of processes (value_loss's per-call metric is over its micro-batch only)."""
    return explained_variance(batch.extras["old_values"], batch.extras["returns"], batch.mask)


class StepObservers:
    """The measurements of an RL run's steps (train.observers), each returning its records."""

    def __init__(self, cfg, moe: bool):
        self.cfg, self.on, self.moe = cfg, cfg.train.observers, moe

    def mismatch(self) -> MismatchStats | None:
        """A fresh rollout/train mismatch observer for the step, None when off (no forward feeds one)."""
        return MismatchStats() if self.on else None

    def scored(self, sc: StepContext, step: int, ep: Episode, batch: Batch, healthy: bool) -> dict:
        """The scored batch's group records and EOS weight shares; the gradient share when due (healthy: the
        rewards and advantages are finite)."""
        if not self.on:
            return {}
        tr = self.cfg.train
        out = group_records(ep, batch.adv, batch.mask, step)  # -> groups.jsonl (diagnostics/group_stats.py)
        out.update(eos_weight_shares(self.cfg.objective, batch.adv, batch.mask, ep.rollout.truncated, ep.correct))
        if tr.grad_share_every and step % tr.grad_share_every == 0 and healthy:
            out.update(extreme_grad_share(sc, batch, ep))
        return out

    def updated(self, sc: StepContext, batch: Batch) -> dict:
        """After the update: the updated policy's routing on the same batch, packed as the rollout's (an MoE);
        how much of the returns' variance the critic's predictions explain (a critic)."""
        if not self.on:
            return {}
        if self.moe:  # router/disagree_old_new, read with the mismatch's records
            with padded_widths(self.cfg.train.pad_to_multiple_of):
                router_old_new(sc.model, batch, sc.mismatch, sc.pad_id, sc.temperature, sc.replay)
        if "returns" in batch.extras:
            return {"value/explained_variance": batch_explained_variance(batch)}
        return {}

    @staticmethod
    def mismatch_records(sc: StepContext) -> dict:
        """The rollout/train mismatch and routing metrics, reduced over the processes; {} when not measured."""
        if sc.mismatch is None:
            return {}
        sc.mismatch.reduce()  # on N processes: each saw the forwards of its rows
        return sc.mismatch.result()
