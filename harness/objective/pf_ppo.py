"""PF-PPO's reward-weighted resampling (Shen et al. arXiv 2409.06957; verl `use_pf_ppo`, docs/objective.md,
"Batch-level knobs"): once the step is scored, the batch the update trains on is B rows drawn with replacement,
each row with probability proportional to a weight of its reward, so that the rows of reliable (extreme) rewards
are trained on more often.

    s_i = r_i                                                      the row's reward (the task's plus shaping)
    pow          w_i = |s_i|^p                                     (p = pf_ppo_weight_pow, verl's weight_pow 2)
    max_min      w_i = 1 if s_i = max_B s or s_i = min_B s, else 0
    max_random   w_i = 0.4 if s_i = max_B s, else 0.1
    w_i <- max(w_i + 1e-8, 1e-8);    idx ~ Multinomial(w, B, with replacement)          verl compute_pf_ppo_reweight_data

`pf_ppo_reweight` (null = off) names the method. The advantages, old log-probs and every per-row tensor the
scoring kept travel with their row (`Batch.rows`), so group statistics are those of the batch as sampled; the
diagnostics and records see the batch as sampled too, only the update sees the resampled one. The draw uses the
trainer's seeded generator (a step's draw is the same on every process and on a resumed run). verl applies it
only with GAE (`adv_estimator: gae`); here it combines with every baseline.

Equal to verl 0.9.1 `compute_pf_ppo_reweight_data` (core_algos.py), the drawn rows exactly with the same generator
state (tests/objective/test_objective_pf_ppo.py, fixture from benchmarks/reference/pf_ppo.py).
Glossary: B rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from harness.objective.extensions import Hooks
from harness.objective.modes import Knob, Requires, register_extension

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs

METHODS = ("pow", "max_min", "max_random")

KNOBS = (
    Knob(
        "pf_ppo_reweight",
        None,
        f"PF-PPO (2409.06957; verl use_pf_ppo + pf_ppo.reweight_method): resample the scored batch with weights of "
        f"the rewards before the update, one of {list(METHODS)}; null = off",
        type=str,
        nullable=True,
    ),
    Knob(
        "pf_ppo_weight_pow",
        2.0,
        "PF-PPO pow: the weight |r|^p of a row (verl pf_ppo.weight_pow)",
        type=float,
        gt=0,
    ),
)


def pf_ppo_weights(scores: torch.Tensor, method: str, weight_pow: float) -> torch.Tensor:
    """(B,) the resampling weights of the rewards (B,), before verl's + 1e-8 (see the module docstring)."""
    s = scores.detach()
    if method == "pow":
        return torch.pow(torch.abs(s), weight_pow)  # w = |s|^p
    if method == "max_min":
        return ((s == s.max()) | (s == s.min())).to(s.dtype)  # the batch's best and worst rows
    if method == "max_random":
        return torch.where(s == s.max(), 0.4, 0.1).to(s.dtype)  # the best rows 4x as likely as the others
    raise ValueError(f"objective.pf_ppo_reweight={method!r}: allowed values: {list(METHODS)} or null")


def pf_ppo_indices(
    scores: torch.Tensor, method: str, weight_pow: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """(B,) long: the rows of the resampled batch, B draws with replacement by the weights of `scores` (B,)."""
    w = torch.clamp(pf_ppo_weights(scores, method, weight_pow) + 1e-8, min=1e-8)  # verl: no row has weight 0
    return torch.multinomial(w, scores.shape[0], replacement=True, generator=generator)


def _resample(cfg: ObjectiveKnobs, rewards: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return pf_ppo_indices(rewards.cpu(), cfg.pf_ppo_reweight, cfg.pf_ppo_weight_pow, generator)


@register_extension(
    "pf_ppo",
    doc="PF-PPO (2409.06957, verl use_pf_ppo): the scored batch resampled with replacement by weights of the "
    "rewards (pow |r|^p, max_min, max_random) before the update",
    knobs=KNOBS,
    switch="pf_ppo_reweight",
    when="objective.pf_ppo_reweight set",
    requires=(Requires("pf_ppo_reweight", METHODS, "the resampling weights are verl's three methods"),),
    hooks=Hooks(resample=_resample),
)
def _pf_ppo_on(cfg: Any) -> bool:
    return getattr(cfg, "pf_ppo_reweight", None) is not None


__all__ = ["METHODS", "pf_ppo_weights", "pf_ppo_indices"]
