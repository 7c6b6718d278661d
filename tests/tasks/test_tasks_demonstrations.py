"""Demonstrations: always verified correct, within max_demo_chars, longer for harder buckets."""

import random
import statistics

import pytest

from harness.tasks import TASKS, make_task

NAMES = sorted(TASKS)
BUCKETS = ("easy", "medium", "hard")


def demos(task, difficulty, n=500, seed=0):
    problems = make_task(task.name, **_knobs(task), difficulty_mix={difficulty: 1}).problems(n, seed)
    rng = random.Random(seed)
    return [(p, task.demonstration(p, rng)) for p in problems]


def _knobs(task):
    return {"max_demo_chars": task.max_demo_chars}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("difficulty", BUCKETS)
def test_every_demonstration_is_scored_correct(name, difficulty):
    task = make_task(name)
    for problem, text in demos(task, difficulty):
        reward = task.score(problem, text, truncated=False)
        assert reward.correct and reward.total == 1.0 and reward.format == 1.0, (problem, text)
        assert len(text) <= task.max_demo_chars
        assert text.splitlines()[-1].startswith("Answer: ")
        assert text.isascii() and all(line.isprintable() for line in text.split("\n"))
        truncated = task.score(problem, text, truncated=True)
        assert not truncated.correct and truncated.total == 0.0 and truncated.format == 0.0


@pytest.mark.parametrize("name", NAMES)
def test_demonstration_length_grows_with_difficulty(name, capsys):
    task = make_task(name)
    lengths = {d: [len(text) for _, text in demos(task, d)] for d in BUCKETS}
    means = [statistics.mean(lengths[d]) for d in BUCKETS]
    with capsys.disabled():
        print(
            f"\n{name} demo chars (mean/max): "
            + ", ".join(f"{d} {statistics.mean(lengths[d]):.1f}/{max(lengths[d])}" for d in BUCKETS)
        )
    assert means[0] + 5 < means[1] and means[1] + 5 < means[2], means


@pytest.mark.parametrize("name", NAMES)
def test_a_smaller_budget_is_respected(name):
    task = make_task(name, max_demo_chars=48)
    for difficulty in BUCKETS:
        for problem, text in demos(task, difficulty, n=200):
            assert len(text) <= 48 and task.score(problem, text, truncated=False).correct


def test_countdown_demonstrations_vary_with_the_rng():
    task = make_task("countdown", difficulty_mix={"medium": 1})
    problems = task.problems(50, seed=0)
    first = [task.demonstration(p, random.Random(1)) for p in problems]
    second = [task.demonstration(p, random.Random(2)) for p in problems]
    assert sum(a != b for a, b in zip(first, second)) > 25
    assert first == [task.demonstration(p, random.Random(1)) for p in problems]  # rng-determined
    tries = [t.count(" no\n") for p in problems for t in [task.demonstration(p, random.Random(p.uid))]]
    assert set(tries) == set(range(task.max_wrong_tries + 1))  # stopping point spread out


def test_countdown_wrong_tries_are_wrong_and_distinct():
    task = make_task("countdown", max_wrong_tries=6)
    for problem in task.problems(300, seed=5):
        text = task.demonstration(problem, random.Random(0))
        tried = [line for line in text.splitlines() if line.endswith(" no")]
        values = [int(line[: -len(" no")].rsplit("=", 1)[1]) for line in tried]
        assert problem.meta["target"] not in values and len(set(values)) == len(values)
        for line in tried:  # each try is a valid use of the numbers with the value it states
            expr, value = line[: -len(" no")].rsplit("=", 1)
            assert not task.is_correct(problem, expr)
        assert text.splitlines()[-2] == f"{problem.meta['solution']}={problem.meta['target']} yes"
