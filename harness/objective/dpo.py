"""Offline preference losses (docs/objective.md §8): DPO (Rafailov et al. 2305.18290) and
IPO (Azar et al. 2310.12036), with DPO-Shift's shift of the rejected term (Yang et al. 2502.07599,
`dpo_shift_lambda`) and RPO's NLL term (`dpo_sft_coef`).

Glossary: B preference pairs. Inputs are SEQUENCE log-prob sums (B,) of the chosen and the
rejected response under the policy (with grad) and the frozen reference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from harness.objective.modes import Knob, Modes, register

if TYPE_CHECKING:
    from harness.objective.fields import ObjectiveKnobs


def dpo_loss(
    cfg: ObjectiveKnobs,
    pol_chosen: torch.Tensor,
    pol_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    chosen_lengths: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """(loss, metrics), mean over the B pairs.

        h = (pi_c - ref_c) - (pi_r - ref_r),  z = beta * h
            with dpo_shift_lambda = lam < 1 (sigmoid only):
        h = (pi_c - ref_c) - lam (pi_r - ref_r)                   (DPO-Shift 2502.07599, fixed f(lam) = lam)
        sigmoid: -log sigma(z)                                   (DPO 2305.18290 Eq. 7)
        ipo:     (z/beta - 1/(2 beta))^2 = (h - 1/(2 tau))^2      (IPO 2310.12036 empirical loss, tau = beta)
        + dpo_sft_coef * (-pi_c / |y_c|)                          (RPO 2404.19733 Eq. 3: NLL of the chosen
                                                                   response per token; needs chosen_lengths (B,))
    Metrics: rewards/chosen = mean beta(pi_c - ref_c), rewards/rejected = mean beta(pi_r - ref_r),
    rewards/margin = mean of their difference, rewards/accuracy = share of pairs with
    chosen reward > rejected reward, logps/chosen, logps/rejected (mean raw policy log-probs:
    likelihood displacement shows only there), loss/dpo.
    """
    shapes = {
        n: tuple(t.shape)
        for n, t in dict(
            pol_chosen=pol_chosen, pol_rejected=pol_rejected, ref_chosen=ref_chosen, ref_rejected=ref_rejected
        ).items()
    }
    if len(set(shapes.values())) != 1 or pol_chosen.dim() != 1:
        raise ValueError(f"all four inputs must be (B,) sequence log-prob sums of the same B, got {shapes}")
    beta = cfg.dpo_beta
    chosen = pol_chosen - ref_chosen.detach()  # log pi/pi_ref of the chosen response
    rejected = pol_rejected - ref_rejected.detach()
    shift = getattr(cfg, "dpo_shift_lambda", 1.0)
    # DPO-Shift 2502.07599: -log sigma(beta log pi/pi_ref(y_w) - f(lam) beta log pi/pi_ref(y_l)), f(lam) = lam
    h = chosen - rejected if shift == 1.0 else chosen - shift * rejected
    losses = DPO_LOSS[cfg.dpo_loss_type](h, beta)
    loss = losses.mean()
    nll = None
    if cfg.dpo_sft_coef > 0:
        if chosen_lengths is None or tuple(chosen_lengths.shape) != tuple(pol_chosen.shape):
            raise ValueError("dpo_sft_coef > 0 needs chosen_lengths (B,): the token count of each chosen response")
        nll = (-pol_chosen / chosen_lengths.to(pol_chosen.dtype)).mean()  # RPO: -log pi(y_c|x) / |y_c|
        loss = loss + cfg.dpo_sft_coef * nll
    with torch.no_grad():
        r_c, r_r = beta * chosen, beta * rejected
        metrics = {
            "rewards/chosen": float(r_c.mean()),
            "rewards/rejected": float(r_r.mean()),
            "rewards/margin": float((r_c - r_r).mean()),
            "rewards/accuracy": float((r_c > r_r).to(torch.float64).mean()),
            "logps/chosen": float(pol_chosen.mean()),
            "logps/rejected": float(pol_rejected.mean()),
            "loss/dpo": float(losses.mean()),
        }
        if nll is not None:
            metrics["loss/sft"] = float(nll)
    return loss, metrics


SHIFT = Knob(
    "dpo_shift_lambda",
    1.0,
    "DPO-Shift (2502.07599): the rejected log-ratio times lambda in h, -log sigma(beta [(pi_c - ref_c) - "
    "lambda (pi_r - ref_r)]); lambda < 1 keeps the chosen response's likelihood from falling, at a cost in "
    "margin; 1 = DPO (the paper's fixed f(lambda); its linear schedules are not here)",
    ge=0,
    le=1,
)

# The `dpo_loss_type` knob (docs/objective.md §8): name -> per-pair loss from (h (B,), beta).
DPO_LOSS: Modes = Modes("dpo_loss_type")


@register("dpo_loss_type", "sigmoid", doc="-log sigma(beta h) (DPO 2305.18290)", knobs=(SHIFT,))
def _sigmoid(h: torch.Tensor, beta: float) -> torch.Tensor:
    return -F.logsigmoid(beta * h)


@register("dpo_loss_type", "ipo", doc="(h - 1/(2 beta))^2 (IPO 2310.12036, tau = beta)")
def _ipo(h: torch.Tensor, beta: float) -> torch.Tensor:
    return (h - 1.0 / (2.0 * beta)) ** 2
