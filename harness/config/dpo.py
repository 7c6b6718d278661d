"""Section `dpo` (the offline preference trainer, objective.preset=dpo) and its side of the ignored-knob
rule: what the DPO trainer does not read (RL objective knobs: errors; the RL loop's train knobs: a
warning), and a changed dpo section under an RL preset."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from harness.config.base import _Section, field_default, show
from harness.config.train import RL_TRAIN_KNOBS
from harness.objective import knob_rules
from harness.tasks.dataset.read import not_a_file


class DpoSection(_Section):
    """Offline preference training, used only with objective.preset=dpo (harness/train/dpo/step.py).
    The optimizer settings come from `train` (lr, betas, weight_decay, grad_clip,
    checkpoint_every, threads); train.steps, prompts_per_step and group_size are unused."""

    pairs: str = Field(
        "generate",
        min_length=1,
        description="'generate': sample the warm-started policy on train-split "
        "prompts, correct answer = chosen, wrong = rejected, once (saved to DIR/pairs.jsonl); or the path "
        "of a JSONL file with one {prompt, chosen, rejected, difficulty} object per line",
    )
    num_prompts: int = Field(
        128,
        ge=1,
        description="pairs=generate: train-split prompts to sample (those with no correct "
        "or no wrong answer give no pair)",
    )
    samples_per_prompt: int = Field(
        8, ge=2, description="pairs=generate: samples per prompt, to find one correct and one wrong answer"
    )
    batch_size: int = Field(16, ge=1, description="preference pairs per optimizer step")
    epochs: int = Field(
        2, ge=1, description="passes over the pairs, reshuffled each epoch; steps = epochs * ceil(pairs / batch_size)"
    )
    max_steps: int | None = Field(
        None, ge=1, description="stop after this many optimizer steps in all (None = all epochs of all rounds)"
    )
    pairs_per_prompt: int = Field(
        1,
        ge=1,
        description="pairs=generate: up to this many (correct, wrong) pairs per "
        "prompt, each sample used once (<= samples_per_prompt // 2)",
    )
    rounds: int = Field(
        1,
        ge=1,
        description="iterative DPO/RPO (2404.19733): round r rebuilds the pairs from the "
        "policy at its start on fresh prompts, with that policy as the reference; pairs=generate only",
    )

    @field_validator("pairs")
    @classmethod
    def _pairs_a_file(cls, value: str) -> str:
        """A pairs file is stat-ed, never opened here: opening a named pipe would wait for a writer."""
        if value != "generate" and (what := not_a_file(value)) is not None:
            raise ValueError(f"{what}, not a regular file; allowed: 'generate' or a JSONL file of pairs")
        return value

    @model_validator(mode="after")
    def _pairs_knobs(self) -> DpoSection:
        if self.pairs_per_prompt > self.samples_per_prompt // 2:
            raise ValueError(
                f"dpo.pairs_per_prompt={self.pairs_per_prompt} cannot exceed dpo.samples_per_prompt // 2 "
                f"= {self.samples_per_prompt // 2} (a pair uses one correct and one wrong sample)"
            )
        if self.rounds > 1 and self.pairs != "generate":
            raise ValueError(
                f"dpo.rounds={self.rounds} needs dpo.pairs=generate (each round samples new pairs from "
                f"the current policy); a pairs file ({self.pairs!r}) allows rounds=1 only"
            )
        return self


DPO_OBJECTIVE_KNOBS = (
    "dpo_beta",
    "dpo_loss_type",
    "dpo_sft_coef",
    "dpo_shift_lambda",
    "dpo_ipo_length_norm",
    "dpo_label_smoothing",
    "dpo_discopop_tau",
    "dpo_loss_weights",
)


def dpo_ignores(run: Any) -> tuple[list[str], list[str]]:
    """The DPO trainer reads only the dpo_* objective knobs and train's optimizer knobs."""
    o, t = run.objective, run.train
    errors, notes = [], []
    bad = [
        f"objective.{k}={getattr(o, k)!r}"
        for k in o.knob_names()
        if k not in DPO_OBJECTIVE_KNOBS + ("algorithm", "plugins") and getattr(o, k) != o.preset_value(k)
    ]
    if bad:
        errors.append(
            f"objective.preset=dpo (the offline DPO trainer) ignores {', '.join(bad)}: its loss reads only "
            f"{', '.join('objective.' + k for k in DPO_OBJECTIVE_KNOBS)} (the reference enters through "
            "dpo_beta, not kl_coef); remove them or use an RL preset"
        )
    for k in DPO_OBJECTIVE_KNOBS:  # a DPO knob its loss type does not read (dpo_shift_lambda with ipo)
        if getattr(o, k) != o.preset_value(k) and (
            msg := knob_rules.unread_message(o, f"objective.{k}", getattr(o, k))
        ):
            errors.append(msg)
    unused = [
        f"train.{k}={show(getattr(t, k))}" for k in RL_TRAIN_KNOBS if not run.at_default(f"train.{k}", getattr(t, k))
    ]
    if unused:
        notes.append(
            f"the DPO trainer (objective.preset=dpo) ignores {', '.join(unused)} (RL-loop knobs; its "
            "length is set by dpo.epochs, dpo.rounds and dpo.max_steps)"
        )
    return errors, notes


def rl_ignores_dpo(run: Any) -> str | None:
    """A changed dpo section or dpo_* knob under an RL preset: the RL loop ignores them."""
    o = run.objective
    dpo = [
        f"dpo.{k}={show(getattr(run.dpo, k))}"
        for k in DpoSection.model_fields
        if getattr(run.dpo, k) != field_default(DpoSection, k)
    ]
    dpo += [f"objective.{k}={getattr(o, k)!r}" for k in DPO_OBJECTIVE_KNOBS if getattr(o, k) != o.preset_value(k)]
    if not dpo:
        return None
    return (
        f"{', '.join(dpo)} only apply with objective.preset=dpo (the offline DPO trainer); "
        f"objective.preset={o.algorithm} runs the RL loop, which ignores them: remove them"
    )
