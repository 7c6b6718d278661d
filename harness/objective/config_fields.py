"""The fields of `ObjectiveConfig` (config.py), section by section of docs/objective.md: the knobs every
algorithm reads or that select a mode (a name in that kind's registry, mode_registries.py). The knobs a mode owns
are declared by the mode (modes.py `Knob`) and carried as extras.

    AdvantageKnobs   where the knobs came from (algorithm, plugins) and the advantage
    PolicyKnobs      the ratio and the surrogate, the KL, the aggregation
    ObjectiveKnobs   the batch-level knobs and the sampler correction, DPO

Each class adds its section to the one before, so the fields keep the order of the YAML, the dump
(config.yaml, MLflow params) and docs/objective.md's table. Validation, the presets and the knobs the
modes declare are config.py's; the mode knobs' registries and the check of a preset's values are
mode_registries.py's. This module imports no other of the package: the functions of the rooms below config.py
take an `ObjectiveKnobs` (the knobs they read), so a room that declares modes never names config.py.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool

NonNeg = Annotated[float, Field(ge=0)]


class AdvantageKnobs(BaseModel):
    """Where a config's knobs came from, and the advantage ("Advantage")."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)

    algorithm: str = Field(
        "custom",
        description="preset these knobs came from ('custom' if none); unset knobs take that preset's values",
    )
    plugins: tuple[str, ...] = Field(
        (),
        description="modules imported before this config is validated: a researcher's own modes, knobs and "
        "presets (docs/extending.md), e.g. [my_variants]",
    )

    # "Advantage": advantage = (reward - baseline) / scale
    baseline: str = Field(
        "group_mean",
        description="b_i: group_mean (GRPO 2402.03300), leave_one_out (RLOO 2402.14740, unbiased), "
        "batch_mean, none (REINFORCE), critic (PPO: value head + GAE 1506.02438, per-token), passk (the Pass@k "
        "advantage, 2508.10751; binary rewards, scale none), prime (PRIME 2502.01456), remax (the greedy response's "
        "reward, ReMax 2310.10505), opo (the group's length-weighted mean reward, OPO 2505.23585), or a registered one",
    )
    scale: str = Field(
        "group_std",
        description="divide by: group_std (GRPO; over-weights easy/hard prompts = difficulty bias), "
        "batch_std (Lite PPO 2508.08221, REINFORCE++ 2501.03262), group_mean (MaxRL 2602.02710, binary rewards), "
        "none (Dr.GRPO 2503.20783 fix)",
    )
    std: str = Field(
        "sample", description="std with N-1 (sample, torch.std default as in TRL/verl GRPO) or N (population)"
    )
    batch_std_of: str = Field(
        "reward",
        description="batch_std of the raw rewards (Lite PPO, TRL scale_rewards=batch) or of reward-baseline "
        "(REINFORCE++-baseline)",
    )
    adv_eps: NonNeg = Field(1e-6, description="added to the std OUTSIDE the sqrt: A = (r - b) / (std + adv_eps)")


class PolicyKnobs(AdvantageKnobs):
    """The ratio, the surrogate, the KL to the reference and the aggregation."""

    # "Importance ratio", "Surrogate and clipping"
    ratio: str = Field(
        "token",
        description="importance ratio: token (PPO/GRPO), sequence (GSPO 2507.18071, length-normalised, "
        "MoE-stable), sequence_token (GSPO-token), none (on-policy REINFORCE/GPG 2504.02546), geometric (GMPO "
        "2507.20673: geometric mean of token ratios clipped in log space; clip none)"
        "; sequence_product (VESPO 2602.10693: prod_t rho_t), subsentence (SSPO 2511.04256: per sspo_span tokens)",
    )
    clip: str = Field(
        "ppo",
        description="surrogate: ppo (clipped min, 1707.06347), cispo (clip the detached IS weight, never drop a "
        "token, 2506.13585), none (rho*A), sapo (soft sigmoid gate, 2511.20347), dppo_tv | dppo_kl (divergence "
        "trust region on the token probability, 2602.04879)"
        "; vespo (Gamma-shaped weight, 2602.10693), gppo (bounded gradient through clipped tokens, 2508.07629, "
        "2509.20712), dro (quadratic log-ratio penalty, verl)"
        "; clip_cov | kl_cov (clip / KL-penalise the tokens of largest covariance of log-prob and advantage, "
        "2505.22617)",
    )
    eps_low: NonNeg | None = Field(
        0.2, description="lower clip distance: bound 1-eps_low; null = no lower bound (CISPO)"
    )
    eps_high: NonNeg = Field(
        0.2, description="upper clip distance: bound 1+eps_high; > eps_low = clip-higher (DAPO 2503.14476, entropy)"
    )

    # "KL to the reference"
    kl_coef: NonNeg = Field(0.04, description="KL weight beta; 0 loads no reference model (GRPO 0.04, PPO 0.05)")
    kl_estimator: str = Field(
        "k3",
        description="KL estimator (Schulman 'Approximating KL'): k1 log-ratio, k2 half squared, k3 unbiased >= 0 "
        "(GRPO), abs |log-ratio|, low_var_kl k3 with verl's clamps",
    )
    kl_placement: str = Field(
        "loss", description="loss: kl_coef*k added to the token loss (GRPO); reward: kl_coef*k1 off the reward (PPO)"
    )
    ref_update_every: int = Field(
        0, ge=0, description="reset pi_ref <- pi_theta every N steps (iterative GRPO, 2402.03300 §4.2); 0 = never"
    )

    # "Aggregation" (length normalisation)
    agg: str = Field(
        "seq_mean_token_mean",
        description="seq_mean_token_mean (GRPO/GSPO; 1/|o_i| = length bias), token_mean (DAPO), "
        "seq_mean_token_sum_norm (Dr.GRPO, /norm_constant), seq_mean_token_sum (RLOO), lambda_length (λ-GRPO "
        "2510.06870: learned length weights), prompt_mean (ScaleRL 2510.13786: each prompt's tokens share one "
        "mean, every prompt weighs the same)",
    )


