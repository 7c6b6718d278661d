"""ReMax (Li et al. arXiv 2310.10505), docs/objective.md, "Advantage" -- `baseline: remax`.

The baseline of a sampled response is the reward of the GREEDY response to the same prompt: the
rollout draws one extra response per prompt at temperature 0 (harness/train/core/collect.py),
scores it with the same rewards (and the same overlong shaping), logs its reward
(`reward/greedy_mean`) and never trains on it. Equal to verl 0.9.1's `remax` advantage estimator
(verl/trainer/ppo/core_algos.py `compute_remax_outcome_advantage`) with `scale: none`
(tests/objective/test_remax_gdpo_dpo_references.py).

Glossary: N prompts, G = group size (ReMax's paper: G = 1), B = N*G sequences (groups contiguous),
T padded response length, M the response mask (B, T).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from harness.objective.advantages import SCALE
from harness.objective.extensions import Hooks, Scored
from harness.objective.kl import kl_in_reward, reward_kl_on
from harness.objective.modes import register_baseline

if TYPE_CHECKING:
    from harness.objective.config import ObjectiveConfig

GREEDY = "greedy_rewards"  # the extras name of the greedy responses' rewards (B,): each prompt's, repeated G times


def remax_advantages(
    cfg: ObjectiveConfig, rewards: torch.Tensor, greedy: torch.Tensor, group_size: int
) -> torch.Tensor:
    """Sequence advantages (B,) from the rewards (B,) and each row's greedy reward (B,), float64 inside:

        A_i = (r(x, y_i) - r(x, y_greedy)) / scale      (ReMax 2310.10505 Algorithm 1, b(x) = r(x, y_greedy))

    scale: the `scale` knob on the centred values of each group (none = ReMax and verl's `remax`)."""
    if rewards.shape != greedy.shape or rewards.dim() != 1:
        raise ValueError(
            f"rewards {tuple(rewards.shape)} and {GREEDY} {tuple(greedy.shape)} must both be (B,): "
            "the greedy reward of each row's prompt"
        )
    r = rewards.detach().to(torch.float64).view(-1, group_size)  # (N, G)
    u = r - greedy.detach().to(torch.float64).view(-1, group_size)  # ReMax: r(x, y_i) - r(x, y_greedy)
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()
    return SCALE[cfg.scale](u, r, cfg).reshape(-1).to(out_dtype)


@register_baseline(
    "remax",
    doc="b_i = the reward of the greedy (temperature 0) response to the same prompt (ReMax 2310.10505, "
    "verl `remax`); one extra greedy rollout per prompt, scored, logged, not trained on",
    hooks=Hooks(greedy=True),
    per_token=True,
)
def _remax_scored(
    cfg: ObjectiveConfig, rewards: torch.Tensor, mask: torch.Tensor, group_size: int, inputs: dict
) -> Scored:
    """The `advantages` hook: the KL placed in the reward (when on) comes off the sampled responses'
    rewards only (verl: token_level_rewards carry it, reward_baselines do not); the greedy reward is
    the baseline."""
    greedy = inputs.get(GREEDY)
    if greedy is None:
        raise ValueError(
            f"baseline='remax' needs {GREEDY} (B,): the reward of one greedy response per prompt "
            "(inputs_needed(obj).greedy_rewards; the trainer's rollout draws it at temperature 0)"
        )
    greedy = greedy.to(rewards.device)
    if reward_kl_on(cfg):
        rewards = kl_in_reward(cfg, rewards, inputs["logp"], inputs["ref_logp"], mask)
    adv = remax_advantages(cfg, rewards, greedy, group_size)
    metrics = {
        "reward/greedy_mean": float(greedy.double().mean()),
        "reward/above_greedy_frac": float((rewards.double() > greedy.double()).double().mean()),
    }
    return Scored(adv=adv, returns=None, rewards=rewards, metrics=metrics)
