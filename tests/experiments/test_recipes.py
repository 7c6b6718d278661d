"""The dataset recipes (experiments/runs/gsm8k.yaml, math.yaml, verl_parquet.yaml) on the sample dataset
in their layouts: each loads, passes the checks before training (its verifier reads the references), and
`harness score` scores a right and a wrong completion as such. The SmolLM2 run on the sample
(gsm8k_sample.yaml) loads as shipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.config import ConfigError, load_config
from tests.experiments.recipes import RECIPES, sample_overrides

RIGHT = {
    "gsm8k.yaml": "So the answer is $\\boxed{{{n}}}$.",
    "math.yaml": "The answer is $\\boxed{{{n}}}$.",
    "verl_parquet.yaml": "She has {n} left.\n#### {n}",
}


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_loads_on_the_sample(name, tmp_path):
    cfg = load_config(f"experiments/runs/{name}", sample_overrides(name, tmp_path))
    assert cfg.task.name == "dataset" and cfg.model.name == "smollm2-135m"


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_expects_the_users_files(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no data/ here
    Path("experiments/runs").mkdir(parents=True)
    Path(f"experiments/runs/{name}").write_text(
        Path(__file__).resolve().parents[2].joinpath("experiments/runs", name).read_text()
    )
    with pytest.raises(ConfigError, match=r"task.data.train='data/.*' does not exist"):
        load_config(f"experiments/runs/{name}")


@pytest.mark.parametrize("name", RECIPES)
def test_score_with_the_recipe(name, tmp_path, capsys):
    overrides = sample_overrides(name, tmp_path)
    cfg = load_config(f"experiments/runs/{name}", overrides)
    from harness.tasks import task_from_config

    p = task_from_config(cfg.task).rows("train")[0]
    n = p.answer.split("#### ")[-1] if "####" in p.answer else p.answer
    if "boxed" in n:
        n = n.split("\\boxed{")[-1].split("}")[0]
    lines = tmp_path / "c.jsonl"
    lines.write_text(
        json.dumps({"uid": p.uid, "completion": RIGHT[name].format(n=n)})
        + "\n"
        + json.dumps({"uid": p.uid, "completion": RIGHT[name].format(n=int(n) + 1)})
        + "\n"
    )
    assert main(["score", f"experiments/runs/{name}", str(lines), *overrides, "task.reward_workers=0"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["correct"] for r in out] == [True, False]


def test_the_smollm2_sample_run_loads():
    cfg = load_config("experiments/runs/gsm8k_sample.yaml")
    assert cfg.task.data.where == {"difficulty": "easy"} and cfg.rollout.backend == "vllm"