class ObjectiveKnobs(PolicyKnobs):
    """The batch-level knobs (shaping, filters, entropy, the sampler correction) and DPO."""

    # "Batch-level knobs"
    dynamic_sampling: StrictBool = Field(
        False, description="drop groups with all-equal rewards and refill (DAPO; zero-gradient groups)"
    )
    overlong_buffer: int = Field(
        0, ge=0, description="DAPO soft overlong punishment zone in tokens before max_new_tokens; 0 = off"
    )
    overlong_penalty: NonNeg = Field(
        1.0, description="DAPO overlong penalty factor: reward -penalty at max_new_tokens, linear over the buffer"
    )
    mask_truncated: StrictBool = Field(
        False, description="truncated responses get no loss (DAPO's overlong filtering ablation)"
    )
    zero_variance_filter: StrictBool = Field(
        False,
        description="drop groups whose rewards are all equal from the batch, without refilling (ScaleRL "
        "2510.13786: they leave the loss's denominators and the batch std)",
    )
    no_positive_resampling: float | None = Field(
        None,
        gt=0,
        le=1,
        description="a training prompt whose running pass rate reaches this leaves the pool for the rest of the run "
        "(ScaleRL 2510.13786: 0.9); null = off",
    )
    entropy_coef: float = Field(
        0.0, description="entropy bonus: loss -= entropy_coef * H per token (negative minimises entropy)"
    )
    entropy_agg: str = Field(
        "agg",
        description="aggregation of the entropy bonus: agg (with the policy's agg, so entropy_coef weighs "
        "differently under Dr.GRPO's sum than under GRPO's mean) or token_mean (TRL 1.16: the mean token entropy "
        "whatever the loss)",
    )
    tis_cap: float | None = Field(
        None,
        gt=0,
        description="truncated IS weight min(pi_old_train/pi_rollout, cap) on the token loss (rollout/train "
        "mismatch); null = off; the old spelling of rollout_is=token_truncate with rollout_is_clip_max=cap",
    )
    rollout_is: str = Field(
        "none",
        description="importance weight pi_old/pi_rollout against the sampler's own log-probs (TRL "
        "vllm_importance_sampling_mode): none, token_truncate (TIS), token_mask (MIS; IcePop 2510.18855 with both "
        "bounds), sequence_truncate, sequence_mask; bounds rollout_is_clip_min / rollout_is_clip_max",
    )
    routing_replay: StrictBool = Field(
        False, description="MoE: replay the rollout's expert choice in the training forward (R3, 2510.11370)"
    )

    # "DPO"
    dpo_beta: float = Field(0.1, gt=0, description="DPO beta (2305.18290) / IPO tau (2310.12036)")
    dpo_loss_type: str = Field(
        "sigmoid",
        description="the preference loss (TRL 1.16 DPOTrainer loss_type): sigmoid -log sigma(z) (DPO); ipo "
        "(h - 1/(2 beta))^2 on per-token log-ratios (IPO); hinge, robust, exo_pair, nca_pair, bco_pair, sppo_hard, "
        "aot, aot_unpaired, apo_zero, apo_down, discopop, sigmoid_norm (docs/objective.md, 'DPO')",
    )
    dpo_sft_coef: NonNeg = Field(
        0.0,
        description="RPO (Pang et al. 2404.19733): + alpha * NLL of the chosen response per token; "
        "counters likelihood displacement; 0 = plain DPO/IPO",
    )
    dpo_loss_weights: dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = Field(
        None,
        description="several dpo_loss_type losses mixed, loss = sum_k w_k mean_B L_k (TRL 1.16 loss_type list with "
        "loss_weights; MPO 2411.10442: {sigmoid: 0.8, bco_pair: 0.2}); dpo_loss_type must be one of its keys; "
        "null = dpo_loss_type alone",
    )


__all__ = ["AdvantageKnobs", "PolicyKnobs", "ObjectiveKnobs"]
