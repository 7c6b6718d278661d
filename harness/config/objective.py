"""The glue between the run config and the objective (harness/objective/): `objective: {preset, knobs}`
built into an ObjectiveConfig with the run keys its preset sets, the trainer its preset runs under, what
the selected modes need of the run (from their declarations: group size, clip distances, each mode's own
`run_rule`), and the ignored-knob rule (a knob set away from its default that nothing selected reads).
The rules that depend on a mode are not written here by its name: the mode declares them
(harness/objective/modes.py `Mode.run_rule`; ratio none's in objective/ratios.py) and `mode_warnings`
calls those of every selected mode."""

from __future__ import annotations

from typing import Any

from harness.config.base import bool_as_number, show
from harness.config.dpo import dpo_ignores, rl_ignores_dpo
from harness.config.rollout import RolloutSection, overlong_problem
from harness.config.task import check_reward_combine
from harness.config.warm_start import pretrained_problem
from harness.objective import PRESETS, ObjectiveConfig, knob_rules
from harness.objective.config import knob_default
from harness.objective.extensions import active_modes
from harness.objective.plugins import import_plugins
from harness.objective.presets import PRESET_RUN_KEYS, preset_trainer

TRAINERS = ("rl", "dpo")  # harness/train/run/shell.py make_trainer


def with_preset_run_keys(data: dict, preset: str) -> dict:
    """`data` with the run keys outside the objective that `preset` sets (presets.PRESET_RUN_KEYS), each where
    the config does not name it."""
    out = dict(data)
    for key, value in PRESET_RUN_KEYS.get(preset, {}).items():
        section, name = key.split(".", 1)
        part = dict(out.get(section) or {})
        part.setdefault(name, value)
        out[section] = part
    return out


def build_objective(data: Any) -> Any:
    """`objective: {preset: NAME, knob: value}` -> ObjectiveConfig.preset(NAME, knob=value);
    the Dr.GRPO constant defaults to rollout.max_new_tokens."""
    if not isinstance(data, dict) or not isinstance(data.get("objective", {}), dict):
        return data
    obj = dict(data.get("objective") or {})
    import_plugins(obj.get("plugins"))  # their presets, modes and knobs exist from here on
    for k, v in obj.items():
        fld = ObjectiveConfig.model_fields.get(k)
        if fld is not None and bool_as_number(fld.annotation, v):
            raise ValueError(f"objective.{k}={v!r}: a boolean where a number is expected; write a number")
    preset = obj.pop("preset", None)
    if preset is not None:
        obj["algorithm"] = preset  # ObjectiveConfig checks the name (presets.preset_knobs)
    max_new = (data.get("rollout") or {}).get("max_new_tokens", RolloutSection().max_new_tokens)
    agg = obj.get("agg", PRESETS.get(obj.get("algorithm"), {}).get("agg", knob_default("agg")))
    if agg == "seq_mean_token_sum_norm" and obj.get("norm_constant") is None:
        obj["norm_constant"] = float(max_new)  # Dr.GRPO's constant: the max generation length
    data = with_preset_run_keys(data, obj.get("algorithm", "custom"))  # e.g. scalerl: model.lm_head_fp32
    if "trainer" not in data:  # the preset sets it
        return {**data, "objective": obj, "trainer": preset_trainer(obj.get("algorithm", "custom"))}
    return {**data, "objective": obj}


def check_trainer(run: Any) -> None:
    """The trainer key agrees with the preset (which sets it when the config does not name it)."""
    o = run.objective
    want = preset_trainer(o.algorithm)
    if run.trainer != want:
        raise ValueError(
            f"trainer={run.trainer!r} cannot run objective.preset={o.algorithm!r}, which runs under "
            f"trainer={want!r}; allowed trainer values: {list(TRAINERS)} (drop the key: the preset "
            "sets it)"
        )


def check_objective_run(run: Any) -> None:
    """What the selected modes need of the run (from their declarations, objective/knob_rules.py):
    train.group_size (a group statistic needs 2; pass@k needs k < G), and a clip distance
    eps_low / eps_high of 0 read by a clipping mode."""
    o = run.objective
    problems = knob_rules.group_size_problems(o, run.train.group_size)
    if problems:
        raise ValueError(problems[0])
    check_reward_combine(run)
    for k in ("eps_low", "eps_high"):
        v = getattr(o, k)
        if v is not None and v == 0 and knob_rules.reads(o, k):
            raise ValueError(
                f"objective.{k}={v}: a clip distance of 0 pins the ratio's bound at 1, so every "
                "token whose ratio moves past it gets no gradient; allowed: a value > 0"
                f"{' (or null: no lower bound)' if k == 'eps_low' else ''}, or objective.clip=none"
            )


def check_overlong_buffer(run: Any) -> None:
    """objective.overlong_buffer leaves room below rollout.max_new_tokens."""
    o = run.objective
    if o.overlong_buffer and o.overlong_buffer >= run.rollout.max_new_tokens:
        raise ValueError(
            f"objective.overlong_buffer={o.overlong_buffer} must be < rollout.max_new_tokens={run.rollout.max_new_tokens}"
        )


def ignored_knobs(run: Any) -> tuple[list[str], list[str]]:
    """(errors, warnings): knobs set away from their default (objective knobs: from the preset's
    value) that the chosen trainer or objective would not read: the objective's knobs and the run
    keys (train.*) its modes read, from the modes' declarations (harness/objective/knob_rules.py)."""
    o = run.objective
    if run.trainer == "dpo":
        return dpo_ignores(run)
    errors = knob_rules.unread_problems(o, o.preset_value, o.knob_names())
    if dpo := rl_ignores_dpo(run):
        errors.append(dpo)
    for key in knob_rules.run_key_readers():
        section, name = key.split(".", 1)
        value = getattr(getattr(run, section), name)
        if not run.at_default(key, value):
            if msg := knob_rules.unread_message(o, key, show(value) if isinstance(value, tuple) else value):
                errors.append(msg)
    errors += [p for p in (pretrained_problem(run), overlong_problem(run)) if p]
    return errors, []


def mode_warnings(run: Any) -> list[str]:
    """What the selected modes' own rules say of the run (`Mode.run_rule`: a list of warnings; a rule that
    refuses the run raises ValueError with its message), in registry order."""
    out: list[str] = []
    for _, _, mode in active_modes(run.objective):
        if mode.run_rule is not None:
            out += mode.run_rule(run)
    return out
