"""Reference losses of verl 0.9.1's on-policy distillation, for tests/objective/test_objective_distill.py.

    python benchmarks/reference/distill.py   # rewrites tests/objective/fixtures/distill.json

On fixed random batches (the student's log-probs, the teacher's, the task's per-token advantages, a response mask
with rows of every length, one row empty), it runs verl 0.9.1's own code, copied below verbatim where it is code
(verl imports Ray, Hydra, tensordict and more; not installed in the project's environment):

  verl/trainer/distillation/losses.py  `distillation_ppo_loss` with use_task_rewards=true and
                                       use_policy_gradient=true (l. 165-227: policy_loss + coef * distill_loss),
                                       `distillation_loss`'s policy-gradient branch (l. 230-302: advantages =
                                       -distillation_losses.detach()) and `compute_distillation_loss_reverse_kl_
                                       estimator` (l. 373-405: kl_penalty(student, teacher, loss_mode));
  verl/trainer/ppo/core_algos.py       `kl_penalty_forward`'s k1 branch (l. 2228-2229), `compute_policy_loss_vanilla`
                                       (l. 1286-1376, clip_ratio 0.2, clip_ratio_c 3) and `agg_loss` token-mean
                                       (l. 1170-1175);
  verl/utils/torch_functional.py       `masked_sum`, `masked_mean` (l. 273-308).

It stores each batch's inputs, verl's total loss and its gradient with respect to the student's log-probs. The
batches are on-policy (log_prob == old_log_prob: ratio 1, verl's single mini-batch step and the harness's
single-pass update), where verl's loss sum and the harness's advantage sum are the same loss.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "distill.json"


# ----------------------------------------------------------------------------- verl 0.9.1 (copied)
def masked_sum(values, mask, axis=None):
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum(axis=axis)


def masked_mean(values, mask, axis=None):
    s = masked_sum(values, mask, axis)
    return s / (mask.sum(axis=axis) + 1e-8)


def agg_loss_token_mean(loss_mat, loss_mask):
    batch_num_tokens = loss_mask.sum()
    return masked_sum(loss_mat, loss_mask) / batch_num_tokens * 1  # dp_size 1


def kl_penalty_k1(logprob, ref_logprob):
    return logprob - ref_logprob


def compute_policy_loss_vanilla(old_log_prob, log_prob, advantages, response_mask, cliprange=0.2, clip_ratio_c=3.0):
    negative_approx_kl = log_prob - old_log_prob
    negative_approx_kl = torch.clamp(negative_approx_kl, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - cliprange, 1 + cliprange)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    return agg_loss_token_mean(pg_losses, response_mask)


def distillation_ppo_loss(log_prob, old_log_prob, teacher_log_probs, advantages, response_mask, coef):
    """use_task_rewards=true, use_policy_gradient=true, loss_mode k1, policy_loss_mode vanilla, token-mean."""
    distillation_losses = kl_penalty_k1(log_prob, teacher_log_probs)
    distill_loss = compute_policy_loss_vanilla(old_log_prob, log_prob, -distillation_losses.detach(), response_mask)
    policy_loss = compute_policy_loss_vanilla(old_log_prob, log_prob, advantages, response_mask)
    return policy_loss + distill_loss * coef


# ----------------------------------------------------------------------------- the fixture
B, T = 5, 6
COEFS = [1.0, 0.5, 2.0]


def _batch(gen: torch.Generator) -> dict:
    logp = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 3
    teacher = logp - 0.5 * torch.randn(B, T, generator=gen, dtype=torch.float64)
    task = torch.randn(B, 1, generator=gen, dtype=torch.float64).expand(B, T).clone()  # a sequence advantage
    lengths = torch.tensor([T, 1, 4, 0, 3])  # every length, one row without a response token
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(torch.float64)
    return {"logp": logp, "teacher_logp": teacher, "task_adv": task[:, 0], "mask": mask}


def build() -> dict:
    gen = torch.Generator().manual_seed(2026)
    cases = []
    for coef in COEFS:
        b = _batch(gen)
        log_prob = b["logp"].clone().requires_grad_(True)
        task = b["task_adv"].unsqueeze(-1).expand(B, T)
        loss = distillation_ppo_loss(log_prob, b["logp"], b["teacher_logp"], task, b["mask"], coef)
        loss.backward()
        cases.append({**{k: v.tolist() for k, v in b.items()}, "coef": coef, "loss": loss.item()})
        cases[-1]["grad"] = log_prob.grad.tolist()
    return {
        "about": "written by benchmarks/reference/distill.py: verl 0.9.1 distillation_ppo_loss (use_task_rewards, "
        "use_policy_gradient, k1, vanilla PPO, token-mean), copied verbatim, on-policy (log_prob == old_log_prob)",
        "cases": cases,
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), indent=1) + "\n")
    print(OUT)
