"""The output head only where a response token is predicted (transformers' `logits_to_keep`), on and off: the time
of the trainer's response forward (no-grad, as the score phase runs it) and of a forward + backward (as the
update runs it), and the largest difference of the log-probs. Figures, never assertions.

    python benchmarks/response_head.py --model smollm2-135m       # the bench's SmolLM2 rows: 64 x (38-47 + 64)
    python benchmarks/response_head.py --model tiny-dense --rows 128 --prompt-len 8 16 --response-len 48

"Off" is the head over every position (harness/models/logprobs.py without the `logits_to_keep` argument), as
before the lever. Each repeat times both, alternating; median [min, max] over the repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

import torch

from harness.bench.report import spread
from harness.machine import cpu_model
from harness.models import build_model
from harness.models import logprobs as lp


def batch(rows: int, prompt_len: tuple[int, int], response_len: int, vocab: int, seed: int = 0):
    """rows prompts of lengths in [lo, hi] and (rows, response_len) responses, every token real."""
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(prompt_len[0], prompt_len[1] + 1, (rows,), generator=g).tolist()
    prompts = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in lens]
    response = torch.randint(3, vocab, (rows, response_len), generator=g)
    return prompts, response, torch.ones(rows, response_len)


def timed(fn, *args) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def forward(model, prompts, response, mask, keep: bool, grad: bool) -> torch.Tensor:
    """The trainer's response forward (log-probs and entropy); with grad, its backward too."""
    with mock.patch.object(lp, "takes_logits_to_keep", lambda m: keep), torch.set_grad_enabled(grad):
        logp, entropy, _ = lp.response_logprobs(model, prompts, response, mask, pad_id=0, with_entropy=True)
        if grad:
            (logp.sum() + entropy.sum()).backward()
            model.zero_grad(set_to_none=True)
    return logp.detach()


def print_on_off(times: dict[tuple[str, bool], list[float]], on_label: str, off_label: str) -> None:
    """The markdown table of a lever on and off: times[(phase, on)] = seconds of each repeat, per phase."""
    print(f"| phase | {on_label} | {off_label} | ratio |\n|---|---|---|---|")
    for phase in ("no-grad forward", "forward + backward"):
        on, off = times[(phase, True)], times[(phase, False)]
        print(f"| {phase} | {spread(on)} | {spread(off)} | {statistics.median(on) / statistics.median(off):.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, nargs=2, default=(38, 47))
    ap.add_argument("--response-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, _ = build_model(args.model, seed=0)
    prompts, response, mask = batch(args.rows, tuple(args.prompt_len), args.response_len, model.config.vocab_size)
    times: dict[tuple[str, bool], list[float]] = {}
    logps: dict[bool, torch.Tensor] = {}
    forward(model, prompts, response, mask, True, False)  # warm-up
    for _ in range(args.repeats):
        for phase, grad in (("no-grad forward", False), ("forward + backward", True)):
            for keep in (True, False):
                seconds, logp = timed(forward, model, prompts, response, mask, keep, grad)
                times.setdefault((phase, keep), []).append(seconds)
                logps[keep] = logp
    diff = float((logps[True] - logps[False]).abs().max())
    print(
        f"{args.model}, {args.rows} rows, prompts {args.prompt_len[0]}-{args.prompt_len[1]} + {args.response_len}"
        f" response tokens, {args.threads} threads, {cpu_model()}, {args.repeats} repeats"
    )
    print_on_off(times, "head on responses only (s)", "head everywhere (s)")
    print(f"largest |log-prob difference|: {diff:.2e}")


if __name__ == "__main__":
    main()
