"""`harness eval RUN_DIR`: pass@k of a finished run's final checkpoint on the held-out set;
with --vs-initial, also of the policy the run started from (warm start or base model) on the
same prompts and sampling seed, and the paired rise of pass@k with a bootstrap 95% interval
(paired.py) -> RUN_DIR/eval.json."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from harness.atomic import atomic_write_text
from harness.config import ConfigError, RunConfig, load_config
from harness.models import load_model
from harness.models.lm_head import lm_head_fp32
from harness.models.lora import load_adapter, read_adapter
from harness.rollout import make_backend
from harness.threads import start_governor
from harness.train.core.collect import eval_problems
from harness.train.core.policy_module import check_resumed_base, prepare_policy
from harness.train.core.rundir import RunDir
from harness.train.eval.evaluate import evaluate
from harness.train.eval.paired import paired_bootstrap
from harness.train.run.task_setup import build_task, prepare_task
from harness.train.run.warmstart import DTYPES, initial_policy, make_render, system_prompt


def load_trained_policy(cfg: RunConfig, ckpt: Path, device: torch.device):
    """(model, tokenizer) of a run's checkpoint for `harness eval`: the saved model (full fine-tuning), or the
    base rebuilt from the config with the checkpoint's adapters (its base digest checked)."""
    if cfg.model.lora is None:
        model, tok = load_model(ckpt, dtype=DTYPES[cfg.model.dtype])
        return (lm_head_fp32(model) if cfg.model.lm_head_fp32 else model), tok  # as the run computed
    model, tok, _ = initial_policy(cfg, device)
    model = prepare_policy(model, cfg)
    check_resumed_base(model, RunDir.load_state(ckpt), ckpt.name)
    load_adapter(model, read_adapter(ckpt))
    return model.eval(), tok


def eval_run(
    run_dir: str | Path, n_samples: int | None = None, num_prompts: int | None = None, vs_initial: bool = False
) -> dict:
    for name, value in (("n_samples", n_samples), ("num_prompts", num_prompts)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"harness eval: {name}={value!r} must be an integer >= 1")
    if not Path(run_dir).is_dir():  # checked before RunDir, which would create the folder
        raise ConfigError(f"{run_dir}: no such run directory (train it first: harness train CONFIG --out {run_dir})")
    run = RunDir(run_dir)
    ckpt = run.latest_checkpoint()
    if ckpt is None or not run.config_path.exists():
        raise ConfigError(f"{run_dir} has no config.yaml or checkpoint: it holds no trained run (train it first)")
    overrides = [f"eval.n_samples={n_samples}"] if n_samples is not None else []
    overrides += [f"eval.num_prompts={num_prompts}"] if num_prompts is not None else []
    if n_samples is not None:
        overrides.append(f"eval.ks={[k for k in (1, 2, 4, 8, 16, 32, 64) if k <= n_samples]}")
    cfg = load_config(run.config_path, overrides)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    start_governor(cfg.train.threads)  # as a training run: fewer threads while another process holds a core
    task = build_task(cfg)
    model, tok = load_trained_policy(cfg, ckpt, device)  # model.lora: the base rebuilt, the checkpoint's adapters

    def initial_backend():  # pass-rate buckets not cached: measured on the policy the run started from
        init_model, init_tok, _ = initial_policy(cfg, device)
        return make_backend(cfg.rollout, init_model, init_tok)

    prepare_task(cfg, task, tok, make_render(tok, cfg.model.prompt_suffix, system_prompt(cfg)), initial_backend)
    problems = eval_problems(task, cfg)

    def measure(model, tok) -> tuple[dict, dict]:
        backend = make_backend(cfg.rollout, model, tok)
        per_prompt: dict = {}
        try:
            out = evaluate(
                task,
                backend,
                make_render(tok, cfg.model.prompt_suffix, system_prompt(cfg)),
                problems,
                cfg,
                step=10**6,
                per_prompt=per_prompt,
            )
        finally:
            backend.close()
        return out, per_prompt

    final, final_pp = measure(model.to(device), tok)
    result = {"checkpoint": ckpt.name, "n_samples": cfg.eval.n_samples, "num_prompts": cfg.eval.num_prompts, **final}
    if vs_initial:
        del model
        init_model, init_tok, _ = initial_policy(cfg, device)
        initial, initial_pp = measure(init_model, init_tok)
        result["initial"] = initial
        for key, scores in final_pp.items():
            cmp = paired_bootstrap(initial_pp[key], scores)
            result[f"delta/{key}"] = cmp["delta"]
            result[f"delta/{key}/ci95"] = [cmp["lo"], cmp["hi"]]
            result[f"delta/{key}/p_le_0"] = cmp["p_le_0"]
    atomic_write_text(run.root / "eval.json", json.dumps(result, indent=2, sort_keys=True))
    return result
