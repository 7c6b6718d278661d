"""Rollout correction (docs/objective.md, "Rollout correction against the sampler"): the token loss weighed against the
SAMPLER's own log-probs.

The sampler (vLLM, a bf16 engine, the hf sampler) draws each token with its own probability pi_rollout,
kept apart from pi_old (the trainer's recomputation at rollout time) in `rollout_logp`. Three knobs
correct the policy-gradient term for the gap; each multiplies the surrogate's token loss l_it (not the
KL or entropy terms) by a detached weight, and the aggregation's denominators stay as they are (a
masked token counts as a zero, as in TRL 1.16 and verl's `rollout_is` weights):

    rollout_is                   importance weight w = pi_old / pi_rollout, truncated or masked
      token_truncate             w_it = min(max(r_it, clip_min), clip_max)     TIS (Yao et al. 2025 blog)
      token_mask                 w_it = r_it if clip_min <= r_it <= clip_max else 0
                                 (MIS; with both bounds IcePop, Ring-1T 2510.18855: [0.5, 5])
      sequence_truncate          w_i = min(max(prod_t r_it, clip_min), clip_max) on every token of row i
      sequence_mask              w_i = prod_t r_it if inside [clip_min, clip_max] else 0 (the whole row)
        r_it = exp(log pi_old - log pi_rollout); `tis_cap: c` is token_truncate with clip_max c (the old spelling)
    off_policy_mask_threshold    DeepSeek-V3.2 (2512.02556, Eq. 9) off-policy sequence mask: row i is dropped when
                                 A_i < 0 and (1/|o_i|) sum_t (log pi_rollout - log pi_theta) > delta
    m2_threshold                 M2PO (2510.01161): the tokens with the largest (log pi_theta - log pi_rollout)^2
                                 are masked until the mean of it over the rest is <= tau_M2

TRL 1.16 (GRPOConfig.vllm_importance_sampling_mode, _clip_min/_clip_max, off_policy_mask_threshold) computes
the first two exactly so: tests/objective/test_objective_rollout_correction.py holds the equality on its
fixture (benchmarks/reference/rollout_correction.py). M2PO has no TRL or verl 0.9.1 code (its authors' repo
clips instead of masking); it follows the paper's algorithm, over the tokens of the batch the loss sees.

Glossary: B rows, T response length, M the response mask (B, T), A the advantage broadcast to (B, T).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from harness.objective.aggregation import masked_mean
from harness.objective.deferred import Deferred, mean_of
from harness.objective.extensions import Hooks, active_hooks
from harness.objective.modes import Knob, Modes, Requires, register, register_extension

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs

CLIP_MAX = Knob(
    "rollout_is_clip_max",
    3.0,
    "upper bound C_max of the sampler IS weight pi_old/pi_rollout: truncate modes clip to it, mask modes zero "
    "above it; null = none (mask modes only) (TRL vllm_importance_sampling_clip_max, default 3)",
    type=float,
    gt=0,
    nullable=True,
)
CLIP_MIN = Knob(
    "rollout_is_clip_min",
    None,
    "lower bound C_min of the sampler IS weight: truncate modes raise to it, mask modes zero below it; "
    "null = none (TRL vllm_importance_sampling_clip_min; IcePop 0.5)",
    type=float,
    ge=0,
    nullable=True,
)
BATCH_NORMALIZE = Knob(
    "rollout_is_batch_normalize",
    False,
    "divide the sampler IS weights by their mean over the step's batch (response tokens; rows for sequence "
    "modes), so that they average 1 (verl rollout_is_batch_normalize)",
    type=bool,
)
WHY_TIS = "tis_cap is the old spelling of rollout_is=token_truncate with rollout_is_clip_max=tis_cap; set one"
WHY_BOUNDS = "C_min must be below C_max"
WHY_ONE = (
    "a mask mode keeps a token only when C_min <= r <= C_max, and a token the sampler and the trainer agree on "
    "has r = 1: an interval without 1 masks every on-policy token"
)


class Weight(NamedTuple):
    """What an importance-sampling mode returns: w (B, T) detached, and where it acted (B, T) bool."""

    w: torch.Tensor
    hit: torch.Tensor


def _bounds_ordered(_: Any, cfg: Any) -> bool:
    lo, hi = cfg.rollout_is_clip_min, cfg.rollout_is_clip_max
    return lo is None or hi is None or lo < hi


def _requires(truncate: bool) -> tuple[Requires, ...]:
    rules = [
        Requires("tis_cap", (None,), WHY_TIS),
        Requires("rollout_is_clip_min", why=WHY_BOUNDS, accepts=_bounds_ordered, allowed_text="a float < C_max"),
    ]
    if not truncate:  # w = r 1[C_min <= r <= C_max]: r = 1 must pass (a truncation keeps every token, clamped)
        pair = ("rollout_is_clip_min", "rollout_is_clip_max")
        rules += [
            Requires(
                pair[0],
                why=WHY_ONE,
                accepts=lambda v, cfg: v is None or v <= 1,
                allowed_text="a float <= 1 or null",
                shows=pair[1:],
            ),
            Requires(
                pair[1],
                why=WHY_ONE,
                accepts=lambda v, cfg: v is None or v >= 1,
                allowed_text="a float >= 1 or null",
                shows=pair[:1],
            ),
        ]
    if truncate:  # torch.clamp needs a bound, and a truncation without an upper bound is no truncation
        rules.append(
            Requires(
                "rollout_is_clip_max",
                why="a truncated weight needs its upper bound",
                accepts=lambda v, cfg: v is not None,
                allowed_text="a float > 0",
            )
        )
    return tuple(rules)


def _log_ratio(log_ratio: torch.Tensor, mask: torch.Tensor, per_sequence: bool) -> torch.Tensor:
    """log r (B, T): per token, or each row's sum broadcast to its tokens (TRL: sum of (old - sampler) * M)."""
    if not per_sequence:
        return log_ratio
    return log_ratio.sum(-1, keepdim=True).expand_as(log_ratio)


