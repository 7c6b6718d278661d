"""Advantages (docs/objective.md, "Advantage"): A = (reward - baseline) / scale, and GAE for the critic.

Glossary: N prompts, G = group size, B = N*G sequences with groups contiguous (rows
[g*G, (g+1)*G) answer prompt g), T = padded response length, M = response mask (B, T).

Papers: GRPO 2402.03300 (group mean / group std), RLOO 2402.14740 (leave-one-out),
Dr.GRPO 2503.20783 (no std), Lite PPO 2508.08221 (group mean, batch std of the rewards),
REINFORCE++ 2501.03262 (batch std of the centred rewards), GAE Schulman et al. 1506.02438,
PPO 1707.06347 (advantage whitening), MaxRL 2602.02710 (divide by the group mean: the
gradient of log pass rate), Pass@k training (Chen et al.) 2508.10751 (the pass@k advantage).

Binary rewards. `baseline: passk` and `scale: group_mean` are formulas of a pass rate: each
reward must be exactly 0 or 1, checked on the reward tensor at every call (`check_binary`),
which raises naming the knob, the offending value and what is allowed (docs/objective.md, "MaxRL and pass@k").

Exactness: wherever a reward equals every reward its baseline averages over (an all-equal
group under group_mean / leave_one_out, an all-equal batch under batch_mean) the advantage
is exactly 0.0, never a rounding residue divided by adv_eps. A spread of exactly 0 (an
all-equal set, or a single sample under the sample std) divides by 1 instead of 0 + adv_eps,
so no scale ever produces NaN or inf.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from harness.objective.extensions import Hooks, Scored
from harness.objective.kl import reward_kl_on, token_rewards_with_kl
from harness.objective.modes import Knob, Modes, Requires, register, register_baseline, register_scale
from harness.objective.value import value_loss

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs


def _spread(x: torch.Tensor, std: str) -> torch.Tensor:
    """std over the last dim, sample (N-1) or population (N); exactly 0 when all values are equal
    (also for a single value, where the sample std would be 0/0)."""
    n = x.shape[-1]
    if n == 1:
        return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    s = STD[std](x)
    same = x.amax(dim=-1) == x.amin(dim=-1)
    return torch.where(same, torch.zeros_like(s), s)


def _divide(u: torch.Tensor, spread: torch.Tensor, eps: float) -> torch.Tensor:
    """u / (spread + eps), EPS OUTSIDE the sqrt; a zero spread divides by 1 (u is 0 there for group baselines)."""
    denom = torch.where(spread > 0, spread + eps, torch.ones_like(spread))
    return u / denom


def group_advantages(cfg: ObjectiveKnobs, rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Sequence advantages (B,) from sequence rewards (B,), groups of `group_size` contiguous.

    baseline b_i:  group_mean     b_i = (1/G) sum_j r_j                       (GRPO 2402.03300 Eq. 3)
                   leave_one_out  b_i = (1/(G-1)) sum_{j != i} r_j             (RLOO 2402.14740)
                                  so r_i - b_i = G/(G-1) * (r_i - mean)
                   batch_mean     b   = mean over all B rewards
                   none           b   = 0
                   passk          the whole Pass@k advantage (2508.10751, `passk_advantages`; scale none)
    scale:         group_std      std_g(r) + adv_eps                         (GRPO; Dr.GRPO removes it)
                   batch_std      std_B(r) (batch_std_of=reward, Lite PPO) or std_B(r - b)
                                  (batch_std_of=centered, REINFORCE++-baseline) + adv_eps
                   group_mean     mean_g(r) + adv_eps                        (MaxRL 2602.02710; binary rewards)
                   none           1
    std: sample (N-1) or population (N). A baseline with per-token advantages (critic, prime) is
    computed by harness.objective.advantages, not here. Computed in float64, returned in the
    rewards' dtype, no gradient. A registered baseline is `fn(rewards (N, G), cfg) -> r - b (N, G)`,
    a scale `fn(centred (N, G), rewards (N, G), cfg) -> advantages (N, G)`, both in float64.
    """
    if BASELINE[cfg.baseline] is None:
        raise ValueError(
            f"baseline={cfg.baseline!r} gives per-token advantages (a value head, or PRIME's reward model): use "
            "harness.objective.advantages(...) (or gae_advantages / prime_advantages), not group_advantages"
        )
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be (B,), got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.shape[0] % group_size:
        raise ValueError(f"group_size={group_size} must be >= 1 and divide B={rewards.shape[0]}")
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()
    g = rewards.detach().to(torch.float64).view(-1, group_size)  # (N, G)
    u = BASELINE[cfg.baseline](g, cfg)  # r - b, (N, G)
    a = SCALE[cfg.scale](u, g, cfg)
    return a.reshape(-1).to(out_dtype)


