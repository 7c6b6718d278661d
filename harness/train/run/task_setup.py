"""The task of a run, built from its config and fitted to its policy.

    task = build_task(cfg)                                   # no model: the generated task, or the dataset read
    prepare_task(cfg, task, tok, render, policy_for_rates)   # once the tokenizer (and policy) exist

prepare_task, for a dataset task: drops (or refuses, rollout.overlong_prompts=error) the prompts
longer than rollout.max_prompt_tokens once rendered by the model's template, or longer than the
model's positions (max_position_embeddings) less rollout.max_new_tokens, printing the count
per split; and, with task.data.difficulty_by_pass_rate, labels every prompt's difficulty bucket
by the initial policy's pass rate on it (pass_rates.py: measured once, cached). The run shell,
`harness eval` and the probes call it, so they all see the same prompts and buckets.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.config import ConfigError
from harness.models.hub import section_model
from harness.models.registry import model_positions
from harness.tasks import task_from_config, task_identity
from harness.train.run.pass_rates import label_by_pass_rate


def build_task(cfg):
    """The run's task (harness.tasks.task_from_config of cfg.task)."""
    return task_from_config(cfg.task)


def prompt_limit(cfg) -> tuple[int | None, str, str]:
    """(the longest prompt a run keeps, in tokens once rendered, and the key that sets it): the smaller of
    rollout.max_prompt_tokens and the model's positions less rollout.max_new_tokens (a longer prompt's
    completion would run past the positions the model was built for), the key that sets it and what
    raises it; (None, "", "") when neither applies."""
    limits = []
    if cfg.rollout.max_prompt_tokens is not None:
        limits.append(
            (cfg.rollout.max_prompt_tokens, f"rollout.max_prompt_tokens={cfg.rollout.max_prompt_tokens}", "raise it")
        )
    positions = model_positions(section_model(cfg.model), cfg.model.overrides)
    if positions is not None:
        room = positions - cfg.rollout.max_new_tokens
        limits.append(
            (
                room,
                f"the {positions} positions (max_position_embeddings) of model.name={cfg.model.name!r} less "
                f"rollout.max_new_tokens={cfg.rollout.max_new_tokens} ({room} tokens)",
                "lower rollout.max_new_tokens or take a model with more positions",
            )
        )
    return min(limits) if limits else (None, "", "")


def drop_long_prompts(cfg, task, render) -> dict[str, int]:
    """The prompts over prompt_limit(cfg) (rollout.max_prompt_tokens, or the model's context less
    rollout.max_new_tokens): -> dropped count per split (ConfigError under overlong_prompts=error)."""
    limit, why, remedy = prompt_limit(cfg)
    if limit is None or cfg.task.name != "dataset":
        return {}
    lengths = {p.uid: len(render(p)) for split in ("train", "eval") for p in task.rows(split)}
    over = {split: [p for p in task.rows(split) if lengths[p.uid] > limit] for split in ("train", "eval")}
    if not any(over.values()):
        return {"train": 0, "eval": 0}
    if cfg.rollout.overlong_prompts == "error":
        longest = max((p for rows in over.values() for p in rows), key=lambda p: lengths[p.uid])
        raise ConfigError(
            f"{why}: {len(over['train'])} train and {len(over['eval'])} eval "
            f"prompts are longer once rendered (the longest {lengths[longest.uid]} tokens, "
            f"{longest.meta['file']} row {longest.meta['row']}); {remedy}, or set "
            "rollout.overlong_prompts=drop"
        )
    dropped = task.keep(lambda p: lengths[p.uid] <= limit)
    total = {s: len(task.rows(s)) + dropped[s] for s in dropped}
    print(
        f"[harness] {why}: dropped {dropped['train']} of {total['train']} train and "
        f"{dropped['eval']} of {total['eval']} eval prompts (longer once rendered)",
        flush=True,
    )
    for split, rows in (("train", task.rows("train")), ("eval", task.rows("eval"))):
        if not rows:
            raise ConfigError(f"{why} drops every {split} prompt; {remedy}")
    return dropped


def prepare_task(cfg, task, tok, render, policy_for_rates: Callable | None = None) -> dict:
    """Fit a dataset task to the model: long prompts dropped, pass-rate buckets set. policy_for_rates:
    () -> a rollout backend on the INITIAL policy (closed after use), called only when pass rates must
    be measured (not cached). Returns what it did (dropped counts, bucket counts) for the run's summary."""
    if cfg.task.name != "dataset":
        return {}
    out: dict = {
        "data_files": task_identity(cfg.task)["files"],
        "rows": {s: len(task.rows(s)) for s in ("train", "eval")},
    }
    dropped = drop_long_prompts(cfg, task, render)
    if dropped:
        out["dropped_long_prompts"] = dropped
    if cfg.task.data.difficulty_by_pass_rate is not None:
        out["pass_rate_buckets"] = label_by_pass_rate(cfg, task, render, policy_for_rates)
    return out
