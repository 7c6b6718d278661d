"""Where a GRPO step's time goes: one step of our trainer under torch.profiler, by phase and by operator, and
each phase against its compute floor. Figures, never assertions.

    python benchmarks/profile_step.py --model tiny-dense --prompts 16          # the bench's tiny workload
    python benchmarks/profile_step.py --model smollm2-135m --prompts 16        # the bench's SmolLM2 workload
    python benchmarks/profile_step.py --model smollm2-135m --set train.autocast=bf16

The workload is `harness bench`'s (harness/bench/workload.py: the model's run YAML, no warm start, one
optimizer step per batch, a checkpoint after each step). Steps 0 and 1 run; step 1 is profiled (step 0
holds lazy initialisation and the initial eval). Printed:

1. the phases of step 1 (rollout, score, update, checkpoint) in seconds, from the run's own perf/* metrics;
2. per phase, the FLOPs of its matrix products counted from the step's tokens and the model's shape: a
   forward is 2 x (weights outside the embedding) per token through the layers, 2 x hidden x vocabulary per
   position through the output head, and attention's two score products; the rollout is the prefill of
   every row's prompt then one forward per generated token over the growing cache; the score phase one
   reference forward; the update a forward and a backward (3 forwards). Elementwise work is not counted.
   The floor is FLOPs / this CPU's measured matmul throughput (torch.mm of a (tokens x hidden) by
   (hidden x 4 hidden) product, fp32 and bf16, on the step's threads): how far each phase is from the limit.
   (torch.profiler's own with_flops held 19 GB for one SmolLM2 step and was killed by the OOM killer.)
3. the top operators of the step by self CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from harness.bench.workload import bench_config
from harness.machine import cpu_model

PHASES = ("rollout", "score", "update", "checkpoint")


def matmul_gflops(m: int, k: int, n: int, dtype: torch.dtype, seconds: float = 1.0) -> float:
    """Measured torch.mm throughput of an (m x k) by (k x n) product in `dtype` (median of ~1 s of repeats)."""
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    for _ in range(3):
        torch.mm(a, b)
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        t0 = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - t0)
    times.sort()
    return 2 * m * k * n / times[len(times) // 2] / 1e9


class StepProfile:
    """Profile the RL trainer's step `which` (torch.profiler, CPU), its phases labelled (record_function around
    collect, score_episode, policy_update and the checkpoint after it), and keep that step's prompt lengths."""

    def __init__(self, which: int):
        self.which, self.prof, self.prompt_lens = which, None, []

    @contextmanager
    def installed(self):
        import harness.train.rl.step as step_mod
        import harness.train.run.shell as shell_mod

        saved = [
            (step_mod, "collect"),
            (step_mod, "score_episode"),
            (step_mod, "policy_update"),
            (shell_mod.Shell, "_checkpoint"),
            (step_mod.RLTrainer, "step"),
        ]
        saved = [(owner, name, getattr(owner, name)) for owner, name in saved]
        for (owner, name, real), label in zip(saved[:4], PHASES):
            setattr(owner, name, self._labelled(real, label))
        step_mod.RLTrainer.step = self._profiled(saved[4][2])
        try:
            yield self
        finally:
            for owner, name, real in saved:
                setattr(owner, name, real)

    def _labelled(self, real, label):
        def wrapper(*a, **k):
            with record_function(f"phase::{label}"):
                out = real(*a, **k)
            if label == "rollout" and self.prof is not None and not self.prompt_lens:
                self.prompt_lens = [len(p) for p in out[0].rollout.prompt_ids]
            return out

        return wrapper

    def _profiled(self, real):
        def step(trainer, ctx, step, rec):
            if step != self.which:
                return real(trainer, ctx, step, rec)
            self.prof = profile(activities=[ProfilerActivity.CPU])
            with self.prof:
                return real(trainer, ctx, step, rec)

        return step


