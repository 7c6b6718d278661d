"""The MoE router's load-balancing loss during RL (TRL's `router_aux_loss_coef`; Switch Transformer 2101.03961 Eq. 4,
docs/objective.md, "Router load-balancing loss"): the auxiliary loss the model itself computes from its router
logits, times a coefficient, added to the policy loss.

    L = L_policy + c * (b / B_mb) * aux,     aux = E * sum_e f_e P_e   (transformers' load_balancing_loss_func)

f_e: the share of the micro-batch's tokens (attention mask, prompt and response) routed to expert e (top-k),
P_e: the mean router probability of e over them, summed over the MoE layers as transformers does (Mixtral's
`outputs.aux_loss` with `output_router_logits=True`). c: `router_aux_loss_coef` (0 = off). The micro-batch's aux
is weighted by its share of the mini-batch's rows, b / B_mb, so the accumulated gradient is the mini-batch's mean
whatever the micro-batch size (TRL adds c * aux to each micro-batch's loss, which its accumulation then averages).

The training forward asks the model for it (`inputs_needed(obj).router_aux_loss`: `output_router_logits=True`)
and passes it in the extras (`router_aux_loss`, a scalar with its gradient); the `loss_term` hook adds it. A dense
model has no router: the run config refuses the knob there (harness/config/model.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from harness.objective.extensions import Hooks
from harness.objective.modes import Knob, register_extension

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs

AUX_KEY = "router_aux_loss"  # the extras name: the micro-batch's load-balancing loss, a scalar with its gradient


def router_aux_term(coef: float, aux: torch.Tensor, rows: int, num_seqs: float | None) -> torch.Tensor:
    """c * (b / B_mb) * aux (scalar); num_seqs None: this micro-batch is the mini-batch."""
    share = 1.0 if num_seqs is None else rows / max(float(num_seqs), 1.0)
    return coef * share * aux


def _loss_term(cfg: ObjectiveKnobs, x, num_seqs, num_tokens):
    aux = x.extras.get(AUX_KEY)
    if aux is None:
        raise ValueError(
            f"objective.router_aux_loss_coef={cfg.router_aux_loss_coef} needs the router's load-balancing loss "
            f"(extras[{AUX_KEY!r}], from the training forward of an MoE: inputs_needed(obj).router_aux_loss)"
        )
    value = router_aux_term(cfg.router_aux_loss_coef, aux, x.mask.shape[0], num_seqs)
    return value, {"loss/router_aux": float(value.detach())}


@register_extension(
    "router_aux",
    doc="the MoE router's load-balancing loss (TRL router_aux_loss_coef; Switch Transformer 2101.03961): "
    "+ router_aux_loss_coef x the model's aux loss",
    knobs=(
        Knob(
            "router_aux_loss_coef",
            0.0,
            "MoE: weight of the router's load-balancing loss added to the loss (TRL / transformers "
            "router_aux_loss_coef, Mixtral 0.02); 0 = off; needs an MoE model",
            type=float,
            ge=0,
        ),
    ),
    switch="router_aux_loss_coef",
    when="objective.router_aux_loss_coef > 0",
    hooks=Hooks(loss_term=_loss_term),
)
def _router_aux_on(cfg: Any) -> bool:
    return cfg.router_aux_loss_coef > 0


def router_aux_on(cfg: Any) -> bool:
    """Whether the training forward must return the router's aux loss."""
    return getattr(cfg, "router_aux_loss_coef", 0.0) > 0


__all__ = ["AUX_KEY", "router_aux_term", "router_aux_on"]