BINARY = "the overlong penalty makes the rewards non-binary, and the formula counts correct samples"
GROUP_STAT = "a group of one response is its own mean (advantage 0) and has no std"

# The `baseline` knob (docs/objective.md, "Advantage"): name -> u = r - b from the rewards (N, G) in float64 and
# the config; None = per-token advantages from its hooks (critic + GAE below, PRIME in prime.py).
BASELINE: Modes = Modes("baseline")
# The `scale` knob (docs/objective.md, "Advantage"): name -> a from (u (N, G), rewards (N, G), cfg).
SCALE: Modes = Modes("scale")
# The `std` knob: name -> the std over the last dim, of N-1 or N in the denominator.
STD: Modes = Modes("std")
# The `batch_std_of` knob: name -> what batch_std measures, from (r (B,), u (N, G)).
BATCH_STD_OF: Modes = Modes("batch_std_of")


def _same(g: torch.Tensor) -> torch.Tensor:
    return (g.amax(-1) == g.amin(-1)).unsqueeze(-1)  # (N, 1) all-equal groups


@register_baseline(
    "group_mean", doc="b_i = mean of the group's rewards (GRPO 2402.03300, Dr.GRPO, DAPO, GSPO)", min_group_size=2
)
def _group_mean(g: torch.Tensor, cfg: ObjectiveKnobs) -> torch.Tensor:
    u = g - g.mean(-1, keepdim=True)  # r_i - mean_g
    return torch.where(_same(g), torch.zeros_like(u), u)


@register_baseline(
    "leave_one_out", doc="b_i = mean of the other G-1 rewards of the group (RLOO 2402.14740)", min_group_size=2
)
def _leave_one_out(g: torch.Tensor, cfg: ObjectiveKnobs) -> torch.Tensor:
    G = g.shape[-1]
    if G < 2:
        raise ValueError(
            f"baseline='leave_one_out' needs group_size >= 2 (the other G-1 rewards), got group_size={G}; "
            "allowed baselines with group_size=1: ['group_mean', 'batch_mean', 'none']"
        )
    loo = (g.sum(-1, keepdim=True) - g) / (G - 1)  # mean of the OTHER G-1 rewards
    return torch.where(_same(g), torch.zeros_like(g), g - loo)


@register_baseline("batch_mean", doc="b = mean of all B rewards")
def _batch_mean(g: torch.Tensor, cfg: ObjectiveKnobs) -> torch.Tensor:
    r = g.reshape(-1)
    u = g - r.mean()
    return torch.zeros_like(u) if r.amax() == r.amin() else u


@register_baseline("none", doc="b = 0 (plain REINFORCE)")
def _no_baseline(g: torch.Tensor, cfg: ObjectiveKnobs) -> torch.Tensor:
    return g.clone()


def check_binary(rewards: torch.Tensor, knob: str) -> None:
    """Raise unless every reward is exactly 0 or 1 (the pass-rate formulas of `knob`)."""
    bad = (rewards != 0) & (rewards != 1)
    if bool(bad.any()):
        i = int(bad.reshape(-1).nonzero()[0].item())
        raise ValueError(
            f"{knob} needs binary rewards (each exactly 0 or 1: it counts correct samples), got "
            f"{float(rewards.reshape(-1)[i])} at row {i}; allowed rewards: 0 and 1 (a task with format_weight 0, "
            "no overlong_buffer shaping)"
        )


