"""One decoding step's attention on this CPU: torch's fused kernel against two products and a softmax
(`rollout.decode_attention: matmul`, harness/models/decode_attention.py), and what that does to a whole generate.

    .venv/bin/python benchmarks/decode_attention.py [--repeats 5] [--generate 2] [--threads 2]

Part 1 times one attention call at SmolLM2-135M's decoding shapes (64 rows, 9 query heads over 3 key/value heads,
head size 64, 112 cached positions, a left-padding mask), as transformers calls it: sdpa (the key/value heads
repeated, the mask passed) against the products, in fp32 and bf16, each the median [min, max] of --repeats timings of
100 calls, the two alternating. Part 2 (--generate N > 0) runs SmolLM2-135M's generate in bf16 (64 rows x 64 new
tokens, prompts of 51-80 tokens) N times a mode, alternating, and prints the seconds of each. Figures, never
assertions: the numbers depend on the machine; quote them with its CPU.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from harness.models.decode_attention import decoding_products, one_row_attention

B, H, HKV, S, D = 64, 9, 3, 112, 64  # SmolLM2-135M's decoding step: rows, heads, kv heads, positions, head size


def _ms(fn, calls: int = 100) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) / calls * 1e3


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}, {max(xs):.2f}]"


def _modes(dtype: torch.dtype, repeats: int) -> tuple[list[float], list[float]]:
    """(sdpa's, the products') ms a call, `repeats` timings each, alternating."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*s, generator=g).to(dtype) for s in ((B, H, 1, D), (B, HKV, S, D), (B, HKV, S, D)))
    mask = torch.ones(B, 1, 1, S, dtype=torch.bool)
    mask[::4, ..., :20] = False  # every fourth row left-padded
    rk, rv = k.repeat_interleave(H // HKV, 1), v.repeat_interleave(H // HKV, 1)  # as transformers' repeat_kv
    fused, products = [], []
    for _ in range(repeats):
        fused.append(_ms(lambda: F.scaled_dot_product_attention(q, rk, rv, attn_mask=mask)))
        products.append(_ms(lambda: one_row_attention(q, k, v, mask, D**-0.5)))
    return fused, products


def one_call(repeats: int) -> None:
    print("| dtype | sdpa ms a call | products ms a call | sdpa / products |\n|---|---|---|---|")
    for dtype in (torch.float32, torch.bfloat16):
        fused, products = _modes(dtype, repeats)
        ratio = statistics.median(fused) / statistics.median(products)
        print(f"| {str(dtype).removeprefix('torch.')} | {_spread(fused)} | {_spread(products)} | {ratio:.1f} |")


def whole_generate(repeats: int) -> None:
    from harness.models import build_model

    model, _ = build_model("smollm2-135m", seed=0)
    model = model.to(torch.bfloat16).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 40000, (B, 80), generator=g)
    attention = torch.ones_like(ids)
    for i in range(B):  # left padding: prompts of 51-80 tokens
        attention[i, : i % 30], ids[i, : i % 30] = 0, 0
    secs: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeats):
        for on in (False, True):
            torch.manual_seed(0)
            t = time.perf_counter()
            with torch.inference_mode(), decoding_products(model, on):
                model.generate(
                    input_ids=ids, attention_mask=attention, max_new_tokens=64, min_new_tokens=64, do_sample=True
                )
            secs[on].append(time.perf_counter() - t)
    print("\n| generate, bf16, 64 rows x 64 tokens | seconds (each run) |\n|---|---|")
    for on, name in ((False, "sdpa"), (True, "sdpa, decoding steps as products")):
        print(f"| {name} | {', '.join(f'{s:.1f}' for s in secs[on])} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5, help="timings of 100 calls a mode (part 1)")
    p.add_argument("--generate", type=int, default=0, help="whole generates a mode (part 2; 0 = skip)")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, kernels {torch.backends.cpu.get_cpu_capability()}"
    )
    one_call(args.repeats)
    if args.generate:
        whole_generate(args.generate)


if __name__ == "__main__":
    main()
