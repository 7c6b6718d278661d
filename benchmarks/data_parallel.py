"""One run on 1 and on 2 processes (train.nproc, docs/scale.md): how often a sampled token flips, and what
each process costs. Figures, never assertions.

    python benchmarks/data_parallel.py                      # the smoke config, 3 steps, 2 repeats
    python benchmarks/data_parallel.py --steps 5 --repeats 3 --prompts 64

1. Flips: at the smoke config's warm start, --prompts prompts x 8 samples generated in one call and in
   two halves (as 2 processes do, rollout.seeding=prompt); prints the share of rows whose tokens differ
   (a near-tie at a CDF boundary, from logits rounded in a batch padded to another width).
2. Cost: `harness train --nproc N` for N = 1, and N = 2 under each layout of --layouts (train.parallel:
   ddp, fsdp), on the smoke config (rollout.seeding=prompt), --repeats times each, alternating; per arm
   the median and range over repeats of the mean step time (steps after the first), rollout and train
   tokens/s, and the peak resident memory of the processes (perf/peak_mem_mb_ranks: max over the
   ranks). Prints the CPU and its core count: on 2 cores, 2 processes of 1 thread each against 1
   process of 2 threads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from harness.config import load_config
from harness.machine import cpu_model
from harness.rollout import SamplingParams, make_backend
from harness.rollout.sharded import concat_rollouts
from harness.train.core.collect import eval_problems
from harness.train.run.task_setup import build_task
from harness.train.run.warmstart import initial_policy

CONFIG = "experiments/runs/smoke.yaml"


def flip_share(n_prompts: int, seeds: int = 3) -> tuple[int, int]:
    """(rows that differ, rows) between one generate call and two halves, over `seeds` sampling seeds."""
    cfg = load_config(CONFIG, ["rollout.seeding=prompt", f"eval.num_prompts={n_prompts}"])
    model, tok, render = initial_policy(cfg, torch.device("cpu"))
    be = make_backend(cfg.rollout, model, tok)
    prompts = [render(p) for p in eval_problems(build_task(cfg), cfg)]
    differ = rows = 0
    for seed in range(seeds):
        p = SamplingParams(max_new_tokens=cfg.rollout.max_new_tokens, temperature=cfg.rollout.temperature, seed=seed)
        whole = be.generate(prompts, 8, p)
        half = len(prompts) // 2
        parts = [be.generate(prompts[:half], 8, p), be.generate(prompts[half:], 8, replace(p, first_prompt=half))]
        joined = concat_rollouts(parts, be.pad_id)
        T = min(whole.response_ids.shape[1], joined.response_ids.shape[1])
        same = (whole.response_ids[:, :T] == joined.response_ids[:, :T]).all(-1)
        same &= whole.response_mask.sum(-1) == joined.response_mask.sum(-1)
        differ += int((~same).sum())
        rows += len(same)
    return differ, rows


def one_run(nproc: int, steps: int, out: Path, layout: str = "ddp") -> dict:
    cmd = [sys.executable, "-m", "harness.cli", "train", CONFIG, "rollout.seeding=prompt", f"train.steps={steps}"]
    cmd += [f"train.parallel={layout}"]
    cmd += ["eval.every=0", "eval.num_prompts=8", "tracking.mlflow=false", "--out", str(out), "--nproc", str(nproc)]
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // nproc))}
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps_ = [r for r in recs[1:] if "perf/step_seconds" in r]  # the first step builds caches
    mean = lambda k: statistics.mean(r[k] for r in steps_)  # noqa: E731
    mem = max(r.get("perf/peak_mem_mb_ranks", r["perf/peak_mem_mb"]) for r in recs if "perf/peak_mem_mb" in r)
    return {
        "step_s": mean("perf/step_seconds"),
        "rollout_tok_s": mean("perf/rollout_tokens_per_s"),
        "train_tok_s": mean("perf/train_tokens_per_s"),
        "peak_mem_mb": mem,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--layouts", default="ddp,fsdp", help="train.parallel of the 2-process arms")
    ap.add_argument("--skip-flips", action="store_true")
    ap.add_argument("--flips-only", action="store_true", help="only part 1 (no timing: fine on a busy machine)")
    args = ap.parse_args()
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; torch {torch.__version__}")
    if not args.skip_flips:
        d, n = flip_share(args.prompts)
        print(f"flips: {d} of {n} rows ({100 * d / n:.2f}%) differ between one generate call and two halves")
    if args.flips_only:
        return
    arms = [(1, "ddp")] + [(2, layout) for layout in args.layouts.split(",")]
    runs: dict[tuple, list[dict]] = {arm: [] for arm in arms}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for nproc, layout in arms:
                out = Path(tmp) / f"n{nproc}-{layout}-r{r}"
                runs[(nproc, layout)].append(one_run(nproc, args.steps, out, layout))
    for (nproc, layout), rs in runs.items():
        cells = []
        for k in ("step_s", "rollout_tok_s", "train_tok_s", "peak_mem_mb"):
            v = [x[k] for x in rs]
            cells.append(f"{k} {statistics.median(v):.1f} [{min(v):.1f}, {max(v):.1f}]")
        print(f"nproc {nproc}{f' {layout}' if nproc > 1 else ''}: " + "; ".join(cells))


if __name__ == "__main__":
    main()
