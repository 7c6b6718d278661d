"""Reference rows of verl 0.9.1's PF-PPO resampling, for tests/objective/test_objective_pf_ppo.py.

    python benchmarks/reference/pf_ppo.py   # rewrites tests/objective/fixtures/pf_ppo.json

verl imports Ray, Hydra and more (not installed in the project's environment), so its code is copied below
verbatim: verl/trainer/ppo/core_algos.py `compute_pf_ppo_reweight_data` (l. 2254-2326). Its `data` is a DataProto;
the stand-in below holds what the function reads (`batch`, a dict of tensors with a `batch_size`,
`non_tensor_batch`, `meta_info`), with a row-index tensor in the batch so the drawn rows can be read back.
torch.multinomial draws from torch's default generator: the fixture stores the seed set right before each call,
and the test seeds a generator of its own with it. Inputs: 12 rewards with ties at the max and the min, negative
ones (pow takes |r|) and zeros (their weight is verl's 1e-8).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "pf_ppo.json"


class TensorDict(dict):
    """The stand-in of verl's TensorDict batch: a dict of tensors with a batch size."""

    batch_size = None


class DataProto:
    """The stand-in of verl's DataProto: what compute_pf_ppo_reweight_data reads."""

    def __init__(self, batch: dict, non_tensor_batch: dict, meta_info: dict):
        self.batch = TensorDict(batch)
        self.batch.batch_size = len(next(iter(batch.values())))
        self.non_tensor_batch = non_tensor_batch
        self.meta_info = meta_info


# ----------------------------------------------------------------------------- verl 0.9.1 (copied)
def compute_pf_ppo_reweight_data(
    data,
    reweight_method: str = "pow",
    weight_pow: float = 2.0,
):
    """Reweight the data based on the token_level_scores.

    Args:
        data: DataProto object, containing batch, non_tensor_batch and meta_info
        reweight_method: str, choices: "pow", "max_min", "max_random"
        weight_pow: float, the power of the weight

    Returns:

    """

    @torch.no_grad()
    def compute_weights(scores: torch.Tensor, reweight_method: str, weight_pow: float) -> torch.Tensor:
        """Compute importance weights for resampling based on scores.

        Args:
            scores (torch.Tensor): Tensor of scores to compute weights from.
            reweight_method (str): Method for computing weights ('pow', 'max_min', 'max_random').
            weight_pow (float): Power exponent for 'pow' method.

        Returns:
            torch.Tensor: Computed importance weights.

        Raises:
            ValueError: If reweight_method is not supported.
        """
        if reweight_method == "pow":
            weights = torch.pow(torch.abs(scores), weight_pow)
        elif reweight_method == "max_min":
            max_score = torch.max(scores)
            min_score = torch.min(scores)
            weights = torch.where((scores == max_score) | (scores == min_score), 1.0, 0.0)
        elif reweight_method == "max_random":
            max_score = torch.max(scores)
            weights = torch.where(scores == max_score, 0.4, 0.1)
        else:
            raise ValueError(f"Unsupported reweight_method: {reweight_method}")
        return weights

    scores = data.batch["token_level_scores"].sum(dim=-1)
    weights = compute_weights(scores, reweight_method, weight_pow)
    weights = torch.clamp(weights + 1e-8, min=1e-8)

    batch_size = scores.shape[0]
    sample_indices = torch.multinomial(weights, batch_size, replacement=True)

    resampled_batch = {key: tensor[sample_indices] for key, tensor in data.batch.items()}

    sample_indices_np = sample_indices.numpy()
    resampled_non_tensor_batch = {}
    for key, array in data.non_tensor_batch.items():
        if isinstance(array, np.ndarray):
            resampled_non_tensor_batch[key] = array[sample_indices_np]
        else:
            resampled_non_tensor_batch[key] = [array[i] for i in sample_indices_np]

    resampled_meta_info = {}
    for key, value in data.meta_info.items():
        if isinstance(value, list) and len(value) == batch_size:
            resampled_meta_info[key] = [value[i] for i in sample_indices_np]
        else:
            resampled_meta_info[key] = value

    from copy import deepcopy

    resampled_data = deepcopy(data)
    resampled_data.batch = type(data.batch)(resampled_batch)
    resampled_data.batch.batch_size = data.batch.batch_size
    resampled_data.non_tensor_batch = resampled_non_tensor_batch
    resampled_data.meta_info = resampled_meta_info

    return resampled_data


# ----------------------------------------------------------------------------- the fixture
REWARDS = [1.0, 0.0, -0.5, 1.0, 0.3, -1.0, 0.0, 0.7, -1.0, 0.2, 1.0, 0.5]
T = 3
CASES = {"pow,2.0": ("pow", 2.0), "pow,1.0": ("pow", 1.0), "max_min,2.0": ("max_min", 2.0)}
CASES["max_random,2.0"] = ("max_random", 2.0)


def _verl_rows(method: str, weight_pow: float, seed: int) -> list[int]:
    B = len(REWARDS)
    scores = torch.zeros(B, T)
    scores[:, -1] = torch.tensor(REWARDS)  # token_level_scores: the reward on the last token
    data = DataProto({"token_level_scores": scores, "row": torch.arange(B)}, {"uid": np.arange(B) // 4}, {"step": 0})
    torch.manual_seed(seed)
    out = compute_pf_ppo_reweight_data(data, method, weight_pow)
    return out.batch["row"].tolist()


def build() -> dict:
    return {
        "about": "written by benchmarks/reference/pf_ppo.py: verl 0.9.1 compute_pf_ppo_reweight_data, copied verbatim",
        "rewards": REWARDS,
        "rows": {key: {str(s): _verl_rows(*case, s) for s in (0, 1, 7)} for key, case in CASES.items()},
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), indent=1) + "\n")
    print(OUT)