def forward_flops(arch, lengths: list[int], head_positions: float) -> float:
    """Matrix-product FLOPs of one forward over rows of `lengths` tokens, the head on `head_positions`."""
    c = arch.config
    body = sum(p.numel() for n, p in arch.named_parameters() if "embed" not in n and "lm_head" not in n)
    attn = sum(2 * c.hidden_size * L * L for L in lengths) * c.num_hidden_layers  # QK^T and AV, causal: half
    return 2 * body * sum(lengths) + 2 * c.hidden_size * c.vocab_size * head_positions + attn


def phase_flops(arch, prompt_lens: list[int], response_tokens: float) -> dict[str, float]:
    """Per phase, for rows of the given prompt lengths and `response_tokens` generated in all."""
    c, rows = arch.config, len(prompt_lens)
    resp = response_tokens / rows  # mean response length
    prefill = forward_flops(arch, prompt_lens, rows)  # the head on each row's last prompt token
    per_token = forward_flops(arch, [1], 1) - 2 * c.hidden_size * c.num_hidden_layers  # one decoded token
    cache = 4 * c.hidden_size * c.num_hidden_layers * (sum(prompt_lens) / rows + resp / 2)  # over the cache
    decode = (per_token + cache) * response_tokens
    one = forward_flops(arch, [int(p + resp) for p in prompt_lens], response_tokens)
    return {"rollout": prefill + decode, "score": one, "update": 3 * one, "checkpoint": 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-dense")
    ap.add_argument("--prompts", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--set", action="extend", nargs="*", default=[], help="extra config overrides (a lever on or off), repeatable"
    )
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    cfg = bench_config(args.model, "hf", steps=2, threads=args.threads, prompts=args.prompts, extra=args.set)
    torch.set_num_threads(args.threads)
    from harness.models.lora import meta_model
    from harness.train import train

    with tempfile.TemporaryDirectory() as tmp, StepProfile(1).installed() as sp:
        train(cfg, Path(tmp) / "run")
        recs = [json.loads(line) for line in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()]
    rec = next(r for r in recs if r.get("step") == 1 and "perf/rollout_seconds" in r)
    seconds = {
        "rollout": rec["perf/rollout_seconds"],
        "score": rec["perf/score_seconds"],
        "update": rec["perf/update_seconds"],
        "checkpoint": next((r.get("perf/checkpoint_seconds") for r in recs if r.get("step") == 2), None),
    }
    arch = meta_model(cfg.model.name, cfg.model.overrides)
    H = arch.config.hidden_size
    tokens = rec["perf/rollout_tokens_per_s"] * rec["perf/rollout_seconds"]
    m = max(256, min(int(tokens), 4096))
    fp32, bf16 = matmul_gflops(m, H, 4 * H, torch.float32), matmul_gflops(m, H, 4 * H, torch.bfloat16)
    flops = phase_flops(arch, sp.prompt_lens, tokens)
    bf16_phases = {"score", "update"} if cfg.train.autocast else set()
    print(f"# {cpu_model()}, {os.cpu_count()} cores, {args.threads} threads; torch {torch.__version__}")
    print(
        f"# {args.model}: N={cfg.train.prompts_per_step} x G={cfg.train.group_size} x T<={cfg.rollout.max_new_tokens}; "
        f"step 1: {tokens:.0f} completion tokens, prompts {min(sp.prompt_lens)}-{max(sp.prompt_lens)} tokens; "
        f"overrides: {' '.join(args.set) or 'none'}"
    )
    print(f"# torch.mm ({m} x {H}) @ ({H} x {4 * H}): fp32 {fp32:.0f} GFLOP/s, bf16 {bf16:.0f} GFLOP/s")
    print(
        "| phase | seconds | matmul GFLOP | floor at fp32 (s) | floor at bf16 (s) | seconds / floor at its precision |"
    )
    print("|---|---|---|---|---|---|")
    for p in PHASES:
        s, f = seconds[p], flops[p] / 1e9
        if s is None:
            continue
        floor = f / (bf16 if p in bf16_phases else fp32)
        ratio = f"{s / floor:.1f}" if floor > 0 else "-"
        print(f"| {p} | {s:.2f} | {f:.1f} | {f / fp32:.2f} | {f / bf16:.2f} | {ratio} |")
    print()
    print(sp.prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top, max_name_column_width=50))


if __name__ == "__main__":
    sys.exit(main())
