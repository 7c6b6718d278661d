"""hf generate's KV cache on this CPU: transformers' dynamic cache (what the rollout uses), a static cache, a
static cache with the model's forward under torch.compile, and a bare decoding loop (the model's forwards on a
dynamic cache and a multinomial draw a step, none of generate's bookkeeping: what a loop of our own would
save). Seconds per generate call, by default of the SmolLM2 bench's shape (16 prompts x 4 samples, 43-token
prompts, 64 new tokens, sampled; the tiny model's: --prompts 16 --group 8 --prompt-tokens 12 --new-tokens 48);
figures, never assertions. One mode a process (a compiled forward must not leak into the next mode):

    python benchmarks/generate_cache.py --mode dynamic
    python benchmarks/generate_cache.py --mode static
    python benchmarks/generate_cache.py --mode compiled   # the first call includes the compilation
    python benchmarks/generate_cache.py --mode loop

`static` passes disable_compile=True (transformers compiles a static-cache generate itself only where its
auto-compile criteria hold); `compiled` wraps the forward in torch.compile(dynamic=False) itself.
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import DynamicCache

from harness.machine import cpu_model
from harness.models import build_model


def prompts(vocab: int, n: int, group: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n * group, length) random prompt ids, each prompt's group rows contiguous, and their attention mask."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (n, length), generator=g).repeat_interleave(group, dim=0)
    return ids, torch.ones_like(ids)


def bare_loop(model, ids: torch.Tensor, att: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """(b, new_tokens) sampled tokens: a prefill, then one forward a token on the cache, softmax and multinomial."""
    cache = DynamicCache()
    out = model(input_ids=ids, attention_mask=att, past_key_values=cache, use_cache=True)
    drawn = []
    for step in range(new_tokens):
        tok = torch.multinomial(torch.softmax(out.logits[:, -1].float(), dim=-1), 1)  # (b, 1)
        drawn.append(tok)
        if step + 1 < new_tokens:
            att = torch.cat([att, torch.ones_like(tok)], dim=1)
            out = model(input_ids=tok, attention_mask=att, past_key_values=out.past_key_values, use_cache=True)
    return torch.cat(drawn, dim=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("dynamic", "static", "compiled", "loop"), required=True)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=16, help="distinct prompts (default 16: the SmolLM2 bench's)")
    ap.add_argument("--group", type=int, default=4, help="rows a prompt (default 4)")
    ap.add_argument("--prompt-tokens", type=int, default=43, help="tokens a prompt (default 43)")
    ap.add_argument("--new-tokens", type=int, default=64, help="tokens generated a row (default 64)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, tok = build_model(args.model, seed=0)
    model.eval()
    ids, att = prompts(model.config.vocab_size, args.prompts, args.group, args.prompt_tokens)
    T = args.new_tokens
    kwargs = {} if args.mode in ("dynamic", "loop") else {"cache_implementation": "static", "disable_compile": True}
    if args.mode == "compiled":
        model.forward = torch.compile(model.forward, dynamic=False)
    what = "a bare decoding loop" if args.mode == "loop" else f"{args.mode} cache"
    print(
        f"{args.model}, {what}, {ids.shape[0]} rows x {args.prompt_tokens} + {T} tokens, {args.threads} threads, {cpu_model()}"
    )
    for call in range(args.calls):
        torch.manual_seed(0)
        start = time.perf_counter()
        with torch.no_grad():
            if args.mode == "loop":
                bare_loop(model, ids, att, T)
            else:
                model.generate(
                    input_ids=ids,
                    attention_mask=att,
                    do_sample=True,
                    top_k=0,
                    max_new_tokens=T,
                    min_new_tokens=T,
                    pad_token_id=tok.pad_token_id or 0,
                    **kwargs,
                )
        print(f"call {call}: {time.perf_counter() - start:.2f} s", flush=True)


if __name__ == "__main__":
    main()