def _truncate(per_sequence: bool) -> Callable:
    def fn(log_ratio: torch.Tensor, mask: torch.Tensor, cfg: Any) -> Weight:
        r = torch.exp(_log_ratio(log_ratio, mask, per_sequence))
        lo, hi = cfg.rollout_is_clip_min, cfg.rollout_is_clip_max
        w = r.clamp(min=lo, max=hi)  # TIS: w = min(max(r, C_min), C_max)
        hit = (r > hi) | (r < lo) if lo is not None else r > hi
        return Weight(w, hit)

    return fn


def _mask(per_sequence: bool) -> Callable:
    def fn(log_ratio: torch.Tensor, mask: torch.Tensor, cfg: Any) -> Weight:
        r = torch.exp(_log_ratio(log_ratio, mask, per_sequence))
        lo, hi = cfg.rollout_is_clip_min, cfg.rollout_is_clip_max
        out = torch.zeros_like(r, dtype=torch.bool)
        if lo is not None:
            out |= r < lo
        if hi is not None:
            out |= r > hi
        return Weight(r.masked_fill(out, 0.0), out)  # MIS / IcePop: w = r 1[C_min <= r <= C_max]

    return fn


# The importance-sampling modes of the sampler correction (objective.rollout_is); TRL 1.16's four.
ROLLOUT_IS: Modes = Modes("rollout_is")


@register("rollout_is", "none", doc="no importance weight against the sampler (tis_cap may still set token_truncate)")
def _none(log_ratio: torch.Tensor, mask: torch.Tensor, cfg: Any) -> Weight:
    return Weight(torch.ones_like(log_ratio), torch.zeros_like(mask, dtype=torch.bool))


register(
    "rollout_is",
    "token_truncate",
    doc="TIS (Yao et al. 2025): w_it = clamp(pi_old/pi_rollout, C_min, C_max) per token (TRL token_truncate)",
    knobs=(CLIP_MAX, CLIP_MIN, BATCH_NORMALIZE),
    requires=_requires(True),
)(_truncate(False))
register(
    "rollout_is",
    "token_mask",
    doc="MIS per token: w_it = r_it inside [C_min, C_max], else 0 (TRL token_mask; both bounds: IcePop 2510.18855)",
    knobs=(CLIP_MAX, CLIP_MIN, BATCH_NORMALIZE),
    requires=_requires(False),
)(_mask(False))
register(
    "rollout_is",
    "sequence_truncate",
    doc="sequence TIS: w_i = clamp(prod_t r_it, C_min, C_max) on the whole row (TRL sequence_truncate)",
    knobs=(CLIP_MAX, CLIP_MIN, BATCH_NORMALIZE),
    requires=_requires(True),
)(_truncate(True))
register(
    "rollout_is",
    "sequence_mask",
    doc="sequence MIS: the row's w_i = prod_t r_it, 0 outside [C_min, C_max] (TRL sequence_mask, verl seq IS)",
    knobs=(CLIP_MAX, CLIP_MIN, BATCH_NORMALIZE),
    requires=_requires(False),
)(_mask(True))


