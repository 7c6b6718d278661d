"""Importance ratios (docs/objective.md, "Importance ratio"): the per-token ratio tensor the surrogate uses,
carrying the gradient of its mode.

Glossary: B sequences, T padded response length, M response mask (B, T), |o_i| = sum_t M[i, t].

Papers: PPO 1707.06347 (token ratio), GSPO 2507.18071 (sequence ratio s_i, GSPO-token
s_{i,t}), GPG 2504.02546 / REINFORCE (no ratio), GMPO 2507.20673 (geometric mean of the
token ratios, clipped per token in log space), VESPO 2602.10693 (the unnormalised sequence ratio
w_i = prod_t rho_t), SSPO 2511.04256 (the geometric mean of the token ratios over a sub-sentence:
between token and sequence level; here a span of `sspo_span` tokens, see `_subsentence`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from harness.objective.modes import Knob, Modes, Requires, register_ratio
from harness.objective.padding import zero_padding

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs


def sequence_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B,) length-normalised log ratio (1/|o_i|) sum_t M (logp - old_logp); 0 for an empty row."""
    m = mask > 0
    diff = torch.where(m, logp - old_logp, torch.zeros_like(logp))
    return diff.sum(-1) / m.sum(-1).clamp(min=1).to(logp.dtype)


def importance_ratio(
    mode: str,
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    mask: torch.Tensor,
    adv: torch.Tensor | None = None,
    cfg: ObjectiveKnobs | None = None,
) -> torch.Tensor:
    """Per-token ratio rho (B, T) for `mode`; padding never reaches a value or a gradient
    (token/none give 1 there, the sequence modes repeat s_i; aggregation masks them out).

    token           rho_{i,t} = exp(clamp(logp - old_logp, ±LOG_RATIO_BOUND = 20))     (PPO r_t(theta))
    sequence        rho_{i,t} = s_i = exp((1/|o_i|) sum_t M (logp - old_logp))        (GSPO s_i(theta))
                    same for every token of i; the gradient flows through the sequence mean
    sequence_token  rho_{i,t} = sg(s_i) * exp(logp - sg(logp))                        (GSPO-token s_{i,t}(theta))
                    value s_i, gradient s_i * grad logp_{i,t} per token
    none            rho_{i,t} = exp(logp - sg(logp)): value 1, gradient grad logp      (REINFORCE / GPG)
    sequence_product rho_{i,t} = w_i = exp(clamp(sum_t M clamp(x_t, -20, 20), log 1e-8, 20))  (VESPO 2602.10693)
                    x = logp - old_logp: the product of the token ratios, NOT length-normalised; the
                    clamps are VESPO's reference code's (TRL copies them)
    subsentence     rho_{i,t} = exp(mean of x over the sspo_span-token span k holding t)        (SSPO 2511.04256)
                    span k = positions [k L, (k+1) L) of the row, L = sspo_span; the gradient flows
                    through the span mean; L = 1 is `token`, L >= T is `sequence`
    geometric       rho_{i,t} = s_i = exp((1/|o_i|) sum_t M x~_t), x = logp - old_logp,   (GMPO 2507.20673)
                    x~ = min(x, clamp(x, -eps_low, eps_high)) where A > 0, max(x, clamp(...)) where A <= 0:
                    the clip acts per token in LOG space, in the direction of the advantage;
                    needs `adv` (B, T) and `cfg` (eps_low, eps_high)
    logp is the current policy's (with grad), old_logp the behaviour policy's (detached here).
    A registered ratio is `fn(logp, old_logp, mask, adv, cfg) -> rho (B, T)`, padding already zeroed.
    """
    if logp.shape != old_logp.shape or logp.shape != mask.shape or logp.dim() != 2:
        raise ValueError(
            f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)}, mask {tuple(mask.shape)} must all be (B, T)"
        )
    m = mask > 0
    lp = zero_padding(logp, m)  # padding may hold garbage (-inf); keep it out of exp and grads
    old = zero_padding(old_logp.detach(), m)
    return RATIO[mode].ratio(lp, old, m, adv, cfg)


# the token log-ratio is clamped to [-LOG_RATIO_BOUND, LOG_RATIO_BOUND] before exp, as verl's
# compute_policy_loss_vanilla (core_algos.py: torch.clamp(negative_approx_kl, min=-20.0, max=20.0)):
# exp(20) = 4.9e8 is finite in fp32 and bf16 where exp(89) is not; a clamped token has no gradient.
# No trained run comes near it (a policy 20 nats from the one that sampled it is past any clip).
LOG_RATIO_BOUND = 20.0