def passk_advantages(g: torch.Tensor, k: int, adv_eps: float = 1e-6) -> torch.Tensor:
    """Pass@k advantages (N, G) of binary rewards g (N, G), n = G samples per group
    (Chen et al. 2508.10751, the analytic form of the group's pass@k gradient):

        rho   = 1 - C(n-c, k) / C(n, k)                    pass@k of the group, c = # correct
        sigma = sqrt(rho (1 - rho))
        A     = (1 - rho) / (sigma + adv_eps)                                  correct samples
        A     = (1 - rho - C(n-c-1, k-1) / C(n-1, k-1)) / (sigma + adv_eps)    wrong samples
    A group with sigma = 0 (pass@k exactly 0 or 1: all wrong, or every k-subset holds a correct
    sample) has advantage exactly 0. Needs 1 <= k <= G; computed in float64."""
    check_binary(g, "baseline='passk'")
    n = g.shape[-1]
    if not 1 <= k <= n:
        raise ValueError(
            f"passk_k={k} must lie in [1, group_size={n}] (pass@k draws k of the G samples); "
            f"allowed passk_k here: 1..{n}"
        )
    out = torch.zeros_like(g)
    c = g.sum(-1).round().long()  # (N,)
    for row, ci in enumerate(c.tolist()):
        rho = 1.0 - math.comb(n - ci, k) / math.comb(n, k)
        sigma = math.sqrt(rho * (1.0 - rho))
        if sigma == 0.0:
            continue  # pass@k is 0 or 1 whatever is sampled: no signal, exactly 0
        wrong_share = math.comb(n - ci - 1, k - 1) / math.comb(n - 1, k - 1)  # sigma > 0: n - c >= k >= 1
        a_correct = (1.0 - rho) / (sigma + adv_eps)
        a_wrong = (1.0 - rho - wrong_share) / (sigma + adv_eps)
        out[row] = torch.where(g[row] == 1, torch.full_like(g[row], a_correct), torch.full_like(g[row], a_wrong))
    return out


@register_scale("group_std", doc="divide by the group's std + adv_eps (GRPO; the difficulty bias)", min_group_size=2)
def _group_std_scale(u: torch.Tensor, g: torch.Tensor, cfg: ObjectiveKnobs) -> torch.Tensor:
    return _divide(u, _spread(g, cfg.std).unsqueeze(-1), cfg.adv_eps)


@register_scale(
    "batch_std",
    doc="divide by the batch's std + adv_eps (Lite PPO 2508.08221, REINFORCE++ 2501.03262); "
    "with the critic: whiten the per-token advantages",
)
def _batch_std_scale(u: torch.Tensor, g: torch.Tensor, cfg: ObjectiveKnobs) -> torch.Tensor:
    return _divide(u, _spread(BATCH_STD_OF[cfg.batch_std_of](g.reshape(-1), u), cfg.std), cfg.adv_eps)


@register_scale(
    "group_mean",
    doc="divide by the group's mean reward + adv_eps (MaxRL 2602.02710: the gradient of log pass rate); binary rewards",
    requires=(Requires("overlong_buffer", (0,), BINARY),),
)
def _group_mean_scale(u: torch.Tensor, g: torch.Tensor, cfg: ObjectiveKnobs) -> torch.Tensor:
    """MaxRL: u / (mean_g(r) + adv_eps); a group of mean 0 (all wrong) divides by 1 (u is 0 there)."""
    check_binary(g, "scale='group_mean'")
    return _divide(u, g.mean(-1, keepdim=True), cfg.adv_eps)


@register_scale("none", doc="no division (Dr.GRPO 2503.20783)")
def _no_scale(u: torch.Tensor, g: torch.Tensor, cfg: ObjectiveKnobs) -> torch.Tensor:
    return u


@register("std", "sample", doc="N-1 (torch.std's default, TRL/verl GRPO)")
def _sample_std(x: torch.Tensor) -> torch.Tensor:
    return x.std(dim=-1, correction=1)


