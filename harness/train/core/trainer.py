"""What a trainer is to the run shell, and what its step may use.

A trainer (the RL step, harness/train/rl/step.py; the DPO step, harness/train/dpo/step.py) supplies
its step and its own extras (`Trainer`); the run shell (harness/train/run/shell.py) builds and
restores everything around it and hands it a `RunContext`. The config key `trainer:` picks one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from harness.config import RunConfig
from harness.train.core.components import Component, Trained, WithTrained
from harness.train.core.nonfinite import on_nonfinite
from harness.train.core.rundir import RunDir


@dataclass
class RunContext(WithTrained):
    """What a trainer's step may use: the run's objects, built and restored by the shell."""

    cfg: RunConfig
    run: RunDir
    device: torch.device
    task: object
    tok: object
    render: object  # Problem -> prompt token ids
    pad_id: int
    backend: object  # the rollout engine (sampling and eval)
    policy: Trained  # the policy and its optimizer
    components: list[Component] = field(default_factory=list)
    last_ckpt: str | None = None  # the newest checkpoint written or resumed from

    def nonfinite(self, step: int, what: str) -> dict:
        """train.nan_policy on a non-finite step: stop raises NonFiniteError; skip_step -> its metrics."""
        return on_nonfinite(self.cfg.train.nan_policy, step, what, self.last_ckpt)


class Trainer:
    """What a trainer supplies to the shell. Its step fills the step's record; the rest has defaults."""

    label = "step"  # printed before the step number
    print_keys: tuple = ()  # (metric, short name) printed per step

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg

    def preflight(self, run: RunDir) -> None:
        """Checks of inputs the config cannot see (files), before any model loads."""

    def prepare(self, ctx: RunContext) -> None:
        """After the initial policy is built, before a checkpoint is loaded."""

    def frozen_modules(self) -> list[torch.nn.Module]:
        """Models the trainer holds besides the trained ones (a frozen reference): sharded with them under
        train.parallel=fsdp (harness/train/core/sharding.py)."""
        return []

    def component_inputs(self) -> list[str]:
        """The objective inputs trained components must provide (e.g. ["values"])."""
        return []

    def schedule(self, start: int) -> Iterator[int]:
        """The steps to run, from `start` (a resumed run skips the steps before it)."""
        raise NotImplementedError

    @property
    def total_steps(self) -> int | None:
        """The steps of the whole run, for the progress line (None: not known before they run)."""
        return None

    @property
    def final_step(self) -> int:
        """The final record's step (known once `schedule` is exhausted)."""
        raise NotImplementedError

    def step(self, ctx: RunContext, step: int, rec: dict) -> list[dict]:
        """Run one step, adding its metrics to rec; returns its sample records."""
        raise NotImplementedError

    def checkpoint_due(self, step: int) -> bool:
        """A checkpoint the trainer needs after `step` besides every train.checkpoint_every."""
        return False

    def eval_extras(self, ctx: RunContext, step: int) -> dict:
        return {}

    def state_dict(self) -> dict:
        """The trainer's own checkpoint state (besides the trained modules)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def summary(self) -> dict:
        return {}

    def artifacts(self) -> list[str]:
        """Files of DIR logged to the tracker at the end, besides config, summary and samples."""
        return []
