"""The rollout correction's step-level part (docs/objective.md, "Rollout correction against the sampler"): what
is decided once per step on the whole batch, from pi_old (the trainer's recompute) against pi_rollout (the sampler's
log-probs), before the advantages and the update.

    rollout_rs                   verl's rejection sampling: tokens (or whole responses) whose divergence from
                                 the sampler passes a bound leave the loss mask -- they are as if not sampled,
                                 so every denominator of the aggregation shrinks with them
      token_k1                   keep t iff log lo <= k1_t <= log hi         k1_t = log pi_rollout - log pi_old
      token_k2 | token_k3        keep t iff k_t <= hi                        k2_t = (log r_t)^2 / 2
                                                                             k3_t = r_t - 1 - log r_t
      seq_sum_k* | seq_mean_k*   the row's sum / mean of k_t over its response tokens against the bound(s)
      seq_max_k2 | seq_max_k3    the row's max of k_t against hi
        r_t = pi_old / pi_rollout, log r clamped to [-20, 20]; several options (comma separated) must all pass
    seq_logprob_error_threshold  NeMo-RL's sequence mask: a response whose mean multiplicative probability error
                                 (1/|o_i|) sum_t exp(|log pi_rollout - log pi_old|) exceeds the threshold leaves
                                 the loss mask whole (NeMo-RL seq_logprob_error_threshold, e.g. 2)
    rollout_is_batch_normalize   the importance weights w of rollout_is divided by their batch mean (over
                                 the response tokens for token modes, over the rows for sequence modes), so
                                 that they average 1 over the step (verl rollout_is_batch_normalize)

Reference code: NeMo-RL nemo_rl/algorithms/grpo.py `compute_and_apply_seq_logprob_error_masking` (applied to
the sample mask before the advantages; its GRPO baseline still counts the masked responses, as ours does); verl 0.9.1 verl/trainer/ppo/rollout_corr_helper.py `compute_rollout_rejection_mask` (the
options, thresholds and the log-ratio clamp) and `compute_rollout_correction_weights` (the batch normalisation);
verl applies both to the whole batch before `compute_advantage` (ray_trainer.py), as this module is called.
Equal on the same inputs: tests/objective/test_objective_rollout_rejection.py, fixture from
benchmarks/reference/rollout_rejection.py.

Glossary: B rows, T response length, M the response mask (B, T).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch

from harness.objective.deferred import mean_of, read, scalar
from harness.objective.modes import Knob, Requires, register_extension
from harness.objective.rollout_correction import ROLLOUT_IS, is_setting

SAFETY_BOUND = 20.0  # verl's clamp of the log ratio before any exp (exp(20) ~ 4.9e8)
TOKEN_OPTIONS = ("token_k1", "token_k2", "token_k3")
OPTIONS = (
    *TOKEN_OPTIONS,
    "seq_sum_k1",
    "seq_sum_k2",
    "seq_sum_k3",
    "seq_mean_k1",
    "seq_mean_k2",
    "seq_mean_k3",
    "seq_max_k2",
    "seq_max_k3",
)
NORM_KEY = "rollout_is_norm"  # (B,) the batch mean the IS weights are divided by (extras, read by the loss)


class Bound(NamedTuple):
    """One option's bounds: k1 options keep lo <= ratio <= hi (compared in log space), the others k <= hi."""

    lo: float | None
    hi: float


# ----------------------------------------------------------------------------- the knobs and their parsing
def options_of(spec: Any) -> list[str]:
    """'token_k1, seq_mean_k3' -> ['token_k1', 'seq_mean_k3'] (repeats dropped, order kept); ValueError naming the
    option that is not one of OPTIONS."""
    if not isinstance(spec, str):
        raise ValueError(f"a comma-separated string of {', '.join(OPTIONS)}")
    out: list[str] = []
    for opt in (o.strip() for o in spec.split(",")):
        if opt not in OPTIONS:
            raise ValueError(f"{opt!r} is not one of {', '.join(OPTIONS)}")
        if opt not in out:
            out.append(opt)
    return out


def _positive(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} (for {option}) is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} (for {option}) must be a finite number > 0")
    return value


