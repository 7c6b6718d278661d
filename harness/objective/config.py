"""`ObjectiveConfig`: every knob of the composable objective (docs/objective.md, "Advantage" to "DPO"), validated.

The field names are the YAML keys under `objective:`. Defaults equal the `grpo` preset.
`ObjectiveConfig.preset(name, **overrides)` starts from a named algorithm (presets.py);
`ObjectiveConfig(algorithm=name, ...)` does the same (unset knobs take the preset's values).

Two kinds of knob. The fields (config_fields.py, one class per section of docs/objective.md; this class adds
the validation and the presets to them) are the knobs every algorithm reads or that select a mode
(`baseline`, `clip`, ...: a name in that kind's registry, modes.py). The knobs a mode owns
(`passk_k` of baseline passk, `sapo_tau_pos` of clip sapo, a researcher's own) are declared by
that mode and carried by every config that can select it (`cfg.passk_k` reads one like a field).

Validation at construction: `objective.plugins` is imported first (plugins.py); an unknown knob
raises naming it and listing the allowed knobs; an illegal value raises naming the knob and the
allowed values; a selected mode's rules and the knobs nothing reads are checked from the modes'
declarations (knob_rules.py), so the rules live with the modes.

Papers: GRPO 2402.03300, Dr.GRPO 2503.20783, DAPO 2503.14476, GSPO 2507.18071,
CISPO/MiniMax-M1 2506.13585, RLOO 2402.14740, REINFORCE++ 2501.03262, Lite PPO 2508.08221,
GPG 2504.02546, PPO 1707.06347, GAE 1506.02438, dual-clip PPO 1912.09729, DPO 2305.18290,
IPO 2310.12036, k1/k2/k3: Schulman, "Approximating KL Divergence" (2020 blog); the zoo of
docs/objective.md ("Advantage", "Importance ratio", "Surrogate and clipping"): MaxRL 2602.02710, Pass@k training
2508.10751, SAPO 2511.20347, GMPO 2507.20673, DPPO 2602.04879; the modes that need more from the trainer
("The trainer's calls"): PRIME 2502.01456, λ-GRPO 2510.06870, SimKO 2510.14807.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import ValidationInfo, field_validator, model_serializer, model_validator

from harness.objective import knob_rules
from harness.objective.config_fields import ObjectiveKnobs
from harness.objective.extensions import active_modes
from harness.objective.mode_registries import MODE_KNOBS
from harness.objective.modes import BUILTIN, RESERVED, all_knobs
from harness.objective.plugins import import_plugins
from harness.objective.presets import PRESETS, preset_knobs, preset_trainer, register_preset


def _loss_mix_problems(cfg: ObjectiveKnobs) -> list[str]:
    """dpo_loss_weights: its keys registered loss types, dpo_loss_type one of them (one line each)."""
    weights = cfg.dpo_loss_weights
    if weights is None:
        return []
    names = MODE_KNOBS["dpo_loss_type"].names
    unknown = [k for k in weights if k not in names]
    if unknown or not weights:
        return [f"dpo_loss_weights={weights!r}: unknown loss type(s) {unknown}; allowed keys: {list(names)}"]
    if cfg.dpo_loss_type not in weights:
        return [
            f"dpo_loss_type={cfg.dpo_loss_type!r} is not a key of dpo_loss_weights={weights!r}: the mix names "
            "every loss type it adds; allowed dpo_loss_type with dpo_loss_weights: one of its keys"
        ]
    return []


class ObjectiveConfig(ObjectiveKnobs):
    """The knobs of the one objective (config_fields.py); a named algorithm is only a preset of them."""

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
        selected (knob_rules.py, from the declarations). The run config refuses every other unread knob."""
        problems = _loss_mix_problems(self) + knob_rules.combination_problems(self)
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
    def preset(cls, name: str, **overrides: Any) -> ObjectiveConfig:
        """The knobs of preset `name` with `overrides` applied one by one."""
        if "algorithm" in overrides:
            raise ValueError("algorithm is set by the preset name; pass the knobs to override instead")
        return cls(algorithm=name, **overrides)

    @property
    def needs_reference(self) -> bool:
        """Whether a frozen reference policy enters the objective: kl_coef > 0, a preference loss
        (a preset run by the pairs trainer, presets.PRESET_TRAINERS: its loss is relative to pi_ref),
        or a mode whose hooks read it (PRIME's implicit rewards log pi_phi - log pi_ref, docs/objective.md, "PRIME")."""
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
