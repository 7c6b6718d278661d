"""Entropy controls (docs/objective.md, "Entropy controls"): the tricks that act on the policy's entropy, each a mode or a knob of
the component it changes, so that each combines with every other.

    clip: clip_cov     the PPO surrogate, and the gradient of a few tokens whose covariance of log-prob and
                       advantage lies in (clip_cov_lb, clip_cov_ub) detached (Clip-Cov, 2505.22617 Eq. 11)
    clip: kl_cov       -rho A, plus ppo_kl_coef |logp - old_logp| on the top kl_cov_ratio tokens by that
                       covariance (KL-Cov, 2505.22617 Eq. 12)
    top_entropy_quantile < 1   a token mask: the policy gradient (and the entropy bonus) only on the tokens whose
                       entropy is in the top quantile of the micro-batch's (the 80/20 rule, 2506.01939; TRL 1.16
                       `top_entropy_quantile`)
    use_adaptive_entropy       the entropy bonus's coefficient steered toward entropy_target, one step of
                       entropy_coef_delta per optimizer step (Skywork-OR1 2505.22312; TRL 1.16 `use_adaptive_entropy`)
    entropy_agg        how the entropy bonus is aggregated: `agg` (with the policy's agg, the default) or
                       `token_mean` (TRL 1.16: the token mean whatever the loss)

Glossary: B rows, T response length, M the response mask (B, T), A the advantage broadcast to tokens (B, T),
H the per-token entropy (B, T). The covariance of a token is verl's (2505.22617 Eq. 9's summand, centred on the
micro-batch): Cov_it = (A_it - mean_M A) (logp_it - mean_M logp).

Reference code: verl 0.9.1 verl/trainer/ppo/core_algos.py `compute_policy_loss_clip_cov` (l. 1743) and
`compute_policy_loss_kl_cov` (l. 1848); TRL 1.16 trl/trainer/grpo_trainer.py `get_high_entropy_mask` (l. 1380) and
the entropy bonus and its adaptive update in `_compute_loss` (l. 3186-3245). Equal to them on random inputs
(tests/objective/test_objective_entropy_controls.py, fixture from benchmarks/reference/entropy_controls.py).
Like verl, both covariance modes select per micro-batch (the tokens of one loss call); Clip-Cov draws its tokens
with torch.randperm from torch's default generator, as verl does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from harness.objective.aggregation import aggregate
from harness.objective.deferred import scalar
from harness.objective.extensions import Hooks
from harness.objective.modes import Knob, Modes, Requires, register, register_clip, register_extension
from harness.objective.surrogates import EPS, _bound_masks, _bounds, _ppo

if TYPE_CHECKING:
    from harness.objective.config_fields import ObjectiveKnobs


# ----------------------------------------------------------------------------- Clip-Cov, KL-Cov (2505.22617)
def token_cov(adv: torch.Tensor, logp: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Cov_it = (A_it - mean_M A)(logp_it - mean_M logp) (B, T), no gradient; the means over the response tokens
    (verl's masked_mean: sum / (count + 1e-8)). 2505.22617 Eq. 9: the entropy change is driven by this covariance."""
    mf = m.to(logp.dtype)
    lp = logp.detach()
    a_mean = (adv * mf).sum() / (mf.sum() + 1e-8)
    lp_mean = (lp * mf).sum() / (mf.sum() + 1e-8)
    return (adv - a_mean) * (lp - lp_mean)


def _clip_cov_candidates(ratio, adv, logp, m, cfg) -> torch.Tensor:
    """The tokens Clip-Cov may detach (B, T) bool: a response token the PPO clip has not already clipped, whose
    covariance lies strictly between clip_cov_lb and clip_cov_ub."""
    lo, hi = _bounds(cfg)
    clipped_by_ppo = (-adv * torch.clamp(ratio, min=lo, max=hi) > -adv * ratio) & m
    cov = token_cov(adv, logp, m)
    return (cov > cfg.clip_cov_lb) & (cov < cfg.clip_cov_ub) & m & ~clipped_by_ppo


