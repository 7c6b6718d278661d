"""`train.chunked_head` off and on: the peak memory and the time of one forward + backward of the trainer's response
forward (log-probs and entropies, harness/models/logprobs.py `response_forward`) against the response length T, on
a model whose cost is its vocabulary. A figure, never an assertion.

    python benchmarks/chunked_head.py --repeats 2          # T = 256 ... 8192, one row, Qwen2.5's vocabulary
    python benchmarks/chunked_head.py --lengths 64 --rows 16 --vocab 49152 --hidden 576 --layers 2 --repeats 3
                                                            # a SmolLM2 micro-batch's head: 16 rows x 64 tokens

The model: a Llama of hidden 256 and 1 layer with random weights and Qwen2.5's 151,936-token vocabulary (tied
embeddings, 39M parameters, almost all of them the head's). One row: a 16-token prompt and T response tokens. Each
point (T, off/on) runs in a fresh subprocess with the training run's allocator settings (harness/malloc.py), so
that its peak resident memory is its own (torch's CPU allocator keeps no peak statistics): after a warm-up of 16
tokens (model built, kernels loaded) the resident peak is reset (/proc/self/clear_refs) and the step's peak is
read over the resident memory before it (/proc/self/status VmHWM - VmRSS): the memory the head path adds. A point
whose plain forward would hold more than --max-gb of logits (4 copies of T x V fp32: the model's logits, their
gathered copy and the two gradients) is skipped, not run, and so is any point whose 4 copies of its logits (a chunk's,
when on) would leave the host less than --spare-gb (a shared host: a point never makes the OOM killer pick a
neighbour). Time: the step's wall seconds and its CPU seconds (user +
system: the page faults of fresh allocations count), the latter the one to read on a shared host.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

VOCAB = 151_936  # Qwen2.5's
PROMPT = 16


def build(hidden: int, layers: int, vocab: int = VOCAB):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=16_384,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(cfg).float().train()


def step(model, T: int, chunk: int, rows: int = 1) -> tuple[float, float]:
    """One forward + backward of log-probs and entropies over `rows` rows of T response tokens -> (wall seconds,
    CPU seconds of this process: user + system, which a concurrent job on the same cores moves far less)."""
    import torch

    from harness.models import logprobs as lp

    g = torch.Generator().manual_seed(T)
    V = model.config.vocab_size
    prompts = [torch.randint(3, V, (PROMPT,), generator=g).tolist() for _ in range(rows)]
    response = torch.randint(3, V, (rows, T), generator=g)
    mask = torch.ones(rows, T)
    start, cpu = time.perf_counter(), cpu_seconds()
    with lp.chunked_head(chunk):
        logp, entropy, _ = lp.response_forward(model, prompts, response, mask, 0, 1.0, with_entropy=True)
    (logp.sum() + 0.1 * entropy.sum()).backward()
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    model.zero_grad(set_to_none=True)
    return seconds, cpu


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def status_mb(field: str) -> float:
    """/proc/self/status's VmRSS (resident now) or VmHWM (its peak since the last reset), in MB."""
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith(field + ":"))
    return int(line.split()[1]) / 1024  # kB


def reset_peak() -> bool:
    """Reset the resident peak (VmHWM) to the resident now (Linux >= 4.0: `5` to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def point(T: int, chunk: int, hidden: int, layers: int, vocab: int = VOCAB, rows: int = 1) -> dict:
    """In this process: warm up on 16 tokens, then one timed step at T -> {seconds, peak_mb}: the resident peak of
    the step over the resident memory before it (VmHWM reset there; else getrusage's maxrss, which counts the
    model's construction too)."""
    import torch

    from harness.malloc import tune

    tune()  # the training run's allocator settings (harness/train/run/shell.py)
    torch.set_num_threads(1)
    model = build(hidden, layers, vocab)
    step(model, 16, chunk)
    before, reset = status_mb("VmRSS"), reset_peak()
    seconds, cpu = step(model, T, chunk, rows)
    peak = status_mb("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"T": T, "chunk": chunk, "seconds": seconds, "cpu_s": cpu, "peak_mb": peak - before}


def plain_logits_gb(tokens: int, vocab: int) -> float:
    return 4 * tokens * vocab * 4 / 1e9


def available_gb() -> float:
    """/proc/meminfo's MemAvailable, in GB (inf where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("MemAvailable:")) * 1024 / 1e9
    except (OSError, StopIteration):
        return float("inf")


def run_point(args, T: int, chunk: int) -> dict | None:
    """One point in a fresh subprocess -> its {seconds, peak_mb}, or None (its error printed)."""
    cmd = [sys.executable, __file__, "--point", str(T), str(chunk), "--hidden", str(args.hidden)]
    cmd += ["--layers", str(args.layers), "--vocab", str(args.vocab), "--rows", str(args.rows)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=os.environ)
    if out.returncode:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def median_point(runs: list[dict]) -> dict | None:
    """The median seconds and peak of a point's repeats (None: none ran)."""
    if not runs:
        return None
    return {k: statistics.median(r[k] for r in runs) for k in ("seconds", "cpu_s", "peak_mb")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 8192])
    ap.add_argument("--chunk", type=int, default=512, help="train.head_chunk_tokens of the 'on' points")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=VOCAB)
    ap.add_argument("--rows", type=int, default=1, help="rows of T response tokens (a micro-batch)")
    ap.add_argument("--repeats", type=int, default=1, help="points a (T, off/on), alternating; the median shown")
    ap.add_argument("--max-gb", type=float, default=4.0, help="skip a plain point whose 4 logits copies exceed it")
    ap.add_argument("--spare-gb", type=float, default=2.0, help="skip a point leaving the host less than this")
    ap.add_argument("--point", type=int, nargs=2, help=argparse.SUPPRESS)  # (T, chunk): one point, in this process
    args = ap.parse_args()
    if args.point:
        print(json.dumps(point(*args.point, args.hidden, args.layers, args.vocab, args.rows)))
        return
    from harness.machine import cpu_model

    print(
        f"CPU: {cpu_model()}; torch threads 1; hidden {args.hidden}, {args.layers} layer(s), vocabulary {args.vocab}, "
        f"{args.rows} row(s), chunk {args.chunk}, median of {args.repeats}"
    )
    print("| T | off: wall s | off: CPU s | off: peak MB | on: wall s | on: CPU s | on: peak MB | on/off CPU time |")
    print("|---|---|---|---|---|---|---|---|")
    for T in args.lengths:
        runs: dict[int, list[dict]] = {0: [], args.chunk: []}
        for _ in range(args.repeats):
            for chunk in (0, args.chunk):
                need = plain_logits_gb(min(T * args.rows, chunk or T * args.rows), args.vocab)
                if (chunk == 0 and need > args.max_gb) or need > available_gb() - args.spare_gb:
                    continue  # over --max-gb, or more than the host can spare now (a shared host: no OOM kill)
                got = run_point(args, T, chunk)
                if got is not None:
                    runs[chunk].append(got)
        off, on = median_point(runs[0]), median_point(runs[args.chunk])
        cell = lambda r, k, f: f.format(r[k]) if r else "skipped"  # noqa: E731
        ratio = f"{on['cpu_s'] / off['cpu_s']:.2f}" if off and on else "-"
        line = [
            cell(r, k, f)
            for r in (off, on)
            for k, f in (("seconds", "{:.2f}"), ("cpu_s", "{:.2f}"), ("peak_mb", "{:.0f}"))
        ]
        print(f"| {T} | " + " | ".join([*line, ratio]) + " |", flush=True)


if __name__ == "__main__":
    main()
