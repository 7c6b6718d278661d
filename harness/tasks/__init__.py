"""Verifiable-reward tasks: a registry and a fail-loud factory.

    task = make_task("countdown", difficulty_mix={"easy": 1, "hard": 1}, format_weight=0.1)
    task = task_from_config(cfg.task)   # any task from the run config's task section, dataset included
    problems = task.problems(64, seed=0, split="train")
    text = task.demonstration(problems[0], random.Random(0))        # SFT target
    reward = task.score(problems[0], completion, truncated=False)   # RewardBreakdown

See common.py for the answer line, reward and split rules, and each task module for its
formats, difficulty buckets and the length regime it is designed to create. The dataset task
(dataset/, task.name: dataset) reads the user's rows and scores them with verifiers and reward
functions (rewards/); docs/tasks.md documents its keys.
"""

from __future__ import annotations

import inspect

from harness.tasks.arithmetic import ArithmeticTask
from harness.tasks.base import Problem, RewardBreakdown, Task
from harness.tasks.countdown import CountdownTask
from harness.tasks.dataset import DatasetTask
from harness.tasks.dataset.hub import hub_commit, is_hub_dataset, without_hub_defaults
from harness.tasks.dataset.read import fingerprint
from harness.tasks.rewards import auto_workers, reward_specs

TASKS: dict[str, type[Task]] = {"arithmetic": ArithmeticTask, "countdown": CountdownTask}  # generated: make_task
TASK_NAMES = (
    *TASKS,
    "dataset",
)  # task.name values; the dataset task is built from its config section (task_from_config)


# The modules whose code a task's numbers depend on besides its class (cache keys: harness/machine.py).
TASK_CODE = {
    "dataset": (
        "harness.tasks.dataset.read",
        "harness.tasks.dataset.hub",
        "harness.tasks.dataset.fields",
        "harness.tasks.dataset.splits",
        "harness.tasks.dataset.problem",
        "harness.tasks.dataset.rewards",
        "harness.tasks.rewards.scorer",
        "harness.tasks.rewards.verifiers",
        "harness.tasks.rewards.functions",
    )
}


def task_code(name: str) -> list:
    """What enters a cache key's code digest for task `name`: its class (with its package bases) and TASK_CODE."""
    cls = TASKS.get(name) or {"dataset": DatasetTask}.get(name)
    return [*([cls] if cls else []), *TASK_CODE.get(name, ())]


def task_kwargs(name: str) -> tuple[str, ...]:
    """The constructor knobs of task `name`."""
    params = inspect.signature(_lookup(name).__init__).parameters
    return tuple(p for p in params if p != "self")


def make_task(name: str, **kwargs) -> Task:
    """Build a registered task; unknown names and knobs are ValueErrors listing the allowed ones."""
    allowed = task_kwargs(name)
    for key in kwargs:
        if key not in allowed:
            raise ValueError(f"unknown argument {key!r} for task {name!r}; allowed: {', '.join(allowed)}")
    return TASKS[name](**kwargs)


def task_from_config(section, mix: bool = True) -> Task:
    """The task a run config's `task` section describes (harness.config.TaskSection): a generated task
    from name, difficulty_mix (unless mix=False: the warm start's default mix) and options; the dataset
    task from data, rewards, correct, reward_timeout and reward_workers."""
    if section.name == "dataset":
        specs = reward_specs([r.model_dump() if hasattr(r, "model_dump") else r for r in section.rewards])
        workers = section.reward_workers if section.reward_workers is not None else auto_workers(specs)
        data = section.data.model_dump() if hasattr(section.data, "model_dump") else dict(section.data or {})
        data.pop("difficulty_by_pass_rate", None)  # applied once a policy exists (harness/train/run/pass_rates.py)
        return DatasetTask(
            data=data,
            rewards=specs,
            correct=section.correct,
            reward_timeout=section.reward_timeout,
            reward_workers=workers,
        )
    kwargs = {"difficulty_mix": section.difficulty_mix} if mix and section.difficulty_mix else {}
    return make_task(section.name, **kwargs, **section.options)


def task_identity(section) -> dict:
    """What cache keys (warm start, step-0 eval, pass rates) must add for a task beyond its config keys:
    for a dataset task its data section, rewards and the sha256 of its files; {} for a generated task."""
    if section.name != "dataset":
        return {}
    data = section.data.model_dump(mode="json")
    files = {"train": _fingerprint(data, "train"), "eval": _fingerprint(data, "eval") if data["eval"] else None}
    return {
        "data": without_hub_defaults({"data": data})["data"],
        "rewards": [r.identity() if hasattr(r, "identity") else r for r in section.rewards],
        "correct": section.correct,
        "files": files,
    }


def _fingerprint(data: dict, file: str) -> str:
    """The identity of task.data's `file` (train or eval): its files' sha256, or a Hub dataset's commit."""
    if is_hub_dataset(data[file]):
        return hub_commit(data[file], data["revision"], f"task.data.{file}")
    return fingerprint(data[file])


def _lookup(name: str) -> type[Task]:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; allowed: {', '.join(TASKS)}")
    return TASKS[name]


__all__ = [
    "TASKS",
    "TASK_NAMES",
    "task_code",
    "ArithmeticTask",
    "CountdownTask",
    "DatasetTask",
    "Problem",
    "RewardBreakdown",
    "Task",
    "make_task",
    "task_from_config",
    "task_identity",
    "task_kwargs",
]