def clip_cov_count(m: torch.Tensor, ratio: float) -> int:
    """How many tokens Clip-Cov detaches at most: max(int(clip_cov_ratio * sum M), 1) (verl)."""
    return max(int(ratio * int(m.sum().item())), 1)


def clip_cov_detached(ratio, adv, logp, m, cfg) -> torch.Tensor:
    """(B, T) bool: the tokens whose gradient Clip-Cov detaches: min(count, #candidates) of the candidates drawn
    uniformly (torch.randperm, torch's default generator, as verl)."""
    idx = torch.nonzero(_clip_cov_candidates(ratio.detach(), adv, logp, m, cfg))
    out = torch.zeros_like(m)
    if len(idx) > 0:
        idx = idx[torch.randperm(len(idx))[: clip_cov_count(m, cfg.clip_cov_ratio)].to(idx.device)]
        out[idx[:, 0], idx[:, 1]] = True
    return out


def _clip_cov(ratio, adv, logp, old_logp, cfg, mask):
    # Clip-Cov (2505.22617 Eq. 11): L = -min(rho A, clip(rho) A) on every token, with the gradient of the
    # tokens drawn from {i : clip_cov_lb < Cov_i < clip_cov_ub} set to 0 (verl: the token loss times 0)
    detached = clip_cov_detached(ratio, adv, logp, mask, cfg)
    return _ppo(ratio, adv, logp, old_logp, cfg) * (~detached).to(ratio.dtype)


def kl_cov_penalised(adv: torch.Tensor, logp: torch.Tensor, m: torch.Tensor, ratio: float) -> torch.Tensor:
    """(B, T) bool: the top max(1, int(kl_cov_ratio * sum M)) response tokens by covariance, its means the plain means
    over the response tokens (verl's kl_cov; torch.topk)."""
    flat = m.reshape(-1)
    valid = torch.nonzero(flat, as_tuple=True)[0]
    out = torch.zeros_like(flat)
    if len(valid) == 0:
        return out.view_as(m)
    a, lp = adv[m].detach(), logp[m].detach()
    cov = (a - a.mean()) * (lp - lp.mean())
    k = max(1, int(len(cov) * ratio))
    out[valid[torch.topk(cov, k, largest=True).indices]] = True
    return out.view_as(m)


def _kl_cov(ratio, adv, logp, old_logp, cfg, mask):
    # KL-Cov (2505.22617 Eq. 12): L = -rho A, + ppo_kl_coef |log pi - log pi_old| on the top-k tokens by Cov
    penalised = kl_cov_penalised(adv, logp, mask, cfg.kl_cov_ratio)
    penalty = cfg.ppo_kl_coef * (logp - old_logp).abs()
    return -adv * ratio + torch.where(penalised, penalty, torch.zeros_like(penalty))


def _clip_cov_metrics(ratio, adv, logp, old_logp, cfg, mask) -> dict:
    """clip_cov/frac: the share of response tokens whose gradient Clip-Cov detached (its count, min(count,
    #candidates), known without drawing them)."""
    n = int(mask.sum().item())
    cand = int(_clip_cov_candidates(ratio.detach(), adv, logp, mask, cfg).sum().item())
    frac = min(clip_cov_count(mask, cfg.clip_cov_ratio), cand) / n if n else float("nan")
    return {"clip_cov/frac": scalar(torch.tensor(frac, dtype=torch.float64))}


def _kl_cov_metrics(ratio, adv, logp, old_logp, cfg, mask) -> dict:
    """kl_cov/frac: the share of response tokens KL-Cov penalised."""
    n = int(mask.sum().item())
    frac = max(1, int(n * cfg.kl_cov_ratio)) / n if n else float("nan")
    return {"kl_cov/frac": scalar(torch.tensor(frac, dtype=torch.float64))}


