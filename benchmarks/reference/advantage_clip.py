"""Reference advantages of NeMo-RL and ROLL with their advantage clipping, for
tests/objective/test_objective_advantage_clip.py.

    python benchmarks/reference/advantage_clip.py   # rewrites tests/objective/fixtures/advantage_clip.json

Neither peer is installed here (neither is on PyPI as a release), so their code is copied below verbatim from
their repositories' snapshots:

  NeMo-RL 7ea279a  nemo_rl/algorithms/utils.py `calculate_baseline_and_std_per_prompt` (l. 104-197),
                   nemo_rl/algorithms/advantage_estimator.py `GRPOAdvantageEstimator.compute_advantage`
                   (l. 69-98, with `self` a namespace of its two settings) and nemo_rl/algorithms/grpo.py
                   `_clip_grpo_advantages` (l. 2302-2313): the GRPO advantage with the group mean
                   (use_leave_one_out_baseline false: NeMo's leave-one-out std is its own, not ours), normalised,
                   then clipped to [advantage_clip_low, advantage_clip_high], one bound, the other, both;
  ROLL 8eb27cc     roll/utils/functionals.py `compute_advantage`'s last lines (l. 1186-1189): the per-token
                   advantages clamped to [-advantage_clip, advantage_clip] and its clip fraction.

Rewards: 6 groups of 4 (binary, one all-equal group, one graded) so that some advantages reach past every bound.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "advantage_clip.json"


# ----------------------------------------------------------------------------- NeMo-RL 7ea279a (copied)
def calculate_baseline_and_std_per_prompt(
    prompts: torch.Tensor,
    rewards: torch.Tensor,
    valid_mask: torch.Tensor,
    leave_one_out_baseline: bool = True,
    std_rewards: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Function to compute a baseline for each (prompt, response) pair in the batch.

    The same baseline is calculated for each prompt. Samples set to 0 in 'valid_mask'
    are not included in the baseline calculation.

    prompts:    tensor (b, s)     Tensor of prompts the model used. May be on any device
    rewards:    tensor (b,)       Float-valued rewards. May be on any device
    valid_mask: tensor (b,)       Vector of 0/1, where 0 is to ignore and 1 is to keep
    leave_one_out_baseline: bool  Compute an unbiased baseline by leaving out the sample that
                                  the baseline is for (from RLOO https://arxiv.org/abs/2402.14740)
    std_rewards: tensor (b,)      Optional separate reward tensor used only for the std
                                  calculation. Defaults to `rewards`. Useful for DAPO,
                                  which needs std on the raw task metric for dynamic
                                  sampling filtering while keeping baseline on the
                                  shaped reward.

    Returns:
    tensor (b,), tensor (b,) of baselines and std on the same device as 'rewards'
    """
    if std_rewards is None:
        std_rewards = rewards
    unique_prompts = torch.unique(prompts, dim=0)

    baseline = torch.zeros_like(rewards)
    sq_baseline = torch.zeros_like(rewards)
    std = torch.zeros_like(rewards)
    device_ordinal = rewards.get_device()
    if device_ordinal == -1:
        reward_device = torch.device("cpu")
    else:
        reward_device = torch.device(f"cuda:{device_ordinal}")

    for i in range(len(unique_prompts)):
        is_matching_prompt = (prompts == unique_prompts[i]).all(1)
        prompt_idx = torch.arange(len(prompts), device=reward_device)[is_matching_prompt]

        if leave_one_out_baseline:
            baseline_mask_matrix = (1 - torch.eye(len(prompt_idx))).to(reward_device)
        else:
            baseline_mask_matrix = torch.ones((len(prompt_idx), len(prompt_idx))).to(reward_device)

        if valid_mask[prompt_idx].sum() <= 1:
            # Ignore sample: there are no valid responses, so set baseline equal to reward
            # to ignore it in the loss computation
            baseline[prompt_idx] = rewards[prompt_idx]
        else:
            num_valid = valid_mask[prompt_idx].float().sum() - int(leave_one_out_baseline)
            prompt_baseline = (
                torch.matmul(baseline_mask_matrix, rewards[prompt_idx] * valid_mask[prompt_idx]) / num_valid
            )
            std_prompt_baseline = (
                prompt_baseline
                if std_rewards is rewards
                else torch.matmul(
                    baseline_mask_matrix,
                    std_rewards[prompt_idx] * valid_mask[prompt_idx],
                )
                / num_valid
            )
            std_prompt_baseline_square = (
                torch.matmul(
                    baseline_mask_matrix,
                    torch.pow(std_rewards[prompt_idx], 2) * valid_mask[prompt_idx],
                )
                / num_valid
            )

            baseline[prompt_idx] = prompt_baseline
            sq_baseline[prompt_idx] = std_prompt_baseline_square
            std[prompt_idx] = (
                ((std_prompt_baseline_square - std_prompt_baseline.square()) * (num_valid / (num_valid - 1)))
                .sqrt()
                .nan_to_num(0)
            )

    return baseline, std


