"""The `dpo_loss_type` modes (docs/objective.md, "DPO"): TRL 1.16's `DPOTrainer` loss types, each a per-pair
loss (B,) from the pairs' log-ratios and the config, its paper's equation beside the line.

Glossary: B preference pairs; c = log pi/pi_ref of the chosen response (B,), r = that of the rejected one,
h = c - r, beta = dpo_beta, sigma the logistic function, |y_c| and |y_r| the responses' token counts (B,).
A mode is called as fn(pair, cfg) with `pair` a `PairLogRatios` and returns the per-pair losses (B,);
dpo_loss (dpo.py) takes their mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from harness.objective.modes import Knob, Modes, Requires, register

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs


@dataclass(frozen=True)
class PairLogRatios:
    """The B pairs' sequence log-prob sums (B,) under the policy (with grad) and the frozen reference,
    and the responses' token counts (B,) (None when the caller has none; the modes that need them say so)."""

    pol_chosen: torch.Tensor
    pol_rejected: torch.Tensor
    ref_chosen: torch.Tensor
    ref_rejected: torch.Tensor
    chosen_lengths: torch.Tensor | None = None
    rejected_lengths: torch.Tensor | None = None

    @property
    def chosen(self) -> torch.Tensor:
        """c = log pi/pi_ref of the chosen response (B,)."""
        return self.pol_chosen - self.ref_chosen.detach()

    @property
    def rejected(self) -> torch.Tensor:
        """r = log pi/pi_ref of the rejected response (B,)."""
        return self.pol_rejected - self.ref_rejected.detach()

    def per_token(self, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(c / |y_c|, r / |y_r|) (B,) each, the counts floored at 1 as TRL does; ValueError naming `mode`
        when the token counts are missing."""
        lengths = (self.chosen_lengths, self.rejected_lengths)
        if any(n is None or tuple(n.shape) != tuple(self.pol_chosen.shape) for n in lengths):
            raise ValueError(
                f"dpo_loss_type={mode!r} divides by the response lengths: dpo_loss needs chosen_lengths and "
                "rejected_lengths (B,), the token count of each chosen and rejected response"
            )
        lc, lr = (n.to(self.pol_chosen.dtype).clamp(min=1.0) for n in lengths)
        return self.chosen / lc, self.rejected / lr


SHIFT = Knob(
    "dpo_shift_lambda",
    1.0,
    "DPO-Shift (2502.07599): the rejected log-ratio times lambda in h, -log sigma(beta [(pi_c - ref_c) - "
    "lambda (pi_r - ref_r)]); lambda < 1 keeps the chosen response's likelihood from falling, at a cost in "
    "margin; 1 = DPO (the paper's fixed f(lambda); its linear schedules are not here)",
    ge=0,
    le=1,
)
IPO_LENGTH_NORM = Knob(
    "dpo_ipo_length_norm",
    True,
    "IPO on per-token log-ratios, (c/|y_c| - r/|y_r| - 1/(2 beta))^2, as TRL 1.16 computes it (the form the "
    "IPO authors confirmed their results use); false = the token sums, (c - r - 1/(2 beta))^2 (the paper's "
    "Eq. 17 read literally)",
)
LABEL_SMOOTHING = Knob(
    "dpo_label_smoothing",
    0.0,
    "eps, the probability that a preference label is flipped: robust (2403.00409) and aot's conservative "
    "mix (1 - eps) * -log sigma(z) + eps * -log sigma(-z); exo_pair's target (1 - eps, eps) (2402.00856 "
    "recommends 1e-3; needs eps > 0)",
    ge=0,
    lt=0.5,
)
DISCOPOP_TAU = Knob(
    "dpo_discopop_tau",
    0.05,
    "DiscoPOP (2406.08414) temperature tau: the mix of the logistic and the exponential loss is "
    "sigma(beta h / tau); the paper's value 0.05",
    gt=0,
)
EXO_NEEDS_EPS = Requires(
    "dpo_label_smoothing",
    why="EXO's target distribution (1 - eps, eps) has log eps in its KL",
    accepts=lambda v, cfg: v > 0,
    allowed_text="a float > 0 and < 0.5 (the paper: 1e-3)",
)


def _selected(cfg, name: str, mode) -> bool:
    """A loss type is selected by dpo_loss_type, or, when dpo_loss_weights is set, by being one of its keys."""
    weights = getattr(cfg, "dpo_loss_weights", None)
    return name in weights if weights else getattr(cfg, "dpo_loss_type", None) == name


# The `dpo_loss_type` knob (docs/objective.md, "DPO"): name -> per-pair loss (B,) from (pair, cfg).
DPO_LOSS: Modes = Modes("dpo_loss_type", active=_selected)


def _smoothed(z: torch.Tensor, eps: float) -> torch.Tensor:
    """(1 - eps) * -log sigma(z) + eps * -log sigma(-z) (B,): cDPO's label-smoothed logistic loss."""
    return -F.logsigmoid(z) * (1 - eps) - F.logsigmoid(-z) * eps


@register("dpo_loss_type", "sigmoid", doc="-log sigma(beta h) (DPO 2305.18290)", knobs=(SHIFT,))
def _sigmoid(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    lam = cfg.dpo_shift_lambda
    # DPO-Shift 2502.07599: -log sigma(beta log pi/pi_ref(y_w) - f(lam) beta log pi/pi_ref(y_l)), f(lam) = lam
    h = pair.chosen - pair.rejected if lam == 1.0 else pair.chosen - lam * pair.rejected
    return -F.logsigmoid(cfg.dpo_beta * h)  # DPO 2305.18290 Eq. 7


@register(
    "dpo_loss_type",
    "ipo",
    doc="(c/|y_c| - r/|y_r| - 1/(2 beta))^2, or on the sums with dpo_ipo_length_norm false (IPO 2310.12036, tau = beta)",
    knobs=(IPO_LENGTH_NORM,),
)
def _ipo(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    if cfg.dpo_ipo_length_norm:
        c, r = pair.per_token("ipo")
    else:
        c, r = pair.chosen, pair.rejected
    return (c - r - 1.0 / (2.0 * cfg.dpo_beta)) ** 2  # IPO 2310.12036 Eq. 17, tau = beta


@register("dpo_loss_type", "hinge", doc="max(0, 1 - beta h) (SLiC, Zhao et al. 2305.10425)")
def _hinge(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    # SLiC 2305.10425's calibration hinge max(0, delta - log P(y_w)/P(y_l)) with delta = 1, on beta h
    return torch.relu(1 - cfg.dpo_beta * (pair.chosen - pair.rejected))


@register(
    "dpo_loss_type",
    "robust",
    doc="(-(1-eps) log sigma(beta h) + eps log sigma(-beta h)) / (1 - 2 eps) (rDPO, Chowdhury et al. 2403.00409)",
    knobs=(LABEL_SMOOTHING,),
)
def _robust(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    z, eps = cfg.dpo_beta * (pair.chosen - pair.rejected), cfg.dpo_label_smoothing
    # rDPO 2403.00409: the unbiased estimate of DPO's loss under labels flipped with probability eps
    return (-(1 - eps) * F.logsigmoid(z) + eps * F.logsigmoid(-z)) / (1 - 2 * eps)


@register(
    "dpo_loss_type",
    "exo_pair",
    doc="KL((sigma(beta h), sigma(-beta h)) || (1-eps, eps)) (EXO, Ji et al. 2402.00856)",
    knobs=(LABEL_SMOOTHING,),
    requires=(EXO_NEEDS_EPS,),
)
def _exo_pair(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    z, eps = cfg.dpo_beta * (pair.chosen - pair.rejected), cfg.dpo_label_smoothing
    # EXO 2402.00856 Eq. 16, K = 2: sum_k q_k (log q_k - log p_k), q = softmax(beta (c, r)), p = (1-eps, eps)
    log_pw, log_pl = math.log1p(-eps), math.log(eps)
    win = torch.sigmoid(z) * (F.logsigmoid(z) - log_pw)
    return win + torch.sigmoid(-z) * (F.logsigmoid(-z) - log_pl)


@register(
    "dpo_loss_type",
    "nca_pair",
    doc="-log sigma(beta c) - 1/2 log sigma(-beta c) - 1/2 log sigma(-beta r) (NCA, Chen et al. 2402.05369)",
)
def _nca_pair(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    rc, rr = cfg.dpo_beta * pair.chosen, cfg.dpo_beta * pair.rejected
    # NCA 2402.05369's pairwise loss (K = 2: one chosen, one rejected response)
    return -F.logsigmoid(rc) - 0.5 * F.logsigmoid(-rc) - 0.5 * F.logsigmoid(-rr)


@register(
    "dpo_loss_type",
    "bco_pair",
    doc="-log sigma(beta c) - log sigma(-beta r) (BCO, Jung et al. 2404.04656, without its reward shift delta)",
)
def _bco_pair(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    # BCO 2404.04656's binary classifier loss with its reward shift delta = 0: TRL 1.16's bco_pair keeps no
    # running mean of the rewards (the paper's delta), so the loss has no state across steps
    return -F.logsigmoid(cfg.dpo_beta * pair.chosen) - F.logsigmoid(-cfg.dpo_beta * pair.rejected)


@register(
    "dpo_loss_type",
    "sppo_hard",
    doc="(c - 1/(2 beta))^2 + (r + 1/(2 beta))^2 (SPPO, Wu et al. 2405.00675, hard P: 1 winner, 0 loser)",
)
def _sppo_hard(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    # SPPO 2405.00675 Eq. 4.7 with P(y_w > y_l) = 1, P(y_l > y_w) = 0, eta = 1/beta
    return (pair.chosen - 0.5 / cfg.dpo_beta) ** 2 + (pair.rejected + 0.5 / cfg.dpo_beta) ** 2


@register(
    "dpo_loss_type",
    "aot",
    doc="smoothed -log sigma(beta (sort(pi_c - pi_r) - sort(ref_c - ref_r))) over the batch "
    "(AOT, Melnyk et al. 2406.05882, paired)",
    knobs=(LABEL_SMOOTHING,),
)
def _aot(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    policy, _ = torch.sort(pair.pol_chosen - pair.pol_rejected, dim=0)
    ref, _ = torch.sort(pair.ref_chosen.detach() - pair.ref_rejected.detach(), dim=0)
    # AOT 2406.05882 (paired): first-order stochastic dominance of the policy's sorted margins over the reference's
    return _smoothed(cfg.dpo_beta * (policy - ref), cfg.dpo_label_smoothing)


@register(
    "dpo_loss_type",
    "aot_unpaired",
    doc="smoothed -log sigma(beta (sort(c) - sort(r))) over the batch (AOT, Melnyk et al. 2406.05882, unpaired)",
    knobs=(LABEL_SMOOTHING,),
)
def _aot_unpaired(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    c, _ = torch.sort(pair.chosen, dim=0)
    r, _ = torch.sort(pair.rejected, dim=0)
    # AOT 2406.05882 (unpaired): the chosen log-ratios' sorted quantiles dominate the rejected ones'
    return _smoothed(cfg.dpo_beta * (c - r), cfg.dpo_label_smoothing)


@register(
    "dpo_loss_type",
    "apo_zero",
    doc="1 - sigma(beta c) + sigma(beta r): chosen up, rejected down (APO-zero, D'Oosterlinck et al. 2408.06266)",
)
def _apo_zero(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    # APO 2408.06266 Eq. 7
    return 1 - torch.sigmoid(cfg.dpo_beta * pair.chosen) + torch.sigmoid(cfg.dpo_beta * pair.rejected)


@register(
    "dpo_loss_type",
    "apo_down",
    doc="sigma(beta c) + 1 - sigma(beta h): both down, rejected more (APO-down, D'Oosterlinck et al. 2408.06266)",
)
def _apo_down(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    c, r = pair.chosen, pair.rejected
    # APO 2408.06266 Eq. 8
    return torch.sigmoid(cfg.dpo_beta * c) + 1 - torch.sigmoid(cfg.dpo_beta * (c - r))


@register(
    "dpo_loss_type",
    "discopop",
    doc="(1 - m) (-log sigma(beta h)) + m exp(-beta h), m = sigma(beta h / tau) (DiscoPOP, Chris Lu et al. 2406.08414)",
    knobs=(DISCOPOP_TAU,),
)
def _discopop(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    z = cfg.dpo_beta * (pair.chosen - pair.rejected)
    m = torch.sigmoid(z / cfg.dpo_discopop_tau)  # DiscoPOP 2406.08414 Eq. 5: the log-ratio modulated mix
    return -F.logsigmoid(z) * (1 - m) + torch.exp(-z) * m


@register(
    "dpo_loss_type",
    "sigmoid_norm",
    doc="-log sigma(beta (c/|y_c| - r/|y_r|)): DPO on per-token log-ratios (length-normalised DPO, as TRL 1.16)",
)
def _sigmoid_norm(pair: PairLogRatios, cfg: ObjectiveKnobs) -> torch.Tensor:
    c, r = pair.per_token("sigmoid_norm")
    return -F.logsigmoid(cfg.dpo_beta * (c - r))  # DPO 2305.18290 Eq. 7 on the length-normalised log-ratios


__all__ = ["DPO_LOSS", "PairLogRatios"]
