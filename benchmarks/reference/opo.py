"""Reference advantages of verl 0.9.1's OPO estimator, for tests/objective/test_objective_opo.py.

    python benchmarks/reference/opo.py   # rewrites tests/objective/fixtures/opo.json

verl imports Ray, Hydra and more (not installed in the project's environment), so its code is copied below
verbatim: verl/trainer/ppo/core_algos.py `compute_opo_outcome_advantage` (l. 640-690; its decorator and its
unused `config` type left out). Inputs: groups of 4 with responses of every length (one empty), binary and
graded rewards, an all-equal group; and a batch of groups of one (verl's baseline 0).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Optional

import numpy as np
import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "opo.json"
AlgoConfig = object


# ----------------------------------------------------------------------------- verl 0.9.1 (copied)
def compute_opo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Optional[AlgoConfig] = None,  # noqa: UP045 (verl's text, verbatim)
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Compute advantage for OPO based on https://arxiv.org/pdf/2505.23585

    Args:
        token_level_rewards: `(torch.Tensor)`
            shape: (bs, response_length)
        response_mask: `(torch.Tensor)`
            shape: (bs, response_length)
        config: (AlgoConfig) algorithm config

    Returns:
        advantages: `(torch.Tensor)`
            shape: (bs, response_length)
        Returns: `(torch.Tensor)`
            shape: (bs, response_length)
    """
    response_length = response_mask.sum(dim=-1)
    scores = token_level_rewards.sum(dim=-1)

    id2score = defaultdict(list)
    id2len = defaultdict(list)
    id2bsl = {}

    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
            id2len[index[i]].append(response_length[i])

        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2bsl[idx] = torch.tensor(0.0)
            elif len(id2score[idx]) > 1:
                score_tensor = torch.stack(id2score[idx])
                len_tensor = torch.stack(id2len[idx])
                id2bsl[idx] = (len_tensor * score_tensor).sum() / len_tensor.sum()
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            scores[i] = scores[i] - id2bsl[index[i]]
        scores = scores.unsqueeze(-1) * response_mask

    return scores, scores


# ----------------------------------------------------------------------------- the fixture
LENGTHS = [3, 1, 5, 2, 4, 4, 1, 6, 2, 0, 3, 5, 6, 2, 2, 1]
REWARDS = [1, 0, 0, 1, 0.9, 0.1, 0.5, 0.0, 1, 1, 0, 0, 1, 1, 1, 1]
T = 6


def _mask(lengths: list[int]) -> torch.Tensor:
    return (torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).float()  # (B, T)


def _verl(rewards: list[float], lengths: list[int], group_size: int) -> list[float]:
    mask = _mask(lengths)
    last = (torch.tensor(lengths) - 1).clamp_min(0)
    token_rewards = torch.zeros(len(rewards), T)
    token_rewards[torch.arange(len(rewards)), last] = torch.tensor(
        rewards, dtype=torch.float32
    )  # the reward at the end
    index = np.array([i // group_size for i in range(len(rewards))])
    adv, _ = compute_opo_outcome_advantage(token_rewards, mask, index)
    # verl's advantage is per token (zero past the response); a row's is its first token's, or 0 when empty
    return [float(adv[i, 0]) if lengths[i] else 0.0 for i in range(len(rewards))]


def build() -> dict:
    return {
        "about": "written by benchmarks/reference/opo.py: verl 0.9.1 compute_opo_outcome_advantage, copied verbatim",
        "lengths": LENGTHS,
        "rewards": REWARDS,
        "T": T,
        "groups_of_4": _verl(REWARDS, LENGTHS, 4),
        "groups_of_1": _verl(REWARDS, LENGTHS, 1),
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), indent=1) + "\n")
    print(OUT)
