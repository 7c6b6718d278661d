"""The ready GPU check: the fair protocol of `harness bench` on a lent GPU, ours against TRL, hf
generation on both sides, in under 8 minutes. Run through benchmarks/gpu_check.sh (which installs the carried
wheels and points the model cache at the carried tokenizer); benchmarks/README.md "A ready GPU check" has the exact
device call.

    benchmarks/gpu_check.sh [--budget-s 420] [--out DIR]      # GPU: the check (GPU-ONLY: the figures need CUDA)
    benchmarks/gpu_check.sh --cpu-smoke [--out DIR]           # here, in seconds: every path, tiny sizes
    benchmarks/gpu_check.sh --only llama-1b-random:levers     # only the named blocks (what an earlier check skipped)
    benchmarks/gpu_check.sh --only smollm2-135m-random:levers --profile-step 11   # profile a slow step itself
    benchmarks/gpu_check.sh --only smollm2-135m-random:levers --no-trl --set train.pad_to_multiple_of=1   # one knob

Blocks, run in this order while the time budget lasts (a block that would not fit is skipped and recorded):
    smollm2-135m-random, every lever against every lever   SmolLM2-135M's shape, random weights (its 98 MB GGUF
    llama-1b-random,     every lever against every lever   does not fit the carry), and a 1.17B Llama
    smollm2-135m-random, defaults against defaults         (harness/models/random_llama.py), both with SmolLM2's
    llama-1b-random,     defaults against defaults         tokenizer, on bench_smollm2.yaml's 16 x 4 x 64 workload
Each block is one `harness bench` call: --fixed-length (every response 64 tokens on both sides), 2-3 warm-up steps
(the steadiness rule), 10 measured steps, then one profiled step per side (kernels, host syncs, GPU idle share).
Written to DIR (default $OUT, else results/bench/gpu_check/<timestamp>): gpu_check.md (the reports), gpu_check.json
(the blocks, skipped ones, the machine) and bench/<model>-<lever set>/<timestamp>.json per block (harness bench's JSON).

--cpu-smoke runs the same code on a CPU with tiny sizes: tiny-dense (defaults) and llama-1b-random cut to one
narrow layer (every lever), 1 + 1 steps + the profiled one, 2 prompts x 2 x 4 tokens, our cases in-process; TRL's
side where TRL is installed (--no-trl: ours only). It proves the check works before a GPU is lent (tests/test_gpu_check.py); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
import time
from pathlib import Path

import torch

from harness import machine
from harness.atomic import atomic_write_text
from harness.cli import main as harness_main

REPO = Path(__file__).resolve().parents[1]
GPU_BLOCKS = (
    ("smollm2-135m-random", "levers", ()),
    ("llama-1b-random", "levers", ()),
    ("smollm2-135m-random", "defaults", ()),
    ("llama-1b-random", "defaults", ()),
)
# --checkpoint-every 1000: our checkpoint only after the last step (1.17B: 14 GB of weights and AdamW state a write)
GPU_ARGS = ("--fixed-length", "--profile", "--warmup", "2", "--warmup-max", "3", "--steps", "10", "--threads", "4",
            "--checkpoint-every", "1000")  # fmt: skip
TINY_1B = "model.overrides={num_hidden_layers: 1, hidden_size: 64, intermediate_size: 128, num_attention_heads: 4, num_key_value_heads: 2}"  # noqa: E501
SMOKE_BLOCKS = (
    ("tiny-dense", "defaults", ()),
    ("llama-1b-random", "levers", ("--set", TINY_1B)),
)
SMOKE_ARGS = ("--fixed-length", "--profile", "--in-process", "--warmup", "1", "--warmup-max", "1", "--steps", "1", "--threads", "1",
              "--prompts", "2", "--group-size", "2", "--max-new-tokens", "4")  # fmt: skip


def bench_block(model: str, lever_set: str, extra: tuple, args, bench_dir: Path) -> dict:
    """One `harness bench` call (its markdown captured); its JSON read back."""
    trl = ["--trl"] if args.trl and importlib.util.find_spec("trl") else ["--no-trl"]
    argv = ["bench", "--models", model, "--backends", "hf", "--lever-sets", lever_set, *trl]
    bench_dir = bench_dir / f"{model}-{lever_set}"  # one folder per block: its report is the one JSON there
    argv += [*(SMOKE_ARGS if args.cpu_smoke else GPU_ARGS), *extra, "--out-dir", str(bench_dir)]
    for setting in args.set:  # every case of every block, on top of its lever set (an A/B of one knob)
        argv += ["--set", setting]
    if args.profile_step is not None:  # profile that step of the plan instead of one more after it
        argv += ["--profile-step", str(args.profile_step)]
    before = set(bench_dir.glob("*.json"))
    out = io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(out):
        rc = harness_main(argv)
    new = sorted(set(bench_dir.glob("*.json")) - before)
    report = json.loads(new[-1].read_text()) if new else None
    return {"model": model, "lever_set": lever_set, "argv": argv, "rc": rc, "seconds": time.monotonic() - t0,
            "markdown": out.getvalue(), "json": str(new[-1]) if new else None, "report": report}  # fmt: skip


def block_name(block: tuple) -> str:
    """MODEL:LEVERS, the name --only takes, of a (model, lever_set, extra) block."""
    return f"{block[0]}:{block[1]}"


def run_blocks(args, bench_dir: Path) -> tuple[list[dict], list[dict]]:
    """The blocks in order while the budget lasts: a block is skipped when the longest block so far would not fit."""
    blocks = SMOKE_BLOCKS if args.cpu_smoke else GPU_BLOCKS
    if args.only:  # a later session's rerun of the blocks an earlier one skipped (e.g. llama-1b-random:levers)
        blocks = [b for b in blocks if block_name(b) in args.only]  # main() checked every name
    done, skipped, t0 = [], [], time.monotonic()
    for model, lever_set, extra in blocks:
        longest = max((b["seconds"] for b in done), default=0.0)
        if done and time.monotonic() - t0 + longest > args.budget_s:
            skipped.append({"model": model, "lever_set": lever_set, "why": f"time budget {args.budget_s:.0f} s"})
            continue
        print(f"[gpu_check] {model}, {lever_set}", file=sys.stderr, flush=True)
        done.append(bench_block(model, lever_set, extra, args, bench_dir))
    return done, skipped


def write_results(out: Path, done: list[dict], skipped: list[dict], args, seconds: float) -> None:
    meta = {
        "machine": machine.one_line(),
        "cuda": torch.cuda.is_available(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "cpu_smoke": args.cpu_smoke,
        "budget_s": args.budget_s,
        "seconds": seconds,
        "skipped": skipped,
    }
    atomic_write_text(out / "gpu_check.json", json.dumps({"meta": meta, "blocks": done}, indent=1))
    head = [f"# GPU check ({meta['gpu'] or 'no GPU: CPU smoke, figures mean nothing'}; {meta['machine']})", ""]
    names = ", ".join(f"{s['model']} {s['lever_set']}" for s in skipped) or "none"
    head += [f"{seconds:.0f} s in all; skipped: {names}"]
    body = [
        f"\n## {b['model']}, {b['lever_set']} (exit {b['rc']}, {b['seconds']:.0f} s)\n\n{b['markdown']}" for b in done
    ]
    atomic_write_text(out / "gpu_check.md", "\n".join(head + body))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on a CPU: every path in seconds")
    ap.add_argument("--no-trl", dest="trl", action="store_false", help="ours only (default: TRL too where installed)")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting blocks past this (default 420)")
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="MODEL:LEVERS",
        help="run only these blocks, e.g. llama-1b-random:levers (repeatable; default: all, in order)",
    )
    ap.add_argument(
        "--profile-step",
        type=int,
        default=None,
        metavar="N",
        help="harness bench --profile-step N: profile step N of each case (e.g. 11, a slow one)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="harness bench --set for every case (repeatable), e.g. train.pad_to_multiple_of=1 against the default",
    )
    ap.add_argument("--out", default=None, help="default $OUT, else results/bench/gpu_check/<timestamp>")
    args = ap.parse_args(argv)
    names = [block_name(b) for b in (SMOKE_BLOCKS if args.cpu_smoke else GPU_BLOCKS)]
    unknown = [o for o in args.only if o not in names]
    if unknown:  # before any block runs (a misspelt block would run nothing and only say so at the end)
        ap.error(f"--only {', '.join(unknown)}: not a block of this check; allowed: {', '.join(names)}")
    if not args.cpu_smoke and not torch.cuda.is_available():
        print("gpu_check: no GPU here (torch.cuda.is_available() is False); --cpu-smoke runs the tiny check",
              file=sys.stderr)  # fmt: skip
        return 2
    out = Path(args.out or os.environ.get("OUT") or REPO / "results/bench/gpu_check" / time.strftime("%Y%m%d-%H%M%S"))
    (out / "bench").mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    done, skipped = run_blocks(args, out / "bench")
    write_results(out, done, skipped, args, time.monotonic() - t0)
    print(f"[gpu_check] {out}/gpu_check.md, gpu_check.json", file=sys.stderr)
    return 0 if done and all(b["rc"] == 0 for b in done) else 1


if __name__ == "__main__":
    sys.exit(main())
