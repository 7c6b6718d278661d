"""`ObjectiveConfig`: every knob of the composable objective (docs/objective.md §1-8), validated.

The field names are the YAML keys under `objective:`. Defaults equal the `grpo` preset.
`ObjectiveConfig.preset(name, **overrides)` starts from a named algorithm (presets.py);
`ObjectiveConfig(algorithm=name, ...)` does the same (unset knobs take the preset's values).

Validation at construction: an unknown knob raises naming it and listing the allowed knobs;
an illegal value raises naming the knob and the allowed values (pydantic's message carries
the knob as its location); combinations that would be silently ignored raise too.

Papers: GRPO 2402.03300, Dr.GRPO 2503.20783, DAPO 2503.14476, GSPO 2507.18071,
CISPO/MiniMax-M1 2506.13585, RLOO 2402.14740, REINFORCE++ 2501.03262, Lite PPO 2508.08221,
GPG 2504.02546, PPO 1707.06347, GAE 1506.02438, dual-clip PPO 1912.09729, DPO 2305.18290,
IPO 2310.12036, k1/k2/k3: Schulman, "Approximating KL Divergence" (2020 blog); the zoo of
docs/objective.md §12: MaxRL 2602.02710, Pass@k training 2508.10751, SAPO 2511.20347,
GMPO 2507.20673, DPPO 2602.04879; of §13: PRIME 2502.01456, λ-GRPO 2510.06870, SimKO 2510.14807.
"""
from __future__ import annotations

import difflib
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.objective.advantages import BASELINE, BATCH_STD_OF, SCALE, STD
from harness.objective.aggregation import AGG
from harness.objective.dpo import DPO_LOSS
from harness.objective.kl import KL_ESTIMATOR, KL_PLACEMENT
from harness.objective.modes import Modes
from harness.objective.presets import PRESETS, preset_trainer
from harness.objective.ratios import RATIO, RATIO_CLIPS_ITSELF
from harness.objective.surrogates import CLIP, NEEDS_TOKEN_RATIO

NonNeg = Annotated[float, Field(ge=0)]

# Every knob that takes a named mode -> its registry (harness/objective/modes.py): the one place a
# mode name is defined; the field types below, the dispatch and docs/objective.md's table follow it.
MODE_KNOBS: dict[str, Modes] = {m.knob: m for m in (
    BASELINE, SCALE, STD, BATCH_STD_OF, RATIO, CLIP, KL_ESTIMATOR, KL_PLACEMENT, AGG, DPO_LOSS)}
BaselineMode = BASELINE.literal
ScaleMode = SCALE.literal
StdMode = STD.literal
BatchStdOfMode = BATCH_STD_OF.literal
RatioMode = RATIO.literal
ClipMode = CLIP.literal
KlEstimatorMode = KL_ESTIMATOR.literal
KlPlacementMode = KL_PLACEMENT.literal
AggMode = AGG.literal
DpoLossMode = DPO_LOSS.literal


