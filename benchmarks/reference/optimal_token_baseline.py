"""Reference advantages of verl 0.9.1's optimal token baseline, for
tests/objective/test_objective_optimal_token_baseline.py.

    python benchmarks/reference/optimal_token_baseline.py   # rewrites tests/objective/fixtures/optimal_token_baseline.json

verl imports Ray, Hydra and more (not installed in the project's environment), so its code is copied below
verbatim: verl/trainer/ppo/core_algos.py `compute_optimal_token_baseline_advantage` (l. 872-988; its registration
decorator left out). Inputs: 3 groups of 4 with responses of every length (one empty; a group whose longest row
is unique, one whose two longest tie), outcome rewards on the last response token, pi_old's log-probs with finite
garbage on the padding and sum_v pi^2 >= pi^2; handle_zero_tail on and off, and groups of one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "optimal_token_baseline.json"


# ----------------------------------------------------------------------------- verl 0.9.1 (copied)
def compute_optimal_token_baseline_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    old_log_probs: torch.Tensor,
    sum_pi_squared: torch.Tensor,
    rollout_is_weights: torch.Tensor = None,
    handle_zero_tail: bool = True,
    epsilon: float = 1e-8,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Compute advantages using Optimal Token Baseline (OTB).

    Unlike the group mean based baseline which uses a single baseline per trajectory,
    this computes a unique baseline for each timestep using cumulative path variance.

    Theory:
        For each timestep t in each prompt group:
            B_t* = E[G_t × W_t] / E[W_t]
        where W_t = Σ_{j=1}^t ||s_j||² (cumulative path-variance proxy)
        and ||s_j||² = 1 - 2π_j + Σπ²

    The cumulative sum W_t captures the "realized energy" of trajectory has been up to timestep t,
    giving higher weight to predicting rewards on high-variance paths.

    Args:
        token_level_rewards: Rewards at each token position [shape: (bs, response_length)]
        response_mask: Binary mask for valid tokens (1) vs padding (0) [shape: (bs, response_length)]
        index: Prompt indices for grouping trajectories from same prompt [shape: (bs,)]
        old_log_probs: Log probabilities from training policy during generation [shape: (bs, response_length)]
        sum_pi_squared: Sum of squared probabilities over vocabulary Σπ² [shape: (bs, response_length)]
        rollout_is_weights: Pre-computed IS weights for W correction [shape: (bs, response_length)],
            None if not using IS
        handle_zero_tail: If True, zero baselines will be set in the portion of the longest trajectory
            that extends beyond the second-longest trajectory in the prompt group.
            Default: True
        epsilon: Small constant for numerical stability (default: 1e-8)

    Returns:
        advantages: OTB advantage estimates [shape: (bs, response_length)]
        returns: Cumulative rewards (returns) from each position [shape: (bs, response_length)]

    Note on Rollout Importance Sampling:
        When rollout_is_weights is provided, W_t is scaled by ρ̄²(t) to minimize MSE under truncated IS:
            B_t* = Σ[G_t × ρ̄²(t) × W_t] / Σ[ρ̄²(t) × W_t]
    """
    with torch.no_grad():
        batch_size, seq_len = token_level_rewards.shape
        device = token_level_rewards.device

        # Compute returns (reward-to-go) for each timestep
        returns = (token_level_rewards * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])

        # Step 1: Compute w_per_timestep = 1 - 2π_t + Σπ²)
        pi_t = torch.exp(old_log_probs)
        w_per_timestep = 1 - 2 * pi_t + sum_pi_squared

        # Step 2: Apply rollout importance sampling correction (if enabled)
        if rollout_is_weights is not None:
            # Scale W by ρ̄² to minimize MSE under truncated IS
            w_per_timestep = w_per_timestep * (rollout_is_weights**2)

        # Step 3: Compute cumulative path-variance proxy: W_t = Σ_{j=1}^t w_j
        # This measures accumulated variance from the start of the trajectory up to timestep t
        w_cumulative = (w_per_timestep * response_mask).cumsum(dim=-1)

        # Group trajectories by prompt
        prompt_groups = defaultdict(list)
        for i in range(batch_size):
            prompt_groups[index[i]].append(i)

        # Initialize baselines tensor [batch_size, seq_len]
        baselines = torch.zeros_like(returns)

        # Compute per-step baseline for each prompt group
        for _, trajectory_indices in prompt_groups.items():
            N = len(trajectory_indices)
            if N == 1:
                # Single trajectory - no baseline (advantage = return)
                continue

            traj_idx = torch.tensor(trajectory_indices, device=device)

            # Extract group data [N, seq_len]
            returns_group = returns[traj_idx]
            w_cumulative_group = w_cumulative[traj_idx]
            mask_group = response_mask[traj_idx]

            # Compute per-timestep baseline: B_t = Σ[G_t × W_t] / Σ[W_t]
            # where W_t = Σ_{j=1}^t ||s_j||² (cumulative path variance)
            # Shape: [seq_len]
            numerator = (returns_group * w_cumulative_group * mask_group).sum(dim=0)  # Sum over trajectories
            denominator = (w_cumulative_group * mask_group).sum(dim=0) + epsilon

            baseline_per_step = numerator / denominator  # [seq_len]

            # Assign to all trajectories in this group
            baselines[traj_idx] = baseline_per_step.unsqueeze(0).expand(N, -1)

            if handle_zero_tail:
                # Optionally zero out the portion of the longest trajectory that extends
                # beyond the second-longest trajectory in the prompt group.
                response_lengths = mask_group.sum(dim=-1)
                sorted_lengths, _ = torch.sort(response_lengths)
                max_length = int(sorted_lengths[-1].item())
                second_max_length = int(sorted_lengths[-2].item())
                max_length_idx = (response_lengths == max_length).nonzero(as_tuple=True)[0]
                if max_length_idx.numel() == 1 and max_length > second_max_length:
                    max_length_traj_idx = trajectory_indices[int(max_length_idx[0])]
                    baselines[max_length_traj_idx, second_max_length:] = 0.0

        # Compute advantages: A_t = G_t - B_t
        advantages = (returns - baselines) * response_mask

    return advantages, returns