class Ratio(NamedTuple):
    ratio: object  # (logp, old_logp, mask, adv, cfg) -> rho (B, T), padding zeroed in logp and old_logp
    masks: object = None  # (logp, old_logp, adv, cfg) -> (low, high) (B, T) bool: tokens the ratio itself clipped
    per_sequence: bool = False  # one value and one clip per sequence: clip/frac counts sequences


def _build(fn, masks=None, per_sequence: bool = False) -> Ratio:
    return Ratio(fn, masks, per_sequence)


LOG_W_MIN = math.log(1e-8)
SSPO_SPAN = Knob(
    "sspo_span",
    16,
    "SSPO (2511.04256) sub-sentence length in tokens: the ratio is the geometric mean of the token ratios "
    "over each span of this many tokens (1 = token ratio, >= the response = GSPO's sequence ratio)",
    ge=1,
)
GEOMETRIC_WHY = "the geometric ratio clips each token in log space itself (eps_low/eps_high, GMPO)"

# The `ratio` knob (docs/objective.md, "Importance ratio"): name -> Ratio(rho(lp, old, m, adv, cfg), ...), all (B, T).
RATIO: Modes = Modes("ratio", build=_build)


@register_ratio("token", doc="exp(logp - old_logp) per token (PPO, GRPO, DAPO, CISPO)")
def _token(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, adv, cfg) -> torch.Tensor:
    return torch.exp((lp - old).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND))


@register_ratio(
    "sequence", doc="s_i = exp(mean_t(logp - old_logp)), one value per sequence (GSPO 2507.18071)", per_sequence=True
)
def _sequence(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, adv, cfg) -> torch.Tensor:
    s = torch.exp(sequence_log_ratio(lp, old, m))  # (B,)
    return s.unsqueeze(-1).expand_as(lp)


@register_ratio(
    "sequence_token",
    doc="sg(s_i) * exp(logp - sg(logp)): value s_i, per-token gradient (GSPO-token)",
    per_sequence=True,
)
def _sequence_token(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, adv, cfg) -> torch.Tensor:
    s = torch.exp(sequence_log_ratio(lp, old, m)).detach()  # sg(s_i)
    return s.unsqueeze(-1) * torch.exp(lp - lp.detach())


def _none_run_rule(run: Any) -> list[str]:
    """Ratio none corrects nothing for samples the current policy did not draw: a warning where the run trains
    on such samples (the later optimizer steps of a batch; rollout.staleness), allowed as a question to study."""
    t, k, out = run.train, run.rollout.staleness, []
    if t.mini_batches > 1 or t.inner_epochs > 1:
        out.append(
            f"objective.ratio=none (e.g. gpg) with train.mini_batches={t.mini_batches}, "
            f"inner_epochs={t.inner_epochs}: every optimizer step after the first of a batch uses "
            "stale samples with no importance correction; set both to 1 for on-policy REINFORCE"
        )
    if k:
        out.append(
            f"rollout.staleness={k} with objective.ratio=none: the samples come from the weights of {k} "
            "updates ago and no importance ratio corrects for it"
        )
    return out


@register_ratio(
    "none",
    doc="exp(logp - sg(logp)): value 1, gradient grad logp (on-policy REINFORCE / GPG 2504.02546)",
    run_rule=_none_run_rule,
)
def _none(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, adv, cfg) -> torch.Tensor:
    return torch.exp(lp - lp.detach())


def _need_adv(adv: torch.Tensor | None, cfg, shape: torch.Size) -> torch.Tensor:
    if adv is None or cfg is None:
        raise ValueError(
            "ratio='geometric' clips in log space by the sign of the advantage: pass adv (B, T) and "
            "cfg (its eps_low, eps_high)"
        )
    if adv.shape != shape:
        raise ValueError(f"adv must be (B, T) = {tuple(shape)} for ratio='geometric', got {tuple(adv.shape)}")
    return adv


