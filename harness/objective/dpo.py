"""Offline preference losses (docs/objective.md, "DPO"): DPO (Rafailov et al. 2305.18290), IPO (Azar et al.
2310.12036) and TRL 1.16's other DPO loss types (`dpo_loss_type`, their equations in dpo_losses.py), with
DPO-Shift's shift of the rejected term (Yang et al. 2502.07599, `dpo_shift_lambda`) and RPO's NLL term
(`dpo_sft_coef`).

Glossary: B preference pairs. Inputs are SEQUENCE log-prob sums (B,) of the chosen and the
rejected response under the policy (with grad) and the frozen reference, and the responses' token counts (B,).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from harness.objective.dpo_losses import DPO_LOSS, PairLogRatios

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs


def dpo_loss(
    cfg: ObjectiveKnobs,
    pol_chosen: torch.Tensor,
    pol_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    chosen_lengths: torch.Tensor | None = None,
    rejected_lengths: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """(loss, metrics), mean over the B pairs.

        c = pi_c - ref_c,  r = pi_r - ref_r,  h = c - r,  z = beta * h
        loss = mean_B DPO_LOSS[dpo_loss_type](pair, cfg)           (dpo_losses.py; e.g. sigmoid: -log sigma(z),
                                                                   DPO 2305.18290 Eq. 7; ipo: IPO 2310.12036)
             or sum_k w_k mean_B DPO_LOSS[k](pair, cfg)           (dpo_loss_weights {k: w_k}: MPO 2411.10442)
        + dpo_sft_coef * (-pi_c / |y_c|)                          (RPO 2404.19733 Eq. 3: NLL of the chosen
                                                                   response per token; needs chosen_lengths (B,))
    chosen_lengths, rejected_lengths (B,): the responses' token counts (ipo with dpo_ipo_length_norm and
    sigmoid_norm divide by them).
    Metrics: rewards/chosen = mean beta(pi_c - ref_c), rewards/rejected = mean beta(pi_r - ref_r),
    rewards/margin = mean of their difference, rewards/accuracy = share of pairs with
    chosen reward > rejected reward, logps/chosen, logps/rejected (mean raw policy log-probs:
    likelihood displacement shows only there), loss/dpo (the preference term), loss/dpo/<type> (each
    weighted term of a mix).
    """
    _check_shapes(pol_chosen, pol_rejected, ref_chosen, ref_rejected)
    pair = PairLogRatios(pol_chosen, pol_rejected, ref_chosen, ref_rejected, chosen_lengths, rejected_lengths)
    terms = _preference_terms(cfg, pair)
    preference = loss = sum(terms.values())
    nll = None
    if cfg.dpo_sft_coef > 0:
        if chosen_lengths is None or tuple(chosen_lengths.shape) != tuple(pol_chosen.shape):
            raise ValueError("dpo_sft_coef > 0 needs chosen_lengths (B,): the token count of each chosen response")
        nll = (-pol_chosen / chosen_lengths.to(pol_chosen.dtype)).mean()  # RPO: -log pi(y_c|x) / |y_c|
        loss = loss + cfg.dpo_sft_coef * nll
    metrics = _metrics(cfg.dpo_beta, pair, preference)
    if len(terms) > 1:
        metrics.update({f"loss/dpo/{n}": float(t.detach()) for n, t in terms.items()})
    if nll is not None:
        metrics["loss/sft"] = float(nll.detach())
    return loss, metrics


def _check_shapes(*logps: torch.Tensor) -> None:
    """ValueError unless the four inputs are (B,) of one B."""
    names = ("pol_chosen", "pol_rejected", "ref_chosen", "ref_rejected")
    shapes = {n: tuple(t.shape) for n, t in zip(names, logps, strict=True)}
    if len(set(shapes.values())) != 1 or logps[0].dim() != 1:
        raise ValueError(f"all four inputs must be (B,) sequence log-prob sums of the same B, got {shapes}")


def _preference_terms(cfg: ObjectiveKnobs, pair: PairLogRatios) -> dict[str, torch.Tensor]:
    """Loss type -> its weighted batch mean w_k mean_B L_k (a scalar): dpo_loss_type with weight 1, or every
    loss type of dpo_loss_weights (TRL 1.16: loss += per_sequence_loss.mean() * loss_weight)."""
    weights = cfg.dpo_loss_weights or {cfg.dpo_loss_type: 1.0}
    return {name: DPO_LOSS[name](pair, cfg).mean() * w for name, w in weights.items()}


@torch.no_grad()
def _metrics(beta: float, pair: PairLogRatios, preference: torch.Tensor) -> dict[str, float]:
    """The metrics of docs/objective.md, "DPO" of the batch (see dpo_loss)."""
    r_c, r_r = beta * pair.chosen, beta * pair.rejected
    return {
        "rewards/chosen": float(r_c.mean()),
        "rewards/rejected": float(r_r.mean()),
        "rewards/margin": float((r_c - r_r).mean()),
        "rewards/accuracy": float((r_c > r_r).to(torch.float64).mean()),
        "logps/chosen": float(pair.pol_chosen.mean()),
        "logps/rejected": float(pair.pol_rejected.mean()),
        "loss/dpo": float(preference),
    }


__all__ = ["DPO_LOSS", "dpo_loss"]
