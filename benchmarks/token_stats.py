"""The tokens' log-probs and entropies a few rows at a time (harness/models/token_stats.py), on and off: the time
of one micro-batch's response forward (no-grad, as the score phase runs it) and of its forward + backward (as the
update runs it), and whether the log-probs, entropies and weight gradients are the same bit for bit. Figures,
never assertions.

    python benchmarks/token_stats.py --model smollm2-135m                   # a micro-batch of the SmolLM2 bench
    python benchmarks/token_stats.py --model smollm2-135m --share-prefix    # with train.share_prefix's forward
    python benchmarks/token_stats.py --model smollm2-135m --share-prefix --autocast   # and train.autocast: bf16
    python benchmarks/token_stats.py --model tiny-dense --rows 16 --prompt-len 8 16 --response-len 48

"Off" is the whole (rows, T, V) tensor through the formulas at once, as before the lever (the path a head that
reads the logits takes: here one that reads nothing). The allocator as a run has it (harness/malloc.py). Each repeat
times both, alternating; median [min, max].
"""

from __future__ import annotations

import argparse

import torch
from response_head import batch, print_on_off, timed

from harness import malloc
from harness.machine import cpu_model
from harness.models import build_model
from harness.models import logprobs as lp


def forward(model, prompts, response, mask, chunks: bool, grad: bool, args) -> list[torch.Tensor]:
    """The trainer's response forward (log-probs and entropy; under train.autocast's bf16 with --autocast); with
    grad, its backward too (outside autocast, as the trainer's) -> what it computed."""
    head = None if chunks else (lambda view: {})
    with torch.set_grad_enabled(grad):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast):
            logp, entropy, _ = lp.response_forward(
                model, prompts, response, mask, 0, with_entropy=True, head=head, share_prefix=args.share_prefix
            )
        out = [logp.detach(), entropy.detach()]
        if grad:
            (logp.sum() + 0.01 * entropy.sum()).backward()
            out += [p.grad for p in model.parameters() if p.grad is not None]
            model.zero_grad(set_to_none=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--rows", type=int, default=16, help="a micro-batch's rows (the bench's train.micro_batch_size)")
    ap.add_argument("--group", type=int, default=4, help="rows a prompt (the bench's group size)")
    ap.add_argument("--prompt-len", type=int, nargs=2, default=(38, 47))
    ap.add_argument("--response-len", type=int, default=64)
    ap.add_argument("--share-prefix", action="store_true")
    ap.add_argument("--autocast", action="store_true", help="the forward under bf16 autocast (train.autocast: bf16)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    malloc.tune()  # as a run's process has it (harness/malloc.py)
    torch.set_num_threads(args.threads)
    model, _ = build_model(args.model, seed=0)
    model.train()
    prompts, response, mask = batch(args.rows, tuple(args.prompt_len), args.response_len, model.config.vocab_size)
    prompts = [prompts[i - i % args.group] for i in range(args.rows)]  # a group's rows share their prompt
    times: dict[tuple[str, bool], list[float]] = {}
    outs: dict[bool, list[torch.Tensor]] = {}
    forward(model, prompts, response, mask, True, False, args)  # warm-up
    for _ in range(args.repeats):
        for phase, grad in (("no-grad forward", False), ("forward + backward", True)):
            for chunks in (True, False):
                seconds, out = timed(forward, model, prompts, response, mask, chunks, grad, args)
                times.setdefault((phase, chunks), []).append(seconds)
                outs[chunks] = out
    same = len(outs[True]) == len(outs[False]) and all(torch.equal(a, b) for a, b in zip(outs[True], outs[False]))
    print(
        f"{args.model}, {args.rows} rows ({args.group} a prompt), prompts {args.prompt_len[0]}-{args.prompt_len[1]}"
        f" + {args.response_len} response tokens, share_prefix={args.share_prefix}, autocast bf16={args.autocast},"
        f" {args.threads} threads, {cpu_model()}, {args.repeats} repeats"
    )
    print_on_off(times, "a few rows at a time (s)", "the whole tensor (s)")
    print(f"log-probs, entropies and {len(outs[True]) - 2} weight gradients bit for bit the same: {same}")


if __name__ == "__main__":
    main()