CLIP_COV_KNOBS = (
    Knob(
        "clip_cov_ratio",
        0.0002,
        "Clip-Cov (2505.22617): share of the response tokens whose gradient is detached (verl clip_cov_ratio)",
        gt=0,
        le=1,
    ),
    Knob("clip_cov_lb", 1.0, "Clip-Cov: lower bound of the covariance of a token it may detach (verl clip_cov_lb)"),
    Knob("clip_cov_ub", 5.0, "Clip-Cov: upper bound of the covariance of a token it may detach (verl clip_cov_ub)"),
)
KL_COV_KNOBS = (
    Knob(
        "kl_cov_ratio",
        0.0002,
        "KL-Cov (2505.22617): share of the response tokens, largest covariance first, that get the KL penalty "
        "(verl kl_cov_ratio)",
        gt=0,
        le=1,
    ),
    Knob(
        "ppo_kl_coef",
        0.1,
        "KL-Cov: weight of |logp - old_logp| on the selected tokens (verl ppo_kl_coef)",
        ge=0,
    ),
)
register_clip(
    "clip_cov",
    doc="ppo's -min(rho A, clip(rho) A), the gradient of clip_cov_ratio of the tokens whose covariance of "
    "log-prob and advantage is in (clip_cov_lb, clip_cov_ub) detached (Clip-Cov 2505.22617)",
    knobs=CLIP_COV_KNOBS,
    reads=EPS,
    requires=(
        Requires("dual_clip", (None,), "Clip-Cov is verl's ppo clip without a dual clip"),
        Requires(  # an empty interval: no token is ever a candidate, so the run is plain ppo, silently
            "clip_cov_ub",
            why="no covariance lies strictly between clip_cov_lb and clip_cov_ub, so Clip-Cov would detach no token",
            accepts=lambda ub, cfg: ub > cfg.clip_cov_lb,
            allowed_text="a number > clip_cov_lb",
        ),
    ),
    masks=_bound_masks,
    masked=True,
    metrics=_clip_cov_metrics,
)(_clip_cov)
register_clip(
    "kl_cov",
    doc="-rho A, + ppo_kl_coef |logp - old_logp| on the kl_cov_ratio tokens of largest covariance of log-prob and "
    "advantage (KL-Cov 2505.22617)",
    knobs=KL_COV_KNOBS,
    masked=True,
    metrics=_kl_cov_metrics,
)(_kl_cov)


# ----------------------------------------------------------------------------- the entropy bonus's aggregation
# The `entropy_agg` knob (docs/objective.md, "Entropy controls").
ENTROPY_AGG: Modes = Modes("entropy_agg")


def entropy_term(cfg: Any, loss_ent: torch.Tensor, agg: dict, keep: torch.Tensor | None) -> torch.Tensor:
    """The entropy bonus's part of the loss (scalar) under cfg.entropy_agg; loss_ent = -coef H (B, T), agg the
    policy's aggregation arguments (objective/policy.py), keep the tokens a token mask keeps (or None)."""
    return ENTROPY_AGG[cfg.entropy_agg](loss_ent, keep, agg)


@register(
    "entropy_agg",
    "agg",
    doc="the bonus aggregated with the policy's agg: entropy_coef weighs otherwise under Dr.GRPO's sum than under "
    "GRPO's mean",
)
def _with_policy_agg(loss_ent, keep, agg):
    return aggregate(loss_tok=loss_ent, **agg)


@register(
    "entropy_agg",
    "token_mean",
    doc="sum M' (-coef H) / sum M', M' the tokens the bonus acts on: the mean token entropy whatever the loss "
    "(TRL 1.16); in a micro-batch sum M' is num_tokens times its kept share",
)
def _token_mean(loss_ent, keep, agg):
    # TRL 1.16 (grpo_trainer.py l. 3196): entropy_loss = sum M' H / sum M', M' the tokens the bonus acts on
    m = agg["mask"]
    acts = m if keep is None else keep
    total = torch.where(acts, loss_ent, torch.zeros_like(loss_ent)).sum()
    if agg["num_tokens"] is None:
        return total / acts.sum().clamp(min=1).to(total.dtype)
    share = acts.sum().to(total.dtype) / m.sum().clamp(min=1).to(total.dtype)
    return total / torch.clamp(share * float(agg["num_tokens"]), min=1.0)


