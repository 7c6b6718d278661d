"""Where a GRPO step's time goes: one step of our trainer under torch.profiler, by phase and by operator, and
each phase against its compute floor. Figures, never assertions.

    python benchmarks/profile_step.py --model tiny-dense --prompts 16          # the bench's tiny workload
    python benchmarks/profile_step.py --model smollm2-135m --prompts 16        # the bench's SmolLM2 workload
    python benchmarks/profile_step.py --model smollm2-135m --prompts 16 --set train.autocast=bf16

The workload is `harness bench`'s (harness/bench/workload.py: the model's run YAML, no warm start, one
optimizer step per batch, a checkpoint after the step). Steps 0 and 1 run; step 1 is profiled (step 0 holds
lazy initialisation and the initial eval). Printed:

1. the phases of step 1 (rollout, score, update, checkpoint) in seconds, from the run's own perf/* metrics;
2. per phase, the FLOPs of its matrix products (torch.profiler's with_flops: aten::mm, addmm, bmm, matmul,
   linear; attention's softmax and the elementwise work are not counted) and the floor they set: FLOPs /
   this CPU's measured matmul throughput (torch.mm of a (tokens x hidden) by (hidden x 4 hidden) product
   at the phase's precision, fp32 and bf16, on the step's threads) -- how far each phase is from the limit;
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


@contextmanager
def phases_recorded():
    """Label the trainer's phases for the profiler (record_function around collect, score_episode,
    policy_update and the checkpoint), by wrapping the functions the RL step calls."""
    import harness.train.rl.step as step_mod
    import harness.train.run.shell as shell_mod

    saved = {}

    def wrap(owner, name, label):
        real = getattr(owner, name)
        saved[(owner, name)] = real

        def wrapper(*a, **k):
            with record_function(f"phase::{label}"):
                return real(*a, **k)

        setattr(owner, name, wrapper)

    wrap(step_mod, "collect", "rollout")
    wrap(step_mod, "score_episode", "score")
    wrap(step_mod, "policy_update", "update")
    wrap(shell_mod.Shell, "_checkpoint", "checkpoint")
    try:
        yield
    finally:
        for (owner, name), real in saved.items():
            setattr(owner, name, real)


class ProfileStep:
    """Profile the trainer's step `which` (the RL trainer's step method) and nothing else."""

    def __init__(self, which: int):
        self.which, self.prof = which, None

    @contextmanager
    def installed(self):
        import harness.train.rl.step as step_mod

        real = step_mod.RLTrainer.step
        me = self

        def step(trainer, ctx, step, rec):
            if step != me.which:
                return real(trainer, ctx, step, rec)
            me.prof = profile(activities=[ProfilerActivity.CPU], with_flops=True, record_shapes=False)
            with me.prof:
                return real(trainer, ctx, step, rec)

        step_mod.RLTrainer.step = step
        try:
            yield
        finally:
            step_mod.RLTrainer.step = real


def phase_flops(prof) -> dict[str, float]:
    """FLOPs of the profiled matrix products, by the phase (record_function range) they ran in."""
    events = prof.events()
    ranges = [
        (e.name.split("::", 1)[1], e.time_range.start, e.time_range.end) for e in events if e.name.startswith("phase::")
    ]
    out = {p: 0.0 for p in PHASES}
    for e in events:
        if not getattr(e, "flops", 0):
            continue
        for name, start, end in ranges:
            if start <= e.time_range.start <= end:
                out[name] += e.flops
                break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-dense")
    ap.add_argument("--prompts", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--set", nargs="*", default=[], help="extra config overrides (a lever on or off)")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    cfg = bench_config(args.model, "hf", steps=2, threads=args.threads, prompts=args.prompts, extra=args.set)
    torch.set_num_threads(args.threads)
    from harness.train import train

    prof = ProfileStep(1)
    with tempfile.TemporaryDirectory() as tmp, phases_recorded(), prof.installed():
        train(cfg, Path(tmp) / "run")
        recs = [json.loads(line) for line in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()]
    rec = next(r for r in recs if r.get("step") == 1 and "perf/rollout_seconds" in r)
    ckpt = next((r.get("perf/checkpoint_seconds") for r in recs if r.get("step") == 2), None)
    seconds = {
        "rollout": rec["perf/rollout_seconds"],
        "score": rec["perf/score_seconds"],
        "update": rec["perf/update_seconds"],
        "checkpoint": ckpt,
    }
    from harness.models.lora import meta_model

    arch = meta_model(cfg.model.name, cfg.model.overrides)
    H = arch.config.hidden_size
    tokens = int(rec["perf/rollout_tokens_per_s"] * rec["perf/rollout_seconds"])
    fp32 = matmul_gflops(max(256, min(tokens, 4096)), H, 4 * H, torch.float32)
    bf16 = matmul_gflops(max(256, min(tokens, 4096)), H, 4 * H, torch.bfloat16)
    autocast = bool(cfg.train.autocast)
    flops = phase_flops(prof.prof)
    print(f"# {cpu_model()}, {os.cpu_count()} cores, {args.threads} threads; torch {torch.__version__}")
    print(f"# {args.model}: N={cfg.train.prompts_per_step} x G={cfg.train.group_size} x T<={cfg.rollout.max_new_tokens}, "
          f"{tokens} completion tokens in step 1; overrides: {' '.join(args.set) or 'none'}")  # fmt: skip
    print(
        f"# torch.mm ({max(256, min(tokens, 4096))} x {H}) @ ({H} x {4 * H}): fp32 {fp32:.0f} GFLOP/s, bf16 {bf16:.0f} GFLOP/s"
    )
    print(
        "| phase | seconds | matmul GFLOP | floor at fp32 (s) | floor at bf16 (s) | seconds / floor at its precision |"
    )
    print("|---|---|---|---|---|---|")
    for p in PHASES:
        s, f = seconds[p], flops[p] / 1e9
        if s is None:
            continue
        prec = bf16 if autocast and p in ("score", "update") else fp32
        ratio = s / (f / prec) if f > 0 else float("nan")
        print(f"| {p} | {s:.2f} | {f:.1f} | {f / fp32:.2f} | {f / bf16:.2f} | {ratio:.1f} |")
    print()
    table = prof.prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top, max_name_column_width=40)
    print(table)


if __name__ == "__main__":
    sys.exit(main())
