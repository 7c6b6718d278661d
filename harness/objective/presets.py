"""Named algorithms as knob values (docs/objective.md, "Presets"). A preset is data, never a code path.

`ObjectiveConfig.preset(name, **overrides)` starts from `PRESETS[name]` and applies the
overrides one by one; knobs a preset does not list take the `ObjectiveConfig` defaults
(which equal the grpo preset). Every preset lists every column of the table of docs/objective.md, "Presets" explicitly
(baseline, scale, ratio, clip, eps_low, eps_high, agg, kl_coef, kl_estimator, kl_placement),
so no preset inherits GRPO's KL by accident.

Wherever a paper and its reference code disagree, the comment of the preset says which one
was picked and which knob reaches the other.

Papers: PPO 1707.06347 (+ InstructGPT 2203.02155 for LM-PPO), GRPO 2402.03300,
Dr.GRPO 2503.20783, DAPO 2503.14476, GSPO 2507.18071, CISPO / MiniMax-M1 2506.13585,
RLOO 2402.14740, REINFORCE++ 2501.03262, Lite PPO 2508.08221, GPG 2504.02546,
DPO 2305.18290, IPO 2310.12036; the zoo (docs/objective.md, "Advantage", "Importance ratio",
"Surrogate and clipping"): MaxRL 2602.02710, Pass@k training 2508.10751, SAPO 2511.20347, GMPO 2507.20673,
DPPO 2602.04879, VESPO 2602.10693, LUSPO 2602.05261, GPPO 2508.07629, CE-GPPO 2509.20712; the modes that need
more from the trainer: λ-GRPO 2510.06870, SimKO 2510.14807, PRIME 2502.01456; "Batch-level knobs": IcePop
2510.18855, M2PO 2510.01161.
"""

from __future__ import annotations

import sys
from typing import Any

from harness.objective.mode_registries import check_knob_values
from harness.objective.modes import BUILTIN, origin_of

# The registry: preset name -> its knob values; the trainer of each preset not run under "rl"; the run-config
# keys outside the objective a preset sets unless the config names them; the module that declared each preset.
PRESETS: dict[str, dict] = {}
PRESET_TRAINERS: dict[str, str] = {}
PRESET_RUN_KEYS: dict[str, dict[str, object]] = {}
PRESET_ORIGINS: dict[str, str] = {}  # preset -> its origin (modes.BUILTIN for the package's own, else the module)
PRESET_DECLARED: dict[str, str] = {}  # preset -> the module whose code called register_preset


def register_preset(name: str, *, trainer: str = "rl", run_keys: dict | None = None, **knobs: Any) -> None:
    """Add a named algorithm: knob values over the defaults (the table below; a researcher's module,
    docs/extending.md). Every key must be a knob and every value allowed (checked now: the module fails to
    import otherwise). trainer: "rl", or "dpo" for a preference loss (the pairs trainer). run_keys: run-config
    keys outside the objective the preset sets unless the config names them (`{"model.lm_head_fp32": True}`)."""
    module = sys._getframe(1).f_globals.get("__name__", "__main__")
    origin = origin_of(module)
    if not name.isidentifier() or name == "custom":
        raise ValueError(f"preset name {name!r} must be an identifier other than 'custom'")
    if PRESET_ORIGINS.get(name) == BUILTIN and origin != BUILTIN:
        raise ValueError(f"preset {name!r} is built in; pick another name")
    if trainer not in ("rl", "dpo"):
        raise ValueError(f"preset {name!r}: trainer={trainer!r}; allowed: ['rl', 'dpo']")
    for key in run_keys or {}:
        if not isinstance(key, str) or key.count(".") != 1 or key.startswith("objective."):
            raise ValueError(
                f"preset {name!r}: run_keys key {key!r}; allowed: a run-config key outside objective, "
                "section.name (e.g. model.lm_head_fp32)"
            )
    check_knob_values(knobs, f"preset {name!r}")
    PRESETS[name] = dict(knobs)
    PRESET_ORIGINS[name], PRESET_DECLARED[name] = origin, module
    if trainer != "rl":
        PRESET_TRAINERS[name] = trainer
    if run_keys:
        PRESET_RUN_KEYS[name] = dict(run_keys)


