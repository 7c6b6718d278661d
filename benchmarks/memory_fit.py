"""What fits: peak memory per process of one update step of a ~1B-parameter model, under each memory knob.
Figures, never assertions.

    python benchmarks/memory_fit.py                          # Llama-shaped 1.1B (TinyLlama's shape), every layout
    python benchmarks/memory_fit.py --size 0.4b --rows 8 --tokens 256     # more activations
    python benchmarks/memory_fit.py --modes fsdp,fsdp+ckpt --no-generate     # the update step only
    python benchmarks/memory_fit.py --ref                    # with a frozen reference copy (a KL term)

The model is built from a transformers config with random weights (nothing downloaded). Each layout runs in
its own process(es) (torchrun for 2): build the model, apply the knob the way a run does (harness functions:
transformers' gradient checkpointing, harness.models.lora.add_lora, harness.train.core.sharding.shard_module),
AdamW, then one update step (forward of B rows x T tokens, the response log-probs the trainer computes, a
policy-gradient loss, backward, clip, AdamW step) and one short generation (the whole weights gathered under
FSDP, harness.parallel.full_params). Per process it prints the peak resident memory of the update step and
of the generation (sampled every 20 ms; freed memory returned to the OS between phases). Each process runs
its own B rows (the per-device batch), so the seconds of a 2-process layout on a 2-core machine are not a
speed figure and are not printed. A layout whose predicted total (all its processes on this machine)
exceeds the memory available here is not run: its prediction is printed instead.

    layout      processes  per process holds (fp32 bytes, P parameters, N processes)
    full        1          weights 4P + gradients 4P + AdamW 8P (+ reference 4P with --ref)
    full+ckpt   1          the same, activations recomputed in the backward
    lora        1          weights 4P (frozen; the reference is the base: no copy) + adapters and their state
    ddp         2          what `full` holds, on each process
    fsdp        2          (4P + 4P + 8P [+ 4P]) / N, plus one layer gathered at a time; the whole weights
                           4P for the generation
    fsdp+ckpt   2          the same, activations recomputed
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import threading
import time

import psutil
import torch

SIZES = {  # Llama-shaped configs (transformers LlamaConfig), random weights
    "1.1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                 num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=False),  # TinyLlama-1.1B's shape
    "0.4b": dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                 num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=True),
}  # fmt: skip
MODES = {"full": 1, "full+ckpt": 1, "lora": 1, "ddp": 2, "fsdp": 2, "fsdp+ckpt": 2}
GB = 1e9


class PeakRSS:
    """The largest resident set size of this process while the block runs, sampled every 20 ms."""

    def __enter__(self):
        self.peak, self._stop = psutil.Process().memory_info().rss, threading.Event()
        self._t = threading.Thread(target=self._watch, daemon=True)
        self._t.start()
        return self

    def _watch(self):
        me = psutil.Process()
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, me.memory_info().rss)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, psutil.Process().memory_info().rss)


def release_freed() -> None:
    """Return freed heap memory to the OS (glibc keeps it otherwise), so the next phase's RSS is its own."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


def build(size: str, mode: str, ref: bool):
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness import parallel
    from harness.models.lora import add_lora, is_lora
    from harness.train.core.components import adamw
    from harness.train.core.sharding import shard_module

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SIZES[size], attn_implementation="sdpa"))
    if mode.endswith("+ckpt"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if mode == "lora":
        model = add_lora(model, 16, 32, 0.0, "all-linear", seed=0)
    reference = None
    if ref and not is_lora(model):
        import copy

        reference = copy.deepcopy(model).eval().requires_grad_(False)
    if mode.startswith("fsdp"):
        shard_module(model)
        if reference is not None:
            shard_module(reference)
    release_freed()
    return model, reference, adamw(model, 1e-5, (0.9, 0.999)), parallel


def step(model, reference, opt, rows: int, tokens: int) -> float:
    """One policy-gradient update step of `rows` rows of `tokens` response tokens after a 32-token prompt."""
    from harness.models.logprobs import response_logprobs
    from harness.parallel import all_reduce_grads, full_params

    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(10, 1000, (32,), generator=g).tolist() for _ in range(rows)]
    resp, mask = torch.randint(10, 1000, (rows, tokens), generator=g), torch.ones(rows, tokens)
    adv = torch.randn(rows, 1, generator=g)
    t0 = time.perf_counter()
    model.train()
    logp, _, _ = response_logprobs(model, prompts, resp, mask, 0)  # (B, T)
    loss = -(adv * logp * mask).sum() / mask.sum()
    if reference is not None:
        with torch.no_grad(), full_params(reference):
            ref_logp, _, _ = response_logprobs(reference, prompts, resp, mask, 0)
        loss = loss + 0.01 * ((logp - ref_logp) * mask).sum() / mask.sum()
    loss.backward()
    all_reduce_grads([model])  # ddp: the gradients summed (fsdp reduce-scattered them in the backward)
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def generate(model, tokens: int = 8) -> None:
    from harness.parallel import full_params

    model.eval()
    with torch.no_grad(), full_params(model):
        model.generate(torch.randint(10, 1000, (2, 32)), max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)


