"""Registry, factory and knob validation: every error names the knob and the allowed values."""

import pytest

from harness.tasks import TASKS, ArithmeticTask, CountdownTask, Task, make_task, task_kwargs


def test_registry():
    assert TASKS == {"arithmetic": ArithmeticTask, "countdown": CountdownTask}
    for name, cls in TASKS.items():
        task = make_task(name)
        assert isinstance(task, cls) and isinstance(task, Task) and task.name == name
        assert task.difficulties == ("easy", "medium", "hard")
    assert "difficulty_mix" in task_kwargs("countdown") and "max_operand" in task_kwargs("arithmetic")


def test_unknown_task_names_the_value_and_the_registry():
    with pytest.raises(ValueError, match=r"'gsm8k'.*arithmetic, countdown"):
        make_task("gsm8k")


def test_unknown_kwarg_names_it_and_the_allowed_ones():
    with pytest.raises(ValueError, match=r"'max_operands'.*'arithmetic'.*max_operand"):
        make_task("arithmetic", max_operands=5)
    with pytest.raises(ValueError, match=r"'max_operand'.*max_number"):
        make_task("countdown", max_operand=5)


@pytest.mark.parametrize("name", sorted(TASKS))
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"difficulty_mix": {"easy": 1, "extreme": 1}}, r"difficulty_mix.*'extreme'.*easy, medium, hard"),
        ({"difficulty_mix": {"easy": -1, "hard": 2}}, r"difficulty_mix\['easy'\].*>= 0"),
        ({"difficulty_mix": {"easy": 0, "hard": 0}}, r"difficulty_mix.*all zero"),
        ({"difficulty_mix": {}}, r"difficulty_mix.*all zero"),
        ({"difficulty_mix": {"easy": float("nan")}}, r"difficulty_mix\['easy'\]"),
        ({"difficulty_mix": {"easy": "1"}}, r"difficulty_mix\['easy'\]"),
        ({"difficulty_mix": [1, 2, 3]}, r"difficulty_mix must be a dict"),
        ({"format_weight": -0.1}, r"format_weight"),
        ({"eval_fraction": 0.0}, r"eval_fraction"),
        ({"eval_fraction": 1.0}, r"eval_fraction"),
        ({"max_demo_chars": 8}, r"max_demo_chars"),
        ({"max_demo_chars": 40.5}, r"max_demo_chars"),
    ],
)
def test_shared_bad_knobs(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_task(name, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_operands": (2, 3)}, "num_operands"),
        ({"num_operands": (3, 3, 4)}, "num_operands.*increase with difficulty"),
        ({"num_operands": (1, 3, 4)}, "num_operands"),
        ({"num_operands": "234"}, "num_operands"),
        ({"max_operand": 0}, "max_operand"),
        ({"max_operand": True}, "max_operand"),
        ({"max_operand": 9.0}, "max_operand"),
        ({"max_value": 5}, "max_value"),
        ({"ops": "+/"}, "ops"),
        ({"ops": ""}, "ops"),
        ({"ops": "++"}, "ops"),
    ],
)
def test_arithmetic_bad_knobs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_task("arithmetic", **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_numbers": (2, 3, 3)}, "num_numbers"),
        ({"num_numbers": (2, 3, 9)}, "num_numbers"),
        ({"max_number": 1}, "max_number"),
        ({"max_target": 0}, "max_target"),
        ({"max_wrong_tries": -1}, "max_wrong_tries"),
    ],
)
def test_countdown_bad_knobs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_task("countdown", **kwargs)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_bad_problems_arguments(name):
    task = make_task(name)
    with pytest.raises(ValueError, match=r"split.*train, eval.*'test'"):
        task.problems(3, seed=0, split="test")
    with pytest.raises(ValueError, match=r"\bn\b"):
        task.problems(-1, seed=0)
    assert task.problems(0, seed=0) == []


def test_an_impossible_budget_fails_loudly():
    with pytest.raises(RuntimeError, match="max_demo_chars"):
        make_task("arithmetic", difficulty_mix={"hard": 1}, max_demo_chars=16).problems(1, seed=0)


def test_numpy_scalars_are_accepted():  # Snakemake's Paramspace hands out numpy scalars
    np = pytest.importorskip("numpy")
    task = make_task(
        "arithmetic", max_operand=np.int64(12), difficulty_mix={"easy": np.float64(1.0)}, format_weight=np.float32(0.5)
    )
    assert task.max_operand == 12 and type(task.max_operand) is int
    assert len(task.problems(10, seed=np.int64(1))) == 10
