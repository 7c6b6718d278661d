"""Periodic eval on a held-out split: unbiased pass@k (Chen et al. 2021, arXiv 2107.03374),
overall and per difficulty bucket, plus lengths of correct and incorrect answers.

Common random numbers: every eval of every run draws its samples with the same seed
(`eval.seed`) on the same prompts, so a change of pass@1 between two evals (or two cells)
reflects the policies more than a fresh draw of sampling noise (with 64 prompts x 8
samples, redrawn samples alone move pass@1 by about +-0.02 at p ~ 0.1).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import torch

from harness import progress
from harness.atomic import atomic_write_text
from harness.objective import pass_at_k
from harness.rollout.base import RolloutBackend, SamplingParams
from harness.tasks.base import Problem, Task
from harness.train.core.collect import score, step_seed
from harness.train.diagnostics.metrics import rollout_metrics
from harness.train.eval.paired import paired_bootstrap

EVAL_PROMPTS = "eval_prompts"  # DIR/eval_prompts/step_N.json: per-prompt pass@1 of every eval
EVAL_SAMPLING_SALT = 10_000  # step_seed salt of every eval's sampling: the same draws at every eval


def is_eval_step(cfg, step: int, is_last: bool) -> bool:
    """Eval at step 0, every `eval.every` steps (eval.spacing=log: at eval.log_steps), and on the final record."""
    if cfg.eval.spacing == "log":
        return is_last or step == 0 or step in cfg.eval.log_steps(cfg.train.steps)
    return is_last or step == 0 or bool(cfg.eval.every and step % cfg.eval.every == 0)


def evaluate(
    task: Task,
    backend: RolloutBackend,
    render,
    problems: list[Problem],
    cfg,
    step: int,
    per_prompt: dict | None = None,
    save_to: Path | None = None,
) -> dict[str, float]:
    """pass@k (overall, per bucket) and lengths on `problems`; if `per_prompt` is a dict, it
    receives "pass_at_k" -> (P,) per-prompt estimates, for paired comparisons (paired.py);
    with `save_to` (a run dir), the per-prompt pass@1 goes to DIR/eval_prompts/step_N.json."""
    per_prompt = {} if per_prompt is None else per_prompt
    ev = cfg.eval
    params = SamplingParams(
        max_new_tokens=cfg.rollout.max_new_tokens,
        temperature=ev.temperature,
        top_p=cfg.rollout.top_p,
        stop=tuple(cfg.rollout.stop),
        seed=step_seed(cfg.eval.seed, 0, EVAL_SAMPLING_SALT),
    )
    with progress.bar(f"eval step {step}", total=len(problems) * ev.n_samples, unit="sample", fed=True):
        rollout = backend.generate([render(p) for p in problems], ev.n_samples, params)
    # the task's reward only: the training objective's overlong shaping is no part of an eval score,
    # so eval/reward/mean is the same for every preset (and the step-0 cache is shared across them)
    ep = score(task, problems, rollout, ev.n_samples, None, cfg.rollout.max_new_tokens)
    correct = ep.correct.view(len(problems), ev.n_samples).sum(-1).tolist()  # c per prompt
    out: dict[str, float] = {}
    buckets: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(problems):
        buckets[p.difficulty].append(i)
    for k in ev.ks:
        scores = torch.tensor([pass_at_k(ev.n_samples, c, k) for c in correct])  # (P,)
        per_prompt[f"pass_at_{k}"] = scores
        out[f"eval/pass_at_{k}"] = float(scores.mean())
        for name, idx in sorted(buckets.items()):
            out[f"eval/pass_at_{k}/{name}"] = float(scores[idx].mean())
    rm = rollout_metrics(ep, prefix="eval/")
    for key in (
        "eval/length/mean",
        "eval/length/correct",
        "eval/length/incorrect",
        "eval/length/truncated_frac",
        "eval/reward/mean",
    ):
        out[key] = rm[key]
    named = {s for sc in ep.scores for s in sc.parts}  # a dataset task's rewards: eval/reward/<name>
    out.update({k: v for k, v in rm.items() if k.rsplit("/", 1)[-1] in named})
    if save_to is not None and "pass_at_1" in per_prompt:
        save_prompt_scores(save_to, step, per_prompt["pass_at_1"].tolist())
    return out


def save_prompt_scores(run_root: Path, step: int, pass_at_1: list[float]) -> None:
    """DIR/eval_prompts/step_N.json: the per-prompt pass@1 of the eval at `step`."""
    folder = Path(run_root) / EVAL_PROMPTS
    folder.mkdir(exist_ok=True)  # rewritten identically if a resumed run repeats this eval
    atomic_write_text(folder / f"step_{step:06d}.json", json.dumps({"step": step, "pass_at_1": pass_at_1}))


def saved_evals(run_root: Path) -> dict[int, Path]:
    """step -> DIR/eval_prompts/step_N.json, for every eval the run saved, in step order."""
    files = sorted((Path(run_root) / EVAL_PROMPTS).glob("step_*.json"))
    return {int(f.stem.split("_")[1]): f for f in files}


def paired_rise(run_root: Path) -> dict | None:
    """The paired rise of pass@1 from the first eval of a run to its last (same prompts, same
    sampling seed), with a bootstrap 95% interval over prompts (paired.py); None if fewer than
    two evals were saved."""
    files = list(saved_evals(run_root).values())
    if len(files) < 2:
        return None
    first, last = (json.loads(f.read_text()) for f in (files[0], files[-1]))
    a, b = torch.tensor(first["pass_at_1"]), torch.tensor(last["pass_at_1"])
    if a.shape != b.shape:
        return None
    cmp = paired_bootstrap(a, b)
    return {
        "from_step": first["step"],
        "to_step": last["step"],
        "prompts": int(a.numel()),
        "delta_pass_at_1": cmp["delta"],
        "ci95": [cmp["lo"], cmp["hi"]],
        "p_le_0": cmp["p_le_0"],
    }