# ----------------------------------------------------------------------------- the token masks against the sampler
def off_policy_keep(cfg: Any, logp: torch.Tensor, rollout_logp: torch.Tensor, adv: torch.Tensor, m: torch.Tensor):
    """DeepSeek-V3.2 (2512.02556, Eq. 9): keep (B, T) = A >= 0 or the row's mean k1 KL(pi_rollout || pi_theta)
    <= delta, computed as TRL 1.16's GRPOTrainer.get_off_policy_mask (a NaN sampler log-prob counts 0)."""
    kl = torch.nan_to_num(torch.where(m, rollout_logp - logp, torch.zeros_like(logp)), nan=0.0)
    n = m.sum(-1, keepdim=True).clamp(min=1).to(kl.dtype)
    avg = kl.sum(-1, keepdim=True) / n  # KL_i = (1/|o_i|) sum_t log(pi_rollout / pi_theta)
    keep = (adv >= 0) | (avg <= cfg.off_policy_mask_threshold)  # M_i = 0 iff A_i < 0 and KL_i > delta
    return keep, {"off_policy_mask/frac_masked": _row_share(~keep, m)}


def m2po_keep(cfg: Any, logp: torch.Tensor, rollout_logp: torch.Tensor, adv: torch.Tensor, m: torch.Tensor):
    """M2PO (2510.01161, Alg. 1): M_2,i = (log pi_theta - log pi_behav)^2 per response token i of the batch; while
    mean_i M_2,i over the unmasked tokens > tau_M2, mask the token with the largest M_2,i. Removing the largest
    value never raises the mean of the rest, so the k masked tokens are the k largest, k the fewest that bring
    the mean to <= tau (ties broken by position). keep (B, T) bool."""
    d2 = torch.where(m, (logp - rollout_logp) ** 2, torch.zeros_like(logp)).nan_to_num(nan=0.0).flatten()  # (log r_i)^2
    order = torch.sort(torch.where(m.flatten(), d2, -1.0), descending=True, stable=True).indices  # padding last
    n = m.sum()
    srt = d2[order]
    removed = torch.cumsum(srt, 0) - srt  # sum of the k largest before position k
    left = (n - torch.arange(d2.numel(), device=d2.device)).clamp(min=1).to(d2.dtype)
    rest_mean = (srt.sum() - removed) / left  # M2 of the rest after masking the k largest
    k = ((rest_mean > cfg.m2_threshold) & (torch.arange(d2.numel(), device=d2.device) < n)).sum()
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=order.device)
    keep = (rank >= k).view_as(m) | ~m
    return keep, {"m2po/frac_masked": masked_mean((~keep).to(logp.dtype), m, deferred=True), "m2po/m2": _m2(d2, n)}


def _m2(d2: torch.Tensor, n: torch.Tensor) -> Deferred:
    return mean_of(d2.sum(), n)


def _row_share(flag: torch.Tensor, m: torch.Tensor) -> Deferred:
    """The share of the rows with a response token that have `flag` on one of them."""
    rows = m.any(-1)
    return mean_of((flag & m).any(-1).to(torch.float32).sum(), rows.sum())


OFF_POLICY_THRESHOLD = Knob(
    "off_policy_mask_threshold",
    None,
    "DeepSeek-V3.2 (2512.02556) off-policy sequence mask: drop a negative-advantage response whose mean "
    "log(pi_rollout/pi_theta) exceeds delta (TRL off_policy_mask_threshold, e.g. 0.5); null = off",
    type=float,
    ge=0,
    nullable=True,
)
M2_THRESHOLD = Knob(
    "m2_threshold",
    None,
    "M2PO (2510.01161) budget tau_M2: mask the tokens with the largest (log pi_theta/pi_rollout)^2 until its "
    "mean over the rest is <= tau (paper 0.04; AReaL m2_threshold); null = off",
    type=float,
    gt=0,
    nullable=True,
)


