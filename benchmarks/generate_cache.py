"""hf generate's KV cache on this CPU: transformers' dynamic cache (what the rollout uses), a static cache, and a
static cache with the model's forward under torch.compile. Seconds per generate call of the SmolLM2 bench's
shape (16 prompts x 4 samples, 43-token prompts, 64 new tokens, sampled); figures, never assertions. One mode a
process (a compiled forward must not leak into the next mode):

    python benchmarks/generate_cache.py --mode dynamic
    python benchmarks/generate_cache.py --mode static
    python benchmarks/generate_cache.py --mode compiled   # the first call includes the compilation

`static` passes disable_compile=True (transformers compiles a static-cache generate itself only where its
auto-compile criteria hold); `compiled` wraps the forward in torch.compile(dynamic=False) itself.
"""

from __future__ import annotations

import argparse
import time

import torch

from harness.machine import cpu_model
from harness.models import build_model


def prompts(vocab: int, n: int, group: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n * group, length) random prompt ids, each prompt's group rows contiguous, and their attention mask."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (n, length), generator=g).repeat_interleave(group, dim=0)
    return ids, torch.ones_like(ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("dynamic", "static", "compiled"), required=True)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, tok = build_model(args.model, seed=0)
    model.eval()
    ids, att = prompts(model.config.vocab_size, 16, 4, 43)
    kwargs = {} if args.mode == "dynamic" else {"cache_implementation": "static", "disable_compile": True}
    if args.mode == "compiled":
        model.forward = torch.compile(model.forward, dynamic=False)
    print(
        f"{args.model}, {args.mode} cache, {ids.shape[0]} rows x 43 + 64 tokens, {args.threads} threads, {cpu_model()}"
    )
    for call in range(args.calls):
        torch.manual_seed(0)
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(
                input_ids=ids,
                attention_mask=att,
                do_sample=True,
                top_k=0,
                max_new_tokens=64,
                min_new_tokens=64,
                pad_token_id=tok.pad_token_id or 0,
                **kwargs,
            )
        print(f"call {call}: {time.perf_counter() - start:.2f} s", flush=True)


if __name__ == "__main__":
    main()
