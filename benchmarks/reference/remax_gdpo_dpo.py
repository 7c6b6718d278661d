# ruff: noqa: UP045 -- the verl functions below are verbatim (Optional[...] as verl writes it)
"""Reference outputs for ReMax, GDPO and DPO's sigmoid loss (docs/zoo.md, "Baselines, reward combination,
DPO fixes") on fixed random inputs with padding -> tests/objective/fixtures/remax_gdpo_dpo.json.

    python benchmarks/reference/remax_gdpo_dpo.py          # rewrite the fixture (CPU, a second)

verl 0.9.1 is not installed in the project's environment (its imports are heavy): the functions below are
copied VERBATIM from its wheel (`pip download verl==0.9.1 --no-deps`), with the file and line named:
  - compute_remax_outcome_advantage   verl/trainer/ppo/core_algos.py:735 (decorator dropped)
  - compute_grpo_outcome_advantage    verl/trainer/ppo/core_algos.py:268 (GDPO's per-reward step)
  - compute_gdpo_outcome_advantage    verl/trainer/ppo/core_algos.py:362 (the score_list path only: the
                                      config/non_tensor_batch branch that reads the rewards out of a
                                      DataProto is left out; score_list and reward_weights are passed in)
  - masked_mean, masked_var, masked_whiten   verl/utils/torch_functional.py:294, 311, 329
TRL 1.16 is importable, but its losses live inside trainer methods: the lines are copied verbatim too
(`self.` attributes passed in as arguments: reward_weights, num_generations, beta; len(self.reward_funcs) is
rewards_per_func.shape[1]):
  - GRPOTrainer._generate_and_score_completions, multi_objective_aggregation == "normalize_then_sum"
    (trl/trainer/grpo_trainer.py:2790-2799), with trl.trainer.utils.nanstd imported
  - DPOTrainer's `loss_type == "sigmoid"` (trl/trainer/dpo_trainer.py:1351-1388, reverse_kl)
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "remax_gdpo_dpo.json"
AlgoConfig = dict  # verl's type hint only


# ----------------------------------------------------------------------------- verl 0.9.1, verbatim
def masked_sum(values, mask, axis=None):  # verl/utils/torch_functional.py (masked_mean's helper)
    return (values * mask).sum(axis=axis)


def masked_mean(values, mask, axis=None):
    s = masked_sum(values, mask, axis)
    return s / (mask.sum(axis=axis) + 1e-8)


def masked_var(values, mask, unbiased=True):
    """Compute variance of tensor with masked values."""
    mean = masked_mean(values, mask)
    centered_values = values - mean
    variance = masked_mean(centered_values**2, mask)
    if unbiased:
        mask_sum = mask.sum()
        if mask_sum == 0:
            raise ValueError("At least one element in the mask has to be 1.")
        # note that if mask_sum == 1, then there is a division by zero issue
        # to avoid it you just need to use a larger minibatch_size
        if mask_sum == 1:
            raise ValueError("The sum of the mask is one, which can cause a division by zero.")
        bessel_correction = mask_sum / (mask_sum - 1)
        variance = variance * bessel_correction
    return variance


def masked_whiten(values, mask, shift_mean=True):
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened


class verl_F:  # noqa: N801 -- verl's module alias inside core_algos.py
    masked_whiten = staticmethod(masked_whiten)


def compute_remax_outcome_advantage(
    token_level_rewards: torch.Tensor,
    reward_baselines: torch.Tensor,
    response_mask: torch.Tensor,
    config: Optional[AlgoConfig] = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        returns = (token_level_rewards * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
        advantages = returns - reward_baselines.unsqueeze(-1) * response_mask

    return advantages, returns


def compute_grpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Optional[AlgoConfig] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    scores = token_level_rewards.sum(dim=-1)

    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}

    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                scores_tensor = torch.stack(id2score[idx])
                id2mean[idx] = torch.mean(scores_tensor)
                id2std[idx] = torch.std(scores_tensor)
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask

    return scores, scores


def compute_gdpo_outcome_advantage(
    token_level_rewards, response_mask, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True, config=None, **kw
):
    score_list = kw["score_list"]  # (the DataProto branch of verl that fills these is left out: see above)
    reward_weights = kw["reward_weights"]

    if score_list is None:
        score_list = [token_level_rewards]

    num_scores = len(score_list)

    if reward_weights is not None:
        weights = torch.tensor(reward_weights, dtype=torch.float32, device=token_level_rewards.device)
    else:
        weights = torch.ones(num_scores, dtype=torch.float32, device=token_level_rewards.device)

    new_advantage = None

    for i in range(num_scores):
        normalized_score, _ = compute_grpo_outcome_advantage(
            token_level_rewards=score_list[i],
            response_mask=response_mask,
            index=index,
            epsilon=epsilon,
            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
            config=config,
        )

        if new_advantage is None:
            new_advantage = weights[i] * normalized_score
        else:
            new_advantage += weights[i] * normalized_score

    advantages = verl_F.masked_whiten(new_advantage, response_mask) * response_mask

    return advantages, advantages


# ----------------------------------------------------------------------------- TRL 1.16, verbatim lines
def trl_normalize_then_sum(rewards_per_func: torch.Tensor, reward_weights: torch.Tensor, num_generations: int):
    from trl.trainer.utils import nanstd

    device = rewards_per_func.device
    unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)
    grouped = rewards_per_func.view(-1, num_generations, rewards_per_func.shape[1])
    mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
    std_k = nanstd(grouped, dim=1, keepdim=True) if num_generations > 1 else torch.zeros_like(mean_k)
    reward_k = (grouped - mean_k) / (std_k + 1e-4)
    reward_k = reward_k.view(-1, rewards_per_func.shape[1])
    rewards = (reward_k * reward_weights.to(device).unsqueeze(0)).nansum(dim=1)
    rewards[unscorable_mask] = torch.nan
    std_rewards = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    advantages = (rewards - torch.nanmean(rewards)) / (std_rewards + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0)


def trl_dpo_sigmoid(chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps, beta):
    chosen_logratios = chosen_logps - ref_chosen_logps
    rejected_logratios = rejected_logps - ref_rejected_logps
    chosen_scores = chosen_logratios
    rejected_scores = rejected_logratios
    delta_score = chosen_scores - rejected_scores
    per_sequence_loss = -F.logsigmoid(beta * delta_score)
    return per_sequence_loss


# ----------------------------------------------------------------------------- the cases
def _mask(gen: torch.Generator, B: int, T: int) -> torch.Tensor:
    """Right-padded response mask (B, T), lengths 1..T."""
    lengths = torch.randint(1, T + 1, (B,), generator=gen)
    return (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).float()


def _outcome_at_last(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """verl's token_level_rewards: the sequence score at the last response token."""
    out = torch.zeros_like(mask)
    out[torch.arange(mask.shape[0]), mask.sum(-1).long() - 1] = scores
    return out


