"""KL to the reference policy (docs/objective.md, "KL to the reference"): estimators and the two placements.

Glossary: B sequences, T padded response length, M response mask (B, T).
Estimators (Schulman, "Approximating KL Divergence", 2020 blog), with d = ref_logp - logp,
samples drawn from pi_theta (so E[k1] = E[k3] = KL(pi_theta || pi_ref)):
    k1 = -d = logp - ref_logp          unbiased, can be negative
    k2 = d^2 / 2                       biased, low variance, >= 0
    k3 = exp(d) - d - 1                unbiased, >= 0 (GRPO 2402.03300 Eq. 4)
    abs = |d|                          biased, >= 0 (verl's `abs`)
    low_var_kl = clip(exp(d') - d' - 1, -10, 10), d' = clip(d, -20, 20)
                                       verl's k3 (`low_var_kl`, `k3`), clamped for stability
With kl_straight_through the loss's k keeps its value and takes k2's gradient, k2 - sg(k2) + sg(k) (verl's
`+` suffix: `k3+` = low_var_kl with it): the expected gradient of k2 is the reverse KL's, that of k1 or k3 is not.
With kl_bias_correction (DeepSeek-V3.2 2512.02556; TRL use_bias_correction_kl) the loss's k is weighed by the
importance ratio rho = pi_theta / pi_old of the `ratio` knob, with its gradient: the samples come from pi_old,
so rho k's gradient is the unbiased reverse-KL gradient of pi_theta.
Placements: `loss` adds kl_coef * k to the token loss (GRPO; done in policy_loss);
`reward` subtracts kl_coef * k1 from the reward (PPO 1707.06347 / InstructGPT 2203.02155,
RLOO 2402.14740, REINFORCE++ 2501.03262) -- the functions below, computed from the
rollout-time log-probs and carrying no gradient.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from harness.objective.modes import Knob, Modes, Requires, register, register_extension, register_kl_estimator

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token KL estimate (B, T) of pi_theta from pi_ref; the gradient flows through logp."""
    if logp.shape != ref_logp.shape:
        raise ValueError(f"logp {tuple(logp.shape)} and ref_logp {tuple(ref_logp.shape)} must have the same shape")
    d = ref_logp.detach() - logp  # log(pi_ref / pi_theta)
    return KL_ESTIMATOR[estimator](d)


# The `kl_estimator` knob (docs/objective.md, "KL to the reference"): name -> k(d), d = ref_logp - logp (B, T).
KL_ESTIMATOR: Modes = Modes("kl_estimator")
# The `kl_placement` knob (docs/objective.md, "KL to the reference"): name -> whether its KL term is on for a config;
# dispatched by objective.api (advantages / loss).
KL_PLACEMENT: Modes = Modes("kl_placement")


@register_kl_estimator("k1", doc="log(pi_theta / pi_ref): unbiased, can be negative")
def _k1(d: torch.Tensor) -> torch.Tensor:
    return -d  # log(pi_theta / pi_ref)


@register_kl_estimator("k2", doc="(1/2)(log r)^2: biased, low variance, >= 0")
def _k2(d: torch.Tensor) -> torch.Tensor:
    return 0.5 * d * d  # (1/2) (log r)^2


@register_kl_estimator("k3", doc="(r - 1) - log r, r = pi_ref/pi_theta: unbiased, >= 0 (GRPO 2402.03300)")
def _k3(d: torch.Tensor) -> torch.Tensor:
    return torch.expm1(d) - d


@register_kl_estimator("abs", doc="|log r|: biased, >= 0 (verl's abs)")
def _abs(d: torch.Tensor) -> torch.Tensor:
    return d.abs()  # |log(pi_theta / pi_ref)|


LOW_VAR_LOG_BOUND, LOW_VAR_KL_BOUND = 20.0, 10.0  # verl core_algos.kl_penalty_forward's clamps


@register_kl_estimator("low_var_kl", doc="k3 with verl's clamps (d to [-20, 20], k3 to [-10, 10]): verl's k3")
def _low_var_kl(d: torch.Tensor) -> torch.Tensor:
    dc = d.clamp(-LOW_VAR_LOG_BOUND, LOW_VAR_LOG_BOUND)
    return (torch.exp(dc) - dc - 1).clamp(-LOW_VAR_KL_BOUND, LOW_VAR_KL_BOUND)  # r - log r - 1, r = pi_ref/pi_theta


