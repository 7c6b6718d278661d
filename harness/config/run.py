"""RunConfig: the sections of a run (one module each beside this one) and the order its rules run in.

Each rule lives in the module of the section it constrains (model.py, task.py, dataset.py, rollout.py,
train.py, scale.py, eval.py, dpo.py, warm_start.py) or, where it is about the objective's modes, in
objective.py and in the modes' own declarations; `_combinations` only calls them, in the order their
messages have always been checked (the first problem found is the one reported). RunConfig itself
keeps what is the whole run's: the `auto` levers resolved for the device and the config written back."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from harness import device_defaults
from harness.config.base import ConfigWarning, _Section, field_default
from harness.config.dataset import check_dataset
from harness.config.dpo import DpoSection
from harness.config.eval import EvalSection, check_eval
from harness.config.model import ModelSection, check_critic_init, check_model, check_moe
from harness.config.objective import (
    build_objective,
    check_objective_run,
    check_overlong_buffer,
    check_trainer,
    ignored_knobs,
    mode_warnings,
)
from harness.config.rollout import RolloutSection, check_staleness, rollout_logp_inexact
from harness.config.scale import check_scale
from harness.config.task import TaskSection, check_generated_task, check_task_name
from harness.config.teacher import check_teacher
from harness.config.tracking import TrackingSection
from harness.config.train import TrainSection, check_batch_shape, check_old_logp, check_warmup
from harness.config.turns import check_multi_turn
from harness.config.warm_start import WarmStartSection, uses_warm_start
from harness.models import MODEL_NAMES
from harness.models.hub import hub_id_problem, hub_snapshot, looks_like_hub_id
from harness.objective import ObjectiveConfig

# the validation context's key (load.py build_config): the reward model folders written before the run starts
TO_BUILD = "reward_models_to_build"


class RunConfig(_Section):
    seed: int = Field(0, description="seed of the run: its prompts, samples, mini-batch order and weight init")
    trainer: Literal["rl", "dpo"] = Field(
        "rl",
        description="rl: the RL loop (rollouts, advantages, policy loss); dpo: the preference-pair trainer. "
        "Set by objective.preset (dpo -> dpo, every other preset -> rl); naming it is optional",
    )
    model: ModelSection = Field(default_factory=ModelSection)
    task: TaskSection = Field(default_factory=TaskSection)
    warm_start: WarmStartSection = Field(default_factory=WarmStartSection)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    train: TrainSection = Field(default_factory=TrainSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    tracking: TrackingSection = Field(default_factory=TrackingSection)
    objective: ObjectiveConfig = Field(default_factory=lambda: ObjectiveConfig.preset("grpo"))
    dpo: DpoSection = Field(default_factory=DpoSection)
    # the levers left `auto` -> what they became on `_device` (harness/device_defaults.py; _resolve_auto)
    _auto: dict[str, Any] = PrivateAttr(default_factory=dict)
    _device: str = PrivateAttr("cpu")

    @model_validator(mode="before")
    @classmethod
    def _build_objective(cls, data: Any) -> Any:
        """`objective: {preset: NAME, knob: value}` -> ObjectiveConfig.preset(NAME, knob=value) (objective.py)."""
        return build_objective(data)

    @model_validator(mode="after")
    def _combinations(self, info: ValidationInfo) -> RunConfig:
        """Every rule of the run, each from the module of what it constrains, in the order they are checked.
        The validation context's TO_BUILD: reward model folders not checked while absent (dataset.py)."""
        self._resolve_auto(device_defaults.run_device())
        check_trainer(self)
        if self.trainer == "rl":  # the DPO trainer reads no group, clip or batch-shape knob
            check_objective_run(self)
            check_warmup(self)
        check_batch_shape(self)
        check_old_logp(self)
        check_overlong_buffer(self)
        check_task_name(self)
        if self.task.name == "dataset":
            check_dataset(self, frozenset((info.context or {}).get(TO_BUILD, ())))
        else:
            check_generated_task(self)
        checks = (check_model, check_critic_init, check_scale, check_moe, check_eval, check_staleness, check_multi_turn)
        for check in checks:
            check(self)
        check_teacher(self)  # model.teacher: on-policy distillation's teacher
        errors, notes = ignored_knobs(self)
        if errors:
            raise ValueError("; ".join(errors))
        for note in mode_warnings(self) + notes:
            warnings.warn(note, ConfigWarning, stacklevel=2)
        return self

    def _resolve_auto(self, device: str) -> None:
        """Every lever left `auto` (harness/device_defaults.py) set to its value on `device`, before any check
        reads it; the levers and what they became are kept (auto_levers) and written back as `auto` by
        to_dict(keep_auto=True). A lever already resolved (a copy of a resolved config) is not again."""
        sections = {"model": self.model, "train": self.train, "rollout": self.rollout}
        resolved = device_defaults.resolve(self._lever_values(), device)
        for key, value in resolved.items():
            section, name = key.split(".", 1)
            setattr(sections[section], name, value)
        self._auto, self._device = {**self._auto, **resolved}, device if resolved else self._device

    def __eq__(self, other: object) -> bool:
        """Equal when every knob is: a lever left auto equals its resolved value named explicitly (a run's
        config.yaml loaded again), whatever the private record of which levers were auto."""
        return isinstance(other, RunConfig) and self.__dict__ == other.__dict__

    __hash__ = None  # mutable, as pydantic's models

    def _lever_values(self) -> dict[str, Any]:
        """The dotted keys of the model, train and rollout sections -> their values (what a lever's auto reads)."""
        sections = {"model": self.model, "train": self.train, "rollout": self.rollout}
        values = {f"{n}.{k}": getattr(sec, k) for n, sec in sections.items() for k in type(sec).model_fields}
        values["model.lora"] = self.model.lora
        return values

    def at_default(self, key: str, value: Any) -> bool:
        """Whether `value` of the dotted `key` is its default: the field's, or, for a lever whose default is auto,
        what auto becomes on this device (a resolved config loaded again names it explicitly)."""
        section, name = key.split(".", 1)
        default = field_default(type(getattr(self, section)), name)
        if value == default or key in self._auto:
            return True
        if default != device_defaults.AUTO:
            return False
        values = {**self._lever_values(), key: device_defaults.AUTO}
        return device_defaults.resolve(values, device_defaults.run_device()).get(key) == value

    @property
    def auto_levers(self) -> dict[str, Any]:
        """{dotted key: value} of the levers this config left `auto`, as resolved for `auto_device`."""
        return dict(self._auto)

    @property
    def auto_device(self) -> str:
        return self._device

    def uses_warm_start(self) -> bool:
        """Whether the run starts from an SFT warm start (warm_start.py)."""
        return uses_warm_start(self)

    def rollout_logp_inexact(self) -> str | None:
        """Why the sampler's log-probs may differ from the policy's own (rollout.py); None: they are the same."""
        return rollout_logp_inexact(self)

    def reuses_rollout_logp(self) -> bool:
        """Whether the loop takes pi_old's log-probs from the sampler (train.old_logp)."""
        mode = self.train.old_logp
        return mode in ("rollout", "bypass") or (mode == "auto" and self.rollout_logp_inexact() is None)

    @field_validator("model")
    @classmethod
    def _model_name(cls, m: ModelSection) -> ModelSection:
        if m.name in MODEL_NAMES or Path(m.name).is_dir():
            if m.revision != "main":
                raise ValueError(
                    f"model.revision={m.revision!r} picks a commit of a Hugging Face Hub repo, and model.name="
                    f"{m.name!r} is not a Hub id (org/name); drop it"
                )
            return m
        problem = hub_id_problem(m.name)
        if problem:
            raise ValueError(f"model.name={m.name!r} {problem}")
        if looks_like_hub_id(m.name):
            hub_snapshot(m.name, m.revision, "model.name")  # one line when it is not to be had
            return m
        raise ValueError(
            f"model.name={m.name!r} is neither one of {list(MODEL_NAMES)} nor an existing folder nor a Hugging "
            "Face Hub id (org/name)"
        )

    def to_dict(self, keep_auto: bool = False) -> dict:
        """The resolved config (every knob explicit, the `auto` levers as resolved for this device: what a run
        computes with), loadable again by load_config. keep_auto: the levers left `auto` written as `auto`, for a
        config that runs elsewhere (a study's cell, resolved again on the device that runs it)."""
        data = self.model_dump(mode="json")
        if keep_auto:
            for key in self._auto:
                section, name = key.split(".", 1)
                data[section][name] = device_defaults.AUTO
        return data