def bounds_of(options: list[str], spec: Any) -> dict[str, Bound]:
    """verl's rollout_rs_threshold: one entry for all options or one per option (comma separated). A k1 option's
    entry is a ratio bound hi (lo = 1/hi) or 'lo_hi'; lo <= 1 <= hi, so that a token the sampler and the trainer
    agree on (r = 1) is kept. The others' is one bound hi > 0 (k2 = k3 = 0 at r = 1: always kept)."""
    if isinstance(spec, bool) or not isinstance(spec, (int, float, str)):
        raise ValueError("a number, or a string of numbers separated by commas")
    parts = [str(spec)] if not isinstance(spec, str) else [p.strip() for p in spec.split(",") if p.strip()]
    if len(parts) not in (1, len(options)):
        raise ValueError(f"{len(parts)} thresholds for {len(options)} options: give one for all or one per option")
    parts = parts * len(options) if len(parts) == 1 else parts
    out = {}
    for opt, part in zip(options, parts, strict=True):
        if opt.endswith("k1"):
            lo_text, hi_text = part.split("_", 1) if "_" in part else (None, part)
            hi = _positive(hi_text, opt)
            lo = _positive(lo_text, opt) if lo_text is not None else 1.0 / hi
            if not lo <= 1.0 <= hi:
                yaml_hint = " (YAML reads an unquoted 0.5_2 as the number 0.52: quote 'lo_hi')" if hi < 1 else ""
                raise ValueError(
                    f"{part!r} for {opt}: the ratio interval [{lo:g}, {hi:g}] must hold 1, or every token the "
                    f"sampler and the trainer agree on is rejected{yaml_hint}"
                )
            out[opt] = Bound(lo, hi)
        else:
            if "_" in part:
                raise ValueError(f"{part!r} for {opt}: a k2/k3 option takes one upper bound, not lower_upper")
            out[opt] = Bound(None, _positive(part, opt))
    return out


def _parse_error(parse) -> Any:
    """(value, cfg) -> the parser's own message for a value it refuses, None for one it takes."""

    def error(value: Any, cfg: Any) -> str | None:
        try:
            parse(value, cfg)
        except ValueError as err:
            return str(err)
        return None

    return error


def _parse_threshold(value: Any, cfg: Any) -> None:
    """A threshold is judged once the options parse (their refusal names rollout_rs itself)."""
    try:
        options = options_of(cfg.rollout_rs)
    except ValueError:
        return
    bounds_of(options, value)


OPTIONS_ERROR = _parse_error(lambda v, cfg: options_of(v))
THRESHOLD_ERROR = _parse_error(_parse_threshold)


RS = Knob(
    "rollout_rs",
    None,
    "verl rejection sampling against the sampler: a comma-separated list of token_k1|k2|k3, seq_sum_k1|k2|k3, "
    "seq_mean_k1|k2|k3, seq_max_k2|k3; a token (token_*) or a whole response (seq_*) whose divergence from "
    "pi_rollout passes rollout_rs_threshold leaves the loss mask; null = off",
    type=str,
    nullable=True,
)
RS_THRESHOLD = Knob(
    "rollout_rs_threshold",
    None,
    "rollout_rs's bounds, one for all options or one per option, comma separated: a k1 option's ratio bound hi "
    "(lower 1/hi) or 'lo_hi' (e.g. 0.5_2.0), the others' upper bound on k2/k3 (verl rollout_rs_threshold)",
    type=float | str,
    nullable=True,
    required=True,
)
ALLOWED_RS = "a comma-separated list of " + ", ".join(OPTIONS)
ALLOWED_THRESHOLD = (
    "one entry for all options or one per option, comma separated; a *_k1 option's a ratio bound hi >= 1 or "
    "'lo_hi' with lo <= 1 <= hi, the others' one number > 0"
)


@register_extension(
    "rollout_rs",
    doc="verl's rejection sampling (rollout_corr_helper.compute_rollout_rejection_mask): tokens or responses "
    "too far from the sampler leave the loss mask, and its denominators, before the advantages",
    knobs=(RS, RS_THRESHOLD),
    requires=(
        Requires(
            "rollout_rs",
            why="each option is one of verl's",
            accepts=lambda v, cfg: OPTIONS_ERROR(v, cfg) is None,
            explain=OPTIONS_ERROR,
            allowed_text=ALLOWED_RS,
        ),
        Requires(
            "rollout_rs_threshold",
            why="it must parse as verl's rollout_rs_threshold for these options",
            accepts=lambda v, cfg: THRESHOLD_ERROR(v, cfg) is None,
            explain=THRESHOLD_ERROR,
            allowed_text=ALLOWED_THRESHOLD,
            shows=("rollout_rs",),
        ),
    ),
    switch="rollout_rs",
    when="objective.rollout_rs set",
)
def _rollout_rs_on(cfg: Any) -> bool:
    return cfg.rollout_rs is not None


