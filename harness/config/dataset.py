"""The checks of a dataset task (task.name: dataset) before any model loads: its own keys set and the
generated tasks' not, its files read, its fields, rewards and first reference answers checked, a reward
model scored once (harness/tasks/dataset/, docs/tasks.md). Memoised per process on the task section and
the files' stats, so a study's cells read a dataset once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.config.base import field_default
from harness.config.data import DataSection, data_stats
from harness.config.task import TaskSection
from harness.config.warm_start import TINY, uses_warm_start
from harness.models.folder import classifier_problem
from harness.models.hub import model_path
from harness.tasks import task_from_config
from harness.tasks.dataset import check_reference_answers
from harness.tasks.dataset.hub import is_hub_dataset
from harness.tasks.rewards import reward_model_problem

_CHECKED_DATA: dict[str, tuple] = {}
_CHECKED_RM: dict[tuple, str] = {}  # (folder, its files' stats) -> why it does not score ("": it does)


def _folder_stats(folder: Path) -> tuple:
    """(name, size, mtime) of a folder's files: a reward model folder re-checked once it changes."""
    return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()))


def check_dataset(run: Any, to_build: frozenset[str] = frozenset()) -> None:
    """task.name=dataset: its own keys set, the generated tasks' keys not; the files read, the fields,
    rewards and reference answers checked (memoised per process on the task section and the files).
    to_build: reward model folders written before the run starts (check_reward_models)."""
    t = run.task
    if t.data is None:
        raise ValueError(
            "task.data: task.name=dataset needs task.data.train (a file or folder of rows) and the "
            "fields to read (prompt_key, answer_key); see docs/tasks.md"
        )
    for key in ("difficulty_mix", "options"):
        if getattr(t, key) != field_default(TaskSection, key):
            raise ValueError(
                f"task.{key}={getattr(t, key)!r} configures a generated task; a dataset task reads its "
                "rows (filter them with task.data.where, limit them with task.data.max_train_rows)"
            )
    d = t.data
    check_hub_keys(d)
    if d.prompt_template is not None and d.prompt_key != field_default(DataSection, "prompt_key"):
        raise ValueError(
            f"task.data.prompt_key={d.prompt_key!r} and task.data.prompt_template are both set; the "
            "template names its fields itself: drop one"
        )
    if d.difficulty_key is not None and d.difficulty_by_pass_rate is not None:
        raise ValueError(
            "task.data.difficulty_key and task.data.difficulty_by_pass_rate are both set; buckets come "
            "from one: drop one"
        )
    if d.eval is not None and d.eval_fraction != field_default(DataSection, "eval_fraction"):
        raise ValueError(
            f"task.data.eval_fraction={d.eval_fraction} splits the train file when task.data.eval is "
            "null; task.data.eval is set: drop eval_fraction"
        )
    if uses_warm_start(run) and d.solution_key is None:
        why = (
            "warm_start.pretrained=true"
            if run.model.name not in TINY
            else f"model.name={run.model.name!r} is built fresh and warm_start.enabled=true"
        )
        raise ValueError(
            f"task.data.solution_key: {why} trains an SFT warm start on the dataset's worked solutions; "
            "name the solution field, or set warm_start.enabled=false (warm_start.pretrained=false for a "
            "pretrained model)"
        )
    if run.trainer == "rl" and t.rewards and all(r.weight == 0 for r in t.rewards):
        raise ValueError(
            f"task.rewards: every weight is 0 ({[r.weight for r in t.rewards]}), so every completion's reward "
            "is 0 and the policy has nothing to learn; give at least one reward a weight other than 0"
        )
    check_reward_models(run, to_build)
    memo = json.dumps([t.model_dump(mode="json"), run.model.name], sort_keys=True, default=str)
    stats = data_stats(d)
    if _CHECKED_DATA.get(memo) == stats:
        return
    task = task_from_config(t)
    check_reference_answers(task, d.check_answers)
    _CHECKED_DATA[memo] = stats


def check_hub_keys(d: DataSection) -> None:
    """task.data.config and task.data.revision pick a Hub dataset's config and commit: set only where train or
    eval is a Hub id (org/name that is no existing path)."""
    if any(is_hub_dataset(p) for p in (d.train, d.eval)):
        return
    for key, default in (("config", None), ("revision", "main")):
        if getattr(d, key) != default:
            raise ValueError(
                f"task.data.{key}={getattr(d, key)!r} picks a Hugging Face Hub dataset's {key}, and neither "
                f"task.data.train={d.train!r} nor task.data.eval is a Hub id (org/name); drop it"
            )


def check_reward_models(run: Any, to_build: frozenset[str] = frozenset()) -> None:
    """task.rewards[i].model: a sequence classifier with one label whose tokenizer loads and whose score of a
    sample is finite (loaded once per process and folder state, on the CPU, before the policy loads);
    task.hacking_window only where the probe runs (a reward model and a verifier or function).
    to_build: folders not checked while they are absent or empty: a study's `reward_model:`, which its
    Snakefile rule trains before any cell runs (build_config's reward_models_to_build, from
    harness/experiment/expand.py)."""
    t = run.task
    models = [(i, r.model) for i, r in enumerate(t.rewards) if r.model is not None and not (r.verifier or r.function)]
    for i, path in models:
        folder = Path(model_path(str(path), key=f"task.rewards[{i}].model"))  # a Hub id: its cached snapshot
        if str(path) in to_build and not (folder.is_dir() and any(folder.iterdir())):
            continue  # a study's reward model, not yet written (train-rm writes its folder whole, at the end)
        problem = classifier_problem(folder)
        if problem is None:
            memo = (str(folder.resolve()), _folder_stats(folder))
            problem = _CHECKED_RM.get(memo) or reward_model_problem(str(folder))
            _CHECKED_RM[memo] = problem or ""
        if problem:
            raise ValueError(f"task.rewards[{i}].model={path!r} is not a reward model: {problem}")
    rules = [r for r in t.rewards if r.model is None]
    if t.hacking_window != field_default(TaskSection, "hacking_window") and not (models and rules):
        raise ValueError(
            f"task.hacking_window={t.hacking_window} sets the reward-hacking probe's window, which runs only "
            "where a reward model (task.rewards[i].model) and a verifier or function both score: drop it"
        )
