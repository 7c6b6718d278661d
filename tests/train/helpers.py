"""Small, fast run configs for the engine tests."""
from harness.config import load_config

FAST = [
    "train.prompts_per_step=8", "train.group_size=4", "rollout.max_new_tokens=40",
    "eval.every=0", "eval.num_prompts=8", "eval.n_samples=4", "eval.ks=[1,4]",
    "warm_start.steps=150", "tracking.mlflow=false", "train.samples_to_log=2",
]


def fast_config(warm_cache: str, *overrides: str):
    return load_config("experiments/runs/smoke.yaml", [*FAST, f"warm_start.cache_dir={warm_cache}", *overrides])
