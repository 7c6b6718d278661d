"""`ObjectiveConfig`: every knob of the composable objective (docs/objective.md §1-8), validated.

The field names are the YAML keys under `objective:`. Defaults equal the `grpo` preset.
`ObjectiveConfig.preset(name, **overrides)` starts from a named algorithm (presets.py);
`ObjectiveConfig(algorithm=name, ...)` does the same (unset knobs take the preset's values).

Two kinds of knob. The fields below are the knobs every algorithm reads or that select a mode
(`baseline`, `clip`, ...: a name in that kind's registry, modes.py). The knobs a mode owns
(`passk_k` of baseline passk, `sapo_tau_pos` of clip sapo, a researcher's own) are declared by
that mode and carried by every config that can select it (`cfg.passk_k` reads one like a field).

Validation at construction: `objective.plugins` is imported first (plugins.py); an unknown knob
raises naming it and listing the allowed knobs; an illegal value raises naming the knob and the
allowed values; a selected mode's rules and the knobs nothing reads are checked from the modes'
declarations (knobs.py), so the rules live with the modes.

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

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from harness.objective import knobs as knob_rules
from harness.objective import presets
from harness.objective.advantages import BASELINE, BATCH_STD_OF, SCALE, STD
from harness.objective.aggregation import AGG
from harness.objective.dpo import DPO_LOSS
from harness.objective.entropy_control import ENTROPY_AGG
from harness.objective.extensions import active_modes
from harness.objective.kl import KL_ESTIMATOR, KL_PLACEMENT
from harness.objective.modes import BUILTIN, RESERVED, KnobError, Modes, all_knobs
from harness.objective.plugins import import_plugins
from harness.objective.presets import PRESETS, preset_knobs, preset_trainer
from harness.objective.ratios import RATIO
from harness.objective.rollout_correction import ROLLOUT_IS
from harness.objective.surrogates import CLIP

NonNeg = Annotated[float, Field(ge=0)]

# Every knob that takes a named mode -> its registry (harness/objective/modes.py): the one place a
# mode name is defined; validation, dispatch and docs/objective.md's table follow it.
MODE_KNOBS: dict[str, Modes] = {
    m.knob: m for m in (BASELINE, SCALE, STD, BATCH_STD_OF, RATIO, CLIP, KL_ESTIMATOR, KL_PLACEMENT, AGG, DPO_LOSS)
}
MODE_KNOBS[ENTROPY_AGG.knob] = ENTROPY_AGG  # entropy_control.py: the entropy bonus's aggregation
MODE_KNOBS[ROLLOUT_IS.knob] = ROLLOUT_IS  # §6 the rollout correction against the sampler (rollout_correction.py)


class ObjectiveConfig(BaseModel):
    """The knobs of the one objective; a named algorithm is only a preset of them."""

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

    # §1 advantage = (reward - baseline) / scale
    baseline: str = Field(
        "group_mean",
        description="b_i: group_mean (GRPO 2402.03300), leave_one_out (RLOO 2402.14740, unbiased), "
        "batch_mean, none (REINFORCE), critic (PPO: value head + GAE 1506.02438, per-token), passk (the Pass@k "
        "advantage, 2508.10751; binary rewards, scale none), prime (PRIME 2502.01456), remax (the greedy response's "
        "reward, ReMax 2310.10505), or a registered one",
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

    # §2-3 ratio, surrogate, clipping
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

    # §4 KL to the reference
    kl_coef: NonNeg = Field(0.04, description="KL weight beta; 0 loads no reference model (GRPO 0.04, PPO 0.05)")
    kl_estimator: str = Field(
        "k3",
        description="KL estimator (Schulman 'Approximating KL'): k1 log-ratio, k2 half squared, k3 unbiased >= 0 (GRPO)",
    )
    kl_placement: str = Field(
        "loss", description="loss: kl_coef*k added to the token loss (GRPO); reward: kl_coef*k1 off the reward (PPO)"
    )
    ref_update_every: int = Field(
        0, ge=0, description="reset pi_ref <- pi_theta every N steps (iterative GRPO, 2402.03300 §4.2); 0 = never"
    )

    # §5 aggregation (length normalisation)
    agg: str = Field(
        "seq_mean_token_mean",
        description="seq_mean_token_mean (GRPO/GSPO; 1/|o_i| = length bias), token_mean (DAPO), "
        "seq_mean_token_sum_norm (Dr.GRPO, /norm_constant), seq_mean_token_sum (RLOO), lambda_length (λ-GRPO "
        "2510.06870: learned length weights), prompt_mean (ScaleRL 2510.13786: each prompt's tokens share one "
        "mean, every prompt weighs the same)",
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
    zero_variance_filter: bool = Field(
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
    routing_replay: bool = Field(
        False, description="MoE: replay the rollout's expert choice in the training forward (R3, 2510.11370)"
    )

    # §8 DPO
    dpo_beta: float = Field(0.1, gt=0, description="DPO beta (2305.18290) / IPO tau (2310.12036)")
    dpo_loss_type: str = Field(
        "sigmoid", description="sigmoid: -log sigma(z) (DPO); ipo: (z/beta - 1/(2 beta))^2 (IPO, no overfitting)"
    )
    dpo_sft_coef: NonNeg = Field(
        0.0,
        description="RPO (Pang et al. 2404.19733): + alpha * NLL of the chosen response per token; "
        "counters likelihood displacement; 0 = plain DPO/IPO",
    )

    # ------------------------------------------------------------------ construction
    @model_validator(mode="before")
    @classmethod
    def _resolve(cls, data: Any) -> Any:
        """Import the plugins; fill unset knobs from `algorithm`'s preset (the one check of its name);
        reject unknown knobs; validate and fill the knobs the modes declare."""
        if not isinstance(data, dict):
            return data
        plugins = import_plugins(data.get("plugins"))
        data = {**preset_knobs(data.get("algorithm", "custom")), **data}
        selected = cls._selected_origins(data)
        specs = knob_rules.knob_specs(plugins, selected)
        cls._refuse_unknown(data, specs)
        out = {k: v for k, v in data.items() if k not in specs}
        out["plugins"] = tuple(dict.fromkeys([*plugins, *(o for o in selected if o != "__main__")]))
        for name, knob in specs.items():
            out[name] = knob.validate(data[name]) if name in data else knob.default
        return out

    @classmethod
    def _selected_origins(cls, data: dict) -> list[str]:
        """The origins (modules) of the plugin modes `data` selects."""
        out = []
        for kind, reg in MODE_KNOBS.items():
            mode = reg.modes.get(data.get(kind, cls.model_fields[kind].default))
            if mode is not None and mode.origin != BUILTIN:
                out.append(mode.origin)
        return out

    @classmethod
    def _refuse_unknown(cls, data: dict, specs: dict) -> None:
        allowed = sorted([*cls.model_fields, *specs])
        unknown = sorted(str(k) for k in data if k not in cls.model_fields and k not in specs)
        if not unknown:
            return
        elsewhere = {k: sorted({m.origin for _, _, m in all_knobs()[k][1]}) for k in unknown if k in all_knobs()}
        hints = {k: difflib.get_close_matches(k, allowed, n=1) for k in unknown if k not in elsewhere}
        hint = "; ".join(
            [f"did you mean {v[0]!r} for {k!r}?" for k, v in hints.items() if v]
            + [f"{k!r} is declared by plugin {o}: add it to objective.plugins" for k, o in elsewhere.items()]
        )
        raise ValueError(
            f"unknown objective knob(s) {unknown}{' (' + hint + ')' if hint else ''}; allowed knobs: {allowed}"
        )

    @field_validator(*MODE_KNOBS)
    @classmethod
    def _registered_mode(cls, value: str, info: ValidationInfo) -> str:
        """A mode knob names a registered mode (a plugin's too): else its registry's message."""
        return MODE_KNOBS[info.field_name].check(value)

    @model_validator(mode="after")
    def _rules(self) -> ObjectiveConfig:
        """The selected modes' rules, then the strict knobs (dual_clip) set while their mode is not
        selected (knobs.py, from the declarations). The run config refuses every other unread knob."""
        problems = knob_rules.combination_problems(self)
        strict = [n for n, (knob, _) in all_knobs().items() if knob.strict and n in (self.model_extra or {})]
        problems += knob_rules.unread_problems(self, self.preset_value, strict)
        if problems:
            raise ValueError(problems[0])
        return self

    @model_serializer(mode="wrap")
    def _without_empty_plugins(self, handler) -> dict:
        """The dump (config.yaml, MLflow params) names `plugins` only when there are some, so a run
        directory recorded before the key existed still holds the same config."""
        out = handler(self)
        if not out.get("plugins"):
            out.pop("plugins", None)
        return out

    # ------------------------------------------------------------------ the knobs
    def knob_names(self) -> list[str]:
        """Every knob of this config: the fields, then the knobs its modes declare."""
        return [*type(self).model_fields, *(self.model_extra or {})]

    def preset_value(self, name: str) -> Any:
        """The value knob `name` takes when it is not set: the preset's, else its default."""
        return knob_default(name, self.algorithm)

    @classmethod
    def check_knob_values(cls, knobs: dict, where: str) -> None:
        """Each key a knob and each value allowed (a preset's knobs); ValueError naming `where` and the knob."""
        declared = {k: kn for k, (kn, _) in all_knobs().items()}
        for k, v in knobs.items():
            try:
                if k in declared:
                    declared[k].validate(v)
                elif k in MODE_KNOBS:
                    MODE_KNOBS[k].check(v)
                elif k in cls.model_fields and k not in ("algorithm", "plugins"):
                    f = cls.model_fields[k]
                    annotation = Annotated[f.annotation, *f.metadata] if f.metadata else f.annotation
                    TypeAdapter(annotation).validate_python(v)
                else:
                    raise ValueError(f"{k!r} is not a knob")
            except (ValueError, KnobError) as err:
                raise ValueError(f"{where}: {' '.join(str(err).split())}") from None

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ObjectiveConfig:
        """The knobs of preset `name` with `overrides` applied one by one."""
        if "algorithm" in overrides:
            raise ValueError("algorithm is set by the preset name; pass the knobs to override instead")
        return cls(algorithm=name, **overrides)

    @property
    def needs_reference(self) -> bool:
        """Whether a frozen reference policy enters the objective: kl_coef > 0, a preference loss
        (a preset run by the pairs trainer, presets.PRESET_TRAINERS: its loss is relative to pi_ref),
        or a mode whose hooks read it (PRIME's implicit rewards log pi_phi - log pi_ref, §13)."""
        return preset_trainer(self.algorithm) == "dpo" or any(
            m.hooks is not None and m.hooks.reference for _, _, m in active_modes(self)
        )


RESERVED.update(ObjectiveConfig.model_fields)


def knob_default(name: str, algorithm: str = "custom") -> Any:
    """The value of knob `name` when nothing sets it: preset `algorithm`'s, else its declared default."""
    preset = PRESETS.get(algorithm, {})
    if name in preset:
        return preset[name]
    if name in ObjectiveConfig.model_fields:
        return ObjectiveConfig.model_fields[name].get_default(call_default_factory=True)
    return all_knobs()[name][0].default


__all__ = ["ObjectiveConfig", "MODE_KNOBS", "knob_default", "register_preset"]


def register_preset(name: str, *, trainer: str = "rl", **knobs) -> None:
    """Add a named algorithm: knob values over the defaults (a researcher's module, docs/extending.md).
    Every key must be a knob and every value allowed (checked now: the module fails to import otherwise)."""
    if not name.isidentifier() or name == "custom":
        raise ValueError(f"preset name {name!r} must be an identifier other than 'custom'")
    if name in presets.BUILTIN_PRESETS:
        raise ValueError(f"preset {name!r} is built in; pick another name")
    if trainer not in ("rl", "dpo"):
        raise ValueError(f"preset {name!r}: trainer={trainer!r}; allowed: ['rl', 'dpo']")
    ObjectiveConfig.check_knob_values(knobs, f"preset {name!r}")
    presets.PRESETS[name] = dict(knobs)
    if trainer != "rl":
        presets.PRESET_TRAINERS[name] = trainer