# ----------------------------------------------------------------------------- the fixture
LENGTHS = [3, 1, 5, 2, 4, 4, 1, 6, 2, 0, 3, 6]  # group 0: one longest (5); group 1: two tie (4, 4); group 2: one
REWARDS = [1.0, 0.0, 0.0, 1.0, 0.9, 0.1, 0.5, 0.0, 1.0, 1.0, 0.0, 0.3]
T = 7


def inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    B = len(LENGTHS)
    mask = (torch.arange(T).unsqueeze(0) < torch.tensor(LENGTHS).unsqueeze(1)).double()  # (B, T)
    pi = 0.05 + 0.9 * torch.rand(B, T, generator=g, dtype=torch.float64)
    old_logp = torch.where(mask > 0, pi.log(), torch.full_like(pi, 3.0))  # padding: finite garbage
    sum_sq = pi**2 + (1 - pi**2) * 0.5 * torch.rand(B, T, generator=g, dtype=torch.float64)
    last = (torch.tensor(LENGTHS) - 1).clamp_min(0)
    token_rewards = torch.zeros(B, T, dtype=torch.float64)
    token_rewards[torch.arange(B), last] = torch.tensor(REWARDS, dtype=torch.float64) * (torch.tensor(LENGTHS) > 0)
    return {"mask": mask, "old_logp": old_logp, "sum_pi_squared": sum_sq, "token_rewards": token_rewards}


def _verl(x: dict, group_size: int, zero_tail: bool) -> list:
    index = np.array([i // group_size for i in range(len(LENGTHS))])
    adv, _ = compute_optimal_token_baseline_advantage(
        x["token_rewards"], x["mask"], index, x["old_logp"], x["sum_pi_squared"], handle_zero_tail=zero_tail
    )
    return adv.tolist()


def build() -> dict:
    x = inputs()
    return {
        "about": "written by benchmarks/reference/optimal_token_baseline.py: verl 0.9.1 "
        "compute_optimal_token_baseline_advantage, copied verbatim",
        "lengths": LENGTHS,
        "rewards": REWARDS,
        "inputs": {k: v.tolist() for k, v in x.items()},
        "adv": {
            "groups_of_4,zero_tail": _verl(x, 4, True),
            "groups_of_4,no_zero_tail": _verl(x, 4, False),
            "groups_of_1,zero_tail": _verl(x, 1, True),
        },
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), indent=1) + "\n")
    print(OUT)