def worker(args) -> None:
    from harness import parallel

    parallel.init_from_env(torch.device("cpu"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // MODES[args.worker]))
    model, reference, opt, _ = build(args.size, args.worker, args.ref)
    params = sum(p.numel() for p in model.parameters()) * (parallel.world() if args.worker.startswith("fsdp") else 1)
    load_peak = psutil.Process().memory_info().rss
    with PeakRSS() as upd:
        step(model, reference, opt, args.rows, args.tokens)
    release_freed()
    gen = None
    if args.generate:
        with PeakRSS() as gen:
            generate(model)
    out = {"mode": args.worker, "rank": parallel.rank(), "params": params, "after_build_gb": load_peak / GB,
           "update_peak_gb": upd.peak / GB, "generate_peak_gb": gen.peak / GB if gen else None}  # fmt: skip
    print("RESULT " + json.dumps(out), flush=True)


def predicted_total_gb(size: str, mode: str, ref: bool, generate: bool) -> float:
    """Bytes all of a layout's processes need on this machine, from the parameter count (no activations):
    fsdp's generation holds the whole weights on each process besides the shards."""
    from transformers import LlamaConfig, LlamaForCausalLM

    with torch.device("meta"):
        P = sum(p.numel() for p in LlamaForCausalLM(LlamaConfig(**SIZES[size])).parameters())
    n = MODES[mode]
    if mode == "lora":
        return 4 * P / GB
    state = (16 + (4 if ref else 0)) * P
    gathered = n * 4 * P if mode.startswith("fsdp") and generate else 0
    return (n * state if mode == "ddp" else state + gathered) / GB


def run_mode(args, mode: str) -> list[dict]:
    n = MODES[mode]
    me = [os.path.abspath(__file__), "--worker", mode, "--size", args.size, "--rows", str(args.rows)]
    me += (
        ["--tokens", str(args.tokens)] + (["--ref"] if args.ref else []) + ([] if args.generate else ["--no-generate"])
    )
    cmd = [sys.executable, *me] if n == 1 else [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                                 f"--nproc_per_node={n}", *me]  # fmt: skip
    # allocations of 64 KiB and more are mapped and unmapped at once: the resident size is what is alive (glibc
    # otherwise keeps freed blocks, and a peak sampled mid-step counts them: measured +1 GB on a 0.4B model)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    rows = [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or len(rows) != n:
        print(f"  {mode}: failed (exit {done.returncode}): {(done.stderr or done.stdout)[-800:]}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="1.1b")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--rows", type=int, default=4, help="rows of the update step (B)")
    ap.add_argument("--tokens", type=int, default=64, help="response tokens per row (T)")
    ap.add_argument("--ref", action="store_true", help="hold a frozen reference copy and add a KL term")
    ap.add_argument("--generate", action=argparse.BooleanOptionalAction, default=True,
                    help="measure a short generation after the step (fsdp: the whole weights gathered)")  # fmt: skip
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    from harness.machine import cpu_model

    avail = psutil.virtual_memory().available / GB
    print(f"# {cpu_model()}, {os.cpu_count()} cores, {psutil.virtual_memory().total / GB:.1f} GB "
          f"({avail:.1f} available); size {args.size}, B={args.rows} x T={args.tokens}, ref={args.ref}")  # fmt: skip
    print("| layout | processes | predicted, all processes (GB) | per process (GB): after build | update step "
          "peak | generation peak |\n|---|---|---|---|---|---|")  # fmt: skip
    for mode in args.modes.split(","):
        need = predicted_total_gb(args.size, mode, args.ref, args.generate)
        if need > 0.9 * avail:
            print(f"| {mode} | {MODES[mode]} | {need:.1f} | not run: over this machine's {avail:.1f} GB | | |")
            continue
        for r in run_mode(args, mode):
            gen = "-" if r["generate_peak_gb"] is None else f"{r['generate_peak_gb']:.1f}"
            print(f"| {mode} | {MODES[mode]} (rank {r['rank']}) | {need:.1f} | {r['after_build_gb']:.1f} | "
                  f"{r['update_peak_gb']:.1f} | {gen} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
