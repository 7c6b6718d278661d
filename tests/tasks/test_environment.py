"""Environments (task.environment): a class with reset and step, one instance a row; its reward replaces the
task's where it gives one (harness/tasks/environment.py, harness/rollout/turns.py, train/core/collect.py score)."""

from __future__ import annotations

import pytest
import torch

from harness.tasks.base import Problem
from harness.tasks.environment import EnvironmentError, EnvSession, load_environment

M = "tests.tasks.user_tools"
PROBLEM = Problem("u", "It is between 1 and 9.", "7", "easy")


@pytest.mark.parametrize(
    "spec, needle",
    [
        (f"{M}:NoStep", "has no step method"),
        (f"{M}:add", "is a function, not a class"),
        (f"{M}:Missing", "has no 'Missing'"),
        ("nope_envs:Guess", "'nope_envs' does not import"),
    ],
)
def test_an_environment_that_does_not_fit_is_refused(spec, needle):
    with pytest.raises(ValueError, match=needle):
        load_environment(spec)


def test_a_session_reads_the_environment_replies():
    s = EnvSession(load_environment(f"{M}:Guess"), f"{M}:Guess")
    assert s.reset(PROBLEM) == "Guess a number. It is between 1 and 9."
    assert s.step("3") == ([{"role": "user", "content": "higher"}], False, 0.0, 0, 0)
    assert s.step("no idea") == ([{"role": "user", "content": "say a number"}], False, None, 0, 0)
    assert s.step("it is 7") == ([], True, 1.0, 0, 0)


def test_a_step_that_returns_something_else_stops_naming_the_environment():
    s = EnvSession(load_environment(f"{M}:Guess"), f"{M}:Guess")
    s.env.step = lambda text: "higher"
    with pytest.raises(EnvironmentError, match=f"environment {M}:Guess step returned 'higher'"):
        s.step("3")
    s.env.step = lambda text: 1 / 0
    with pytest.raises(EnvironmentError, match="step raised ZeroDivisionError"):
        s.step("3")


def test_the_environment_reward_replaces_the_task_reward():
    from harness.rollout.base import RolloutBatch
    from harness.tasks import make_task
    from harness.train.core.collect import score

    task = make_task("arithmetic")
    p = task.problems(1, seed=0)[0]
    rollout = RolloutBatch(
        [[1]] * 2, torch.zeros(2, 1, dtype=torch.long), torch.ones(2, 1), torch.zeros(2, 1),
        torch.zeros(2, dtype=torch.bool), [f"Answer: {p.answer}", "Answer: x"],
        {"env_reward": torch.tensor([float("nan"), 0.25])},
    )  # fmt: skip
    ep = score(task, [p], rollout, 2, None, 8)
    assert ep.rewards.tolist() == [1.0, 0.25]  # row 0: the task's reward (the environment gave none)
    assert ep.correct.tolist() == [True, False]  # "correct" stays the task's verdict