def compute_advantage(self, prompt_ids, rewards, mask, **kwargs):
    """Compute GRPO advantages.

    Args:
        prompt_ids: Tensor of shape [batch_size] identifying which prompt each sample belongs to.
        rewards: Tensor of shape [batch_size] containing reward for each sample.
        mask: Response token mask of shape [batch_size, seq_len], 1 for valid response tokens, 0 for padding.
              Used only for expanding advantages to token-level shape.
        **kwargs: Additional arguments (unused).

    Returns:
        Advantages tensor of shape [batch_size, seq_len].
    """
    baseline, std = calculate_baseline_and_std_per_prompt(
        prompt_ids,
        rewards,
        torch.ones_like(rewards),
        leave_one_out_baseline=self.use_leave_one_out_baseline,
    )
    advantages = (rewards - baseline).unsqueeze(-1)

    if self.normalize_rewards:
        # don't sharpen the ones with no variation
        epsilon = 1e-6
        non_zero_std_mask = std > 0
        advantages[non_zero_std_mask] = advantages[non_zero_std_mask] / (std.unsqueeze(-1)[non_zero_std_mask] + epsilon)

    return advantages.expand(mask.shape)


def _clip_grpo_advantages(
    advantages: torch.Tensor,
    grpo_config,
) -> torch.Tensor:
    """Clamp normalized advantages when clip bounds are configured."""
    clip_low = grpo_config.advantage_clip_low
    clip_high = grpo_config.advantage_clip_high
    if clip_low is not None:
        advantages = advantages.clamp(min=clip_low)
    if clip_high is not None:
        advantages = advantages.clamp(max=clip_high)
    return advantages


# ----------------------------------------------------------------------------- ROLL 8eb27cc (copied)
def compute_clip_fraction(values: torch.Tensor, clip_max: float, clip_min: float):
    numel = values.numel()
    num_clipped = (values > clip_max).sum().item() + (values < clip_min).sum().item()
    clipfrac = num_clipped / numel if numel > 0 else 0.0
    return clipfrac


def roll_clip(advantages: torch.Tensor, advantage_clip) -> tuple[torch.Tensor, float]:
    """compute_advantage's clip, with data.meta_info a returned number."""
    if advantage_clip is not None:
        adv_clip_frac = compute_clip_fraction(values=advantages, clip_min=-advantage_clip, clip_max=advantage_clip)
        advantages = torch.clamp(advantages, min=-advantage_clip, max=advantage_clip)
    return advantages, adv_clip_frac


# ----------------------------------------------------------------------------- the fixture
G = 4
REWARDS = [1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0.9, 0.1, 0.5, 0.0]
BOUNDS = [(-1.0, 1.0), (None, 1.2), (-0.6, None), (-0.5, 2.0), (0.0, None)]
ROLL_CLIPS = [1.0, 0.8]
T = 3


def _nemo(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    prompt_ids = torch.arange(rewards.shape[0]).div(G, rounding_mode="floor").unsqueeze(-1)  # (B, 1) one id a group
    est = SimpleNamespace(use_leave_one_out_baseline=False, normalize_rewards=True)
    return compute_advantage(est, prompt_ids, rewards, mask)


def build() -> dict:
    rewards = torch.tensor(REWARDS, dtype=torch.float32)  # NeMo builds its baseline matrix in float32
    mask = torch.ones(rewards.shape[0], T)
    adv = _nemo(rewards, mask)
    nemo = {}
    for low, high in BOUNDS:
        cfg = SimpleNamespace(advantage_clip_low=low, advantage_clip_high=high)
        nemo[f"{low},{high}"] = _clip_grpo_advantages(adv.clone(), cfg)[:, 0].tolist()
    roll = {}
    for c in ROLL_CLIPS:
        clipped, frac = roll_clip(adv.clone() * mask, c)
        roll[str(c)] = {"adv": clipped[:, 0].tolist(), "clip_frac": frac}
    return {
        "about": "written by benchmarks/reference/advantage_clip.py: NeMo-RL 7ea279a GRPO advantages and "
        "_clip_grpo_advantages, ROLL 8eb27cc compute_advantage's clip, copied verbatim",
        "group_size": G,
        "rewards": REWARDS,
        "unclipped": adv[:, 0].tolist(),
        "nemo": nemo,
        "roll": roll,
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), indent=1) + "\n")
    print(OUT)
