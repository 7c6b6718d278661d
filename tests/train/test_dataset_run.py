"""A run on a dataset task end to end (tiny model, seconds): the SFT warm start from the dataset's
solution field, the named rewards logged as reward/<name>, long prompts dropped with a count, and
difficulty buckets from the initial policy's pass rate, measured once and cached."""

from __future__ import annotations

import json

import pytest

from harness.config import ConfigError, load_config
from harness.jsonl import read_jsonl
from harness.train import train

SAMPLE = "results/data/gsm8k_sample"


def config(tmp_path, *overrides):
    data = {
        "train": f"{SAMPLE}/train.jsonl",
        "eval": f"{SAMPLE}/test.jsonl",
        "prompt_key": "question",
        "solution_key": "answer",
        "difficulty_key": "difficulty",
        "where": {"difficulty": "easy"},
        "max_train_rows": 64,
        "max_eval_rows": 16,
    }
    return load_config(
        "experiments/runs/smoke.yaml",
        [
            "task.name=dataset",
            f"task.data={json.dumps(data)}",
            "task.rewards=[gsm8k, {function: tests.tasks.user_rewards:brevity, weight: 0.1}]",
            "task.reward_workers=0",
            f"warm_start.cache_dir={tmp_path / 'ws'}",
            "warm_start.steps=4",
            "warm_start.batch_size=4",
            "train.steps=2",
            "train.prompts_per_step=2",
            "train.group_size=2",
            "train.mini_batches=1",
            "train.checkpoint_every=1",
            "train.threads=1",
            "rollout.max_new_tokens=24",
            "rollout.temperature=1.0",
            "eval.temperature=1.0",
            "eval.num_prompts=4",
            "eval.n_samples=2",
            "eval.ks=[1,2]",
            "eval.every=1",
            "tracking.mlflow=false",
            *overrides,
        ],
    )


def test_a_dataset_run_logs_named_rewards(tmp_path):
    summary = train(config(tmp_path), tmp_path / "run")
    records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    steps = [r for r in records if "reward/mean" in r]
    assert steps and all({"reward/gsm8k", "reward/brevity", "reward/timeouts"} <= set(r) for r in steps)
    assert all(0.0 <= r["reward/gsm8k"] <= 1.0 for r in steps)
    evals = [r for r in records if "eval/pass_at_1" in r]
    assert {"eval/reward/gsm8k", "eval/pass_at_1/easy"} <= set(evals[0])
    assert summary["paired_rise"]["prompts"] == 4
    ws = next(p for p in (tmp_path / "ws").glob("tiny-dense-dataset-*") if p.is_dir())  # keyed by the data files
    key = json.loads((ws / "warmstart.json").read_text())["key"]
    assert key["files"]["train"] and key["data"]["solution_key"] == "answer"
    assert summary["task"]["data_files"] == key["files"] and summary["task"]["rows"] == {"train": 64, "eval": 16}
    from harness.train.run.final_eval import eval_run

    out = eval_run(tmp_path / "run", n_samples=2, num_prompts=4, vs_initial=True)  # `harness eval` on a dataset run
    assert "delta/pass_at_1" in out and "eval/reward/gsm8k" in out


def test_dpo_on_a_dataset(tmp_path):
    """The DPO trainer on a dataset task, from a pairs file (its prompts get the data's system prompt)."""
    from harness.train.run.warmstart import initial_policy, system_prompt

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "".join(
            json.dumps(
                {
                    "prompt": f"Tom has {i} apples and buys 2. How many?",
                    "chosen": f"#### {i + 2}",
                    "rejected": f"#### {i}",
                    "difficulty": "easy",
                }
            )
            + "\n"
            for i in range(4)
        )
    )
    data = {
        "train": f"{SAMPLE}/train.jsonl",
        "eval": f"{SAMPLE}/test.jsonl",
        "prompt_key": "question",
        "max_train_rows": 16,
        "max_eval_rows": 4,
        "system_prompt": "Be brief.",
    }
    cfg = load_config(
        "experiments/runs/smoke.yaml",
        [
            "task.name=dataset",
            f"task.data={json.dumps(data)}",
            "task.rewards=[gsm8k]",
            "task.reward_workers=0",
            "warm_start.enabled=false",
            "objective.preset=dpo",
            f"dpo.pairs={pairs}",
            "dpo.batch_size=2",
            "dpo.max_steps=2",
            "train.threads=1",
            "train.old_logp=recompute",
            "train.mini_batches=1",
            "rollout.max_new_tokens=16",
            "eval.num_prompts=4",
            "eval.n_samples=2",
            "eval.ks=[1,2]",
            "tracking.mlflow=false",
        ],
    )
    assert system_prompt(cfg) == "Be brief."
    _, tok, render = initial_policy(cfg, "cpu")
    from harness.train.dpo.pairs import PreferencePair

    ids = render(PreferencePair("Q?", "a", "b", "easy"))
    assert tok.decode(ids).startswith("<bos>Be brief.\n")  # a pair's prompt is rendered as the task's prompts are
    summary = train(cfg, tmp_path / "dpo")
    assert summary["trainer"] == "dpo" and summary["steps"] == 2