# ----------------------------------------------------------------------------- the 80/20 rule (2506.01939)
def top_entropy_mask(entropy: torch.Tensor, mask: torch.Tensor, quantile: float) -> torch.Tensor:
    """(B, T) bool: the response tokens whose entropy is at or above the (1 - quantile) quantile of the response
    tokens' entropies (torch.quantile, linear interpolation, in float32), as TRL 1.16's get_high_entropy_mask.
    2506.01939 Eq. 5: J = E[ sum_t 1(H_t >= tau_rho) min(rho A, clip(rho) A) ], tau_rho the top-rho quantile."""
    m = mask > 0
    local = entropy.detach()[m].float()
    if local.numel() == 0:
        return torch.zeros_like(m)
    threshold = torch.quantile(local, 1.0 - quantile)
    return ((entropy.detach() * m.to(entropy.dtype)) >= threshold) & m


def _top_entropy_token_mask(cfg, entropy, mask, extras):
    if entropy is None:
        raise ValueError(
            f"top_entropy_quantile={cfg.top_entropy_quantile} needs the per-token entropy (B, T) of the policy"
        )
    return top_entropy_mask(entropy, mask, cfg.top_entropy_quantile)


TOP_ENTROPY_KNOB = Knob(
    "top_entropy_quantile",
    1.0,
    "80/20 rule (2506.01939; TRL top_entropy_quantile): the policy gradient only on the tokens in the top "
    "quantile of the micro-batch's entropies (the paper: 0.2); 1 = every token",
    ge=0,
    le=1,
)

# ----------------------------------------------------------------------------- adaptive entropy (Skywork-OR1)
ADAPTIVE_KNOBS = (
    Knob(
        "use_adaptive_entropy",
        False,
        "Skywork-OR1 (2505.22312; TRL use_adaptive_entropy): entropy_coef is the starting coefficient, moved by "
        "entropy_coef_delta each optimizer step toward entropy_target, applied only at or below the target",
    ),
    Knob("entropy_coef_min", 0.0, "adaptive entropy: lower bound of the coefficient (TRL entropy_coef_min)", ge=0),
    Knob("entropy_coef_max", 1.0, "adaptive entropy: upper bound of the coefficient (TRL entropy_coef_max)", ge=0),
    Knob(
        "entropy_coef_delta",
        0.005,
        "adaptive entropy: the coefficient's step per optimizer step (TRL entropy_coef_delta)",
        ge=0,
    ),
    Knob(
        "entropy_target",
        0.2,
        "adaptive entropy: target mean token entropy in nats, over the tokens the bonus acts on (TRL entropy_target)",
        ge=0,
    ),
)


@dataclass
class AdaptiveEntropy:
    """The controller's state, kept across optimizer steps and saved in checkpoints (TRL's entropy_coef and
    _last_world_entropy). Skywork-OR1 (2505.22312) §3.2.4: alpha_{k+1} = alpha_k + delta if H_k <= H_target else
    alpha_k - delta, clipped to [entropy_coef_min, entropy_coef_max]; the bonus -alpha_k H is applied only while
    H_{k-1} <= H_target (TRL 1.16: H_{-1} = inf, so no bonus before the first measurement)."""

    coef: float
    last_entropy: float = math.inf

    @classmethod
    def start(cls, cfg: Any) -> AdaptiveEntropy:
        return cls(float(cfg.entropy_coef))

    def applied(self, cfg: Any) -> float:
        """The coefficient every micro-batch of the next optimizer step uses."""
        return self.coef if self.last_entropy <= cfg.entropy_target else 0.0

    def update(self, cfg: Any, entropy: float) -> None:
        """One optimizer step's measurement: the mean entropy of the tokens the bonus acted on."""
        if entropy <= cfg.entropy_target:
            self.coef = min(self.coef + cfg.entropy_coef_delta, cfg.entropy_coef_max)
        else:
            self.coef = max(self.coef - cfg.entropy_coef_delta, cfg.entropy_coef_min)
        self.last_entropy = float(entropy)

    def state_dict(self) -> dict:
        return {"coef": self.coef, "last_entropy": self.last_entropy}

    def load_state_dict(self, state: dict) -> None:
        self.coef, self.last_entropy = float(state["coef"]), float(state["last_entropy"])


