"""The dataset recipes in experiments/runs/ expect the user's files (data/...); the tests point them at
the sample dataset in the same layout (results/data, written on first use; verl's parquet written here)."""

from __future__ import annotations

import json
from pathlib import Path

SAMPLE = "results/data"
RECIPES = ("gsm8k.yaml", "math.yaml", "verl_parquet.yaml")


def verl_parquet(folder: Path) -> Path:
    """The sample's GSM8K layout rewritten as verl's examples/data_preprocess/gsm8k.py writes GSM8K."""
    import datasets

    from harness.tasks.sample_data import write_samples

    write_samples(SAMPLE)
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        rows = [json.loads(line) for line in Path(f"{SAMPLE}/gsm8k_sample/{split}.jsonl").read_text().splitlines()]
        out = [
            {
                "data_source": "openai/gsm8k",
                "prompt": [
                    {
                        "role": "user",
                        "content": r["question"] + " Let's think step by step and output the "
                        'final answer after "####".',
                    }
                ],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": r["answer"].split("#### ")[1]},
                "extra_info": {"split": split, "index": i, "answer": r["answer"], "question": r["question"]},
            }
            for i, r in enumerate(rows[:300])
        ]
        datasets.Dataset.from_list(out).to_parquet(str(folder / f"{split}.parquet"))
    return folder


def sample_overrides(name: str, tmp: Path) -> list[str]:
    """Overrides that point recipe `name` (a file name in experiments/runs/) at the sample; [] for other configs."""
    if name == "gsm8k.yaml":
        return [
            f"task.data.train={SAMPLE}/gsm8k_sample/train.jsonl",
            f"task.data.eval={SAMPLE}/gsm8k_sample/test.jsonl",
        ]
    if name == "math.yaml":
        return [f"task.data.train={SAMPLE}/math_sample/train.jsonl", f"task.data.eval={SAMPLE}/math_sample/test.jsonl"]
    if name == "ppo_rm.yaml":  # its reward model folder (harness train-rm writes it): a tiny random one here
        from tests.tasks.reward_models import tiny_reward_model

        rm = tiny_reward_model(tmp / "rm")
        return [f"task.rewards=[number, {{model: {rm}, name: rm, weight: 0.5, normalize: running}}]"]
    if name == "verl_parquet.yaml":
        folder = verl_parquet(tmp / "verl")
        return [f"task.data.train={folder}/train.parquet", f"task.data.eval={folder}/test.parquet"]
    return []
