"""`baseline: optimal_token` -- the optimal token baseline (OTB) of verl 0.9.1 (docs/objective.md, "Advantage"): one
baseline per prompt group and token position, the group's returns weighted by each path's accumulated
score-function variance.

    w_{i,t} = 1 - 2 pi_old(o_{i,t}) + sum_v pi_old(v | q, o_{i,<t})^2        ||grad log pi||^2 proxy (verl ||s_t||^2)
    W_{i,t} = sum_{j <= t} M_{i,j} w_{i,j}                                    cumulative path variance
    B_{g,t} = sum_{i in g} G_{i,t} W_{i,t} M_{i,t} / (sum_{i in g} W_{i,t} M_{i,t} + eps)     B_t* = E[G W] / E[W]
    A_{i,t} = (G_{i,t} - B_{g(i),t}) M_{i,t},   G_{i,t} = sum_{j >= t} M_{i,j} r_{i,j}   (reward-to-go)

r_{i,t}: the row's reward on its last response token (minus kl_coef k1 per token when the KL is in the reward, as
the critic's token rewards). A group of one row has no baseline (A = G). With `otb_zero_tail` (verl's
`handle_zero_tail`, default true) the positions of a group's single longest row beyond its second-longest row's
length get baseline 0 (no other row is there to estimate it). No scale: verl's advantages are used as they are
(`scale: none`).

sum_v pi^2 is read from pi_old's logits by the mode's `old_forward` hook (`sum_pi_squared`, (B, T)), so pi_old needs
its own forward before the advantages (`inputs_needed(obj).recompute_old_logp`): the update is never a single pass.
verl's optional IS weighting of W by the rollout weights (rollout_is_weights^2) is not built: W is pi_old's.

Equal to verl 0.9.1 `compute_optimal_token_baseline_advantage` (core_algos.py) to 1e-6
(tests/objective/test_objective_optimal_token_baseline.py, fixture from benchmarks/reference/optimal_token_baseline.py).
Glossary: B rows, T response length, G group size (groups contiguous), V vocabulary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from harness.objective.extensions import Hooks, Scored, TokenLogits
from harness.objective.kl import reward_kl_on, token_rewards_with_kl
from harness.objective.modes import Knob, Requires, register_baseline

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs

SUM_PI_SQUARED = "sum_pi_squared"  # the extras name: sum_v pi_old(v)^2 per response token, (B, T)
EPS = 1e-8  # verl's epsilon of the baseline's denominator

KNOBS = (
    Knob(
        "otb_zero_tail",
        True,
        "optimal_token: a group's single longest row gets baseline 0 past its second-longest row's length "
        "(verl handle_zero_tail)",
    ),
)


def sum_pi_squared(view: TokenLogits) -> torch.Tensor:
    """(B, T) sum_v pi(v)^2 of the forward's distribution at each response token (no gradient)."""
    logits = view.logits.detach().float()
    return torch.softmax(logits, dim=-1).pow(2).sum(-1)


def reward_to_go(token_rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """G_{i,t} = sum_{j >= t} M_{i,j} r_{i,j} (B, T)."""
    return (token_rewards * mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])


def path_variance(old_logp: torch.Tensor, sum_sq: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """W_{i,t} = sum_{j <= t} M (1 - 2 pi_old(o_j) + sum_v pi_old^2) (B, T)."""
    w = 1 - 2 * torch.exp(old_logp) + sum_sq
    return (w * mask).cumsum(dim=-1)


def _zero_tail(base: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The group's baselines (G, T) with the single longest row's positions past the second-longest length set to 0."""
    lengths = mask.sum(-1)
    ordered = torch.sort(lengths).values
    longest, second = int(ordered[-1].item()), int(ordered[-2].item())
    rows = (lengths == longest).nonzero(as_tuple=True)[0]
    if rows.numel() == 1 and longest > second:
        base = base.clone()
        base[int(rows[0]), second:] = 0.0
    return base


def optimal_token_advantages(
    token_rewards: torch.Tensor,
    mask: torch.Tensor,
    old_logp: torch.Tensor,
    sum_sq: torch.Tensor,
    group_size: int,
    zero_tail: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(A (B, T), G (B, T)) from the token rewards, the mask, pi_old's log-probs and sum_v pi_old^2, all (B, T),
    for contiguous groups of `group_size` rows (see the module docstring)."""
    with torch.no_grad():
        m = (mask > 0).to(token_rewards.dtype)
        returns = reward_to_go(token_rewards, m)
        W = path_variance(old_logp.to(returns.dtype), sum_sq.to(returns.dtype), m)
        B, T = returns.shape
        base = torch.zeros_like(returns)
        if group_size > 1:
            g_ret, g_w, g_m = (x.view(-1, group_size, T) for x in (returns, W, m))
            num = (g_ret * g_w * g_m).sum(1)  # (N, T): sum_i G W M
            den = (g_w * g_m).sum(1) + EPS
            base = (num / den).unsqueeze(1).expand(-1, group_size, -1).reshape(B, T)  # B_t* = E[G W] / E[W]
            if zero_tail:
                base = torch.cat([_zero_tail(b, gm) for b, gm in zip(base.view(-1, group_size, T), g_m)])
        return (returns - base) * m, returns  # A_t = G_t - B_t


def _old_forward(cfg: ObjectiveKnobs, view: TokenLogits) -> dict[str, torch.Tensor]:
    return {SUM_PI_SQUARED: sum_pi_squared(view)}


@register_baseline(
    "optimal_token",
    doc="the optimal token baseline (verl 0.9.1 optimal_token_baseline): per group and position, the returns "
    "weighted by each path's cumulative sum of 1 - 2 pi + sum pi^2; per-token advantages, no scale",
    knobs=KNOBS,
    requires=(Requires("scale", ("none",), "verl's OTB advantages are not normalised"),),
    hooks=Hooks(old_forward=_old_forward),
    per_token=True,
)
def _scored(cfg: ObjectiveKnobs, rewards: torch.Tensor, mask: torch.Tensor, group_size: int, inputs: dict) -> Scored:
    """The OTB advantages from the rewards (B,), pi_old's log-probs (`old_logp`, else `logp`) and sum_pi_squared."""
    old_logp = inputs.get("old_logp")
    old_logp = inputs.get("logp") if old_logp is None else old_logp
    sum_sq = inputs.get(SUM_PI_SQUARED)
    if old_logp is None or sum_sq is None:
        raise ValueError(
            "baseline='optimal_token' needs pi_old's log-probs (old_logp, (B, T)) and sum_v pi_old^2 "
            f"({SUM_PI_SQUARED!r}, (B, T), its old_forward hook's) in advantages(extras=...): "
            "inputs_needed(obj).recompute_old_logp / .old_forward"
        )
    kl = reward_kl_on(cfg)
    tok = token_rewards_with_kl(cfg, rewards, old_logp, inputs.get("ref_logp") if kl else None, mask)
    adv, _ = optimal_token_advantages(tok, mask, old_logp, sum_sq.to(old_logp.device), group_size, cfg.otb_zero_tail)
    return Scored(adv=adv, returns=None, rewards=(tok * (mask > 0)).sum(-1))


__all__ = ["SUM_PI_SQUARED", "sum_pi_squared", "reward_to_go", "path_variance", "optimal_token_advantages"]
