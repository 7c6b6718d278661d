"""Prompts longer than the model's context (its positions less rollout.max_new_tokens) are dropped, counted and
said, or refused with rollout.overlong_prompts=error, as rollout.max_prompt_tokens drops them (not
3,364-token prompts trained on a model of 512 positions with only transformers' warning). The renderer is a
stand-in (one token a character, as the tiny models' tokenizer): no model loads."""

from __future__ import annotations

import pytest

from harness.config import ConfigError, load_config
from harness.train.run.task_setup import build_task, drop_long_prompts, prompt_limit
from tests.tasks.conftest import write_jsonl

SMOKE = "experiments/runs/smoke.yaml"  # tiny-dense (512 positions), rollout.max_new_tokens=48


def render(problem) -> list[int]:
    return [0] * (len(problem.prompt) + 1)  # <bos> + one token a character


@pytest.fixture
def cfg_of(tmp_path):
    rows = [{"question": f"Q{i} " + "x" * (600 if i % 5 == 0 else 20), "answer": str(i)} for i in range(40)]
    path = write_jsonl(tmp_path / "train.jsonl", rows)

    def cfg(*extra):
        data = f"task.data={{train: {path}, prompt_key: question, eval_fraction: 0.25}}"
        base = ["task.name=dataset", data, "task.rewards=[number]", "task.reward_workers=0"]
        return load_config(SMOKE, ["warm_start.enabled=false", *base, *extra])

    return cfg


def test_prompts_over_the_context_are_dropped_and_counted(cfg_of, capsys):
    cfg = cfg_of()
    assert prompt_limit(cfg)[0] == 512 - 48
    task = build_task(cfg)
    long = {s: sum(len(render(p)) > 464 for p in task.rows(s)) for s in ("train", "eval")}
    assert long["train"] > 0 and long["train"] + long["eval"] == 8
    dropped = drop_long_prompts(cfg, task, render)
    assert dropped == long and all(len(render(p)) <= 464 for s in ("train", "eval") for p in task.rows(s))
    out = capsys.readouterr().out
    assert (
        "[harness] the 512 positions (max_position_embeddings) of model.name='tiny-dense' less "
        f"rollout.max_new_tokens=48 (464 tokens): dropped {long['train']} of" in out
    )


def test_prompts_over_the_context_refused_with_overlong_prompts_error(cfg_of):
    cfg = cfg_of("rollout.overlong_prompts=error")  # a dataset task: the context makes the key meaningful
    with pytest.raises(ConfigError) as e:
        drop_long_prompts(cfg, build_task(cfg), render)
    msg = str(e.value)
    assert msg.startswith("the 512 positions (max_position_embeddings) of model.name='tiny-dense' less ")
    assert "prompts are longer once rendered (the longest 605 tokens, " in msg
    assert "lower rollout.max_new_tokens or take a model with more positions, or set rollout.overlong_prompts" in msg


def test_the_smaller_limit_is_said(cfg_of, capsys):
    cfg = cfg_of("rollout.max_prompt_tokens=100")
    assert prompt_limit(cfg)[:2] == (100, "rollout.max_prompt_tokens=100")
    cfg = cfg_of("rollout.max_prompt_tokens=1000", "rollout.max_new_tokens=200")
    assert prompt_limit(cfg)[0] == 312 and "rollout.max_new_tokens=200 (312 tokens)" in prompt_limit(cfg)[1]
    cfg = cfg_of("model.overrides={max_position_embeddings: 1024}")
    task = build_task(cfg)
    assert drop_long_prompts(cfg, task, render) == {"train": 0, "eval": 0}  # 605 tokens fit 1024 - 48


def test_overlong_prompts_still_needs_a_limit_on_a_generated_task():
    with pytest.raises(ConfigError, match="rollout.overlong_prompts='error' says what to do with prompts over"):
        load_config(SMOKE, ["rollout.overlong_prompts=error"])