def straight_through(k: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """k's value with k2's gradient (verl kl_penalty's '+'): k2 - sg(k2) + sg(k). k, d: (B, T)."""
    k2 = _k2(d)
    return k2 - k2.detach() + k.detach()


# verl's kl_loss_type names that are not ours, as the refusal of one spells them here
VERL_SPELLINGS = {
    "kl": "verl's k1: kl_estimator: k1",
    "mse": "verl's k2: kl_estimator: k2",
    **{
        f"{v}+": f"verl's straight-through {v}: kl_estimator: {ours} with kl_straight_through: true"
        for v, ours in (("kl", "k1"), ("k1", "k1"), ("abs", "abs"), ("k3", "low_var_kl"), ("low_var_kl", "low_var_kl"))
    },
}
KL_ESTIMATOR.spellings.update(VERL_SPELLINGS)


LOSS_KL_WHY = "it changes the KL term of the loss (kl_placement: loss)"
LOSS_KL_REQUIRES = (
    Requires("kl_placement", ("loss",), LOSS_KL_WHY),
    Requires("kl_coef", why=LOSS_KL_WHY, accepts=lambda v, cfg: v > 0, allowed_text="a float > 0"),
)
STRAIGHT_THROUGH_KNOBS = (
    Knob(
        "kl_straight_through",
        False,
        "the loss's KL estimate k keeps its value and takes k2's gradient, k2 - sg(k2) + sg(k) (verl's kl_loss_type "
        "suffix '+': k3+ = low_var_kl with this)",
        type=bool,
    ),
)


@register_extension(
    "kl_straight_through",
    doc="verl's straight-through KL ('k3+'): the value of kl_estimator's k, the gradient of k2",
    knobs=STRAIGHT_THROUGH_KNOBS,
    requires=LOSS_KL_REQUIRES,
    switch="kl_straight_through",
    when="objective.kl_straight_through=true",
)
def _kl_straight_through_on(cfg: ObjectiveKnobs) -> bool:
    return bool(cfg.kl_straight_through)


BIAS_KNOBS = (
    Knob(
        "kl_bias_correction",
        False,
        "weigh the loss's KL estimate by the importance ratio rho = pi_theta / pi_old, with its gradient: the "
        "unbiased reverse-KL gradient (DeepSeek-V3.2 2512.02556; TRL use_bias_correction_kl)",
        type=bool,
    ),
)


@register_extension(
    "kl_bias_correction",
    doc="DeepSeek-V3.2's unbiased KL (2512.02556; TRL use_bias_correction_kl): the loss's kl_coef k times rho",
    knobs=BIAS_KNOBS,
    requires=LOSS_KL_REQUIRES,
    switch="kl_bias_correction",
    when="objective.kl_bias_correction=true",
)
def _kl_bias_correction_on(cfg: ObjectiveKnobs) -> bool:
    return bool(cfg.kl_bias_correction)


def loss_kl_term(cfg: ObjectiveKnobs, logp: torch.Tensor, ref_logp: torch.Tensor, rho: torch.Tensor) -> torch.Tensor:
    """kl_coef k(logp, ref_logp) per token (B, T); with kl_straight_through k's value on k2's gradient (verl's
    kl_penalty with '+'), with kl_bias_correction times rho (the `ratio` knob's pi_theta / pi_old, (B, T), with
    its gradient: TRL's per_token_kl * coef_1)."""
    k = kl_penalty(logp, ref_logp, cfg.kl_estimator)
    if getattr(cfg, "kl_straight_through", False):
        k = straight_through(k, ref_logp.detach() - logp)
    if getattr(cfg, "kl_bias_correction", False):
        k = k * rho
    return cfg.kl_coef * k


@register("kl_placement", "loss", doc="kl_coef * k (the chosen estimator) added to the token loss (GRPO)")
def loss_kl_on(cfg: ObjectiveKnobs) -> bool:
    """Whether kl_coef * k is added to the token loss (kl_placement: loss, kl_coef > 0)."""
    return cfg.kl_coef > 0 and KL_PLACEMENT.check(cfg.kl_placement) == "loss"


@register(
    "kl_placement",
    "reward",
    doc="kl_coef * k1 subtracted from the reward, from the rollout log-probs, no gradient "
    "(PPO/InstructGPT per token with the critic; RLOO/REINFORCE++ per sequence)",
    requires=(
        Requires(
            "kl_estimator",
            ("k1",),
            "the reward placement subtracts kl_coef*k1 (docs/objective.md, 'KL to the reference')",
        ),
    ),
)
def reward_kl_on(cfg: ObjectiveKnobs) -> bool:
    """Whether kl_coef * k1 comes off the reward (kl_placement: reward, kl_coef > 0)."""
    return cfg.kl_coef > 0 and KL_PLACEMENT.check(cfg.kl_placement) == "reward"


def _reward_kl_active(cfg: ObjectiveKnobs, ref_logp: torch.Tensor | None) -> bool:
    if KL_PLACEMENT.check(cfg.kl_placement) != "reward" or cfg.kl_coef == 0:
        return False
    if ref_logp is None:
        raise ValueError(
            f"kl_coef={cfg.kl_coef} with kl_placement='reward' needs ref_logp (the reference policy's log-probs); "
            "set kl_coef=0 to train without a reference model"
        )
    return True


def kl_in_reward(
    cfg: ObjectiveKnobs,
    rewards: torch.Tensor,
    logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    mask: torch.Tensor,
) -> torch.Tensor:
    """Sequence rewards (B,) with the reward-placed KL: r_i - kl_coef * sum_t M k1_{i,t}.

    Used with a non-critic baseline (RLOO, REINFORCE++): the penalised reward then goes into
    group_advantages. logp = the rollout policy's log-probs (B, T). A no-op (rewards returned
    as float) unless kl_placement='reward' and kl_coef > 0. No gradient.
    """
    active = _reward_kl_active(cfg, ref_logp)
    return sequence_rewards_with_kl(rewards, logp, ref_logp if active else None, mask, cfg.kl_coef if active else 0.0)


def sequence_rewards_with_kl(
    rewards: torch.Tensor, logp: torch.Tensor, ref_logp: torch.Tensor | None, mask: torch.Tensor, kl_coef: float
) -> torch.Tensor:
    """r_i - kl_coef * sum_t M k1_{i,t} (B,), in logp's dtype, no gradient; rewards as they are
    (in logp's dtype) when ref_logp is None or kl_coef is 0. logp, ref_logp, mask: (B, T)."""
    r = rewards.detach().to(logp.dtype)
    if ref_logp is None or kl_coef == 0:
        return r
    m = mask > 0
    k1 = torch.where(m, kl_penalty(logp.detach(), ref_logp, "k1"), torch.zeros_like(logp))
    return r - kl_coef * k1.sum(-1)


def token_rewards_with_kl(
    cfg: ObjectiveKnobs,
    rewards: torch.Tensor,
    logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    mask: torch.Tensor,
) -> torch.Tensor:
    """Per-token rewards (B, T) for the critic path (GAE), `token_rewards` with the config's KL:
    present only when kl_placement='reward' and kl_coef > 0."""
    active = _reward_kl_active(cfg, ref_logp)
    return token_rewards(rewards, logp, ref_logp if active else None, mask, cfg.kl_coef if active else 0.0)


def token_rewards(
    rewards: torch.Tensor, logp: torch.Tensor, ref_logp: torch.Tensor | None, mask: torch.Tensor, kl_coef: float
) -> torch.Tensor:
    """Per-token rewards (B, T):
        r_{i,t} = -kl_coef * k1_{i,t} * M_{i,t}  +  [t = last response token of i] * r_i
    (InstructGPT 2203.02155 Eq. 2 spread over tokens); no KL term when ref_logp is None or
    kl_coef is 0 (logp then only gives the shape and dtype). A row without response tokens
    gets no reward. No gradient. rewards (B,); logp, ref_logp, mask (B, T).
    """
    if rewards.dim() != 1 or rewards.shape[0] != logp.shape[0] or logp.shape != mask.shape:
        raise ValueError(
            f"rewards {tuple(rewards.shape)} must be (B,) and logp {tuple(logp.shape)}, mask {tuple(mask.shape)} (B, T)"
        )
    m = mask > 0
    out = torch.zeros_like(logp, dtype=logp.dtype).detach()
    if ref_logp is not None and kl_coef != 0:
        k1 = torch.where(m, kl_penalty(logp.detach(), ref_logp, "k1"), torch.zeros_like(out))
        out = out - kl_coef * k1
    pos = torch.arange(out.shape[1], device=out.device).expand_as(m)
    last = torch.where(m, pos, torch.full_like(pos, -1)).amax(-1)  # index of the last response token
    has = last >= 0
    rows = torch.arange(out.shape[0], device=out.device)
    out[rows[has], last[has]] += rewards.detach().to(out.dtype)[has]
    return out
