"""A researcher's own code that exits or kills its process is an error of that code, named in one line, never a
success and never a silent 0: a reward function calling os._exit in a reward worker, sys.exit at run
time or during the reference-answer check, a reward that hangs during that check, a plugin module calling sys.exit
on import, a plugin function calling it at run time. A run it stops exits != 0 (2 before any model loads) and
resumes once the code is fixed, no logged step lost or twice. Each run: the tiny model, a few seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from faults_helpers import file_steps

from harness.cli import main
from harness.objective.modes import KINDS

SAMPLE = "results/data/gsm8k_sample"
M = "tests.tasks.user_rewards"


def dataset_args(tmp_path, rewards: str, *extra: str) -> list[str]:
    data = {"train": f"{SAMPLE}/train.jsonl", "prompt_key": "question", "max_train_rows": 16, "eval_fraction": 0.2}
    return [
        "train",
        "experiments/runs/smoke.yaml",
        "task.name=dataset",
        f"task.data={json.dumps(data)}",
        f"task.rewards={rewards}",
        "warm_start.enabled=false",
        "train.steps=4",
        "train.prompts_per_step=2",
        "train.group_size=2",
        "train.mini_batches=1",
        "train.threads=1",
        "train.checkpoint_every=1",
        "rollout.max_new_tokens=8",
        "eval.every=0",
        "eval.num_prompts=2",
        "eval.n_samples=1",
        "eval.ks=[1]",
        "tracking.mlflow=false",
        *extra,
        "--out",
        str(tmp_path / "run"),
    ]


def last_line(capsys) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_a_reward_that_kills_its_worker_stops_the_run_and_it_resumes_once_fixed(tmp_path, capsys, monkeypatch):
    """os._exit in a reward worker used to kill it: every reward of every later step 0, counted as timeouts, and
    the run ended 'done' with exit 0. Now the step stops with one line naming the function, exit status 1, the
    steps before it logged and checkpointed; the rerun without the fault resumes and completes every step once."""
    args = dataset_args(tmp_path, f"[gsm8k, {{function: {M}:kills_after_budget}}]", "task.reward_workers=1")
    monkeypatch.setenv("HARNESS_TEST_COUNTER", str(tmp_path / "calls"))
    monkeypatch.setenv("HARNESS_TEST_CALLS", "10")  # the step-0 eval (2), then 4 a step: step 2 kills
    assert main(args) == 1
    err = last_line(capsys)
    assert err.startswith(
        f"harness: RewardFunctionError: reward function {M}:kills_after_budget (task.rewards 'kills_after_budget') "
        "called os._exit(3) on train row"
    ), err
    assert file_steps(tmp_path / "run") == [0, 1]
    assert (tmp_path / "run" / "checkpoints" / "latest").read_text() == "step_000001"
    monkeypatch.delenv("HARNESS_TEST_COUNTER")  # the function fixed
    assert main(args) == 0
    assert file_steps(tmp_path / "run") == [0, 1, 2, 3, 4]  # 4: the final record (the trained policy's eval)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["reward/timeouts"] == 0.0 for r in records if "reward/timeouts" in r)


def test_sys_exit_in_a_reward_at_run_time_is_an_error(tmp_path, capsys):
    """sys.exit(3) in a reward function scored in the trainer's process (reward_workers: 0): the run used to die
    with no message; now one line naming the function and the row, exit status 1."""
    assert main(dataset_args(tmp_path, f"[gsm8k, {{function: {M}:always_exits}}]", "task.reward_workers=0")) == 1
    err = last_line(capsys)
    assert f"reward function {M}:always_exits (task.rewards 'always_exits') called sys.exit(3) on train row" in err, err
    assert err.startswith("harness: RewardFunctionError: ") and "completion '" in err


def test_sys_exit_in_a_reward_during_the_reference_check_is_refused(tmp_path, capsys):
    """sys.exit(0) while the references are scored as completions: `harness train` used to print nothing, train
    nothing and exit 0 (a Snakemake job marked done). Now exit status 2 before any model loads, one line."""
    assert main(dataset_args(tmp_path, f"[{{function: {M}:exits_zero}}]")) == 2
    err = last_line(capsys)
    assert err.startswith("harness: ") and "task.rewards[0] (function tests.tasks.user_rewards:exits_zero)" in err
    assert "called sys.exit(0) on train row" in err and "\n" not in err
    assert not (tmp_path / "run").exists()


def test_a_reward_that_hangs_during_the_reference_check_is_reported_as_hanging(tmp_path, capsys):
    """It used to be reported as 'does not read the data's answers'."""
    assert main(dataset_args(tmp_path, f"[{{function: {M}:hangs}}]", "task.reward_timeout=0.3")) == 2
    err = last_line(capsys)
    assert "task.rewards[0] (function tests.tasks.user_rewards:hangs) ran over task.reward_timeout=0.3 s" in err
    assert "does it hang?" in err and "does not read" not in err, err