class ObjectiveConfig(BaseModel):
    """The knobs of the one objective; a named algorithm is only a preset of them."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    algorithm: str = Field(
        "custom",
        description="preset these knobs came from ('custom' if none); unset knobs take that preset's values",
    )

    # §1 advantage = (reward - baseline) / scale
    baseline: BaselineMode = Field(
        "group_mean",
        description="b_i: group_mean (GRPO 2402.03300), leave_one_out (RLOO 2402.14740, unbiased), "
        "batch_mean, none (REINFORCE), critic (PPO: value head + GAE 1506.02438, per-token), passk (the Pass@k "
        "advantage, 2508.10751; binary rewards, scale none)",
    )
    scale: ScaleMode = Field(
        "group_std",
        description="divide by: group_std (GRPO; over-weights easy/hard prompts = difficulty bias), "
        "batch_std (Lite PPO 2508.08221, REINFORCE++ 2501.03262), group_mean (MaxRL 2602.02710, binary rewards), "
        "none (Dr.GRPO 2503.20783 fix)",
    )
    passk_k: int = Field(
        4, ge=1, description="k of baseline=passk (Pass@k training 2508.10751): the advantage of the group's pass@k; "
        "1 <= k < group_size",
    )
    std: StdMode = Field(
        "sample", description="std with N-1 (sample, torch.std default as in TRL/verl GRPO) or N (population)"
    )
    batch_std_of: BatchStdOfMode = Field(
        "reward",
        description="batch_std of the raw rewards (Lite PPO, TRL scale_rewards=batch) or of reward-baseline "
        "(REINFORCE++-baseline)",
    )
    adv_eps: NonNeg = Field(1e-6, description="added to the std OUTSIDE the sqrt: A = (r - b) / (std + adv_eps)")
    gamma: float = Field(1.0, ge=0, le=1, description="GAE discount (critic baseline; 1.0 for LM PPO, TRL/OpenRLHF)")
    lam: float = Field(0.95, ge=0, le=1, description="GAE lambda (critic baseline; bias-variance trade-off, 1506.02438)")

    # §2-3 ratio, surrogate, clipping
    ratio: RatioMode = Field(
        "token",
        description="importance ratio: token (PPO/GRPO), sequence (GSPO 2507.18071, length-normalised, "
        "MoE-stable), sequence_token (GSPO-token), none (on-policy REINFORCE/GPG 2504.02546), geometric (GMPO "
        "2507.20673: geometric mean of token ratios clipped in log space; clip none)",
    )
    clip: ClipMode = Field(
        "ppo",
        description="surrogate: ppo (clipped min, 1707.06347), cispo (clip the detached IS weight, never drop a "
        "token, 2506.13585), none (rho*A), sapo (soft sigmoid gate, 2511.20347), dppo_tv | dppo_kl (divergence "
        "trust region on the token probability, 2602.04879)",
    )
    eps_low: NonNeg | None = Field(
        0.2, description="lower clip distance: bound 1-eps_low; null = no lower bound (CISPO)"
    )
    eps_high: NonNeg = Field(
        0.2, description="upper clip distance: bound 1+eps_high; > eps_low = clip-higher (DAPO 2503.14476, entropy)"
    )
    dual_clip: float | None = Field(
        None, gt=1,
        description="dual-clip PPO constant c > 1 (1912.09729): for A<0 the loss is capped at -c*A (ppo clip only)",
    )
    sapo_tau_pos: float = Field(
        1.0, gt=0, description="SAPO gate temperature where A > 0 (2511.20347; clip=sapo): larger = sharper gate"
    )
    sapo_tau_neg: float = Field(
        1.05, gt=0, description="SAPO gate temperature where A <= 0 (2511.20347; clip=sapo; > tau_pos damps "
        "negative updates faster)",
    )
    div_low: NonNeg = Field(
        0.15, description="DPPO divergence bound where A <= 0 (2602.04879; clip=dppo_tv: total variation, "
        "dppo_kl: binary KL)",
    )
    div_high: NonNeg = Field(
        0.15, description="DPPO divergence bound where A > 0 (2602.04879; clip=dppo_tv | dppo_kl)"
    )
    is_cap: float = Field(
        20.0, gt=0, description="DPPO: cap of the detached IS weight min(rho, is_cap) (2602.04879; clip=dppo_*)"
    )

    # §4 KL to the reference
    kl_coef: NonNeg = Field(0.04, description="KL weight beta; 0 loads no reference model (GRPO 0.04, PPO 0.05)")
    kl_estimator: KlEstimatorMode = Field(
        "k3",
        description="KL estimator (Schulman 'Approximating KL'): k1 log-ratio, k2 half squared, k3 unbiased >= 0 (GRPO)",
    )
    kl_placement: KlPlacementMode = Field(
        "loss", description="loss: kl_coef*k added to the token loss (GRPO); reward: kl_coef*k1 off the reward (PPO)"
    )
    ref_update_every: int = Field(
        0, ge=0, description="reset pi_ref <- pi_theta every N steps (iterative GRPO, 2402.03300 §4.2); 0 = never"
    )

    # §5 aggregation (length normalisation)
    agg: AggMode = Field(
        "seq_mean_token_mean",
        description="seq_mean_token_mean (GRPO/GSPO; 1/|o_i| = length bias), token_mean (DAPO), "
        "seq_mean_token_sum_norm (Dr.GRPO, /norm_constant), seq_mean_token_sum (RLOO), lambda_length (λ-GRPO "
        "2510.06870: learned length weights)",
    )
    norm_constant: float | None = Field(
        None, gt=0, description="C of seq_mean_token_sum_norm (Dr.GRPO: max generation length; run config fills it)"
    )

    # §6 batch-level knobs
    dynamic_sampling: bool = Field(
        False, description="drop groups with all-equal rewards and refill (DAPO; zero-gradient groups)"
    )
    overlong_buffer: int = Field(
        0, ge=0, description="DAPO soft overlong punishment zone in tokens before max_new_tokens; 0 = off"
    )
    overlong_penalty: NonNeg = Field(
        1.0, description="DAPO overlong penalty factor: reward -penalty at max_new_tokens, linear over the buffer"
    )
    mask_truncated: bool = Field(
        False, description="truncated responses get no loss (DAPO's overlong filtering ablation)"
    )
    entropy_coef: float = Field(
        0.0, description="entropy bonus: loss -= entropy_coef * H per token (negative minimises entropy)"
    )
    tis_cap: float | None = Field(
        None, gt=0,
        description="truncated IS weight min(pi_old_train/pi_rollout, cap) on the token loss (rollout/train "
        "mismatch); null = off",
    )
    routing_replay: bool = Field(
        False, description="MoE: replay the rollout's expert choice in the training forward (R3, 2510.11370)"
    )

    # SimKO's top-K spreading (docs/objective.md §13)
    simko_top_k: int = Field(
        0, ge=0, description="SimKO (2510.14807): K top candidates per token that share the gradient of a correct "
        "response at high-entropy tokens; 0 = SimKO off (the trainer then computes no top-K log-probs)",
    )
    simko_tau: float = Field(
        0.8, gt=0, lt=1, description="SimKO: a token is gated when its entropy exceeds this quantile of its "
        "response's token entropies (simko_top_k > 0)",
    )
    simko_mix: float = Field(
        0.01, ge=0, le=1, description="SimKO: share of a gated token's gradient spread over the top-K candidates "
        "(correct responses; simko_top_k > 0)",
    )
    simko_neg_scale: NonNeg = Field(
        1.1, description="SimKO: A <- simko_neg_scale * A at gated argmax tokens of wrong responses (simko_top_k > 0)"
    )

    # λ-GRPO's learned length weights (docs/objective.md §13; agg: lambda_length)
    lambda_init: float = Field(
        0.0, description="λ-GRPO (2510.06870): λ's starting value; 0 = token_mean exactly (agg=lambda_length)"
    )
    lambda_lr: float = Field(
        1e-2, gt=0, description="λ-GRPO: AdamW learning rate of the learned scalar λ (no weight decay; "
        "agg=lambda_length)",
    )
    lambda_r: float = Field(
        0.5, gt=0, description="λ-GRPO: h_i = max(1 + lambda_r z_i, 1e-6), z_i the length's z-score in its group "
        "(agg=lambda_length)",
    )

    # PRIME's implicit process rewards (docs/objective.md §13; baseline: prime)
    prime_beta: float = Field(
        0.05, gt=0, description="PRIME (2502.01456) beta: token reward beta*(log pi_phi - log pi_ref) of the implicit "
        "reward model, and its BCE's logit beta*sum_t of it (baseline=prime)",
    )
    prime_coef: NonNeg = Field(
        5.0, description="PRIME: weight of the RLOO'd process rewards in the token return (verl recipe 5; baseline=prime)"
    )
    outcome_coef: NonNeg = Field(
        5.0, description="PRIME: weight of the RLOO'd outcome at the last token (verl recipe 5; baseline=prime)"
    )
    prm_lr: float = Field(
        1e-4, gt=0, description="PRIME: AdamW learning rate of the implicit reward model (the paper: 1e-6 at 7B, "
        "twice the policy's; here train.lr's default; baseline=prime)",
    )
    prime_keep_last_token: bool = Field(
        False, description="PRIME: keep the last response token's process reward (the PRIME repository) instead of "
        "dropping it (verl's recipe); baseline=prime",
    )

    # PPO critic
    vf_coef: NonNeg = Field(0.1, description="value-loss weight (critic baseline; TRL PPO 0.1)")
    value_clip: float | None = Field(
        0.2, gt=0, description="clip V to V_old +- value_clip in the value loss (PPO); null = unclipped"
    )

    # §8 DPO
    dpo_beta: float = Field(0.1, gt=0, description="DPO beta (2305.18290) / IPO tau (2310.12036)")
    dpo_loss_type: DpoLossMode = Field(
        "sigmoid", description="sigmoid: -log sigma(z) (DPO); ipo: (z/beta - 1/(2 beta))^2 (IPO, no overfitting)"
    )
    dpo_sft_coef: NonNeg = Field(
        0.0, description="RPO (Pang et al. 2404.19733): + alpha * NLL of the chosen response per token; "
        "counters likelihood displacement; 0 = plain DPO/IPO"
    )

    # ------------------------------------------------------------------ construction
    @model_validator(mode="before")
    @classmethod
    def _known_knobs_and_preset(cls, data: Any) -> Any:
        """Reject unknown knobs (listing the allowed ones); fill unset knobs from `algorithm`'s preset."""
        if not isinstance(data, dict):
            return data
        unknown = sorted(str(k) for k in data if k not in cls.model_fields)
        if unknown:
            hints = {k: difflib.get_close_matches(k, cls.model_fields, n=1) for k in unknown}
            hint = "; ".join(f"did you mean {v[0]!r} for {k!r}?" for k, v in hints.items() if v)
            raise ValueError(
                f"unknown objective knob(s) {unknown}{' (' + hint + ')' if hint else ''}; "
                f"allowed knobs: {sorted(cls.model_fields)}"
            )
        algo = data.get("algorithm", "custom")
        if algo != "custom":
            if algo not in PRESETS:
                raise ValueError(f"algorithm={algo!r} is not a preset; allowed: ['custom'] + {sorted(PRESETS)}")
            data = {**PRESETS[algo], **data}
        return data

    @model_validator(mode="after")
    def _combinations(self) -> "ObjectiveConfig":
        if self.agg == "seq_mean_token_sum_norm" and self.norm_constant is None:
            raise ValueError(
                "norm_constant is required when agg='seq_mean_token_sum_norm' (Dr.GRPO: the max generation "
                "length, e.g. norm_constant=max_new_tokens); allowed values: a float > 0"
            )
        if self.kl_placement == "reward" and self.kl_estimator != "k1":
            raise ValueError(
                f"kl_estimator={self.kl_estimator!r} with kl_placement='reward': the reward placement subtracts "
                "kl_coef*k1 (docs/objective.md §4); allowed kl_estimator there: ['k1']"
            )
        if self.baseline == "critic" and self.scale not in ("batch_std", "none"):
            raise ValueError(
                f"scale={self.scale!r} with baseline='critic': critic advantages are per token, not per group; "
                "allowed scale with the critic: ['batch_std', 'none']"
            )
        if self.dual_clip is not None and self.clip != "ppo":
            raise ValueError(
                f"dual_clip={self.dual_clip} needs clip='ppo' (got clip={self.clip!r}); allowed dual_clip here: [None]"
            )
        self._zoo_combinations()
        return self

    def _zoo_combinations(self) -> None:
        """The rules of docs/objective.md §12 (MaxRL, pass@k, SAPO, GMPO, DPPO)."""
        if self.ratio in RATIO_CLIPS_ITSELF and self.clip != "none":
            raise ValueError(
                f"clip={self.clip!r} with ratio={self.ratio!r}: the geometric ratio clips each token in log space "
                "itself (eps_low/eps_high, GMPO); allowed clip with ratio='geometric': ['none']"
            )
        if self.clip in NEEDS_TOKEN_RATIO and self.ratio != "token":
            raise ValueError(
                f"ratio={self.ratio!r} with clip={self.clip!r}: DPPO's trust region is on each sampled token's "
                "probability; allowed ratio with clip dppo_tv | dppo_kl: ['token']"
            )
        if self.baseline == "passk" and self.scale != "none":
            raise ValueError(
                f"scale={self.scale!r} with baseline='passk': the Pass@k advantage is already normalised by its "
                "sigma; allowed scale with baseline='passk': ['none']"
            )
        if self.simko_top_k and (self.clip != "ppo" or self.ratio != "token" or self.dual_clip is not None
                                 or self.eps_low is None):
            raise ValueError(
                f"simko_top_k={self.simko_top_k} with clip={self.clip!r}, ratio={self.ratio!r}, dual_clip="
                f"{self.dual_clip}, eps_low={self.eps_low}: SimKO's loss is the token-level PPO clip of its mixed "
                "ratio (docs/objective.md §13); allowed with simko_top_k > 0: clip='ppo', ratio='token', "
                "dual_clip=None, eps_low a number"
            )
        if self.baseline == "prime" and self.scale != "batch_std":
            raise ValueError(
                f"scale={self.scale!r} with baseline='prime': PRIME whitens its token returns over the batch "
                "(docs/objective.md §13); allowed scale with baseline='prime': ['batch_std']"
            )
        if self.baseline == "prime" and self.kl_coef > 0 and self.kl_placement == "reward":
            raise ValueError(
                f"kl_placement='reward' with baseline='prime' (kl_coef={self.kl_coef}): PRIME's returns are built from "
                "its process and outcome rewards only; allowed: kl_placement='loss', or kl_coef=0"
            )
        binary = [k for k, on in (("baseline='passk'", self.baseline == "passk"),
                                  ("scale='group_mean'", self.scale == "group_mean"),
                                  ("baseline='prime'", self.baseline == "prime")) if on]
        if binary and self.overlong_buffer:
            raise ValueError(
                f"overlong_buffer={self.overlong_buffer} with {' and '.join(binary)}: the overlong penalty makes "
                "the rewards non-binary, and the formula counts correct samples; allowed overlong_buffer here: [0]"
            )

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "ObjectiveConfig":
        """The knobs of preset `name` with `overrides` applied one by one."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; valid presets: {sorted(PRESETS)}")
        if "algorithm" in overrides:
            raise ValueError("algorithm is set by the preset name; pass the knobs to override instead")
        return cls(algorithm=name, **overrides)

    @property
    def needs_reference(self) -> bool:
        """Whether a frozen reference policy enters the objective: kl_coef > 0, a preference loss
        (a preset run by the pairs trainer, presets.PRESET_TRAINERS: its loss is relative to pi_ref),
        or PRIME's implicit rewards (log pi_phi - log pi_ref, docs/objective.md §13)."""
        return self.kl_coef > 0 or preset_trainer(self.algorithm) == "dpo" or self.baseline == "prime"
