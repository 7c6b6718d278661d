"""The reference implementations' outputs for VESPO, LUSPO, the two-sided clip delta (TRL 1.16), DRO
(verl 0.9.1) and GPPO / CE-GPPO (the authors' code), on fixed random inputs with padding: writes
tests/objective/fixtures/vespo_luspo_dro_gppo.json, which tests/objective/test_objective_vespo_luspo_dro_gppo.py
compares our `policy_loss` to (loss and gradient wrt logp, 1e-6).

    PYTHONPATH=$PWD python benchmarks/reference/vespo_luspo_dro_gppo.py      # needs TRL 1.16 (requirements-bench.txt)

Sources, copied verbatim where the reference is not a callable function (each block names its lines):
  TRL 1.16.0  trl/trainer/grpo_trainer.py: `GRPOTrainer.get_gamma_weights` (l. 2970-3018) is CALLED;
              the loss lines of `_compute_loss` (importance weights l. 3083-3095, the grpo/luspo branch
              with `delta` l. 3112-3120, the vespo branch l. 3125-3136, the grpo / dapo-vespo / luspo
              normalisers l. 3153-3182) are copied, with self.* replaced by this script's arguments.
  verl 0.9.1  verl/trainer/ppo/core_algos.py `compute_policy_loss_dro` (l. 2014-2045) and `agg_loss`
              (l. 1140-1206, its token-mean branch), verl/utils/torch_functional.py `masked_sum` /
              `masked_mean` (l. 273-308): copied (verl imports ray, hydra, ... and is not installed in
              the project's environment; `pip download verl==0.9.1 --no-deps` to read it).
  CE-GPPO     github.com/Kwai-Klear/CE-GPPO README, `compute_gppo_loss_general_beta` (the authors' GPPO /
              CE-GPPO loss, verl-based): copied.
The inputs are float64; padding holds finite garbage (the references multiply by the mask).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "vespo_luspo_dro_gppo.json"


def inputs(seed: int = 0) -> dict[str, torch.Tensor]:
    """B = 6 responses of lengths 7, 5, 3, 6, 1, 4 (T = 7, right padding); log-ratios of scale 0.5 so
    that every clip binds somewhere; one zero advantage."""
    g = torch.Generator().manual_seed(seed)
    B, T = 6, 7
    lengths = torch.tensor([7, 5, 3, 6, 1, 4])
    mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.float64)
    old = -3.0 * torch.rand(B, T, generator=g, dtype=torch.float64) - 0.05
    logp = old + 0.5 * torch.randn(B, T, generator=g, dtype=torch.float64)
    logp = torch.minimum(logp, torch.full_like(logp, -1e-3))  # a log-probability
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    adv[2] = 0.0
    return {"logp": logp, "old_logp": old, "adv": adv, "mask": mask}


# ----------------------------------------------------------------------------- TRL 1.16 (copied lines)
def trl_loss(loss_type: str, x: dict, *, eps_low=0.2, eps_high=0.2, delta=None, level="token", vespo=(2, 3, 3, 2)):
    """TRL 1.16 GRPOTrainer._compute_loss's policy term (beta 0, no vLLM, no entropy mask, one process,
    gradient accumulation 1, steps_per_generation 1): -> (loss, grad wrt logp)."""
    from trl.trainer.grpo_trainer import GRPOTrainer

    per_token_logps = x["logp"].clone().requires_grad_(True)
    old_per_token_logps, mask = x["old_logp"], x["mask"]
    advantages = x["adv"].unsqueeze(1)
    # l. 3083-3095
    log_ratio = per_token_logps - old_per_token_logps
    if level == "token":
        log_importance_weights = log_ratio
    elif level == "sequence":
        log_importance_weights = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        log_importance_weights = log_importance_weights.unsqueeze(-1)
    coef_1 = torch.exp(log_importance_weights)
    if loss_type in ["grpo", "bnpo", "dr_grpo", "dapo", "luspo"]:  # l. 3112-3120
        coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
        # Two-sided clipping
        if delta is not None:
            coef_1 = torch.clamp(coef_1, max=delta)

        per_token_loss1 = coef_1 * advantages
        per_token_loss2 = coef_2 * advantages
        per_token_loss = -torch.min(per_token_loss1, per_token_loss2)
    elif loss_type == "vespo":  # l. 3125-3136 (get_gamma_weights called)
        phi_seq = GRPOTrainer.get_gamma_weights(
            advantages=advantages,
            log_ratio_per_token=log_ratio,
            mask=mask,
            importance_sampling_ratio=None,
            k_pos=vespo[0],
            lambda_pos=vespo[1],
            k_neg=vespo[2],
            lambda_neg=vespo[3],
        )
        per_token_loss = -phi_seq * advantages * per_token_logps
    if loss_type in ["grpo", "sapo"]:  # l. 3153-3182, normalizer 1
        loss = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif loss_type in ["cispo", "dapo", "vespo"]:
        normalizer = mask.sum().clamp(min=1.0)  # num_items_in_batch / num_processes * GA / steps_per_generation
        loss = (per_token_loss * mask).sum() / normalizer
    elif loss_type == "luspo":
        loss = (per_token_loss * mask).sum(-1).mean()
    loss.backward()
    return loss.item(), per_token_logps.grad


# ----------------------------------------------------------------------------- verl 0.9.1 (copied)
def masked_sum(values: torch.Tensor, mask: torch.Tensor, axis=None) -> torch.Tensor:
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum(axis=axis)


def masked_mean(values, mask, axis=None):
    s = masked_sum(values, mask, axis)
    return s / (mask.sum(axis=axis) + 1e-8)


def agg_loss_token_mean(loss_mat, loss_mask):
    """verl 0.9.1 agg_loss, loss_agg_mode 'token-mean', dp_size 1, batch_num_tokens None."""
    batch_num_tokens = loss_mask.sum()
    return masked_sum(loss_mat, loss_mask) / batch_num_tokens * 1


def verl_dro(x: dict, beta: float):
    """verl 0.9.1 compute_policy_loss_dro (token-mean, no rollout IS weights) -> (loss, grad wrt logp)."""
    log_prob = x["logp"].clone().requires_grad_(True)
    old_log_prob, response_mask = x["old_logp"], x["mask"]
    advantages = x["adv"].unsqueeze(1).expand_as(log_prob)
    log_ratio = log_prob - old_log_prob
    pg_losses = -(log_prob * advantages - 0.5 * beta * log_ratio.square())
    pg_loss = agg_loss_token_mean(loss_mat=pg_losses, loss_mask=response_mask)
    pg_loss.backward()
    return pg_loss.item(), log_prob.grad


# ----------------------------------------------------------------------------- CE-GPPO authors (copied)
def compute_gppo_loss_general_beta(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    cliprange=None,
    cliprange_low=None,
    cliprange_high=None,
    clip_ratio_c=3.0,
    loss_agg_mode="token-mean",
    gppo_loss_beta1=0.75,
    gppo_loss_beta2=1.0,
):
    negative_approx_kl = log_prob - old_log_prob
    ratio = torch.exp(negative_approx_kl)
    ratio_detached = ratio.detach()

    if cliprange_low is None:
        cliprange_low = cliprange
    if cliprange_high is None:
        cliprange_high = cliprange

    # case masks
    low_mask = (ratio < (1 - cliprange_low)) & (advantages < 0)
    high_mask = (ratio > (1 + cliprange_high)) & (advantages > 0)
    other_mask = ~(low_mask | high_mask)

    beta1 = gppo_loss_beta1
    beta2 = gppo_loss_beta2

    # three cases
    clip_pg_losses1 = torch.zeros_like(advantages)
    clip_pg_losses1[low_mask] = (
        -beta1 * (1 - cliprange_low) / ratio_detached[low_mask] * ratio[low_mask] * advantages[low_mask]
    )
    clip_pg_losses1[high_mask] = (
        -beta2 * (1 + cliprange_high) / ratio_detached[high_mask] * ratio[high_mask] * advantages[high_mask]
    )
    clip_pg_losses1[other_mask] = -ratio[other_mask] * advantages[other_mask]

    pg_losses3 = -advantages * clip_ratio_c

    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)

    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    pg_loss = agg_loss_token_mean(loss_mat=pg_losses, loss_mask=response_mask)
    return pg_loss


def authors_gppo(x: dict, beta1: float, beta2: float, eps_low=0.2, eps_high=0.28, c=3.0):
    log_prob = x["logp"].clone().requires_grad_(True)
    adv = x["adv"].unsqueeze(1).expand_as(log_prob).clone()
    loss = compute_gppo_loss_general_beta(
        x["old_logp"], log_prob, adv, x["mask"], cliprange_low=eps_low, cliprange_high=eps_high, clip_ratio_c=c,
        gppo_loss_beta1=beta1, gppo_loss_beta2=beta2,
    )  # fmt: skip
    loss.backward()
    return loss.item(), log_prob.grad


# ----------------------------------------------------------------------------- the cases
# name -> (our objective config: preset and overrides, the reference's call)
CASES = {
    "trl_vespo": (("vespo", {}), lambda x: trl_loss("vespo", x)),
    "trl_vespo_knobs": (
        ("vespo", dict(vespo_k_pos=1.5, vespo_lambda_pos=2.5, vespo_k_neg=0.5, vespo_lambda_neg=1.0)),
        lambda x: trl_loss("vespo", x, vespo=(1.5, 2.5, 0.5, 1.0)),
    ),
    "trl_luspo": (("luspo", {}), lambda x: trl_loss("luspo", x, eps_low=3e-4, eps_high=4e-4, level="sequence")),
    "trl_luspo_wide": (
        ("luspo", dict(eps_low=0.2, eps_high=0.28)),
        lambda x: trl_loss("luspo", x, eps_low=0.2, eps_high=0.28, level="sequence"),
    ),
    "trl_delta": (("grpo", dict(kl_coef=0.0, delta=1.5)), lambda x: trl_loss("grpo", x, delta=1.5)),
    "trl_delta_below_clip": (("grpo", dict(kl_coef=0.0, delta=1.1)), lambda x: trl_loss("grpo", x, delta=1.1)),
    "verl_dro": (("grpo", dict(kl_coef=0.0, clip="dro", dro_beta=0.1, agg="token_mean")), lambda x: verl_dro(x, 0.1)),
    "verl_dro_beta": (
        ("grpo", dict(kl_coef=0.0, clip="dro", dro_beta=2.0, agg="token_mean")),
        lambda x: verl_dro(x, 2.0),
    ),
    "authors_gppo": (("gppo", dict(dual_clip=3.0)), lambda x: authors_gppo(x, 1.0, 1.0)),
    "authors_ce_gppo": (("ce_gppo", dict(dual_clip=3.0)), lambda x: authors_gppo(x, 0.75, 1.0)),
}


def main() -> None:
    x = inputs()
    cases = {}
    for name, ((preset, overrides), ref) in CASES.items():
        loss, grad = ref(x)
        assert math.isfinite(loss), name
        cases[name] = {"preset": preset, "overrides": overrides, "loss": loss, "grad": grad.tolist()}
        print(f"{name:22s} loss {loss:+.9f}")
    out = {
        "source": "benchmarks/reference/vespo_luspo_dro_gppo.py (TRL 1.16.0, verl 0.9.1 copied, CE-GPPO authors' code)",
        "inputs": {k: v.tolist() for k, v in x.items()},
        "cases": cases,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