PLUGIN_EXITS_ON_IMPORT = "import sys\nsys.exit(0)\n"
PLUGIN_EXITS_AT_RUN_TIME = textwrap.dedent(
    """
    import sys
    from harness.objective import register_baseline

    @register_baseline("exits_at_run_time", doc="calls sys.exit(0): a plugin's bug")
    def exits_at_run_time(rewards, cfg):
        sys.exit(0)
    """
)


def test_a_plugin_that_exits_on_import_is_refused(tmp_path, capsys, monkeypatch):
    (tmp_path / "plugin_exits_on_import.py").write_text(PLUGIN_EXITS_ON_IMPORT)
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["train", "experiments/runs/smoke.yaml", "objective.plugins=[plugin_exits_on_import]"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 2
    err = last_line(capsys)
    assert err.startswith("harness: ") and "objective.plugins: module 'plugin_exits_on_import' does not import" in err
    assert "it called sys.exit(0) on import" in err, err


def test_a_plugin_function_that_exits_at_run_time_stops_the_run(tmp_path, capsys, monkeypatch):
    """Whatever code the harness calls: a SystemExit that reaches the CLI is a fault naming where it was raised."""
    (tmp_path / "plugin_exits_at_run_time.py").write_text(PLUGIN_EXITS_AT_RUN_TIME)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = ["objective.plugins=[plugin_exits_at_run_time]", "objective.baseline=exits_at_run_time"]
    try:
        assert main(dataset_args(tmp_path, "[gsm8k]", *plugin)) == 1
    finally:  # the registry is the process's: later tests list the baselines without this one
        KINDS["baseline"].unregister("exits_at_run_time")
        sys.modules.pop("plugin_exits_at_run_time", None)
    err = last_line(capsys)
    assert (
        err.startswith("harness: UserCodeExit: sys.exit(0) was called at ") and "plugin_exits_at_run_time.py:7" in err
    )
    assert "(in exits_at_run_time) inside `harness train`" in err, err


@pytest.mark.parametrize(
    "body, did", [("import sys\nsys.exit(0)\n", "sys.exit(0)"), ("import os\nos._exit(0)\n", "os._exit(0)")]
)
def test_a_reward_module_that_exits_on_import_is_refused(body, did, tmp_path):
    """os._exit on import used to end `harness train` at once, silently, with the status the module chose (0 here:
    a success). In a process of its own, so that the old behaviour fails this test instead of ending pytest."""
    (tmp_path / "rewards_exit_on_import.py").write_text(body)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    args = dataset_args(tmp_path, "[gsm8k, {function: rewards_exit_on_import:f}]")
    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    err = done.stderr.strip().splitlines()[-1]
    assert "module 'rewards_exit_on_import' does not import (it called " + did + " on import)" in err, err


@pytest.mark.parametrize(
    "body, did", [("import sys\nsys.exit(0)\n", "sys.exit(0)"), ("import os\nos._exit(0)\n", "os._exit(0)")]
)
def test_a_plugin_module_that_exits_on_import_is_refused(body, did, tmp_path):
    """A plugin (objective.plugins) calling os._exit on import used to end `harness config` / `train` at once,
    printing nothing, with the status the module chose (0: a success). In a process of its own, as above."""
    (tmp_path / "plugin_exit_on_import.py").write_text(body)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    args = ["config", "experiments/runs/smoke.yaml", "objective.plugins=[plugin_exit_on_import]"]
    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    err = done.stderr.strip().splitlines()[-1]
    assert "objective.plugins: module 'plugin_exit_on_import' does not import (it called " + did + " on import)" in err