def adaptive_entropy(cfg: ObjectiveKnobs) -> AdaptiveEntropy | None:
    """A fresh controller when cfg turns it on, else None (the trainer keeps it across steps)."""
    return AdaptiveEntropy.start(cfg) if getattr(cfg, "use_adaptive_entropy", False) else None


ENTROPY_COEF_KEY = "entropy_coef"  # extras: the coefficient the controller applies this optimizer step (0-dim)
ENTROPY_WINDOW_KEY = "_entropy_window"  # metrics: (sum of H, count) over the bonus's tokens, for the controller


def entropy_coef_now(cfg: Any, extras) -> float | torch.Tensor:
    """The entropy bonus's coefficient in this loss: the controller's (extras) when adaptive, else entropy_coef.
    Adaptive with no controller state given: its first step's, 0 (TRL: no bonus before the first measurement)."""
    if not getattr(cfg, "use_adaptive_entropy", False):
        return cfg.entropy_coef
    if ENTROPY_COEF_KEY in extras:
        return extras[ENTROPY_COEF_KEY]
    return AdaptiveEntropy.start(cfg).applied(cfg)


def entropy_bonus_on(cfg: Any) -> bool:
    """Whether the entropy enters the loss (its gradient needed): a coefficient, or the adaptive controller."""
    return bool(cfg.entropy_coef) or bool(getattr(cfg, "use_adaptive_entropy", False))


@register_extension(
    "top_entropy",
    doc="80/20 rule (2506.01939): the policy gradient, and the entropy bonus, only on the top_entropy_quantile of "
    "the tokens by entropy (TRL 1.16 top_entropy_quantile)",
    knobs=(TOP_ENTROPY_KNOB,),
    switch="top_entropy_quantile",
    when="objective.top_entropy_quantile < 1",
    hooks=Hooks(token_mask=_top_entropy_token_mask),
)
def _top_entropy_on(cfg: Any) -> bool:
    return cfg.top_entropy_quantile < 1.0


@register_extension(
    "adaptive_entropy",
    doc="Skywork-OR1's adaptive entropy coefficient (2505.22312; TRL 1.16 use_adaptive_entropy): entropy_coef "
    "steered toward entropy_target; its state is checkpointed",
    knobs=ADAPTIVE_KNOBS,
    requires=(
        Requires(  # the controller clips the coefficient to [min, max]: an empty interval has no coefficient
            "entropy_coef_max",
            why="the coefficient is kept in [entropy_coef_min, entropy_coef_max], an empty interval",
            accepts=lambda hi, cfg: hi >= cfg.entropy_coef_min,
            allowed_text="a number >= entropy_coef_min",
        ),
    ),
    switch="use_adaptive_entropy",
    when="objective.use_adaptive_entropy=true",
)
def _adaptive_entropy_on(cfg: Any) -> bool:
    return bool(cfg.use_adaptive_entropy)


__all__ = [
    "ENTROPY_AGG",
    "entropy_term",
    "token_cov",
    "clip_cov_detached",
    "kl_cov_penalised",
    "top_entropy_mask",
    "AdaptiveEntropy",
    "adaptive_entropy",
    "entropy_coef_now",
    "entropy_bonus_on",
]
