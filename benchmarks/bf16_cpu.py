"""bf16 vs fp32 matmul time on this machine (why train.autocast=bf16 warns on a CPU without bf16
instructions: harness/machine.py bf16_slow_reason, docs/scale.md). A figure, never an assertion.

    python benchmarks/bf16_cpu.py                 # 128, 256, 512; 1 thread
    python benchmarks/bf16_cpu.py --sizes 64 1024 --threads 2

Prints the CPU, its bf16 instructions, and per size the median of --repeats timings of
torch.mm(n x n, n x n) in fp32 and in bf16 with their ratio (bf16 / fp32) and spread.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from harness.machine import BF16_ISA, bf16_slow_reason, cpu_model, isa_flags


def time_mm(n: int, dtype: torch.dtype, repeats: int, budget_s: float) -> list[float]:
    """Seconds per torch.mm of two (n, n) matrices of `dtype`, `repeats` timings (each the mean of as
    many calls as fit in budget_s, at least one)."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    torch.mm(a, b)  # warm-up (kernel selection)
    out = []
    for _ in range(repeats):
        calls, t0 = 0, time.perf_counter()
        while True:
            torch.mm(a, b)
            calls += 1
            if time.perf_counter() - t0 >= budget_s:
                break
        out.append((time.perf_counter() - t0) / calls)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.2, help="seconds per timing (at least one call)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    flags = isa_flags()
    print(
        f"CPU: {cpu_model()}; ISA: {', '.join(flags) or '-'}; bf16 instructions "
        f"({' / '.join(BF16_ISA)}): {[f for f in flags if f in BF16_ISA] or 'none'}; torch threads {args.threads}"
    )
    print(f"harness warns: {bf16_slow_reason() or 'no'}")
    print(f"{'n':>6} {'fp32 ms':>10} {'bf16 ms':>10} {'bf16/fp32':>10} {'ratio range':>16}")
    for n in args.sizes:
        f32 = time_mm(n, torch.float32, args.repeats, args.budget)
        b16 = time_mm(n, torch.bfloat16, args.repeats, args.budget)
        ratios = [b / f for b, f in zip(b16, f32)]
        print(
            f"{n:>6} {statistics.median(f32) * 1e3:>10.3f} {statistics.median(b16) * 1e3:>10.3f} "
            f"{statistics.median(ratios):>10.0f} {min(ratios):>7.0f}-{max(ratios):<7.0f}"
        )


if __name__ == "__main__":
    main()
