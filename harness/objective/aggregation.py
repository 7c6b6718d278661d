"""Aggregation -- the length normalisation (docs/objective.md, "Aggregation"): loss l (B, T) -> scalar.

Glossary: B sequences, T padded response length, M response mask (B, T), |o_i| = sum_t M[i, t].

    seq_mean_token_mean      (1/B) sum_i (1/|o_i|) sum_t M l      GRPO 2402.03300 Eq. 3, GSPO 2507.18071
                                                                  (1/|o_i| = the length bias, Dr.GRPO 2503.20783)
    token_mean               sum_{i,t} M l / sum_{i,t} M          DAPO 2503.14476 (token-level policy gradient loss)
    seq_mean_token_sum_norm  (1/B) sum_i sum_t M l / C            Dr.GRPO (C = max generation length)
    seq_mean_token_sum       (1/B) sum_i sum_t M l                RLOO 2402.14740 (response = one action)
    lambda_length            sum_i f_i sum_t M l / sum_{i,t} M    λ-GRPO 2510.06870 (f: learned length weights,
                                                                  its row_weights hook, lambda_grpo.py)
    prompt_mean              (1/B) sum_i f_i sum_t M l            ScaleRL 2510.13786 (f_i = G / L_g(i): prompt-level,
                                                                  its row_weights hook, prompt_mean.py)

B and sum M are the denominators of the WHOLE optimizer mini-batch: pass them as
num_seqs / num_tokens when the mini-batch is split into micro-batches, and the sum of the
micro-batch losses equals the mini-batch loss, so accumulated gradients are identical.
Defaults: this batch's own counts. B counts the sequences with at least one response token
(a row whose mask was zeroed, e.g. by mask_truncated, is as if it had not been sampled).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, NamedTuple

import torch

from harness.objective import lambda_grpo, prompt_mean
from harness.objective.deferred import Deferred, mean_of, read
from harness.objective.modes import Knob, Modes, register_agg

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs


def batch_denominators(mask: torch.Tensor) -> tuple[int, int]:
    """(num_seqs, num_tokens) of a (B, T) mask: rows with >= 1 response token, response tokens.
    Compute them on the whole mini-batch and pass them to every micro-batch's loss."""
    m = mask > 0
    return int((m.sum(-1) > 0).sum().item()), int(m.sum().item())


def aggregate(
    agg: str,
    loss_tok: torch.Tensor,
    mask: torch.Tensor,
    norm_constant: float | None = None,
    num_seqs: int | float | torch.Tensor | None = None,
    num_tokens: int | float | torch.Tensor | None = None,
    cfg: ObjectiveKnobs | None = None,
) -> torch.Tensor:
    """Scalar loss from the per-token loss (B, T) under `agg` (see the module docstring).

    Padding never contributes (masked with where, so garbage there cannot leak as NaN).
    A denominator of 0 (no response tokens at all) is treated as 1: the loss is then 0.
    cfg: the objective config the mode reads its knobs from (None: only norm_constant is given).
    A registered agg is `fn(l (B, T) zero on padding, M bool (B, T), num_seqs, num_tokens, cfg) -> scalar`.
    """
    if loss_tok.shape != mask.shape or loss_tok.dim() != 2:
        raise ValueError(f"loss {tuple(loss_tok.shape)} and mask {tuple(mask.shape)} must both be (B, T)")
    m = mask > 0
    ell = torch.where(m, loss_tok, torch.zeros_like(loss_tok))
    if num_seqs is None or num_tokens is None:  # this batch's own (read from the device): none when both are given
        own_seqs, own_tokens = batch_denominators(m)
        n_seq = own_seqs if num_seqs is None else num_seqs
        n_tok = own_tokens if num_tokens is None else num_tokens
    else:
        n_seq, n_tok = num_seqs, num_tokens
    n_seq = max(float(n_seq), 1.0)
    n_tok = max(float(n_tok), 1.0)
    return AGG[agg].loss(ell, m, n_seq, n_tok, _knobs(cfg, norm_constant))


def token_weights(
    agg: str,
    mask: torch.Tensor,
    norm_constant: float | None = None,
    num_seqs: int | float | None = None,
    num_tokens: int | float | None = None,
    cfg: ObjectiveKnobs | None = None,
) -> torch.Tensor:
    """(B, T) weight w_it with which `aggregate` sums the per-token losses: aggregate(agg, l, M)
    = sum_{i,t} w_it l_it. It is what the aggregation makes of the per-token gradient:
        seq_mean_token_mean      w_it = 1 / (B |o_i|)   (a long response's tokens weigh less)
        token_mean               w_it = 1 / sum M
        seq_mean_token_sum_norm  w_it = 1 / (B C)
        seq_mean_token_sum       w_it = 1 / B
    0 on padding. Denominators as in `aggregate` (the whole mini-batch's when given)."""
    m = (mask > 0).to(torch.float64)
    own_seqs, own_tokens = batch_denominators(mask)
    n_seq = max(float(own_seqs if num_seqs is None else num_seqs), 1.0)
    n_tok = max(float(own_tokens if num_tokens is None else num_tokens), 1.0)
    weights = AGG[agg].weights
    if weights is None:
        raise ValueError(f"agg={agg!r} declares no token weights")
    return weights(m, n_seq, n_tok, _knobs(cfg, norm_constant))


def _knobs(cfg, norm_constant: float | None):
    """The knobs an aggregation reads: the config's, or (a call without one) norm_constant alone."""
    return cfg if cfg is not None else SimpleNamespace(norm_constant=norm_constant)


