"""Two runs compared prompt by prompt on their saved evals: `harness compare RUN_A RUN_B`.

Every eval a run makes writes its per-prompt pass@1 to RUN/eval_prompts/step_N.json
(evaluate.py). Two runs whose evals drew the same prompts with the same sampling seed (same
task, eval.num_prompts, eval.seed, eval.n_samples, eval.temperature, rollout.max_new_tokens,
rollout.top_p) can be compared prompt by prompt: d_i = score_B(i) - score_A(i) removes the
prompt-difficulty variance, and the 95% interval is the paired bootstrap over prompts
(paired.py). Runs whose evals differ in any of those keys are refused (ConfigError naming the
key and both values): their prompts or draws are not the same, so a per-prompt difference
would mean nothing.

pass@k for k <= n (n = eval.n_samples) comes from each prompt's correct count c = n * pass@1
with the unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al. 2021, eq. 1;
harness/objective/passk.py): the same numbers the run logged as eval/pass_at_k.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml

from harness.config import ConfigError
from harness.objective.passk import pass_at_k
from harness.train.eval.evaluate import saved_evals
from harness.train.eval.paired import paired_bootstrap

# the config keys that fix which prompts an eval draws and how it samples them
EVAL_IDENTITY = (
    "task.name",
    "task.difficulty_mix",
    "task.options",
    "eval.num_prompts",
    "eval.seed",
    "eval.n_samples",
    "eval.temperature",
    "rollout.max_new_tokens",
    "rollout.top_p",
    "task.data",
    "task.rewards",
    "task.correct",
    "rollout.stop",
    "rollout.max_prompt_tokens",
)
# keys added after runs were recorded: a config.yaml without them had their default
IDENTITY_DEFAULTS = {
    "task.data": None,
    "task.rewards": [],
    "task.correct": None,
    "rollout.stop": [],
    "rollout.max_prompt_tokens": None,
}


def dotted(cfg: dict, key: str):
    """cfg["a"]["b"] for key "a.b" (None where a level is missing)."""
    node = cfg
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def run_config(run_dir: Path) -> dict:
    """RUN/config.yaml, the resolved config the run was trained with."""
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"{run_dir}: no config.yaml (not a run directory, or no step finished yet)")
    return yaml.safe_load(path.read_text())


# task.rewards[i] keys added after runs were recorded, at their default (a reward model's keys)
REWARD_DEFAULTS = {"model": None, "micro_batch_size": None, "normalize": "none"}


def _identity(key: str, value):
    """A recorded value as the comparison reads it: task.rewards entries without the keys at REWARD_DEFAULTS."""
    if key == "task.rewards" and isinstance(value, list):
        return [
            {k: v for k, v in e.items() if not (k in REWARD_DEFAULTS and v == REWARD_DEFAULTS[k])}
            if isinstance(e, dict)
            else e
            for e in value
        ]
    return value


def check_paired(cfg_a: dict, cfg_b: dict, run_a: Path, run_b: Path) -> None:
    """Raise a ConfigError naming the first eval-identity key whose value differs."""
    for key in EVAL_IDENTITY:
        va, vb = (
            _identity(key, IDENTITY_DEFAULTS.get(key) if v is None else v)
            for v in (dotted(cfg_a, key), dotted(cfg_b, key))
        )
        if va != vb:
            raise ConfigError(
                f"{key}: {va!r} in {run_a} but {vb!r} in {run_b}; runs are compared prompt by prompt "
                f"only when their evals draw the same prompts the same way ({', '.join(EVAL_IDENTITY)})"
            )


def pick_step(steps_a: dict, steps_b: dict, step: int | None, run_a: Path, run_b: Path) -> int:
    """The requested step (saved by both runs), else the last step both saved."""
    common = sorted(set(steps_a) & set(steps_b))
    if step is not None:
        for run, steps in ((run_a, steps_a), (run_b, steps_b)):
            if step not in steps:
                raise ConfigError(f"--step: {step} has no saved eval in {run}; its evals: {sorted(steps) or 'none'}")
        return step
    if not common:
        raise ConfigError(
            f"--step: no eval step saved by both runs ({run_a}: {sorted(steps_a) or 'none'}; "
            f"{run_b}: {sorted(steps_b) or 'none'})"
        )
    return common[-1]


def correct_counts(pass_at_1: list[float], n: int, where: Path) -> list[int]:
    """(P,) per-prompt pass@1 of n samples -> (P,) correct counts c = n * pass@1."""
    counts = [round(p * n) for p in pass_at_1]
    bad = [p for p, c in zip(pass_at_1, counts) if abs(p * n - c) > 1e-6]
    if bad:
        raise ConfigError(f"{where}: pass@1 {bad[0]!r} is not a count out of eval.n_samples = {n}")
    return counts


def compare_runs(
    run_a: str | Path, run_b: str | Path, step: int | None = None, ks: list[int] | None = None, n_boot: int = 2000
) -> dict:
    """Per-prompt comparison of run B against run A at one eval step.
    -> {"step", "prompts", "n_samples", "runs": [A, B], "metrics": {"pass_at_k": {"a", "b", "delta", "lo", "hi",
    "p_le_0"}}}; delta = B - A, [lo, hi] the paired bootstrap 95% interval over prompts."""
    run_a, run_b = Path(run_a), Path(run_b)
    cfg_a, cfg_b = run_config(run_a), run_config(run_b)
    check_paired(cfg_a, cfg_b, run_a, run_b)
    steps_a, steps_b = saved_evals(run_a), saved_evals(run_b)
    at = pick_step(steps_a, steps_b, step, run_a, run_b)
    n = int(dotted(cfg_a, "eval.n_samples"))
    ks = sorted(set(ks or dotted(cfg_a, "eval.ks") or [1]))
    outside = [k for k in ks if k < 1 or k > n]
    if outside:
        raise ConfigError(f"--ks: {outside[0]} is outside 1..eval.n_samples = {n}")
    counts = [correct_counts(json.loads(s[at].read_text())["pass_at_1"], n, s[at]) for s in (steps_a, steps_b)]
    if len(counts[0]) != len(counts[1]):
        raise ConfigError(f"eval prompts: {len(counts[0])} in {run_a} but {len(counts[1])} in {run_b} at step {at}")
    metrics = {}
    for k in ks:
        a, b = (torch.tensor([pass_at_k(n, c, k) for c in cs], dtype=torch.float64) for cs in counts)  # (P,) each
        metrics[f"pass_at_{k}"] = {"a": float(a.mean()), "b": float(b.mean()), **paired_bootstrap(a, b, n_boot=n_boot)}
    return {"step": at, "prompts": len(counts[0]), "n_samples": n, "runs": [str(run_a), str(run_b)], "metrics": metrics}


def format_comparison(result: dict) -> str:
    """The comparison as a small table, one metric a line."""
    a, b = result["runs"]
    lines = [
        f"A = {a}",
        f"B = {b}",
        f"eval at step {result['step']}: {result['prompts']} prompts x {result['n_samples']} samples, "
        "the same prompts and sampling seed in both runs; B - A with a paired bootstrap 95% interval over prompts",
        f"{'metric':<12} {'A':>7} {'B':>7} {'B - A':>8}  95% interval         P(B - A <= 0)",
    ]
    for name, m in result["metrics"].items():
        lines.append(
            f"{name:<12} {m['a']:7.3f} {m['b']:7.3f} {m['delta']:+8.3f}  [{m['lo']:+.3f}, {m['hi']:+.3f}]"
            f"     {m['p_le_0']:.3f}"
        )
    return "\n".join(lines)
