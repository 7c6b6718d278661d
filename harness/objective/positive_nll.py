"""VAPO's positive-example NLL (Yue et al. arXiv 2504.05118 §4.4, docs/objective.md, "Positive-example NLL"): an
imitation term on the step's good responses, added to the policy loss.

    L = L_policy + mu * L_NLL,    L_NLL = agg_{i in T, t} ( -log pi_theta(o_it | q, o_i<t) )       (2504.05118 Eq. 11)

T: the rows counted positive (`positive_nll_rows`): `positive` r_i > 0 (VAPO's correct answers under a 0/1 or
+-1 reward; NeMo-RL `positive_example_nll_weight`), or `max` r_i = max_B r > min_B r (the batch's best rows,
none when every reward is equal). The NLL of the other rows is 0 and is aggregated with the objective's own `agg`
(its denominators the whole mini-batch's, its row weights those of prompt_mean / lambda_length), so under
`token_mean` L_NLL = (sum over T's tokens of -log pi) / (all response tokens), where VAPO divides by T's tokens
only: VAPO's mu = 0.1 on half the tokens positive is 0.05 here. mu: `positive_nll_coef` (0 = off).

The rows are chosen from the step's rewards (the reward the scoring hooks see: the task's plus shaping; with the KL
in the reward and a group baseline, after its penalty), once a step: the `scoring` hook keeps 1/0 per row in the extras (`positive_nll_rows`),
the `loss_term` hook adds mu L_NLL. A row with advantage 0 (a group of right answers) then still has a gradient.

Glossary: B rows, T response length (the set T of the equation is the positive rows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from harness.objective.aggregation import aggregate
from harness.objective.extensions import Hooks, active_hooks
from harness.objective.modes import Knob, Requires, register_extension

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs

ROWS_KEY = "positive_nll_rows"  # the extras name: 1.0 on a row of T, else 0.0, (B,)
ROWS = ("positive", "max")

KNOBS = (
    Knob(
        "positive_nll_coef",
        0.0,
        "VAPO (2504.05118): weight mu of the NLL of the positive rows added to the loss (VAPO 0.1; NeMo-RL "
        "positive_example_nll_weight); 0 = off",
        type=float,
        ge=0,
    ),
    Knob(
        "positive_nll_rows",
        "positive",
        f"the rows the positive-example NLL trains on: positive (reward > 0) or max (reward = the batch's max > "
        f"its min); one of {list(ROWS)}",
        type=str,
    ),
)


def positive_rows(rewards: torch.Tensor, how: str) -> torch.Tensor:
    """(B,) 1.0 on the rows of T, else 0.0, from the rewards (B,): `positive` r > 0; `max` r = max r > min r."""
    r = rewards.detach()
    if how == "positive":
        return (r > 0).to(torch.float32)
    if how == "max":
        return ((r == r.max()) & (r > r.min())).to(torch.float32)
    raise ValueError(f"objective.positive_nll_rows={how!r}: allowed values: {list(ROWS)}")


def positive_nll_tokens(logp: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """(B, T) -log pi_theta on the response tokens of the rows of T (rows (B,) 1/0), 0 elsewhere (padding too:
    it may hold -inf)."""
    m = mask > 0
    nll = torch.where(m, -logp, torch.zeros_like(logp))
    return nll * rows.to(logp.dtype).unsqueeze(-1)


def positive_nll_loss(cfg: Any, logp, mask, rows, num_seqs=None, num_tokens=None, extras=None) -> torch.Tensor:
    """mu * L_NLL (scalar, with its gradient in logp (B, T)): the NLL of the rows of T aggregated with cfg.agg, each
    row first scaled by the active row weights (prompt_mean's, lambda_length's), as the policy loss's rows are."""
    tok = positive_nll_tokens(logp, mask, rows.to(logp.device))
    for row_weights in active_hooks(cfg, "row_weights"):
        tok = tok * row_weights(cfg, extras or {}).to(tok.dtype).unsqueeze(-1)
    agg = aggregate(cfg.agg, tok, mask, cfg.norm_constant, num_seqs, num_tokens, cfg)
    return cfg.positive_nll_coef * agg  # 2504.05118 Eq. 11: L_PPO + mu L_NLL


def _scoring(cfg: ObjectiveKnobs, rewards: torch.Tensor, mask: torch.Tensor, group_size: int) -> dict:
    return {ROWS_KEY: positive_rows(rewards, cfg.positive_nll_rows)}


def _loss_term(cfg: ObjectiveKnobs, x, num_seqs, num_tokens):
    rows = x.extras.get(ROWS_KEY)
    if rows is None:
        raise ValueError(
            f"objective.positive_nll_coef={cfg.positive_nll_coef} needs extras[{ROWS_KEY!r}] (b,), from its scoring "
            "hook (harness.objective.advantages(...) returns it in Scored.extras; pass them to LossInputs(extras=...))"
        )
    value = positive_nll_loss(cfg, x.logp, x.mask, rows, num_seqs, num_tokens, x.extras)
    return value, {"loss/positive_nll": float(value.detach())}


@register_extension(
    "positive_nll",
    doc="VAPO's positive-example NLL (2504.05118; NeMo-RL positive_example_nll_weight): + positive_nll_coef x the "
    "NLL of the rows with reward > 0 (or = the batch's max), aggregated with agg",
    knobs=KNOBS,
    switch="positive_nll_coef",
    when="objective.positive_nll_coef > 0",
    requires=(Requires("positive_nll_rows", ROWS, "the rows it trains on are chosen by their reward"),),
    hooks=Hooks(scoring=_scoring, loss_term=_loss_term),
)
def _positive_nll_on(cfg: ObjectiveKnobs) -> bool:
    return cfg.positive_nll_coef > 0


def positive_nll_on(cfg: Any) -> bool:
    """Whether the term is on: a row with advantage 0 then still has a gradient (api.inputs_needed)."""
    return getattr(cfg, "positive_nll_coef", 0.0) > 0


__all__ = ["ROWS_KEY", "positive_rows", "positive_nll_tokens", "positive_nll_loss", "positive_nll_on"]
