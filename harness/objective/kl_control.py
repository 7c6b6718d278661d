"""PPO's adaptive KL controller (docs/objective.md, "KL to the reference"): the reward's KL weight beta steered toward a
target KL.

Ziegler et al. 2019 (1909.08593) §2.2, as InstructGPT's PPO ran it and verl and OpenRLHF ship it:

    e_t       = clip(KL_t / KL_target - 1, -0.2, 0.2)
    beta_{t+1} = beta_t (1 + e_t n_t / horizon)

KL_t is the step's measured KL of the behaviour policy from pi_ref: per sequence the mean over its response
tokens of the reward's estimator (k1 = log pi_theta - log pi_ref), then the mean over the B sequences (verl
`apply_kl_penalty`: masked_mean over each row, then the batch mean); n_t = B, the step's sequences. beta_t is
the weight of this step's reward penalty (r_i - beta_t sum_t k1); the step's measurement moves the next one.

Reference code: verl 0.9.1 verl/trainer/ppo/core_algos.py `AdaptiveKLController` and
verl/trainer/ppo/ray_trainer.py `apply_kl_penalty` (algorithm.kl_ctrl.type: adaptive, target_kl, horizon;
`kl_coef` its starting beta); OpenRLHF `AdaptiveKLController` (--init_kl_coef, --kl_target, --kl_horizon).
Equal to verl's on a sequence of measurements (tests/objective/test_objective_kl_control.py, fixture from
benchmarks/reference/kl_control.py). Glossary: B rows, T response length, M the loss mask (B, T).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.objective.aggregation import aggregate
from harness.objective.kl import kl_penalty
from harness.objective.modes import Knob, Requires, register_extension

ERROR_CLIP = 0.2  # the proportional error's bound (1909.08593 §2.2; verl, OpenRLHF)

KNOBS = (
    Knob(
        "kl_target",
        None,
        "adaptive KL (PPO, 1909.08593 §2.2; verl kl_ctrl.target_kl): the per-token KL of the reward's penalty "
        "that beta is steered toward, kl_coef the starting beta; null = a fixed kl_coef",
        type=float,
        nullable=True,
        gt=0,
    ),
    Knob(
        "kl_horizon",
        10000,
        "adaptive KL: the horizon in sequences; beta moves by at most 20% per horizon (verl kl_ctrl.horizon)",
        type=int,
        ge=1,
    ),
)

WHY = "the adaptive controller steers the reward's KL penalty (PPO: r - beta k1), starting from kl_coef"


@dataclass
class AdaptiveKL:
    """beta and the rule that moves it, kept across steps and saved in checkpoints (verl's kl_ctrl.value)."""

    value: float

    def update(self, cfg: Any, current_kl: float, n_steps: int) -> None:
        """One step's measurement: e = clip(KL / target - 1, -0.2, 0.2); beta <- beta (1 + e n / horizon)."""
        error = min(max(current_kl / cfg.kl_target - 1.0, -ERROR_CLIP), ERROR_CLIP)
        self.value *= 1.0 + error * n_steps / cfg.kl_horizon

    def state_dict(self) -> dict:
        return {"value": self.value}

    def load_state_dict(self, state: dict) -> None:
        self.value = float(state["value"])


def adaptive_kl(cfg: Any) -> AdaptiveKL | None:
    """A fresh controller at beta = kl_coef when cfg sets kl_target, else None (the trainer keeps it)."""
    return AdaptiveKL(float(cfg.kl_coef)) if getattr(cfg, "kl_target", None) is not None else None


def steer_kl(ctl: AdaptiveKL | None, cfg: Any, measured: dict, rows: int) -> dict:
    """{"kl/coef": beta_t}, the beta that weighed the step's penalty, after moving ctl by the step's KL_t
    (measured["kl/reward"], the scoring's) over its `rows` sequences; {} without a controller."""
    if ctl is None:
        return {}
    beta = ctl.value
    ctl.update(cfg, float(measured["kl/reward"]), n_steps=rows)
    return {"kl/coef": beta}


def reward_kl_mean(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL_t (0-dim): mean over rows of each row's mean k1 over its masked tokens (verl apply_kl_penalty).

    logp: the behaviour policy's log-probs (B, T), the ones the reward's penalty reads; ref_logp (B, T); mask (B, T).
    A row with no masked token counts as 0 (verl's masked_mean of an empty row: 0 / eps), as it does in
    seq_mean_token_mean's (1/B) sum_i (1/|o_i|) sum_t M k1 with B every row."""
    k1 = kl_penalty(logp.detach(), ref_logp, "k1")  # log pi_theta - log pi_ref
    return aggregate("seq_mean_token_mean", k1, mask, num_seqs=mask.shape[0])


@register_extension(
    "adaptive_kl",
    doc="PPO's adaptive KL controller (1909.08593 §2.2; verl kl_ctrl.type=adaptive): the reward's KL weight "
    "steered toward kl_target, starting at kl_coef; its state is checkpointed",
    knobs=KNOBS,
    requires=(
        Requires("kl_placement", ("reward",), WHY),
        Requires("kl_coef", why=WHY, accepts=lambda v, cfg: v > 0, allowed_text="a float > 0"),
    ),
    switch="kl_target",
    when="objective.kl_target set",
)
def _adaptive_kl_on(cfg: Any) -> bool:
    return cfg.kl_target is not None


__all__ = ["AdaptiveKL", "adaptive_kl", "steer_kl", "reward_kl_mean", "KNOBS"]