@register_extension(
    "off_policy_mask",
    doc="off-policy sequence masking (DeepSeek-V3.2 2512.02556): negative-advantage rows far from the sampler "
    "get no policy gradient",
    knobs=(OFF_POLICY_THRESHOLD,),
    switch="off_policy_mask_threshold",
    when="objective.off_policy_mask_threshold set",
    hooks=Hooks(rollout_mask=off_policy_keep),
)
def _off_policy_mask_on(cfg: Any) -> bool:
    return cfg.off_policy_mask_threshold is not None


@register_extension(
    "m2po",
    doc="M2PO (2510.01161): mask the tokens with the largest squared log-ratio to the sampler until its second "
    "moment is under m2_threshold",
    knobs=(M2_THRESHOLD,),
    switch="m2_threshold",
    when="objective.m2_threshold set",
    hooks=Hooks(rollout_mask=m2po_keep),
)
def _m2po_on(cfg: Any) -> bool:
    return cfg.m2_threshold is not None


# metrics that are shares of rows: a trainer merging micro-batches weighs them by rows (harness/train/rl/update.py)
ROW_METRICS = ("off_policy_mask/frac_masked", "rollout_is/seq_frac_truncated", "rollout_is/seq_frac_masked")


# ----------------------------------------------------------------------------- the correction the loss applies
def is_setting(cfg: Any) -> tuple[str, Any]:
    """(the importance-sampling mode, the config it reads its bounds from): `tis_cap: c` is token_truncate with
    clip_max c and no clip_min."""
    if cfg.tis_cap is not None:
        return "token_truncate", _Bounds(None, cfg.tis_cap)
    return cfg.rollout_is, cfg


class _Bounds(NamedTuple):
    rollout_is_clip_min: float | None
    rollout_is_clip_max: float | None


def uses_sampler_logp(cfg: Any) -> bool:
    """Whether the loss reads the sampler's log-probs (an IS mode, or a mask against the sampler)."""
    return is_setting(cfg)[0] != "none" or bool(active_hooks(cfg, "rollout_mask"))


class Correction(NamedTuple):
    """w (B, T) detached, multiplying the surrogate's token loss (None: no correction), and its metrics."""

    w: torch.Tensor | None
    metrics: dict[str, Deferred]


@torch.no_grad()
def rollout_correction(
    cfg: ObjectiveKnobs,
    lp: torch.Tensor,
    old: torch.Tensor,
    rollout: torch.Tensor,
    A: torch.Tensor,
    m: torch.Tensor,
    norm: torch.Tensor | None = None,
) -> Correction:
    """The weight of the policy-gradient token loss against the sampler: the IS weight (rollout_is / tis_cap) times
    every active mask (off-policy sequence mask, M2PO). lp, old, rollout, A: (B, T), 0 on padding (policy.Tokens);
    m bool (B, T); norm (B,): the step's mean IS weight (rollout_is_batch_normalize: batch_correction.py), w / norm.
    Metrics: rollout_is/{frac_truncated, seq_frac_truncated | frac_masked, seq_frac_masked,
    weight_mean} (not under the old spelling tis_cap), off_policy_mask/frac_masked (rows), m2po/{frac_masked, m2}."""
    name, bounds = is_setting(cfg)
    w, metrics = None, {}
    if name != "none":
        # log r = log pi_old - log pi_rollout; a token the sampler could not score (NaN) gets r = 1, as in TRL
        got = ROLLOUT_IS[name](torch.nan_to_num(old - rollout, nan=0.0), m, bounds)
        w = got.w if norm is None else got.w / norm.to(got.w.dtype).unsqueeze(-1)  # verl: w / mean_batch(w)
        kind = "masked" if name.endswith("_mask") else "truncated"
        if cfg.tis_cap is None:  # tis_cap logs none: the moe golden record (tis_cap=2.0) holds none of these keys
            metrics = {
                f"rollout_is/frac_{kind}": masked_mean(got.hit.to(lp.dtype), m, deferred=True),
                f"rollout_is/seq_frac_{kind}": _row_share(got.hit, m),
                "rollout_is/weight_mean": masked_mean(w, m, deferred=True),
            }
    for hook in active_hooks(cfg, "rollout_mask"):
        keep, more = hook(cfg, lp.detach(), rollout, A, m)
        w = keep.to(lp.dtype) if w is None else w * keep.to(w.dtype)
        metrics.update(more)
    return Correction(w, metrics)


__all__ = [
    "ROLLOUT_IS",
    "ROW_METRICS",
    "Correction",
    "rollout_correction",
    "uses_sampler_logp",
    "off_policy_keep",
    "m2po_keep",
]