def geometric_log_ratio(x: torch.Tensor, adv: torch.Tensor, eps_low: float | None, eps_high: float) -> torch.Tensor:
    """GMPO's clipped token log-ratio x~ (B, T) from x = logp - old_logp (B, T) (2507.20673, Eq. 4 in
    log space): A > 0: min(x, clamp(x, -eps_low, eps_high)) -- only the upward move is capped;
    A <= 0: max(x, clamp(x, -eps_low, eps_high)) -- only the downward move is capped.
    A capped token carries no gradient (it is the constant bound)."""
    clamped = torch.clamp(x, min=None if eps_low is None else -eps_low, max=eps_high)
    return torch.where(adv > 0, torch.minimum(x, clamped), torch.maximum(x, clamped))


def geometric_clip_masks(
    x: torch.Tensor, adv: torch.Tensor, eps_low: float | None, eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(low, high) bool (B, T): the tokens whose log-ratio GMPO's clip replaced by its bound
    (high: A > 0 and x > eps_high; low: A < 0 and x < -eps_low) -- the clip/frac metrics."""
    high = (adv > 0) & (x > eps_high)
    low = (adv < 0) & (x < -eps_low) if eps_low is not None else torch.zeros_like(high)
    return low, high


def _geometric_masks(lp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, cfg) -> tuple[torch.Tensor, torch.Tensor]:
    """GMPO: the tokens whose log-ratio the clip replaced by its bound (for clip/frac)."""
    return geometric_clip_masks(lp.detach() - old, adv, cfg.eps_low, cfg.eps_high)


# one value per sequence too, but it clips token by token: its clip/frac counts tokens
@register_ratio(
    "geometric",
    doc="s_i = exp(mean_t of the token log-ratios, each clipped in log space by the sign of A), one "
    "value per sequence (GMPO 2507.20673); clip none",
    reads=("eps_low", "eps_high"),
    requires=(Requires("clip", ("none",), GEOMETRIC_WHY),),
    masks=_geometric_masks,
)
def _geometric(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, adv, cfg) -> torch.Tensor:
    a = _need_adv(adv, cfg, lp.shape)
    xt = geometric_log_ratio(lp - old, a, cfg.eps_low, cfg.eps_high)
    xt = torch.where(m, xt, torch.zeros_like(xt))
    s = torch.exp(xt.sum(-1) / m.sum(-1).clamp(min=1).to(lp.dtype))  # (B,) geometric mean of the clipped ratios
    return s.unsqueeze(-1).expand_as(lp)


@register_ratio(
    "sequence_product",
    doc="w_i = exp(sum_t(logp - old_logp)), the product of the token ratios, not length-normalised, one "
    "value per sequence (VESPO 2602.10693; clip vespo)",
    per_sequence=True,
)
def _sequence_product(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, adv, cfg) -> torch.Tensor:
    x = torch.clamp(lp - old, -20.0, 20.0)  # padding is 0 here
    log_w = torch.clamp(x.sum(-1), LOG_W_MIN, 20.0)  # log w_i = sum_t log rho_t   (VESPO's sequence weight)
    return torch.exp(log_w).unsqueeze(-1).expand_as(lp)


def span_mean(x: torch.Tensor, m: torch.Tensor, span: int) -> torch.Tensor:
    """(B, T): each token's mean of x over the response tokens of its span [k span, (k+1) span) of the row
    (0 where a span has none). x is zero on padding."""
    B, T = x.shape
    n = -(-T // span)  # spans per row
    pad = n * span - T
    xs = torch.nn.functional.pad(x, (0, pad)).view(B, n, span).sum(-1)  # (B, n)
    cs = torch.nn.functional.pad(m.to(x.dtype), (0, pad)).view(B, n, span).sum(-1)
    means = xs / cs.clamp(min=1)
    return means.repeat_interleave(span, dim=-1)[:, :T]


@register_ratio(
    "subsentence",
    doc="exp(mean of logp - old_logp over each span of sspo_span tokens): between token and sequence "
    "level (SSPO 2511.04256)",
    knobs=(SSPO_SPAN,),
)
def _subsentence(lp: torch.Tensor, old: torch.Tensor, m: torch.Tensor, adv, cfg) -> torch.Tensor:
    # SSPO 2511.04256: s_{i,k} = exp((1/|k|) sum_{t in k} (logp - old_logp)), the sub-sentence's geometric mean
    return torch.exp(span_mean(lp - old, m, cfg.sspo_span))


def is_sequence_level(mode: str) -> bool:
    """Whether the ratio is one value per sequence (clip metrics are then shares of sequences)."""
    return RATIO[mode].per_sequence