def _need_c(cfg) -> float:
    if cfg.norm_constant is None:
        raise ValueError("agg='seq_mean_token_sum_norm' needs norm_constant (Dr.GRPO: the max generation length)")
    return float(cfg.norm_constant)


class Aggregation(NamedTuple):
    loss: object  # (l (B, T) zero on padding, M bool (B, T), num_seqs, num_tokens, cfg) -> scalar
    weights: object = None  # (M float64 (B, T), num_seqs, num_tokens, cfg) -> w (B, T)


def _build(fn, weights=None) -> Aggregation:
    return Aggregation(fn, weights)


NORM_CONSTANT = Knob(
    "norm_constant",
    None,
    "C of seq_mean_token_sum_norm (Dr.GRPO: max generation length; the run "
    "config fills it from rollout.max_new_tokens)",
    type=float,
    gt=0,
    nullable=True,
    required=True,
)

# The `agg` knob (docs/objective.md, "Aggregation"): the loss and its token weights w_it (aggregate = sum w l).
AGG: Modes = Modes("agg", build=_build)


def _seq_mean_token_mean_weights(m, n_seq, n_tok, cfg):
    return m / (m.sum(-1, keepdim=True).clamp(min=1) * n_seq)


@register_agg(
    "seq_mean_token_mean",
    doc="(1/B) sum_i (1/|o_i|) sum_t M l: a long response's tokens weigh less, the length bias (GRPO, GSPO)",
    weights=_seq_mean_token_mean_weights,
)
def _seq_mean_token_mean(ell, m, n_seq, n_tok, cfg):
    lengths = m.sum(-1).clamp(min=1).to(ell.dtype)  # |o_i|
    return (ell.sum(-1) / lengths).sum() / n_seq


def _token_mean_weights(m, n_seq, n_tok, cfg):
    return m / n_tok


@register_agg(
    "token_mean",
    doc="sum M l / sum M (DAPO 2503.14476, PPO, CISPO, REINFORCE++, Lite PPO, GPG)",
    weights=_token_mean_weights,
)
def _token_mean(ell, m, n_seq, n_tok, cfg):
    return ell.sum() / n_tok


def _sum_norm_weights(m, n_seq, n_tok, cfg):
    return m / (n_seq * _need_c(cfg))


@register_agg(
    "seq_mean_token_sum_norm",
    doc="(1/B) sum_i sum_t M l / C, C = norm_constant (Dr.GRPO 2503.20783)",
    knobs=(NORM_CONSTANT,),
    weights=_sum_norm_weights,
)
def _seq_mean_token_sum_norm(ell, m, n_seq, n_tok, cfg):
    return ell.sum() / (n_seq * _need_c(cfg))


def _per_sequence_weights(m, n_seq, n_tok, cfg):
    return m / n_seq


@register_agg(
    "seq_mean_token_sum",
    doc="(1/B) sum_i sum_t M l: the response is one action (RLOO 2402.14740)",
    weights=_per_sequence_weights,
)
def _seq_mean_token_sum(ell, m, n_seq, n_tok, cfg):
    return ell.sum() / n_seq


@register_agg(
    "prompt_mean",
    doc="(1/N) sum_g (1/sum_{i in g}|o_i|) sum_{i in g} sum_t M l: every prompt weighs the same, its tokens "
    "share one mean (ScaleRL 2510.13786 prompt-level aggregation; prompt_mean.py); the token weights "
    "shown are token_mean's",
    hooks=prompt_mean.HOOKS,
    weights=_token_mean_weights,
)
def _prompt_mean(ell, m, n_seq, n_tok, cfg):
    """seq_mean_token_sum's loss; the row weights G / L_g come from its hooks (token_mean's weights shown)."""
    return ell.sum() / n_seq


@register_agg(
    "lambda_length",
    doc="sum_i f_i sum_t M l / sum M, f the learned length weights of λ-GRPO 2510.06870 "
    "(docs/objective.md, 'λ-GRPO'); the token weights shown are λ = 0's, token_mean's",
    knobs=lambda_grpo.KNOBS,
    hooks=lambda_grpo.HOOKS,
    weights=_token_mean_weights,
)
def _lambda_length(ell, m, n_seq, n_tok, cfg):
    """token_mean's loss; the row weights f_i enter through its hooks (lambda_grpo.py)."""
    return ell.sum() / n_tok


def masked_mean(x: torch.Tensor, mask: torch.Tensor, deferred: bool = False) -> float | Deferred:
    """Mean of x over the response tokens (a float, for metrics); NaN when there are none. deferred: left on the
    device, read later with others (objective/deferred.py)."""
    m = mask > 0
    out = mean_of(torch.where(m, x.detach(), torch.zeros_like(x)).sum(), m.sum())  # the float32 sum / the count
    return out if deferred else read(out)


def seq_mean(x: torch.Tensor, mask: torch.Tensor, deferred: bool = False) -> float | Deferred:
    """Mean over non-empty sequences of each sequence's token mean (metrics of sequence ratios). deferred: the
    per-sequence means stay on the device; their mean over the non-empty ones is taken when read, by torch on the
    host (on a CPU run the kernel the eager mean ran; on a GPU it may round differently from the device's)."""
    m = mask > 0
    lengths = m.sum(-1)
    per_seq = torch.where(m, x.detach(), torch.zeros_like(x)).sum(-1) / lengths.clamp(min=1).to(x.dtype)
    dtype = per_seq.dtype

    def finish(values: list[float], counts: list[float]) -> torch.Tensor | float:
        kept = [v for v, n in zip(values, counts) if n > 0]
        return torch.tensor(kept, dtype=dtype).mean() if kept else float("nan")

    out = Deferred(finish, per_seq, lengths)
    return out if deferred else read(out)
