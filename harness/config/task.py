"""Section `task` (and `task.rewards[i]`) and the rules of a generated task: the keys of a dataset task
unset, the difficulty mix and options accepted by the task's constructor; the reward combination's
needs of the group (a rule of `task.reward_combine`, so it lives here). A dataset task's checks: dataset.py."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from harness.config.base import _Section, field_default
from harness.config.data import DataSection
from harness.objective import inputs_needed
from harness.tasks import TASK_NAMES, make_task


class RewardSection(_Section):
    """task.rewards[i]: one reward, a built-in verifier or a function; the total is the weighted sum.
    A string is short for one: 'gsm8k' = {verifier: gsm8k}, 'my_rewards:fn' = {function: my_rewards:fn}."""

    verifier: Literal["math", "gsm8k", "number", "exact", "regex", "choice"] | None = Field(
        None,
        description="a built-in verifier: reward 1 if the completion's final answer equals the reference, else 0 "
        "(harness/tasks/rewards/verifiers.py)",
    )
    function: str | None = Field(
        None,
        description="module.path:function taking (prompt, completion, answer, row) -> "
        "float or {reward, correct} (TRL: reward_funcs; verl: custom_reward_function.path/name)",
    )
    name: str | None = Field(
        None, description="logged as reward/<name>; default: the verifier's or the function's name"
    )
    weight: float = Field(1.0, description="weight in the total reward (TRL: reward_weights)")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="verifier options: regex {pattern, group, ignore_case}, choice {choices}, exact {case_sensitive}",
    )
    model: str | None = Field(
        None,
        description="a reward model: a local Hugging Face sequence-classification folder (num_labels 1, with its "
        "tokenizer), scoring the prompt's chat and the completion re-rendered with its own chat template; its "
        "score is the reward (TRL: a model in reward_funcs; verl: reward_model.model.path)",
    )
    micro_batch_size: int | None = Field(
        None, ge=1, description="a reward model's rows per forward (null: 8); a score does not depend on it"
    )
    normalize: Literal["none", "batch", "running"] = Field(
        "none",
        description="this reward's values before the weighted sum: none; batch: whitened over the training batch "
        "(x - mean) / std; running: by the mean and std of every training batch so far (kept in the checkpoint)",
    )

    def identity(self) -> dict:
        """The entry as cache keys read it: the reward-model keys left out where they are at their defaults
        (so a verifier's or a function's key does not change when the reward-model keys are unused)."""
        out = self.model_dump(mode="json")
        for key in ("model", "micro_batch_size", "normalize"):
            if out[key] == field_default(RewardSection, key):
                del out[key]
        return out

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"function": data} if ":" in data else {"verifier": data}
        return data


class TaskSection(_Section):
    name: str = Field(
        "arithmetic",
        description="arithmetic | countdown (generated, harness.tasks.TASKS) | dataset (the rows of task.data)",
    )
    difficulty_mix: dict[str, float] | None = Field(
        None, description="weight per difficulty bucket, e.g. {easy: 1, hard: 1}"
    )
    options: dict[str, Any] = Field(default_factory=dict, description="other constructor arguments of the task")
    data: DataSection | None = Field(None, description="task.name=dataset: the data files and which fields to read")
    rewards: list[RewardSection] = Field(
        default_factory=list,
        description="task.name=dataset: verifiers and reward "
        "functions, each logged as reward/<name>; the total is their weighted sum",
    )
    correct: str | None = Field(
        None,
        description="the reward (by name) whose verdict is 'correct' for pass@k, "
        "reward/accuracy and length/correct; default: the first verifier, else the first reward",
    )
    reward_timeout: float = Field(
        5.0,
        gt=0,
        description="seconds each reward may take on one completion; over it: "
        "reward 0, not correct, counted in reward/timeouts",
    )
    reward_workers: int | None = Field(
        None,
        ge=0,
        description="worker processes that score completions (0: the "
        "trainer's process); null: 2 when a reward is math, regex or a function, else 0",
    )
    reward_combine: Literal["sum_then_normalize", "normalize_then_sum"] = Field(
        "sum_then_normalize",
        description="how the rewards make the one reward the objective sees (TRL: multi_objective_aggregation). "
        "sum_then_normalize: their weighted sum (the objective's baseline/scale normalise it); "
        "normalize_then_sum: each reward normalised within its group (objective.std, objective.adv_eps), then "
        "weighted and summed (GDPO 2601.05242, verl gdpo); a dataset task's task.rewards, a generated task's "
        "correct + format_weight * format",
    )
    tools: list[str] = Field(
        default_factory=list,
        description="module.path:function tools the model may call over several turns (rollout.max_turns): typed "
        "functions with a docstring, returning a string; rendered by the chat template where it renders tools "
        "(hermes <tool_call>), else as a plain description (<call>NAME ARGS</call>); docs/tasks.md, 'Tools and "
        "environments' (TRL: GRPOTrainer tools; verl: multi_turn.tool_config_path)",
    )
    environment: str | None = Field(
        None,
        description="module.path:Class with reset(problem) -> first message and step(text) -> (observation, done[, "
        "reward]), one instance a rollout row; its reward, when given, replaces the task's (TRL: "
        "environment_factory; verl: AgentLoop)",
    )
    tool_timeout: float = Field(
        5.0, gt=0, description="seconds a tool call may take; over it the model reads an error (tool_errors counts it)"
    )
    tool_workers: int = Field(
        0,
        ge=0,
        description="worker processes that run the tool calls (0: the trainer's process); a worker a tool kills "
        "is replaced, the call an error the model reads",
    )
    hacking_window: int = Field(
        10,
        ge=3,
        description="the reward-hacking probe (a reward model and a verifier both scoring): steps over which "
        "hacking/gap_trend is fitted, and the window in which a rising proxy with a falling verified accuracy "
        "warns once (each trend tested against its noise: 3 steps at least)",
    )


def task_names() -> set[str]:
    return set(TASK_NAMES)


def check_reward_combine(run: Any) -> None:
    """task.reward_combine=normalize_then_sum (GDPO) normalises each reward within its group: a group of
    two or more, and no greedy baseline (ReMax's single greedy response has no group)."""
    if run.task.reward_combine == "sum_then_normalize":
        return
    if run.train.group_size < 2:
        raise ValueError(
            f"task.reward_combine='normalize_then_sum' with train.group_size={run.train.group_size}: each "
            "reward is normalised within its group; allowed: train.group_size >= 2, or "
            "task.reward_combine='sum_then_normalize'"
        )
    if inputs_needed(run.objective).greedy_rewards:
        raise ValueError(
            f"task.reward_combine='normalize_then_sum' with objective.baseline={run.objective.baseline!r}: "
            "the greedy response the baseline scores has no group to be normalised in; allowed with it: "
            "task.reward_combine='sum_then_normalize'"
        )


def check_task_name(run: Any) -> None:
    """task.name is a registered task (harness.tasks.TASKS) or dataset."""
    if run.task.name not in task_names():
        raise ValueError(f"task.name={run.task.name!r} is unknown; allowed: {sorted(task_names())}")


def check_generated_task(run: Any) -> None:
    """A generated task (not dataset): no dataset key set; the task is constructed (cheap, no model) so that
    difficulty_mix and options fail here."""
    t = run.task
    dataset_only = [
        f"task.{k}"
        for k in ("data", "rewards", "correct", "reward_timeout", "reward_workers", "hacking_window")
        if getattr(t, k) != field_default(TaskSection, k)
    ]
    dataset_only += [f"rollout.{k}" for k in ("max_prompt_tokens",) if getattr(run.rollout, k) is not None]
    if dataset_only:
        raise ValueError(
            f"{', '.join(dataset_only)} configure a dataset task (task.name=dataset); task.name="
            f"{t.name!r} generates its problems and scores them itself: drop them, or set "
            "task.name=dataset"
        )
    if "difficulty_mix" in t.options:
        raise ValueError("task.options.difficulty_mix: set the mix as task.difficulty_mix (its own key)")
    try:
        make_task(t.name, difficulty_mix=t.difficulty_mix)
    except (ValueError, TypeError) as err:
        raise ValueError(f"task.difficulty_mix={t.difficulty_mix!r}: {err}") from None
    try:
        make_task(t.name, difficulty_mix=t.difficulty_mix, **t.options)
    except (ValueError, TypeError) as err:
        raise ValueError(f"task.options={t.options!r}: {err}") from None