def remax_case(seed: int, N: int, G: int, T: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    mask = _mask(gen, N * G, T)
    rewards = torch.randint(0, 3, (N * G,), generator=gen).float() * 0.5 - 0.25 * torch.rand(N * G, generator=gen)
    greedy = (torch.randint(0, 3, (N,), generator=gen).float() * 0.5).repeat_interleave(G)
    adv, _ = compute_remax_outcome_advantage(_outcome_at_last(rewards, mask), greedy, mask)
    return dict(N=N, G=G, mask=mask.tolist(), rewards=rewards.tolist(), greedy=greedy.tolist(), verl_adv=adv.tolist())


def gdpo_case(seed: int, N: int, G: int, K: int, T: int, equal_lengths: bool) -> dict:
    gen = torch.Generator().manual_seed(seed)
    mask = torch.ones(N * G, T) if equal_lengths else _mask(gen, N * G, T)
    values = torch.randint(0, 2, (N * G, K), generator=gen).float()
    values[:, -1] = torch.rand(N * G, generator=gen) * 3.0  # one continuous reward of a larger spread
    values[:G, 0] = 1.0  # an all-equal group of reward 0: contributes exactly 0
    weights = (torch.rand(K, generator=gen) + 0.5).tolist()
    index = np.array([str(i // G) for i in range(N * G)])
    scores = [_outcome_at_last(values[:, k].clone(), mask) for k in range(K)]
    verl_sum = sum(
        w * compute_grpo_outcome_advantage(s.clone(), mask, index)[0] for w, s in zip(torch.tensor(weights), scores)
    )
    verl_adv, _ = compute_gdpo_outcome_advantage(
        scores[0], mask, index, score_list=[s.clone() for s in scores], reward_weights=weights
    )
    trl_adv = trl_normalize_then_sum(values.clone(), torch.tensor(weights), G)
    return dict(
        N=N,
        G=G,
        mask=mask.tolist(),
        values=values.tolist(),
        weights=weights,
        verl_group_normalised_sum=verl_sum.tolist(),
        verl_adv=verl_adv.tolist(),
        trl_adv=trl_adv.tolist(),
    )


def dpo_case(seed: int, B: int, beta: float) -> dict:
    gen = torch.Generator().manual_seed(seed)
    pc, pr, rc, rr = (-(torch.rand(B, generator=gen) * 40.0) for _ in range(4))
    loss = trl_dpo_sigmoid(pc, pr, rc, rr, beta)
    return dict(
        beta=beta, pol_chosen=pc.tolist(), pol_rejected=pr.tolist(), ref_chosen=rc.tolist(), ref_rejected=rr.tolist(),
        trl_sigmoid=loss.tolist(),
    )  # fmt: skip


def main() -> None:
    fixture = {
        "remax": [remax_case(0, 4, 3, 7), remax_case(1, 5, 1, 6)],
        "gdpo": [gdpo_case(2, 4, 4, 3, 6, equal_lengths=False), gdpo_case(3, 3, 5, 2, 5, equal_lengths=True)],
        "dpo": [dpo_case(4, 16, 0.1), dpo_case(5, 9, 0.5)],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
