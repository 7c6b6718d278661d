"""Reference trajectory of PPO's adaptive KL controller, for tests/objective/test_objective_kl_control.py.

    python benchmarks/reference/kl_control.py   # rewrites tests/objective/fixtures/kl_control.json

On fixed random batches (the behaviour policy's and the reference's log-probs, a response mask with rows of
every length, one row empty), it runs verl 0.9.1's own code, copied below verbatim (verl imports Ray, Hydra and
more; not installed in the project's environment):

  verl/trainer/ppo/core_algos.py    `AdaptiveKLController` (l. 153-174) and the "kl" branch of
                                    `kl_penalty_forward` (l. 2216-2229: logprob - ref_logprob);
  verl/trainer/ppo/ray_trainer.py   the measurement and the update of `apply_kl_penalty` (l. 94-112);
  verl/utils/torch_functional.py    `masked_sum` and `masked_mean` (l. 273-308).

It stores each step's inputs, the beta that weighed the step's penalty, the step's measured KL and the beta after
the update. The batches' KLs are drawn around the target so that the proportional error is clipped at both
bounds on some steps and inside them on others.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "kl_control.json"


# ----------------------------------------------------------------------------- verl 0.9.1 (copied)
class AdaptiveKLController:
    def __init__(self, init_kl_coef, target_kl, horizon):
        self.value = init_kl_coef
        self.target = target_kl
        self.horizon = horizon

    def update(self, current_kl, n_steps):
        target = self.target
        proportional_error = np.clip(current_kl / target - 1, -0.2, 0.2)
        mult = 1 + proportional_error * n_steps / self.horizon
        self.value *= mult


def masked_sum(values, mask, axis=None):
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum(axis=axis)


def masked_mean(values, mask, axis=None):
    s = masked_sum(values, mask, axis)
    return s / (mask.sum(axis=axis) + 1e-8)


def verl_measure_and_update(old_log_probs, ref_log_prob, response_mask, kl_ctrl):
    """apply_kl_penalty's lines 94-112 without the DataProto: (beta used, current_kl)."""
    batch_size = old_log_probs.shape[0]
    kld = old_log_probs - ref_log_prob  # kl_penalty(..., "kl")
    kld = kld * response_mask
    beta = kl_ctrl.value
    current_kl = masked_mean(kld, mask=response_mask, axis=-1)  # average over sequence
    current_kl = torch.mean(current_kl, dim=0).item()
    kl_ctrl.update(current_kl=current_kl, n_steps=batch_size)
    return beta, current_kl


# ----------------------------------------------------------------------------- the fixture
CONFIG = {"kl_coef": 0.1, "kl_target": 0.05, "kl_horizon": 40}
B, T = 6, 7
SCALES = [0.0, 0.02, 0.045, 0.055, 0.2, 0.01, 0.08]  # the steps' KL sizes: clipped below, inside, clipped above


def _batch(gen: torch.Generator, scale: float) -> dict:
    logp = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 3
    ref = logp - scale * (1 + torch.randn(B, T, generator=gen, dtype=torch.float64))
    lengths = torch.tensor([T, 1, 4, 0, 6, 3])  # every length, one row without a response token
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(torch.float64)
    return {"logp": logp, "ref_logp": ref, "mask": mask}


def build() -> dict:
    gen = torch.Generator().manual_seed(2026)
    ctl = AdaptiveKLController(CONFIG["kl_coef"], CONFIG["kl_target"], CONFIG["kl_horizon"])
    steps = []
    for scale in SCALES:
        b = _batch(gen, scale)
        beta, kl = verl_measure_and_update(b["logp"], b["ref_logp"], b["mask"], ctl)
        steps.append({**{k: v.tolist() for k, v in b.items()}, "beta": beta, "current_kl": kl, "beta_after": ctl.value})
    return {
        "about": "written by benchmarks/reference/kl_control.py: verl 0.9.1 AdaptiveKLController and "
        "apply_kl_penalty's measurement, copied verbatim",
        "config": CONFIG,
        "steps": steps,
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), indent=1) + "\n")
    print(OUT)