SEQ_ERROR = Knob(
    "seq_logprob_error_threshold",
    None,
    "NeMo-RL's sequence mask against the sampler: a response whose mean over its tokens of exp(|log pi_rollout - "
    "log pi_old|) exceeds this leaves the loss (NeMo-RL grpo.seq_logprob_error_threshold, e.g. 2); >= 1, since "
    "every token's error is; null = off",
    type=float,
    nullable=True,
    ge=1,
)


@register_extension(
    "seq_logprob_error",
    doc="NeMo-RL's sequence-level logprob-error mask (compute_and_apply_seq_logprob_error_masking): responses "
    "whose mean multiplicative probability error against the sampler is too large leave the loss mask",
    knobs=(SEQ_ERROR,),
    switch="seq_logprob_error_threshold",
    when="objective.seq_logprob_error_threshold set",
)
def _seq_error_on(cfg: Any) -> bool:
    return cfg.seq_logprob_error_threshold is not None


def rejects(cfg: Any) -> bool:
    """Whether a step-level rejection is on (rollout_rs, seq_logprob_error_threshold)."""
    return getattr(cfg, "rollout_rs", None) is not None or getattr(cfg, "seq_logprob_error_threshold", None) is not None


def old_policy_readers(cfg: Any) -> list[tuple[str, Any, Any, str]]:
    """(knob, its value, its off value, what it does) of every knob set in cfg that reads pi_old, as the trainer
    computes it, against the sampler: pi_old must then be its own forward, and neither train.old_logp=rollout nor
    bypass may make it the sampler's."""
    knobs = (
        ("tis_cap", None, "TIS corrects"),
        ("rollout_is", "none", "it weighs"),
        ("rollout_rs", None, "it rejects by"),
        ("seq_logprob_error_threshold", None, "it rejects by"),
    )
    return [(k, getattr(cfg, k), off, does) for k, off, does in knobs if getattr(cfg, k, off) != off]


# ----------------------------------------------------------------------------- the computation
def _divergences(log_ratio: torch.Tensor) -> dict[str, torch.Tensor]:
    """k1, k2, k3 per token (B, T) from log r = log pi_old - log pi_rollout, clamped to [-20, 20] as verl's."""
    lr = log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND)
    return {"k1": -lr, "k2": 0.5 * lr**2, "k3": torch.exp(lr) - 1.0 - lr}  # k1 = log(pi_rollout / pi_old)


def _row_stat(how: str, k: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """(B, 1): the row's sum, mean or max of k over its response tokens (0 for a row without any, as verl's
    masked_mean's 0 / eps and its max's -inf -> 0)."""
    if how == "sum":
        return torch.where(m, k, 0.0).sum(-1, keepdim=True)
    if how == "mean":
        return torch.where(m, k, 0.0).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)
    top = torch.where(m, k, float("-inf")).amax(-1, keepdim=True)
    return torch.where(torch.isinf(top), torch.zeros_like(top), top)


