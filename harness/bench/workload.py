"""The benchmark workload: one run config per (model, backend), shared by our trainer and TRL.

The config is the model's run YAML (smoke.yaml for the tiny models; bench_smollm2.yaml for SmolLM2:
the GSM8K-format sample, on which its rewards vary from the first step) plus overrides: no warm start, no MLflow, `steps` policy iterations, a checkpoint
every step (so its cost is measured), and an eval reduced to 2 prompts x 1 sample (ours
evaluates at step 0 and after the last step; TRL does not evaluate). prompts_per_step (N),
group_size (G) and max_new_tokens (T) keep the YAML's values unless given.
"""

from __future__ import annotations

from pathlib import Path

from harness.config import RunConfig, load_config

REPO = Path(__file__).resolve().parents[2]
RUN_YAMLS = {
    "tiny-dense": "smoke.yaml",
    "tiny-moe": "smoke.yaml",
    "smollm2-135m": "bench_smollm2.yaml",
    # the GPU check's models (harness/models/random_llama.py): random weights, SmolLM2's tokenizer and workload
    "smollm2-135m-random": "bench_smollm2.yaml",
    "llama-1b-random": "bench_smollm2.yaml",
}
BACKENDS = ("hf", "vllm")


def run_yaml(model: str) -> Path:
    """experiments/runs/<yaml> of a model (relative to the repo, else to the working folder)."""
    if model not in RUN_YAMLS:
        raise ValueError(f"--models: {model!r} is not benchmarked; allowed: {sorted(RUN_YAMLS)}")
    rel = Path("experiments/runs") / RUN_YAMLS[model]
    return REPO / rel if (REPO / rel).is_file() else rel


def bench_config(
    model: str,
    backend: str,
    *,
    steps: int,
    threads: int | None,
    prompts: int | None = None,
    group_size: int | None = None,
    max_new_tokens: int | None = None,
    checkpoint_every: int = 1,
    extra: list[str] | tuple[str, ...] = (),
    fixed_length: bool = False,
) -> RunConfig:
    """RunConfig of one benchmark case (raises ConfigError naming a bad key). fixed_length: every response
    exactly max_new_tokens long (rollout.min_new_tokens = rollout.max_new_tokens: EOS masked before)."""
    if backend not in BACKENDS:
        raise ValueError(f"--backends: {backend!r} is unknown; allowed: {list(BACKENDS)}")
    overrides = [
        f"model.name={model}",
        f"rollout.backend={backend}",
        "warm_start.enabled=false",
        "tracking.mlflow=false",
        f"train.steps={steps}",
        f"train.checkpoint_every={checkpoint_every}",
        "train.mini_batches=1",
        "train.inner_epochs=1",  # one optimizer step per rollout batch, as TRL's default
        "rollout.temperature=1.0",  # TRL's default (smoke.yaml samples hotter)
        "eval.every=0",
        "eval.num_prompts=2",
        "eval.n_samples=1",
        "eval.ks=[1]",
    ]
    if threads:
        overrides.append(f"train.threads={threads}")
    if prompts:
        overrides.append(f"train.prompts_per_step={prompts}")
    if group_size:
        overrides.append(f"train.group_size={group_size}")
    if max_new_tokens:
        overrides.append(f"rollout.max_new_tokens={max_new_tokens}")
    cfg = load_config(run_yaml(model), [*overrides, *extra])
    if fixed_length:
        return load_config(
            run_yaml(model), [*overrides, *extra, f"rollout.min_new_tokens={cfg.rollout.max_new_tokens}"]
        )
    return cfg
