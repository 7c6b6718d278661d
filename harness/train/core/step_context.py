"""What the functions of one RL step share, as one typed object instead of positional threading.

    sc = StepContext.build(cfg, policy, components, ref, device, pad_id, mismatch)
    batch, metrics = score_episode(sc, ep)              # pi_old, pi_ref, advantages (core/scoring.py)
    policy_update(sc, batch, generator)                 # the update (rl/update.py)
    forward_loss(sc, part, (num_seqs, num_tokens))      # one micro-batch's loss (core/forward.py)

Every forward of the step reads how to run from here: the pad id, the sampling temperature (the
log-probs are those of the distribution sampled), the micro-batch rows, the MoE routing replay and
the shared prompt prefix. `mismatch` is the step's rollout/train observer (None: not measured).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from harness.objective import inputs_needed
from harness.train.core.components import Component, Trained, WithTrained
from harness.train.core.mismatch import MismatchStats


def single_pass(cfg) -> bool:
    """Whether the update's first forward is pi_old's: one epoch of one mini-batch, no mode asks for
    a separate pi_old forward (TIS weighs pi_old, as the trainer computes it, against the sampler), and the
    sampler is the policy at the start of the update (rollout.staleness 0: else pi_old is the stale sampler's), and
    pi_old is not the sampler's by train.old_logp=bypass (which holds even where they differ)."""
    tr = cfg.train
    return (
        tr.inner_epochs == 1
        and tr.mini_batches == 1
        and not inputs_needed(cfg.objective).recompute_old_logp
        and not cfg.rollout.staleness
        and tr.old_logp != "bypass"
    )


@dataclass(frozen=True)
class StepContext(WithTrained):
    """One step's policy, reference, components and the settings of its forwards.

    cfg          the run's config (its objective.kl_coef is the adaptive controller's beta of this step)
    policy       pi_theta and its optimizer
    components   the trained components (PPO's value model, PRIME's reward model, λ-GRPO's λ)
    ref          pi_ref, frozen, when the objective needs one (core/scoring.py frozen_reference), else None
    single_pass  the update's first forward is pi_old's (`single_pass` above)
    mismatch     fed by pi_old's forward with the rollout/train mismatch and routing (None: not measured)
    teacher      pi_T, frozen, when the objective distils (core/scoring.py frozen_teacher), else None
    """

    cfg: object
    policy: Trained
    components: tuple[Component, ...]
    ref: torch.nn.Module | None
    device: torch.device
    pad_id: int
    single_pass: bool
    mismatch: MismatchStats | None = None
    teacher: torch.nn.Module | None = None

    @classmethod
    def build(
        cls, cfg, policy: Trained, components=(), ref=None, device=None, pad_id: int = 0, mismatch=None, teacher=None
    ):
        """The context of a step under cfg; single_pass read from cfg, device from the policy's weights if None."""
        device = device if device is not None else next(policy.module.parameters()).device
        return cls(cfg, policy, tuple(components), ref, device, pad_id, single_pass(cfg), mismatch, teacher)

    @property
    def temperature(self) -> float:
        return self.cfg.rollout.temperature

    @property
    def replay(self) -> bool:
        """objective.routing_replay: every forward takes the rollout's expert choices (an MoE's batch.routing)."""
        return self.cfg.objective.routing_replay

    @property
    def share_prefix(self) -> bool:
        """train.share_prefix: a prompt's rows of a micro-batch run it once (harness/models/prefix_groups.py)."""
        return self.cfg.train.share_prefix

    @property
    def micro(self) -> int | None:
        """train.micro_batch_size: rows per forward (None: the whole batch)."""
        return self.cfg.train.micro_batch_size

    def probe(self) -> StepContext:
        """The context of a forward outside the update (a diagnostic, FSDP's pad): its own log-probs are pi_old's
        and it feeds no observer."""
        return replace(self, single_pass=True, mismatch=None)

    def with_cfg(self, cfg) -> StepContext:
        return replace(self, cfg=cfg)
