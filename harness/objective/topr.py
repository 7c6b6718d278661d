"""TOPR, Tapered Off-Policy REINFORCE (Le Roux et al. arXiv 2503.14286), docs/objective.md, "Surrogate and clipping" --
`clip: topr`.

The rows are split by the sign of their reward, not of their advantage (the paper's Eq. 8, ROLL's
`pg_variant: topr`):

    r_i > 0   (T+)   l = -w_pos A log pi                       SFT-like: no importance weight at all
    r_i <= 0  (T-)   l = -w_neg sg(clip(rho, 0, 1)) A log pi    the weight tapered to [0, 1]

so a good response is pushed up however far the policy has moved from the sampler, and a bad one is pushed down
no harder than plain on-policy REINFORCE. rho is the token ratio pi_theta / pi_old (ROLL's; the paper writes the
sequence's). Equal to ROLL 8eb27cc `AgenticActorPGWorker._compute_topr_loss` to 1e-6
(tests/objective/test_objective_topr.py). w_pos, w_neg: `topr_positive_weight`, `topr_negative_weight`
(ROLL's names, default 1).

The split needs the step's rewards: the mode's `scoring` hook keeps r_i > 0 per row in the extras
(`topr_positive`), and its `token_loss` hook replaces the surrogate.

Glossary: B rows, T response length.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from harness.objective.extensions import Hooks
from harness.objective.modes import Knob, Requires, register_clip

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs

POSITIVE = "topr_positive"  # the extras name: 1.0 where the row's reward is > 0, else 0.0, (B,)

KNOBS = (
    Knob(
        "topr_positive_weight",
        1.0,
        "TOPR: the weight of the rows with reward > 0 (ROLL topr_positive_weight)",
        type=float,
        gt=0,
    ),
    Knob(
        "topr_negative_weight",
        1.0,
        "TOPR: the weight of the rows with reward <= 0 (ROLL topr_negative_weight)",
        type=float,
        gt=0,
    ),
)


def topr_token_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, positive: torch.Tensor, w_pos: float, w_neg: float
) -> torch.Tensor:
    """l (B, T) from logp (B, T) with its gradient, old_logp (B, T), adv (B, T) and positive (B,) 1/0:

    l = -w_pos A logp                       on rows with r > 0  (2503.14286 Eq. 8, T+)
      - w_neg sg(clip(rho, 0, 1)) A logp    on rows with r <= 0 (T-), rho = exp(logp - old_logp)"""
    pos = positive.to(logp.dtype).unsqueeze(-1).expand_as(logp)  # (B, T)
    taper = torch.clamp(torch.exp(logp - old_logp), min=0.0, max=1.0).detach()  # [pi / mu]_0^1
    return -w_pos * adv * logp * pos - w_neg * taper * adv * logp * (1.0 - pos)


def _scoring(
    cfg: ObjectiveKnobs, rewards: torch.Tensor, mask: torch.Tensor, group_size: int
) -> dict[str, torch.Tensor]:
    return {POSITIVE: (rewards.detach() > 0).to(torch.float32)}  # ROLL: scores > 0 positive, <= 0 negative


def _token_loss(cfg: ObjectiveKnobs, logp, old_logp, adv, mask, entropy, extras) -> torch.Tensor:
    positive = extras.get(POSITIVE)
    if positive is None:
        raise ValueError(
            f"clip='topr' splits the rows by their reward: extras[{POSITIVE!r}] (B,), from its scoring hook "
            "(harness.objective.advantages(...) returns it in Scored.extras; pass them to policy_loss(extras=...))"
        )
    # padding: logp is 0 there (policy.py's zero_padding), so is the loss; aggregate masks it again
    return topr_token_loss(
        logp, old_logp, adv, positive.to(logp.device), cfg.topr_positive_weight, cfg.topr_negative_weight
    )


@register_clip(
    "topr",
    doc="TOPR (2503.14286, ROLL pg_variant topr): rows with reward > 0 -A log pi, the others -sg(clip(rho, 0, 1)) A log pi",
    knobs=KNOBS,
    requires=(Requires("ratio", ("token",), "TOPR's taper weighs each token by its own ratio (ROLL's)"),),
    hooks=Hooks(scoring=_scoring, token_loss=_token_loss),
)
def _topr(ratio, adv, logp, old_logp, cfg):
    raise ValueError(
        "clip='topr' is computed by its token_loss hook from the rows' rewards (policy_loss with the extras of "
        "harness.objective.advantages), not by surrogate_loss alone"
    )


__all__ = ["POSITIVE", "topr_token_loss"]