def test_long_prompts_dropped_or_refused(tmp_path, capsys):
    from harness.train.run.task_setup import build_task, drop_long_prompts
    from harness.train.run.warmstart import initial_policy

    cfg = config(tmp_path, "warm_start.enabled=false", "rollout.max_prompt_tokens=80")
    task = build_task(cfg)
    _, tok, render = initial_policy(cfg, "cpu")
    lengths = [len(render(p)) for p in task.rows("train")]
    over = sum(n > 80 for n in lengths)
    assert 0 < over < len(lengths)  # the char tokenizer: one token a character
    dropped = drop_long_prompts(cfg, task, render)
    assert dropped["train"] == over and all(len(render(p)) <= 80 for p in task.rows("train"))
    assert f"dropped {over} of 64 train" in capsys.readouterr().out
    cfg = config(tmp_path, "warm_start.enabled=false", "rollout.max_prompt_tokens=80", "rollout.overlong_prompts=error")
    with pytest.raises(
        ConfigError,
        match=r"rollout.max_prompt_tokens=80: \d+ train and \d+ eval prompts are longer "
        r"once rendered \(the longest \d+ tokens, train row \d+\)",
    ):
        drop_long_prompts(cfg, build_task(cfg), render)


def test_pass_rate_buckets_measured_once(tmp_path, monkeypatch):
    from harness.rollout import make_backend
    from harness.train.run import pass_rates
    from harness.train.run.task_setup import build_task, prepare_task
    from harness.train.run.warmstart import initial_policy

    data = {
        "train": f"{SAMPLE}/train.jsonl",
        "eval": f"{SAMPLE}/test.jsonl",
        "prompt_key": "question",
        "max_train_rows": 6,
        "max_eval_rows": 4,
        "difficulty_by_pass_rate": {"samples": 2, "edges": [0.5]},
    }
    cfg = config(tmp_path, "warm_start.enabled=false", f"task.data={json.dumps(data)}", "rollout.max_new_tokens=8")
    policy, tok, render = initial_policy(cfg, "cpu")
    task = build_task(cfg)
    info = prepare_task(cfg, task, tok, render, lambda: make_backend(cfg.rollout, policy, tok))["pass_rate_buckets"]
    assert set(task.difficulties) <= {"p0.00-0.50", "p0.50-1.00"} and 0.0 <= info["mean_pass_rate"] <= 1.0
    cached = json.loads(pass_rates.cache_path(cfg).read_text())["rates"]
    assert len(cached) == 10 and all(v in (0.0, 0.5, 1.0) for v in cached.values())
    again = build_task(cfg)
    prepare_task(cfg, again, tok, render, lambda: pytest.fail("measured again"))  # from the cache
    assert [p.difficulty for p in again.rows("eval")] == [p.difficulty for p in task.rows("eval")]


def test_bucket_names():
    from harness.train.run.pass_rates import bucket_names, bucket_of

    assert bucket_names([0.25, 0.75]) == ["hard", "medium", "easy"]
    assert [bucket_of(p, [0.25, 0.75]) for p in (0.0, 0.25, 0.5, 0.75, 1.0)] == [
        "hard",
        "medium",
        "medium",
        "easy",
        "easy",
    ]
    assert bucket_names([0.1, 0.5, 0.9]) == ["p0.00-0.10", "p0.10-0.50", "p0.50-0.90", "p0.90-1.00"]


def test_a_pretrained_folder_is_warm_started_only_when_asked(tmp_path):
    """A model folder (as a user's pretrained model) starts from its own weights; with
    warm_start.pretrained=true it is first SFT'd on the dataset's solutions (a warm start of its own key)."""
    from harness.models import build_model, save_model
    from harness.train.run.warmstart import initial_policy, warm_start_folder

    folder = save_model(*build_model("tiny-dense", seed=3), tmp_path / "my-model")
    plain = config(tmp_path, f"model.name={folder}")
    assert not plain.uses_warm_start()
    model, _, _ = initial_policy(plain, "cpu")
    import torch

    ref, _ = build_model("tiny-dense", seed=3)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref.state_dict().values()))
    asked = config(tmp_path, f"model.name={folder}", "warm_start.pretrained=true")
    assert asked.uses_warm_start() and warm_start_folder(asked) != warm_start_folder(plain)
    model, _, _ = initial_policy(asked, "cpu")  # SFT'd on task.data.solution_key (4 steps)
    report = json.loads((warm_start_folder(asked) / "warmstart.json").read_text())
    assert report["key"]["pretrained_sft"] is True and report["key"]["model"] == str(folder)
    assert any(not torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref.state_dict().values()))


def test_a_raising_reward_function_stops_the_run_in_one_line(tmp_path, capsys):
    from harness.cli import main

    data = {"train": f"{SAMPLE}/train.jsonl", "prompt_key": "question", "max_train_rows": 16, "eval_fraction": 0.2}
    code = main(
        [
            "train",
            "experiments/runs/smoke.yaml",
            "task.name=dataset",
            f"task.data={json.dumps(data)}",
            "task.rewards=[gsm8k, {function: tests.tasks.user_rewards:boom}]",
            "task.reward_workers=0",
            "warm_start.enabled=false",
            "train.steps=1",
            "train.prompts_per_step=2",
            "train.group_size=2",
            "train.mini_batches=1",
            "train.threads=1",
            "rollout.max_new_tokens=8",
            "eval.num_prompts=2",
            "eval.n_samples=1",
            "eval.ks=[1]",
            "tracking.mlflow=false",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1
    assert err.startswith(
        "harness: RewardFunctionError: reward function tests.tasks.user_rewards:boom (task.rewards "
        "'boom') raised ZeroDivisionError: division by zero on train row"
    ), err  # the train FILE's row
    assert "(uid train:" in err and ", completion '" in err