# PPO (Schulman et al. 1707.06347) as used for LMs (InstructGPT 2203.02155; TRL PPOTrainer).
# Learned critic + GAE(gamma=1, lam=0.95), advantages whitened over the batch's response
# tokens, token-level clipped surrogate, clipped value loss, KL as a per-token k1 penalty in
# the reward. The paper's own (control) setting has no KL term and gamma=0.99; the LM values
# are TRL PPOConfig's defaults (kl_coef 0.05, cliprange 0.2, vf_coef 0.1, cliprange_value 0.2,
# gamma 1, lam 0.95) -- picked; `gamma`, `lam`, `kl_coef`, `vf_coef`, `value_clip` reach others.
register_preset(
    "ppo",
    baseline="critic",
    scale="batch_std",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.05,
    kl_estimator="k1",
    kl_placement="reward",
    gamma=1.0,
    lam=0.95,
    vf_coef=0.1,
    value_clip=0.2,
)
# PPO with the adaptive KL controller (Ziegler et al. 1909.08593 §2.2, as InstructGPT 2203.02155 ran PPO): the
# ppo preset with the reward's beta steered toward a target KL, starting at the ppo preset's 0.05. The target
# and horizon are verl's (algorithm.kl_ctrl.type: adaptive, target_kl 0.1, horizon 10000), because this
# controller measures KL as verl does, the per-token k1 mean of each response averaged over the responses;
# Ziegler's and TRL's old PPOTrainer's target (6 nats) is a per-sequence sum, another unit. A horizon of 10,000
# sequences moves beta by at most 0.2 B / 10,000 a step: `kl_horizon` reaches a faster controller.
register_preset(
    "ppo_adaptive_kl",
    baseline="critic",
    scale="batch_std",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.05,
    kl_estimator="k1",
    kl_placement="reward",
    kl_target=0.1,
    kl_horizon=10000,
    gamma=1.0,
    lam=0.95,
    vf_coef=0.1,
    value_clip=0.2,
)
# GRPO (DeepSeekMath, Shao et al. 2402.03300, Eq. 3): group-mean baseline divided by the
# group std, 1/|o_i| per response then mean over the group, k3 KL in the loss with beta=0.04,
# eps=0.2. The paper does not say which std; re-implementations (TRL, verl) use torch.std, the
# sample (N-1) std -- picked; `std: population` reaches the N form. There is no official code;
# recent TRL / verl defaults drifted to token-level aggregation and no KL -- the paper's
# seq_mean_token_mean and beta 0.04 are picked; `agg: token_mean`, `kl_coef: 0` reach those.
register_preset(
    "grpo",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="seq_mean_token_mean",
    kl_coef=0.04,
    kl_estimator="k3",
    kl_placement="loss",
)
# Dr.GRPO (Liu et al. 2503.20783, "GRPO done right"): removes both biases -- no std division
# (difficulty bias) and a constant normaliser instead of 1/|o_i| (length bias); no KL (beta=0).
# The paper's objective sums the token terms of each response (then 1/G); its released code
# (understand-r1-zero on oat) also divides that sum by a constant, the generation budget --
# picked: seq_mean_token_sum_norm with norm_constant = max_new_tokens (the run config fills
# it; ObjectiveConfig requires it). The two differ by a constant step size only;
# `agg: seq_mean_token_sum` reaches the paper's unnormalised sum.
register_preset(
    "dr_grpo",
    baseline="group_mean",
    scale="none",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="seq_mean_token_sum_norm",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# DAPO (Yu et al. 2503.14476): clip-higher eps 0.2/0.28, token-level loss over the batch,
# no KL, dynamic sampling (drop groups with accuracy 0 or 1, refill), soft overlong
# punishment. Paper and its code (verl recipe/dapo) agree on eps, token-mean, no KL and the
# penalty factor 1.0; both use L_max = 20480 with an overlong buffer L_cache = 4096 (20%).
# The buffer is in tokens here; 13 = round(0.2 * 64), 64 being the harness's default
# rollout.max_new_tokens -- set `overlong_buffer: 4096` at paper scale. The paper's rewards
# are +1/-1 (penalty 1.0 = half their range); with 0/1 task rewards the same factor is the
# full range -- `overlong_penalty` rescales it. Overlong FILTERING (masking truncated
# responses) is an ablation in the paper, not part of DAPO: mask_truncated=False;
# `mask_truncated: true` reaches it. Both filter dynamic-sampling groups on accuracy (verl
# `filter_groups.metric=acc`), so pass the task reward, not the shaped one, to
# `dynamic_sampling_keep`.
register_preset(
    "dapo",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.28,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
    dynamic_sampling=True,
    overlong_buffer=13,
    overlong_penalty=1.0,
    mask_truncated=False,
)
# GSPO (Zheng et al. 2507.18071): length-normalised sequence ratio
# s_i = (pi/pi_old)^(1/|o_i|), clipped at 3e-4/4e-4 (distances, as in the paper and verl's
# recipe clip_ratio_low/high), group-std advantage, no KL. The objective is a mean over
# sequences; with a ratio constant along the sequence seq_mean_token_mean gives exactly
# (1/B) sum_i l_i (verl's gspo recipe uses the same "seq-mean-token-mean").
register_preset(
    "gspo",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="sequence",
    clip="ppo",
    eps_low=3e-4,
    eps_high=4e-4,
    agg="seq_mean_token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# GSPO-token (2507.18071): s_{i,t} = sg(s_i) * pi(y_t)/sg(pi(y_t)); equals GSPO in
# value and gradient when advantages are per sequence, and admits per-token advantages.
register_preset(
    "gspo_token",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="sequence_token",
    clip="ppo",
    eps_low=3e-4,
    eps_high=4e-4,
    agg="seq_mean_token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# CISPO (MiniMax-M1, 2506.13585): REINFORCE with the detached, clipped IS weight
# sg(clip(r, 1-eps_low, 1+eps_high)) * A * log pi, normalised by the total token count; no KL.
# The paper sets no lower bound ("eps_low to a large value") and tunes only eps_high without
# publishing it (no public code). Picked eps_low=None and eps_high=4.0 (a distance, i.e. an
# absolute weight cap of 5.0, the value TRL documents for loss_type="cispo", where
# epsilon_high is an absolute cap). Any other cap: `eps_high`.
register_preset(
    "cispo",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="cispo",
    eps_low=None,
    eps_high=4.0,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# RLOO (Ahmadian et al. 2402.14740): leave-one-out baseline, no std, the whole response is
# one action (REINFORCE on the summed log-prob: seq_mean_token_sum), sequence-level k1 KL
# subtracted from the reward. The paper is plain on-policy REINFORCE (no ratio, no clip); the
# reference implementation (TRL RLOOTrainer) wraps it in a PPO clip at 0.2 and uses
# kl_coef 0.05 -- picked (identical on-policy, where rho = 1). `clip: none, ratio: none`
# reaches the paper's pure REINFORCE.
register_preset(
    "rloo",
    baseline="leave_one_out",
    scale="none",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="seq_mean_token_sum",
    kl_coef=0.05,
    kl_estimator="k1",
    kl_placement="reward",
)
# REINFORCE++-baseline (Hu et al. 2501.03262): group-mean baseline, then normalisation by the
# std of the CENTRED rewards over the whole batch (the paper's advantage and OpenRLHF
# `reinforce_baseline`) -- batch_std_of="centered" (Lite PPO's "reward" is the other form);
# token-level PPO clip 0.2, token_mean, k1 KL in the reward with OpenRLHF's default
# init_kl_coef 0.01. Paper and code apply the k1 penalty per token and use the return-to-go
# A_t = r - kl_coef * sum_{s>=t} k1_s, whitened over response tokens; here the penalty is
# summed over the whole response and subtracted from r_i (kl_in_reward, the RLOO/TRL form):
# token t additionally carries kl_coef * sum_{s<t} k1_s. No knob reaches the token-level form;
# it is token_rewards_with_kl + gae_advantages(values=0, gamma=1, lam=1) + whiten.
# `baseline: batch_mean` reaches the original (group-free) REINFORCE++.
register_preset(
    "reinforce_pp",
    baseline="group_mean",
    scale="batch_std",
    batch_std_of="centered",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.01,
    kl_estimator="k1",
    kl_placement="reward",
)
# Lite PPO (Liu et al. 2508.08221, "Tricks or Traps?"): group-level mean, batch-level std of
# the rewards (TRL's scale_rewards="batch"), token-level loss, vanilla PPO clip, no KL.
register_preset(
    "lite_ppo",
    baseline="group_mean",
    scale="batch_std",
    batch_std_of="reward",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# GPG (Chu et al. 2504.02546): plain policy gradient -- no ratio, no clip, no KL, no
# reference model -- with the group-mean baseline and token-level normalisation. The paper's
# F_norm (1 or the group std) is 1 here (`scale: group_std` reaches the other); its
# "accurate gradient estimation" factor alpha = B/(B - M) (M = samples in zero-variance
# groups) is a per-batch rescale of the step that is NOT applied; `dynamic_sampling: true`
# removes those groups instead. eps_low/eps_high are unused (clip none).
register_preset(
    "gpg",
    baseline="group_mean",
    scale="none",
    std="sample",
    ratio="none",
    clip="none",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# ---------------------------------------------------------------- the zoo
# (docs/objective.md, "Advantage", "Importance ratio", "Surrogate and clipping")
# MaxRL (2602.02710): A_i = (r_i - mean_g) / (mean_g + adv_eps), an unbiased estimate
# of grad log pass-rate (the maximum-likelihood objective) for BINARY rewards (checked on every
# reward tensor). An all-wrong group gives exactly 0 (no division by adv_eps alone). Singleton
# groups (G = 1): the group mean is the reward itself, so A = 0 -- no signal; the run config
# refuses group_size < 2 with a group baseline. Token-level PPO clip .2/.2, token_mean, no KL.
register_preset(
    "maxrl",
    baseline="group_mean",
    scale="group_mean",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# Pass@k training (2508.10751): the analytic pass@k advantage of each group
# (baseline=passk, already normalised: scale none), k = 4; binary
# rewards. passk_k must be < group_size (k = G makes pass@k 0 or 1 for every group, A = 0).
register_preset(
    "passk",
    baseline="passk",
    scale="none",
    std="sample",
    passk_k=4,
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# SAPO (2511.20347): a soft sigmoid gate (4/tau) sigma(tau (rho - 1)) replaces the
# hard clip; tau_pos 1.0, tau_neg 1.05 (the reference implementations' values: tau_neg > tau_pos
# damps negative-advantage tokens faster). Aggregation: seq_mean_token_mean (GRPO's, the
# paper's) -- picked; verl's and TRL's SAPO losses ignore their aggregation-mode setting,
# here `agg` is honoured like for every other preset. eps_low/eps_high are unused.
register_preset(
    "sapo",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="sapo",
    eps_low=0.2,
    eps_high=0.2,
    sapo_tau_pos=1.0,
    sapo_tau_neg=1.05,
    agg="seq_mean_token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# GMPO (2507.20673): the geometric mean of the token ratios, each clipped in log
# space at (-0.4, 0.4) in the direction of the advantage, -s_i A_i per sequence. verl's and
# TRL's GMPO losses ignore their aggregation-mode setting (one term per sequence); with a ratio
# constant along the sequence, seq_mean_token_mean gives exactly (1/B) sum_i -s_i A_i, that
# per-sequence mean -- picked; `agg` is honoured if changed (token_mean weighs long responses more).
register_preset(
    "gmpo",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="geometric",
    clip="none",
    eps_low=0.4,
    eps_high=0.4,
    agg="seq_mean_token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# DPPO (2602.04879): REINFORCE with a detached, capped IS weight, -A sg(min(rho, is_cap)) logp,
# on the tokens inside a trust region of the sampled token's probability (total variation
# |pi - mu| or the binary KL), checked in the direction of the advantage. Dr.GRPO-style
# advantage (no std) and aggregation (norm_constant = max_new_tokens). verl's DPPO caps the IS
# weight at 3 by default; the paper's runs use a large cap -- is_cap 20, picked (`is_cap: 3`
# reaches verl's). Divergence bounds 0.15 (tv) and 0.05 (binary KL).
register_preset(
    "dppo_tv",
    baseline="group_mean",
    scale="none",
    std="sample",
    ratio="token",
    clip="dppo_tv",
    eps_low=0.2,
    eps_high=0.2,
    div_low=0.15,
    div_high=0.15,
    is_cap=20.0,
    agg="seq_mean_token_sum_norm",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
register_preset(
    "dppo_kl",
    baseline="group_mean",
    scale="none",
    std="sample",
    ratio="token",
    clip="dppo_kl",
    eps_low=0.2,
    eps_high=0.2,
    div_low=0.05,
    div_high=0.05,
    is_cap=20.0,
    agg="seq_mean_token_sum_norm",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# PRIME (Cui et al. 2502.01456), verl's PRIME recipe, docs/objective.md, "PRIME": an
# implicit process reward model pi_phi (a copy of the warm start, trained each step with
# BCE(sigmoid(beta sum_t log pi_phi/pi_ref), outcome) at prm_lr) gives token rewards
# beta*log(pi_phi/pi_ref), beta 0.05; RLOO of them (x5) and of the outcome (x5), returns
# whitened over the batch (scale batch_std); token-level PPO clip .2/.2, token_mean, no KL.
# verl drops the last token's process reward -- picked; the PRIME repository keeps it
# (`prime_keep_last_token: true`). The paper's PRM lr is 1e-6 at 7B (prm_lr; here 1e-4).
register_preset(
    "prime",
    baseline="prime",
    scale="batch_std",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
    prime_beta=0.05,
    prime_coef=5.0,
    outcome_coef=5.0,
    prm_lr=1e-4,
    prime_keep_last_token=False,
)
# SimKO (2510.14807), docs/objective.md, "Token statistics": GRPO (this table's grpo row, its KL included) plus,
# at the tokens above their response's 0.8 entropy quantile, a share 0.01 of a correct
# response's gradient spread over pi_old's top-3 tokens and wrong responses' argmax tokens
# pushed 1.1x harder. The reference code (verl-based) gates both branches and marks a response
# correct by reward == 1 -- here by A > 0 (the same responses except all-correct groups, A = 0);
# it clips symmetrically -- here eps_low / eps_high (0.2 / 0.2, the same).
register_preset(
    "simko",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="seq_mean_token_mean",
    kl_coef=0.04,
    kl_estimator="k3",
    kl_placement="loss",
    simko_top_k=3,
    simko_tau=0.8,
    simko_mix=0.01,
    simko_neg_scale=1.1,
)
# λ-GRPO (2510.06870), docs/objective.md, "λ-GRPO": GRPO's advantage and clip with a learned length
# weight f_i = G softmax_j(h_j^λ) per group (agg lambda_length), λ from 0 (= token_mean, DAPO's
# loss) at its own lr 1e-2, lambda_r 0.5; no KL. The paper's code was not available: the
# choices made (population std, the 1e-6 floor of h, per-group normalisation, the token-count
# denominator) are in harness/objective/lambda_grpo.py's docstring.
register_preset(
    "lambda_grpo",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="lambda_length",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
    lambda_init=0.0,
    lambda_lr=1e-2,
    lambda_r=0.5,
)
# --- surrogates and ratios of 2025-26 (docs/objective.md, "Surrogates and ratios of 2025-26", docs/zoo.md) ---
# VESPO (2602.10693; TRL 1.16 loss_type="vespo"): -sg(phi(w)) A logp with w the unnormalised
# sequence ratio prod_t rho_t and phi(w) = e^lambda w^k e^(-lambda w), (k, lambda) = (2, 3) where
# A >= 0 and (3, 2) where A < 0 (TRL 1.16's defaults); token_mean as TRL's vespo
# normaliser (tokens of the batch). No clip: eps_low / eps_high are unused.
register_preset(
    "vespo",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="sequence_product",
    clip="vespo",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
    vespo_k_pos=2.0,
    vespo_lambda_pos=3.0,
    vespo_k_neg=3.0,
    vespo_lambda_neg=2.0,
)
# LUSPO (2602.05261; TRL loss_type="luspo"): GSPO with each sequence's loss scaled by its length,
# i.e. GSPO's sequence ratio and clip under seq_mean_token_sum ((1/B) sum_i |o_i| l_i), TRL's luspo
# aggregation. The paper changes GSPO only in this length scaling, so GSPO's clip range 3e-4 / 4e-4
# is kept (an assumption, not read off the paper's tables); TRL's generic epsilon default is
# `eps_low: 0.2, eps_high: 0.2`.
register_preset(
    "luspo",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="sequence",
    clip="ppo",
    eps_low=3e-4,
    eps_high=4e-4,
    agg="seq_mean_token_sum",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# GPPO (Klear-Reasoner 2508.07629): PPO's clipped value, the gradient of a clipped token kept at
# (1 -+ eps) A grad logp (beta1 = beta2 = 1); DAPO's clip-higher 0.2 / 0.28 and token_mean, the
# recipe it is built on. The authors' code also applies dual-clip c = 3 for A < 0 -- not picked
# (the paper's equation has none); `dual_clip: 3.0` reaches it.
register_preset(
    "gppo",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="gppo",
    eps_low=0.2,
    eps_high=0.28,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
    gppo_beta1=1.0,
    gppo_beta2=1.0,
)
# CE-GPPO (2509.20712): GPPO with the clipped tokens' gradients scaled by beta1 (A < 0, below
# 1 - eps_low: the exploitation side) and beta2 (A > 0, above 1 + eps_high: exploration);
# beta1 0.75, beta2 1.0, the defaults of the authors' compute_gppo_loss_general_beta. Dual-clip
# as in gppo (`dual_clip: 3.0` reaches their code).
register_preset(
    "ce_gppo",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="gppo",
    eps_low=0.2,
    eps_high=0.28,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
    gppo_beta1=0.75,
    gppo_beta2=1.0,
)
# ---------------------------------------------------------------- entropy controls (docs/objective.md, "Entropy controls")
# Clip-Cov (2505.22617; verl 0.9.1 loss_mode clip_cov): GRPO's advantage, the PPO clip 0.2/0.2, token-mean, no
# KL, no entropy bonus, and the gradient of clip_cov_ratio 2e-4 of the tokens whose covariance of log-prob and
# advantage lies in (1, 5) detached -- verl's actor defaults, as the paper's recipe (PRIME-RL
# Entropy-Mechanism-of-RL, verl recipe/entropy) uses them. Like verl, the tokens are drawn per micro-batch.
register_preset(
    "clip_cov",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="clip_cov",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
    clip_cov_ratio=0.0002,
    clip_cov_lb=1.0,
    clip_cov_ub=5.0,
)
# KL-Cov (2505.22617; verl 0.9.1 loss_mode kl_cov): -rho A with no clip, + ppo_kl_coef |log pi - log pi_old| on
# the top kl_cov_ratio of the tokens by covariance. verl's actor defaults are kl_cov_ratio 2e-4 and ppo_kl_coef
# 0.1 (the knobs' defaults here); the paper's recipe (verl recipe/entropy 7b_kl_cov.sh) sets 2e-3 and 1 --
# picked; GRPO's advantage, token-mean, no KL to pi_ref. eps_low/eps_high are unused (kl_cov has no clip).
register_preset(
    "kl_cov",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="kl_cov",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
    kl_cov_ratio=0.002,
    ppo_kl_coef=1.0,
)
# The 80/20 rule (Wang et al. 2506.01939, "Beyond the 80/20 rule"): DAPO (this table's dapo row: clip-higher
# 0.2/0.28, token-mean, no KL, dynamic sampling, soft overlong punishment) with the policy gradient only on the
# top 20% of the tokens by entropy (TRL top_entropy_quantile 0.2). The paper takes the quantile over the whole
# batch; TRL (and here) over the tokens of one loss call (a micro-batch; one process).
register_preset(
    "top_entropy",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.28,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
    dynamic_sampling=True,
    overlong_buffer=13,
    overlong_penalty=1.0,
    mask_truncated=False,
    top_entropy_quantile=0.2,
)
# IcePop (Ring-1T, 2510.18855; docs/objective.md, "Rollout correction against the sampler"): GRPO (this table's grpo
# row, its KL included) with the two-sided token mask against the sampler: a token's loss is weighed by k = pi_old /
# pi_rollout when 0.5 <= k <= 5 and dropped otherwise (the paper's alpha 0.5, beta 5; verl's decoupled_token_icepop
# defaults).
register_preset(
    "icepop",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="seq_mean_token_mean",
    kl_coef=0.04,
    kl_estimator="k3",
    kl_placement="loss",
    rollout_is="token_mask",
    rollout_is_clip_min=0.5,
    rollout_is_clip_max=5.0,
)
# M2PO (2510.01161; docs/objective.md, "Rollout correction against the sampler"): J = (1 / sum_i |o_i|) sum_{i,t} M_it
# r_it A_it -- no clip, the token-mean aggregation, group-normalised advantages, no KL; M masks the tokens with the
# largest (log pi_theta / pi_behav)^2 until their second moment is <= tau_M2 = 0.04 (the paper's value).
register_preset(
    "m2po",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="none",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
    m2_threshold=0.04,
)
# ScaleRL (Khatri et al. 2510.13786 §4, its Eq. of J_ScaleRL): CISPO's truncated IS weight
# sg(min(rho, eps_max)) * A * log pi (no lower bound: eps_low None; eps_max unpublished per run, the
# cispo preset's cap picked: eps_high 4.0 = a cap of 5), prompt-level aggregation
# 1/sum_{g}|y_g| per prompt then a mean over prompts (agg prompt_mean), the group-mean advantage divided
# by the std of the batch's advantages (scale batch_std, batch_std_of centered: "A_std of all advantages
# in the batch"), zero-variance filtering (0 < mean(r) < 1: all-equal groups leave the batch, not
# refilled), no-positive-resampling (pass_rate(x) < 0.9: solved prompts leave the pool), no KL; the LM
# head in fp32 is a model knob the preset also sets (PRESET_RUN_KEYS). The paper's off-policy scheme,
# PipelineRL-8, is `rollout.staleness: 8` here (an axis, not part of the preset: on-policy by default).
register_preset(
    "scalerl",
    run_keys={"model.lm_head_fp32": True},
    baseline="group_mean",
    scale="batch_std",
    std="sample",
    batch_std_of="centered",
    ratio="token",
    clip="cispo",
    eps_low=None,
    eps_high=4.0,
    agg="prompt_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
    zero_variance_filter=True,
    no_positive_resampling=0.9,
)
# ReMax (Li et al. 2310.10505): REINFORCE whose baseline is the reward of the greedy response
# to the same prompt (one extra temperature-0 rollout per prompt, scored, logged, not trained on;
# verl's `remax` estimator). No std: A = r - r_greedy (verl). The paper's gradient sums the
# token log-probs of a response (seq_mean_token_sum) and is on-policy (ratio 1 under the PPO clip
# of a single pass, as the rloo row). The paper draws one response per prompt (train.group_size: 1
# reaches it); no KL here (a verifiable reward; objective.kl_coef with kl_placement: reward adds
# verl's use_kl_in_reward, taken off the sampled responses only).
register_preset(
    "remax",
    baseline="remax",
    scale="none",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="seq_mean_token_sum",
    kl_coef=0.0,
    kl_estimator="k1",
    kl_placement="reward",
)
# OPO (Hao et al. 2505.23585): the group's length-weighted mean reward as the baseline (the paper's optimal
# baseline), no std, exact on-policy (train.inner_epochs 1 and train.mini_batches 1, the defaults: one optimizer
# step per rollout batch, rho = 1), no KL, no entropy bonus: verl 0.9.1's docs/algo/opo.md configuration with
# its default loss_agg_mode token-mean.
register_preset(
    "opo",
    baseline="opo",
    scale="none",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# TOPR (Le Roux et al. 2503.14286): rows with reward > 0 take the SFT-like -A log pi, the others the ratio
# tapered to [0, 1]; ROLL's pg_variant topr with its example's group mean/std normalisation, no KL, no entropy
# bonus (examples/qwen2.5-0.5B-agentic/agent_val_frozen_lake-pg_var.yaml; its advantage_clip 0.2 and batch
# whitening are left to adv_clip_low/high and the scale knob).
register_preset(
    "topr",
    baseline="group_mean",
    scale="group_std",
    std="sample",
    ratio="token",
    clip="topr",
    eps_low=0.2,
    eps_high=0.2,
    agg="seq_mean_token_mean",
    kl_coef=0.0,
    kl_estimator="k3",
    kl_placement="loss",
)
# On-policy distillation (Thinking Machines, "On-policy distillation", 2025; GKD 2306.13649's on-policy case):
# the student samples, model.teacher scores its tokens, A_t = -(log pi_old - log pi_T) per token with coefficient
# 1 and no task reward (tinker-cookbook's on_policy_distillation recipe: kl_penalty_coef 1, kl_discount_factor
# 0); the policy loss of verl 0.9.1's distillation (use_policy_gradient, policy_loss_mode vanilla: the PPO clip
# 0.2, its default loss_agg_mode token-mean). objective.distill_task_advantage: true mixes in the verifiable
# reward's advantage (then baseline and scale apply: group_mean / group_std reach GRPO's).
register_preset(
    "opd",
    baseline="none",
    scale="none",
    std="sample",
    ratio="token",
    clip="ppo",
    eps_low=0.2,
    eps_high=0.2,
    agg="token_mean",
    kl_coef=0.0,
    kl_estimator="k1",
    kl_placement="loss",
    distill_coef=1.0,
    distill_task_advantage=False,
)
# DPO (Rafailov et al. 2305.18290), offline preference loss, beta 0.1 (TRL default);
# `dpo_loss_type: ipo` gives IPO (Azar et al. 2310.12036). The reference model enters through
# dpo_beta, not kl_coef; the policy-gradient knobs are unused by dpo_loss.
register_preset(
    "dpo",
    trainer="dpo",
    dpo_beta=0.1,
    dpo_loss_type="sigmoid",
    kl_coef=0.0,
)

BUILTIN_PRESETS: tuple[str, ...] = tuple(PRESETS)  # the package's own (docs/objective.md, "Presets")


def preset_trainer(name: str) -> str:
    """`trainer:` of preset `name` ("custom" and every RL preset: "rl")."""
    return PRESET_TRAINERS.get(name, "rl")


def preset_knobs(name: str) -> dict:
    """The knob values of preset `name` ({} for "custom"): the one check of a preset name, whose
    ValueError lists the allowed names (objective.preset in YAML, algorithm= in Python)."""
    if name == "custom":
        return {}
    if name not in PRESETS:
        raise ValueError(
            f"unknown preset {name!r} (objective.preset / algorithm); allowed: {['custom', *sorted(PRESETS)]}"
        )
    return PRESETS[name]
