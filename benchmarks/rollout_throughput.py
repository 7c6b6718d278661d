"""Rollout throughput, weight-sync cost and sync-probe accuracy: hf vs vllm(-cpu).

For each model: N prompts x G samples x max_new_tokens (sampling, T=1, fixed seed).
  hf     HFBackend (transformers generate on the policy module), after a small warm-up
  vllm   VLLMBackend: engine start time, then the same generate after a warm-up;
         sync time (sync_weights without its check, mean of 3 after an Adam step),
         probe |dlogp| engine vs trainer: right after start, after a sync, and with a
         step NOT synced (how far a missed sync moves it), and the max |dlogp| between
         the sampler's log-probs of the batch and the trainer's recomputation; on more than one
         torch thread, how far the engine on 1 thread draws the same batch (rows, |dlogp|).
Tokens/s counts generated tokens (EOS included). Engine warm-up is excluded.

    .venv/bin/python benchmarks/rollout_throughput.py                    # tiny-dense and smollm2-135m
    .venv/bin/python benchmarks/rollout_throughput.py --models tiny-dense --threads 1
    .venv/bin/python benchmarks/rollout_throughput.py --models smollm2-135m --backends vllm --dtype bfloat16 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import time
import types

import torch

CASES = {  # model -> (prompts, group size, max_new_tokens)
    "tiny-dense": (64, 8, 48),
    "tiny-moe": (64, 8, 48),
    "smollm2-135m": (16, 4, 64),
}


def _prompts(tok, n: int) -> list[list[int]]:
    from harness.models import render_prompt

    return [
        render_prompt(tok, f"What is {17 * i % 89} + {31 * i % 97}? Answer with a number.\nAnswer:") for i in range(n)
    ]


def _adam_step(model, batch, pad_id) -> None:
    from harness.models.logprobs import response_logprobs

    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    model.train()
    logp, _, _ = response_logprobs(model, batch.prompt_ids[:8], batch.response_ids[:8], batch.response_mask[:8], pad_id)
    (-(logp.sum())).backward()
    opt.step()
    model.zero_grad(set_to_none=True)
    model.eval()


def _timed_generate(backend, prompts, G, tokens, seed=0):
    from harness.rollout.base import SamplingParams

    t0 = time.perf_counter()
    batch = backend.generate(prompts, G, SamplingParams(max_new_tokens=tokens, temperature=1.0, seed=seed))
    dt = time.perf_counter() - t0
    return batch, dt, float(batch.response_mask.sum())


def _one_thread_against_many(backend, prompts, G: int, T: int) -> dict:
    """The same batch (seed 0) drawn on the trainer's threads and on 1 engine thread, the prefix cache emptied
    before each (each prefill computed anew): how many rows have the same tokens, and the largest |dlogp| of the
    sampler's log-probs on those rows (0: bit for bit)."""
    batches = []
    for threads in (None, 1):
        backend.llm.reset_prefix_cache()
        backend.engine_threads = threads
        batches.append(_timed_generate(backend, prompts, G, T)[0])
    backend.engine_threads = None
    a, b = batches
    same = (a.response_ids == b.response_ids).all(dim=1)  # (B,)
    dlogp = (a.sampler_logp[same] - b.sampler_logp[same]).abs().max() if same.any() else torch.tensor(float("nan"))
    return {"rows_same_tokens": int(same.sum()), "rows": len(same), "max_abs_dlogp_same_rows": float(dlogp)}


def bench(name: str, backends: list[str], dtype: str, max_num_seqs: int = 256) -> dict:
    from harness.models import build_model
    from harness.models.logprobs import response_logprobs
    from harness.rollout.hf import HFBackend

    N, G, T = CASES[name]
    model, tok = build_model(name, seed=0)
    prompts = _prompts(tok, N)
    res: dict = {"model": name, "prompts": N, "group": G, "max_new_tokens": T, "torch_threads": torch.get_num_threads()}
    if "hf" in backends:
        hf = HFBackend(model, tok)
        _timed_generate(hf, prompts[:2], 2, 4)  # warm-up
        _, dt, n = _timed_generate(hf, prompts, G, T)
        res.update(hf_seconds=dt, hf_tokens=n, hf_tokens_per_s=n / dt)
    if "vllm" in backends:
        from harness.rollout.vllm_backend import VLLMBackend

        cfg = types.SimpleNamespace(dtype=dtype, gpu_memory_utilization=0.3, router_noise=0.0)
        t0 = time.perf_counter()
        be = VLLMBackend(model, tok, cfg, verify_first=0, verify_every=0, max_num_seqs=max_num_seqs)
        res["vllm_start_seconds"] = time.perf_counter() - t0
        try:
            res["probe_delta_start"] = be.verify_sync(model, tol=float("inf"))
            _timed_generate(be, prompts[:2], 2, 4)  # warm-up
            batch, dt, n = _timed_generate(be, prompts, G, T)
            res.update(vllm_seconds=dt, vllm_tokens=n, vllm_tokens_per_s=n / dt)
            with torch.no_grad():
                logp, _, _ = response_logprobs(
                    model, batch.prompt_ids, batch.response_ids, batch.response_mask, tok.pad_token_id
                )
            res["sampler_vs_trainer_max_abs_dlogp"] = float((logp - batch.sampler_logp).abs().max())
            if torch.get_num_threads() > 1:
                res["vllm_1_thread_against_many"] = _one_thread_against_many(be, prompts, G, T)
            syncs = []
            for _ in range(3):
                _adam_step(model, batch, tok.pad_token_id)
                res["probe_delta_unsynced_after_adam_step"] = be.verify_sync(model, tol=float("inf"))
                t0 = time.perf_counter()
                be.push_weights(model)
                syncs.append(time.perf_counter() - t0)
                res["probe_delta_after_sync"] = be.verify_sync(model, tol=float("inf"))
            res["sync_seconds"] = sum(syncs) / len(syncs)
            t0 = time.perf_counter()
            be.verify_sync(model, tol=float("inf"))
            res["verify_seconds"] = time.perf_counter() - t0
        finally:
            be.close()
    if "hf_tokens_per_s" in res and "vllm_tokens_per_s" in res:
        res["vllm_over_hf"] = res["vllm_tokens_per_s"] / res["hf_tokens_per_s"]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny-dense,smollm2-135m", help=f"comma list of {list(CASES)}")
    ap.add_argument("--backends", default="hf,vllm")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="vLLM engine dtype")
    ap.add_argument("--max-num-seqs", type=int, default=256, help="vLLM: sequences decoded together")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads (default: torch's): hf generate's and vLLM's in-process engine's",
    )
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"[bench] cpu_count={os.cpu_count()} loadavg={os.getloadavg()}", flush=True)
    for name in args.models.split(","):
        res = bench(name, args.backends.split(","), args.dtype, args.max_num_seqs)
        res["loadavg_after"] = os.getloadavg()
        print(json.dumps(res, indent=1), flush=True)


if __name__ == "__main__":  # vLLM may start subprocesses
    main()
