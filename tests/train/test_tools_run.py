"""`harness train` with a tool and with an environment: GRPO steps on multi-turn trajectories of the tiny model
(harness/train/core/agent.py, harness/rollout/turns.py), their turns/* metrics logged."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SMALL = [
    "warm_start.enabled=false",  # a fresh tiny model: the run's mechanics, not what it learns
    "train.steps=1",
    "train.prompts_per_step=2",
    "train.group_size=2",
    "rollout.max_new_tokens=12",
    "eval.num_prompts=2",
    "eval.n_samples=2",
    "eval.ks=[1,2]",
]


def _train(tmp_path, *overrides: str) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    args = ["train", "experiments/runs/calculator.yaml", *SMALL, *overrides, "--out", str(tmp_path / "run")]
    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]


TURN_KEYS = {"turns/mean", "turns/tool_calls", "turns/tool_errors", "turns/obs_tokens", "turns/model_frac"}


@pytest.mark.slow
def test_grpo_steps_with_the_calculator_tool(tmp_path):
    step0 = _train(tmp_path)[0]
    assert TURN_KEYS <= set(step0), sorted(step0)
    assert 1 <= step0["turns/mean"] <= 3 and step0["turns/tool_calls"] >= 0


@pytest.mark.slow
def test_grpo_steps_with_an_environment_that_answers_every_turn(tmp_path):
    """The Guess environment answers every turn that is not the number: a fresh model's trajectories run to
    rollout.max_turns, the environment's observations masked out of the loss (turns/model_frac < 1)."""
    env = ["task.tools=[]", "task.environment=tests.tasks.user_tools:Guess", "rollout.max_turns=2"]
    # a turn ends at a vowel or a digit (not truncated): a fresh model's turn is a few characters
    ends = ["rollout.max_new_tokens=40", "rollout.stop=[a,e,i,o,u,'0','1','2','3','4','5']"]
    step0 = _train(tmp_path, *env, *ends)[0]
    assert step0["turns/mean"] > 1 and step0["turns/obs_tokens"] > 0
    assert 0 < step0["turns/model_frac"] < 1 and step0["turns/tool_calls"] == 0