@register("std", "population", doc="N")
def _population_std(x: torch.Tensor) -> torch.Tensor:
    return x.std(dim=-1, correction=0)


@register("batch_std_of", "reward", doc="the raw rewards (Lite PPO, TRL scale_rewards=batch)")
def _of_rewards(r: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    return r


@register("batch_std_of", "centered", doc="the centred rewards r - b (REINFORCE++-baseline)")
def _of_centred(r: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    return u.reshape(-1)


def _passk_group_rule(cfg: ObjectiveKnobs, group_size: int) -> str | None:
    """`passk_k` < `train.group_size`: pass@k of G samples with k = G is 0 or 1 for every group (advantage 0)"""
    if cfg.passk_k < group_size:
        return None
    return (
        f"objective.passk_k={cfg.passk_k} with train.group_size={group_size}: pass@k of G samples with k >= G "
        f"is 0 or 1 for every group (advantage 0); allowed: objective.passk_k in 1..{group_size - 1}"
    )


@register_baseline(
    "passk",
    doc="the Pass@k advantage of the group (Chen et al. 2508.10751); binary rewards, scale none",
    knobs=(
        Knob(
            "passk_k",
            4,
            "k of baseline=passk (Pass@k training 2508.10751): the advantage of the group's pass@k; 1 <= k < group_size",
            ge=1,
        ),
    ),
    requires=(
        Requires("scale", ("none",), "the Pass@k advantage is already normalised by its sigma"),
        Requires("overlong_buffer", (0,), BINARY),
    ),
    group_rule=_passk_group_rule,
)
def _passk(g: torch.Tensor, cfg: ObjectiveKnobs) -> torch.Tensor:
    return passk_advantages(g, cfg.passk_k, cfg.adv_eps)


def gae_advantages(
    token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised Advantage Estimation (Schulman et al. 1506.02438, Eq. 16), masked.

    token_rewards, values, mask: (B, T); the mask is right-padded (response tokens first).
        delta_t = r_t + gamma * V_{t+1} - V_t        (V after the last response token = 0: terminal)
        A_t     = delta_t + gamma * lam * A_{t+1}
        R_t     = A_t + V_t                           (the value target)
    Returns (advantages, returns), both (B, T), detached, 0 on padding.
    """
    if not (token_rewards.shape == values.shape == mask.shape) or token_rewards.dim() != 2:
        raise ValueError(
            f"token_rewards {tuple(token_rewards.shape)}, values {tuple(values.shape)} and mask "
            f"{tuple(mask.shape)} must all be (B, T)"
        )
    m = mask > 0
    r = torch.where(m, token_rewards.detach(), torch.zeros_like(token_rewards))
    v = torch.where(m, values.detach(), torch.zeros_like(values)).to(r.dtype)
    T = r.shape[1]
    adv = torch.zeros_like(r)
    last = torch.zeros_like(r[:, 0])
    for t in reversed(range(T)):
        next_v = v[:, t + 1] if t + 1 < T else torch.zeros_like(last)
        delta = r[:, t] + gamma * next_v - v[:, t]
        last = torch.where(m[:, t], delta + gamma * lam * last, torch.zeros_like(last))
        adv[:, t] = last
    returns = torch.where(m, adv + v, torch.zeros_like(adv))
    return adv, returns


def whiten(
    x: torch.Tensor, mask: torch.Tensor, *, std: str = "sample", eps: float = 1e-6, shift_mean: bool = True
) -> torch.Tensor:
    """(x - mean) / (std + eps) over the response tokens of the whole batch (PPO advantage
    whitening; `scale: batch_std` for the critic baseline). x, mask: (B, T) -> (B, T), 0 on padding.
    All-equal values give exactly 0 (with shift_mean); a zero std divides by 1."""
    m = mask > 0
    vals = x.detach()[m].to(torch.float64)
    out = torch.zeros_like(x, dtype=torch.float64)
    if vals.numel() == 0:
        return out.to(x.dtype)
    centred = vals - vals.mean() if shift_mean else vals
    if shift_mean and vals.amax() == vals.amin():
        centred = torch.zeros_like(vals)
    out[m] = _divide(centred, _spread(vals, std), eps)
    return out.to(x.dtype)


def critic_advantages(
    cfg: ObjectiveKnobs, token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The critic path of the advantage with the config's knobs: `gae_whitened`."""
    return gae_whitened(
        token_rewards, values, mask, gamma=cfg.gamma, lam=cfg.lam, scale=cfg.scale, std=cfg.std, adv_eps=cfg.adv_eps
    )


def gae_whitened(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float,
    lam: float,
    scale: str,
    std: str = "sample",
    adv_eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE(gamma, lam), then whitening when scale='batch_std' (scale 'none' keeps the advantages).
    Returns (advantages (B, T), returns (B, T)); the returns are the un-whitened value targets."""
    if scale not in ("batch_std", "none"):
        raise ValueError(
            f"scale={SCALE.check(scale)!r} with the critic: per-token advantages; "
            "allowed scale with the critic: ['batch_std', 'none']"
        )
    adv, returns = gae_advantages(token_rewards, values, mask, gamma, lam)
    if scale == "batch_std":
        adv = whiten(adv, mask, std=std, eps=adv_eps)
    return adv, returns


# ----------------------------------------------------------------------------- the critic (PPO)
def _value_term(cfg: ObjectiveKnobs, x, num_seqs, num_tokens):
    """The value loss (the critic's) when the value model's output `values` (b, T) is among the loss inputs."""
    values = x.extras.get("values")
    if values is None:
        return None, {}
    old_values, returns = x.extras.get("old_values"), x.extras.get("returns")
    if old_values is None or returns is None:
        raise ValueError("values given without old_values and returns (b, T): the value loss needs all three")
    return value_loss(cfg, values, old_values, returns, x.mask, num_seqs=num_seqs, num_tokens=num_tokens)


@register_baseline(
    "critic",
    doc="a learned value model and GAE: per-token advantages (PPO 1707.06347, GAE 1506.02438)",
    knobs=(
        Knob("gamma", 1.0, "GAE discount (critic baseline; 1.0 for LM PPO, TRL/OpenRLHF)", ge=0, le=1),
        Knob("lam", 0.95, "GAE lambda (critic baseline; bias-variance trade-off, 1506.02438)", ge=0, le=1),
        Knob("vf_coef", 0.1, "value-loss weight (critic baseline; TRL PPO 0.1)", ge=0),
        Knob(
            "value_clip",
            0.2,
            "clip V to V_old +- value_clip in the value loss (PPO); null = unclipped",
            gt=0,
            nullable=True,
        ),
    ),
    reads=("train.critic_lr",),
    requires=(Requires("scale", ("batch_std", "none"), "critic advantages are per token, not per group"),),
    hooks=Hooks(component="values", loss_term=_value_term),
    per_token=True,
)
def _critic_scored(
    cfg: ObjectiveKnobs, rewards: torch.Tensor, mask: torch.Tensor, group_size: int, inputs: dict
) -> Scored:
    """Per-token rewards r_t = -kl_coef k1_t + [t last] r_i (KL only when placed in the reward), GAE,
    whitening for scale batch_std; inputs: values (B, T) of the value model, logp and ref_logp."""
    values = inputs.get("values")
    if values is None:
        raise ValueError(
            f"baseline={cfg.baseline!r} needs values (B, T) from the value model "
            "(inputs_needed(obj).components: 'values')"
        )
    kl_reward = reward_kl_on(cfg)
    shape_src = inputs["logp"] if kl_reward else torch.zeros_like(values)  # only shape and dtype when no KL
    tok = token_rewards_with_kl(cfg, rewards, shape_src, inputs.get("ref_logp") if kl_reward else None, mask)
    adv, returns = critic_advantages(cfg, tok, values, mask)
    return Scored(adv=adv, returns=returns, rewards=tok.sum(-1), extras={"old_values": values, "returns": returns})