def _keeps(option: str, bound: Bound, ks: dict[str, torch.Tensor], m: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: what one option keeps; a seq_* option keeps or drops the whole row."""
    k = ks[option[-2:]]
    stat = k if option in TOKEN_OPTIONS else _row_stat(option.split("_")[1], k, m)
    if bound.lo is not None:  # k1: log lo <= k1 <= log hi (verl compares in log space)
        keep = (stat >= math.log(bound.lo)) & (stat <= math.log(bound.hi))
    else:
        keep = stat <= bound.hi
    return keep.expand_as(m)


def sampler_log_ratio(old_logp: torch.Tensor, rollout_logp: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """log r = log pi_old - log pi_rollout (B, T), 0 on padding; a token the sampler could not score (NaN) has
    log r = 0, as in the importance weights. old_logp, rollout_logp (B, T); m bool."""
    return torch.nan_to_num(torch.where(m, old_logp - rollout_logp, 0.0), nan=0.0)


def rejection_keep(cfg: Any, log_ratio: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: the tokens every rollout_rs option keeps (True on padding); log_ratio from sampler_log_ratio."""
    ks = _divergences(log_ratio)
    options = options_of(cfg.rollout_rs)
    bounds = bounds_of(options, cfg.rollout_rs_threshold)
    keep = torch.ones_like(m)
    for opt in options:  # every option must pass (verl: combined_mask *= each option's)
        keep = keep & _keeps(opt, bounds[opt], ks, m)
    return keep | ~m


def seq_prob_error(log_ratio: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """(B,): each row's mean over its response tokens of exp(|log pi_rollout - log pi_old|) = exp(|log r|), the
    multiplicative probability error (NeMo-RL); 0 for a row without a response token."""
    return torch.where(m, log_ratio.abs().exp(), 0.0).sum(-1) / m.sum(-1).clamp(min=1)


def is_batch_norm(cfg: Any, log_ratio: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """0-dim: the batch mean of the IS weights rollout_is gives (before the rejection: verl computes both from the
    response mask as sampled): over the response tokens for a token mode, over the rows (each row's weight once)
    for a sequence mode; 1 when it is not above 1e-8 (verl)."""
    name, bounds = is_setting(cfg)
    w = ROLLOUT_IS[name](log_ratio, m, bounds).w
    w = torch.where(m, w, 0.0)
    if name.startswith("sequence"):
        rows = m.any(-1)
        per_row = w.sum(-1) / m.sum(-1).clamp(min=1)  # verl: masked_mean over the row, then over the rows
        mean = per_row[rows].sum() / rows.sum().clamp(min=1)
    else:
        mean = w.sum() / m.sum().clamp(min=1)
    return torch.where(mean > 1e-8, mean, torch.ones_like(mean))


class BatchCorrection(NamedTuple):
    """What the step-level correction gives the step: the loss mask (B, T) after the rejection, per-row tensors the
    loss reads (extras: the IS weights' batch mean), and its metrics."""

    mask: torch.Tensor
    extras: dict[str, torch.Tensor]
    metrics: dict[str, float]


@torch.no_grad()
def batch_correction(
    cfg: Any, mask: torch.Tensor, old_logp: torch.Tensor | None, rollout_logp: torch.Tensor
) -> BatchCorrection:
    """The step's loss mask after verl's rejection sampling, and the IS weights' batch normaliser, from the whole
    batch: mask (B, T) the loss mask; old_logp (B, T) pi_old (None only when neither is on: a single pass);
    rollout_logp (B, T) the sampler's. Metrics: rejection/frac_masked (the share of the response tokens
    rejected, by rollout_rs and the sequence error together), rejection/seq_frac_masked (of the rows with a response
    token, those with one rejected), seq_logprob_error/mean (the rows' mean error), rollout_is/batch_norm_factor."""
    extras, metrics = {}, {}
    normalize = getattr(cfg, "rollout_is_batch_normalize", False) and is_setting(cfg)[0] != "none"
    if not (rejects(cfg) or normalize):
        return BatchCorrection(mask, extras, metrics)
    if old_logp is None:
        raise ValueError("objective.rollout_rs / rollout_is_batch_normalize need pi_old's log-probs before the update")
    m = mask > 0
    log_ratio = sampler_log_ratio(old_logp, rollout_logp, m)
    if normalize:
        norm = is_batch_norm(cfg, log_ratio, m)
        extras[NORM_KEY] = norm.expand(mask.shape[0]).clone()  # (B,): a per-row tensor travels with its rows
        metrics["rollout_is/batch_norm_factor"] = scalar(norm)
    if rejects(cfg):
        keep = torch.ones_like(m)
        if cfg.rollout_rs is not None:
            keep = rejection_keep(cfg, log_ratio, m)
        if cfg.seq_logprob_error_threshold is not None:  # NeMo-RL: seq error <= threshold keeps the row
            error = seq_prob_error(log_ratio, m)
            keep = keep & (error <= cfg.seq_logprob_error_threshold).unsqueeze(-1)
            rows = m.any(-1)
            metrics["seq_logprob_error/mean"] = mean_of(torch.where(rows, error, 0.0).sum(), rows.sum())
        dropped = m & ~keep
        rows = m.any(-1)
        metrics["rejection/frac_masked"] = mean_of(dropped.sum().to(old_logp.dtype), m.sum())
        metrics["rejection/seq_frac_masked"] = mean_of(dropped.any(-1).sum().to(old_logp.dtype), rows.sum())
        mask = mask * keep.to(mask.dtype)
    return BatchCorrection(mask, extras, read(metrics))


__all__ = [
    "OPTIONS",
    "NORM_KEY",
    "BatchCorrection",
    "batch_correction",
    "rejection_keep",
    "is_batch_norm",
    "rejects",
    "seq_prob_error",
]
