"""Generators: determinism, split disjointness, difficulty labels and the mix knob."""

import json
from collections import Counter

import pytest

from harness.tasks import TASKS, make_task
from harness.tasks.common import split_of

NAMES = sorted(TASKS)


def key(problem):
    """The identity the split router hashes (countdown: number multiset + target)."""
    meta = problem.meta
    return meta["expression"] if "expression" in meta else f"{sorted(meta['numbers'])}->{meta['target']}"


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_and_split_give_the_same_problems(name):
    task = make_task(name)
    assert task.problems(200, seed=7) == make_task(name).problems(200, seed=7)
    assert task.problems(200, seed=7, split="eval") == task.problems(200, seed=7, split="eval")
    assert task.problems(200, seed=7) != task.problems(200, seed=8)
    assert task.problems(50, seed=7) == task.problems(200, seed=7)[:50]  # a prefix is stable


@pytest.mark.parametrize("name", NAMES)
def test_uids_are_stable_and_unique(name):
    problems = make_task(name).problems(300, seed=3, split="eval")
    assert len({p.uid for p in problems}) == 300
    assert problems[5].uid == f"{name}-eval-3-5"


@pytest.mark.parametrize("name", NAMES)
def test_train_and_eval_never_share_a_problem(name):
    task = make_task(name)
    train = {key(p) for seed in range(3) for p in task.problems(1500, seed=seed, split="train")}
    evals = {key(p) for seed in range(3) for p in task.problems(1500, seed=seed, split="eval")}
    assert train and evals and not train & evals
    assert all(split_of(name, k, task.eval_fraction) == "eval" for k in evals)
    # the same problem seen with a different mix still lands in the same split
    hard_eval = {key(p) for p in make_task(name, difficulty_mix={"hard": 1}).problems(500, 0, "eval")}
    assert not hard_eval & train


@pytest.mark.parametrize("name", NAMES)
def test_every_problem_is_labelled_and_well_formed(name):
    task = make_task(name)
    sizes = task.num_operands if name == "arithmetic" else task.num_numbers
    for p in task.problems(600, seed=0):
        assert p.difficulty in task.difficulties
        assert len(p.meta["operands" if name == "arithmetic" else "numbers"]) == sizes[p.difficulty]
        assert p.prompt.endswith("\n") and p.prompt.count("\n") == 1
        assert len(p.prompt) < 40
        assert p.prompt.isascii() and p.prompt[:-1].isprintable()
        json.dumps(p.meta)


@pytest.mark.parametrize("name", NAMES)
def test_difficulty_mix_frequencies_match_the_weights(name):
    mix = {"easy": 0.6, "medium": 0.3, "hard": 0.1}
    n = 4000
    counts = Counter(p.difficulty for p in make_task(name, difficulty_mix=mix).problems(n, seed=11))
    for bucket, weight in mix.items():
        assert abs(counts[bucket] / n - weight) < 0.03, (bucket, counts)  # ~4 sigma at p=0.6


@pytest.mark.parametrize("name", NAMES)
def test_mix_weights_need_not_sum_to_one_and_zero_buckets_never_appear(name):
    task = make_task(name, difficulty_mix={"easy": 3, "hard": 1})
    counts = Counter(p.difficulty for p in task.problems(2000, seed=0))
    assert counts["medium"] == 0
    assert abs(counts["easy"] / 2000 - 0.75) < 0.04
    assert make_task(name).difficulty_mix == pytest.approx({"easy": 1 / 3, "medium": 1 / 3, "hard": 1 / 3})


def test_size_knobs_change_the_problems():
    hard = make_task("arithmetic", difficulty_mix={"hard": 1}, max_operand=50, num_operands=(2, 3, 5))
    problems = hard.problems(300, seed=0)
    assert all(len(p.meta["operands"]) == 5 for p in problems)
    assert max(max(p.meta["operands"]) for p in problems) > 9
    assert all(abs(int(p.answer)) <= hard.max_value for p in problems)
    cd = make_task("countdown", max_number=25, max_target=500, num_numbers=(3, 4, 5))
    problems = cd.problems(300, seed=0)
    assert all(len(p.meta["numbers"]) == cd.num_numbers[p.difficulty] for p in problems)
    assert max(p.meta["target"] for p in problems) > 99
    assert all(p.meta["target"] not in p.meta["numbers"] for p in problems)
