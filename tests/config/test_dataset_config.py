"""Every check of a dataset task before any model loads (harness/config/dataset.py check_dataset,
harness/tasks/dataset/): each is a one-line ConfigError naming the key; the CLI exits 2 with it,
without loading a model, a tokenizer or a warm start."""

from __future__ import annotations

import json

import pytest

from harness.config import ConfigError, load_config
from tests.config.test_early_checks import no_model  # noqa: F401 -- the fixture: every way to a model raises
from tests.tasks.conftest import gsm8k_rows, write_jsonl

SMOKE = "experiments/runs/smoke.yaml"


@pytest.fixture
def data(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", gsm8k_rows(40))
    write_jsonl(tmp_path / "test.jsonl", gsm8k_rows(6, start=200))
    nested = [
        {"prompt": [{"role": "user", "content": r["question"]}], "reward_model": {"ground_truth": r["answer"]}}
        for r in gsm8k_rows(20)
    ]
    write_jsonl(tmp_path / "verl.jsonl", nested)
    (tmp_path / "broken.jsonl").write_text('{"question": "a", "answer": "1"}\n{"question": "b", "answer": \n')
    (tmp_path / "rows.txt").write_text("question,answer\n")
    return tmp_path


def dataset(data, *extra, train="train.jsonl", **keys) -> list[str]:
    d = {"train": str(data / train), "prompt_key": "question", **keys}
    return [
        "task.name=dataset",
        f"task.data={json.dumps(d)}",
        "task.rewards=[gsm8k]",
        "warm_start.enabled=false",
        "task.reward_workers=0",
        *extra,
    ]


def err(overrides) -> str:
    with pytest.raises(ConfigError) as e:
        load_config(SMOKE, overrides)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


def test_a_good_dataset_config_loads(data):
    cfg = load_config(SMOKE, dataset(data, eval=str(data / "test.jsonl")))
    assert cfg.task.data.train.endswith("train.jsonl") and cfg.task.rewards[0].verifier == "gsm8k"
    cfg = load_config(
        SMOKE, dataset(data, "task.rewards=[{verifier: number, name: acc}, tests.tasks.user_rewards:brevity]")
    )
    assert [r.name for r in cfg.task.rewards] == ["acc", None] and cfg.task.rewards[1].function.endswith(":brevity")


@pytest.mark.parametrize(
    "extra, keys, needles",
    [
        ((), {"train": "missing.jsonl"}, ["task.data.train=", "missing.jsonl' does not exist"]),
        ((), {"train": "broken.jsonl"}, ["task.data.train=", "does not parse as JSON Lines"]),
        ((), {"train": "rows.txt"}, ["cannot tell its format", "task.data.format"]),
        (
            (),
            {"answer_key": "solution"},
            [
                "task.data.answer_key='solution': no field 'solution'",
                "its columns: ['question', 'answer', 'difficulty']",
            ],
        ),
        (
            (),
            {"prompt_template": "{question} {hint}", "prompt_key": "prompt"},
            ["task.data.prompt_template ({hint})='hint'", "no field 'hint'"],
        ),
        ((), {"difficulty_key": "level"}, ["task.data.difficulty_key='level': no field 'level'"]),
        ((), {"where": {"difficulty": "impossible"}}, ["task.data.train=", "holds no rows after task.data.where"]),
        ((), {"eval_fraction": 0.001}, ["task.data.eval_fraction=0.001 leaves no eval rows"]),
        (
            (),
            {"eval": "train.jsonl"},
            ["task.data.train and task.data.eval share 40 prompt(s)", "task.data.overlap=drop"],
        ),
        (
            (),
            {"prompt_template": "{question}"},
            ["task.data.prompt_key='question' and task.data.prompt_template are both set"],
        ),
        (
            (),
            {"difficulty_key": "difficulty", "difficulty_by_pass_rate": {"samples": 2}},
            ["task.data.difficulty_key and task.data.difficulty_by_pass_rate are both set"],
        ),
        ((), {"eval": "test.jsonl", "eval_fraction": 0.2}, ["task.data.eval_fraction=0.2", "task.data.eval is set"]),
        (
            (),
            {"prompt_template": "{question", "prompt_key": "prompt"},
            ["task.data.prompt_template='{question'", "not a valid template"],
        ),
        (
            (),
            {"difficulty_by_pass_rate": {"edges": [0.8, 0.2]}},
            ["task.data.difficulty_by_pass_rate.edges", "must increase"],
        ),
        (
            ("task.rewards=[choice]",),
            {},
            [
                "task.rewards[0] (verifier choice) does not read the data's answers",
                "train row 0's reference answer",
                "task.data.check_answers=0 skips",
            ],
        ),
        (
            ("task.rewards=[{function: tests.tasks.user_rewards:two_args}]",),
            {},
            ["task.rewards[0].function=", "has signature two_args(prompt, completion)"],
        ),
        (
            ("task.rewards=[{function: tests.tasks.user_rewards:boom}]",),
            {},
            [
                "task.rewards[0] (function tests.tasks.user_rewards:boom), scoring the reference answers",
                "raised ZeroDivisionError",
                "train row 0",
            ],
        ),
        (("task.rewards=[{function: not_a_module_at_all:f}]",), {}, ["module 'not_a_module_at_all' does not import"]),
        (("task.rewards=[{verifier: regex}]",), {}, ["task.rewards[0].verifier 'regex' needs options.pattern"]),
        (
            ("task.rewards=[gsm8k, number]", "task.correct=exact"),
            {},
            ["task.correct='exact' is not one of the rewards", "['gsm8k', 'number']"],
        ),
        (("task.rewards=[]",), {}, ["task.rewards: name at least one reward"]),
        (("task.reward_timeout=0",), {}, ["task.reward_timeout"]),
        (("task.difficulty_mix={easy: 1}",), {}, ["task.difficulty_mix={'easy': 1.0} configures a generated task"]),
        (
            ("warm_start.enabled=true",),
            {},
            ["task.data.solution_key", "trains an SFT warm start on the dataset's worked"],
        ),
    ],
)
def test_dataset_errors(data, extra, keys, needles):
    keys = {k: (str(data / v) if k in ("train", "eval") else v) for k, v in keys.items()}
    msg = err(dataset(data, *extra, **keys))
    for n in needles:
        assert n in msg, msg


def test_dotted_answer_key_names_the_level_that_is_missing(data):
    msg = err(dataset(data, train="verl.jsonl", prompt_key="prompt", answer_key="reward_model.truth"))
    assert (
        "task.data.answer_key='reward_model.truth': no field 'truth' in reward_model; its keys of reward_model: "
        "['ground_truth']" in msg
    ), msg


def test_rows_with_a_wrong_prompt_or_answer(tmp_path):
    write_jsonl(tmp_path / "t.jsonl", [{"question": "ok?", "answer": "1"}, {"question": 5, "answer": "2"}])
    msg = err(dataset(tmp_path, train="t.jsonl"))
    assert "task.data.prompt_key='question': train row 1's prompt is a int (5)" in msg, msg
    write_jsonl(tmp_path / "t.jsonl", [{"question": "ok?", "answer": "1"}, {"question": "b?", "answer": None}])
    assert "task.data.answer_key='answer': train row 1's answer is empty" in err(dataset(tmp_path, train="t.jsonl"))
    write_jsonl(
        tmp_path / "t.jsonl",
        [{"prompt": [{"role": "system", "content": "x"}, {"role": "user", "content": "q"}], "answer": "1"}],
    )
    msg = err(dataset(tmp_path, train="t.jsonl", prompt_key="prompt", system_prompt="Be brief."))
    assert "task.data.system_prompt is set, but train row 0's prompt messages already hold a system message" in msg


@pytest.mark.parametrize(
    "overrides, needle",
    [
        (
            ["task.data={train: x.jsonl}", "task.rewards=[gsm8k]"],
            "task.data, task.rewards configure a dataset task (task.name=dataset)",
        ),
        (["rollout.max_prompt_tokens=100"], "rollout.max_prompt_tokens configure a dataset task"),
        (["task.name=dataset"], "task.data: task.name=dataset needs task.data.train"),
        (["rollout.overlong_prompts=error"], "rollout.overlong_prompts='error' says what to do with prompts over"),
        (["warm_start.pretrained=true"], "warm_start.pretrained=true asks for an SFT warm start of a pretrained model"),
    ],
)
def test_dataset_keys_elsewhere(overrides, needle):
    assert needle in err(overrides)


def test_the_check_is_memoised_and_redone_when_a_file_changes(data, monkeypatch):
    import harness.config.dataset as config  # the dataset checks call check_reference_answers by this name

    calls = []
    real = config.check_reference_answers
    monkeypatch.setattr(config, "check_reference_answers", lambda t, n: (calls.append(n), real(t, n)))
    load_config(SMOKE, dataset(data))
    load_config(SMOKE, dataset(data))
    assert len(calls) == 1
    write_jsonl(data / "train.jsonl", gsm8k_rows(41))
    load_config(SMOKE, dataset(data))
    assert len(calls) == 2


# ----------------------------------------------------------------------------- the CLI, before any model


@pytest.mark.parametrize(
    "keys, extra, needle",
    [
        ({"answer_key": "solution"}, (), "task.data.answer_key='solution'"),
        ({"train": "missing.jsonl"}, (), "does not exist"),
        ({}, ("task.rewards=[choice]",), "does not read the data's answers"),
        ({}, ("task.rewards=[{function: tests.tasks.user_rewards:two_args}]",), "has signature"),
    ],
)
def test_cli_reports_before_any_model_loads(
    no_model,  # noqa: F811 -- the fixture imported from test_early_checks
    data,
    tmp_path,
    capsys,
    keys,
    extra,
    needle,
):
    from harness.cli import main

    keys = {k: (str(data / v) if k == "train" else v) for k, v in keys.items()}
    out = tmp_path / "run"
    code = main(["train", SMOKE, *dataset(data, *extra, **keys), "tracking.mlflow=false", "--out", str(out)])
    err_text = capsys.readouterr().err
    assert code == 2, err_text
    assert needle in err_text and "Traceback" not in err_text and "\n" not in err_text.strip()
    assert not (out / "config.yaml").exists()
