"""`train.share_prefix` on and off: the time of the trainer's response forward over one micro-batch of b rows (G
samples of each prompt, contiguous), no-grad (as the score phase runs it) and forward + backward (as the
update), and the largest differences of the log-probs and gradients. Figures, never assertions.

    python benchmarks/shared_prefix_forward.py --model smollm2-135m --micro 4 8 16   # the bench's SmolLM2 rows
    python benchmarks/shared_prefix_forward.py --model tiny-dense --group-size 8 --prompt-len 8 16 --response-len 48

Off: every row [prompt | response] through the model (harness/models/logprobs.py `pack`); on: each prompt once
and the responses on its KV cache (harness/models/prefix_groups.py). Seconds per 4 rows (the work of a
micro-batch over its rows), median [min, max] over the repeats; on and off alternate.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from response_head import batch  # benchmarks/response_head.py: random prompts and full-length responses

from harness.bench.report import spread
from harness.machine import cpu_model
from harness.models import build_model
from harness.models.logprobs import response_forward


def grouped(prompts: list[list[int]], group_size: int) -> list[list[int]]:
    """The first len(prompts) / group_size prompts, each repeated group_size times (contiguous, as a rollout's)."""
    return [p for p in prompts[: len(prompts) // group_size] for _ in range(group_size)]


def forward(model, rows, response, mask, share: bool, grad: bool):
    """The trainer's response forward (log-probs and entropy) -> (seconds, logp, gradients or {})."""
    start = time.perf_counter()
    with torch.set_grad_enabled(grad):
        logp, entropy, _ = response_forward(model, rows, response, mask, 0, with_entropy=True, share_prefix=share)
        if grad:
            (logp.sum() + 0.01 * entropy.sum()).backward()
    seconds = time.perf_counter() - start
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None} if grad else {}
    model.zero_grad(set_to_none=True)
    return seconds, logp.detach(), grads


def measure(model, rows, response, mask, repeats: int) -> tuple[dict, float, float]:
    """-> ({(phase, share): seconds per 4 rows, one per repeat}, largest |dlogp|, largest relative |dgrad|)."""
    times: dict[tuple[str, bool], list[float]] = {}
    out: dict[bool, tuple] = {}
    forward(model, rows, response, mask, True, False)  # warm-up
    for _ in range(repeats):
        for phase, grad in (("no-grad forward", False), ("forward + backward", True)):
            for share in (False, True):
                seconds, logp, grads = forward(model, rows, response, mask, share, grad)
                times.setdefault((phase, share), []).append(seconds * 4 / len(rows))
                if grad:
                    out[share] = (logp, grads)
    dlogp = float((out[True][0] - out[False][0]).abs().max())
    dgrad = max(float((out[True][1][k] - g).norm() / g.norm().clamp(min=1e-30)) for k, g in out[False][1].items())
    return times, dlogp, dgrad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--micro", type=int, nargs="+", default=(4, 8, 16), help="rows of a micro-batch")
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, nargs=2, default=(38, 47))
    ap.add_argument("--response-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, _ = build_model(args.model, seed=0)
    model.train()
    G = args.group_size
    print(
        f"{args.model}, groups of {G}, prompts {args.prompt_len[0]}-{args.prompt_len[1]} + {args.response_len} "
        f"response tokens, {args.threads} threads, {cpu_model()}, {args.repeats} repeats; seconds per 4 rows"
    )
    print("| rows a micro-batch | phase | shared prefix (s) | plain (s) | shared / plain | largest dlogp, dgrad |")
    print("|---|---|---|---|---|---|")
    for b in args.micro:
        prompts, response, mask = batch(b, tuple(args.prompt_len), args.response_len, model.config.vocab_size)
        times, dlogp, dgrad = measure(model, grouped(prompts, G), response, mask, args.repeats)
        for phase in ("no-grad forward", "forward + backward"):
            on, off = times[(phase, True)], times[(phase, False)]
            ratio = statistics.median(on) / statistics.median(off)
            print(f"| {b} | {phase} | {spread(on)} | {spread(off)} | {ratio:.2f} | {dlogp:.1e}, {dgrad:.1e} |")


if __name__ == "__main__":
    main()
