"""Starting the vLLM engine of `rollout.backend=vllm`: its arguments, its CPU KV cache, the process state it changes.

    engine = start_engine(model, tokenizer, rollout_cfg, dtype="float32", seed=0, max_model_len=None,
                          max_num_seqs=256, engine_kwargs={})
    engine.llm.generate(...)      # vllm.LLM, in this process unless VLLM_ENABLE_V1_MULTIPROCESSING=1 was set

The policy (model + tokenizer) is written once with `save_pretrained` to a temp folder (`engine.folder`, a
LoRA policy's base with the adapters merged) and `vllm.LLM` is started on it (`engine_args`): eager on a
CPU, CUDA graphs on a GPU, where with `rollout.vllm_sleep` (auto: on CUDA) it also gets vLLM's sleep mode.
On a CPU, chunked prefill is off (vLLM 0.32 crashes on a seeded request whose prompt it splits) and the KV
cache is sized explicitly (`kv_cache_bytes`). vLLM seeds the global RNGs and replaces
`torch.set_num_threads` at start: both are put back (`preserved_process_state`). The module doc of
vllm_backend.py says why each of these is so.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import psutil
import torch

from harness import device_defaults
from harness.models.lora import save_plain

# Set before vLLM is imported (its env reads are cached once an engine has started).
ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
WORKER_EXTENSION = "harness.rollout.vllm_worker.HarnessWorkerExtension"


def engine_args(
    folder: str, dtype: str, seed: int, max_model_len: int, max_num_seqs: int, memory_share: float, on_cpu: bool,
    sleep: bool = False,
) -> dict:  # fmt: skip
    """vllm.LLM's arguments for the model saved in `folder`, for a CPU (on_cpu) or a GPU engine: eager on a CPU,
    CUDA graphs (enforce_eager off) on a GPU; vLLM's sleep mode where asked (rollout.vllm_sleep) on a GPU; the
    CPU-only settings (whole-prompt prefill, an explicit KV cache) are added by the caller."""
    args = dict(
        model=folder,
        tokenizer=folder,
        dtype=dtype,
        seed=seed,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        enforce_eager=on_cpu,  # a GPU captures CUDA graphs of the decoding step
        enable_prefix_caching=True,
        gpu_memory_utilization=memory_share,
        logprobs_mode="processed_logprobs",  # the sampler's distribution, see vllm_backend.py's module doc
        generation_config="vllm",  # ignore generation_config.json sampling defaults
        worker_extension_cls=WORKER_EXTENSION,
    )
    if sleep and not on_cpu:
        args["enable_sleep_mode"] = True
    return args


def kv_cache_bytes(config, dtype: str, max_model_len: int, max_num_seqs: int, memory_share: float) -> int | None:
    """A CPU KV cache sized to what generation can use, `max_num_seqs` sequences of
    `max_model_len` tokens, capped at vLLM's own CPU budget (memory_share x RAM - this
    process's resident memory), at least one sequence. None (vLLM decides) for configs
    without the usual attention fields.

    Why not vLLM's default on CPU: it allocates the whole budget (5 GiB for a 1M-parameter
    model here) and runs a warm-up forward to measure memory; an explicit size skips both
    (engine start ~2x less CPU time, close ~2x less)."""
    layers, heads = getattr(config, "num_hidden_layers", None), getattr(config, "num_attention_heads", None)
    hidden = getattr(config, "hidden_size", None)
    if not (layers and heads and hidden):
        return None
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    per_token = 2 * layers * kv_heads * head_dim * (4 if dtype == "float32" else 2)  # K and V
    need = per_token * max_model_len * max_num_seqs
    budget = int(memory_share * psutil.virtual_memory().total) - psutil.Process().memory_info().rss
    return max(min(need, budget), per_token * max_model_len)  # at least one full sequence


@contextlib.contextmanager
def preserved_process_state() -> Iterator[None]:
    """Restore global RNG states and torch.set_num_threads/num_threads that vLLM changes."""
    set_threads, n_threads = torch.set_num_threads, torch.get_num_threads()
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            torch.set_num_threads = set_threads
            torch.set_num_threads(n_threads)
            random.setstate(py_state)
            np.random.set_state(np_state)


class Engine(NamedTuple):
    """A started engine: the vllm.LLM, the folder it was started from (removed at close), rollout.sync_bucket_mb
    resolved for its platform, whether it runs in this process, whether it sleeps between generate calls."""

    llm: object
    folder: str
    sync_bucket_mb: int
    in_process: bool
    sleep_between: bool


def resolved_args(
    model, cfg, folder: str, dtype: str, seed: int, max_model_len: int | None, max_num_seqs: int
) -> tuple[dict, int]:
    """(vllm.LLM's arguments for the model saved in `folder` (CPU: whole-prompt prefill, a sized KV cache),
    rollout.sync_bucket_mb resolved for the engine's platform)."""
    from vllm.platforms import current_platform  # heavy: vLLM loads only where an engine starts

    max_pos = getattr(model.config, "max_position_embeddings", None) or 1024
    on_cpu = current_platform.is_cpu()
    share = getattr(cfg, "gpu_memory_utilization", 0.3)
    device = "cpu" if on_cpu else "cuda"  # a lever still auto (a section used alone): the engine's platform
    sleep = device_defaults.lever("rollout.vllm_sleep", getattr(cfg, "vllm_sleep", False), device) is True
    bucket_mb = device_defaults.lever("rollout.sync_bucket_mb", getattr(cfg, "sync_bucket_mb", 0), device)
    args = engine_args(folder, dtype, seed, max_model_len or min(max_pos, 1024), max_num_seqs, share, on_cpu, sleep)
    if on_cpu:
        # vLLM 0.32 CPU bug: a seeded request whose prompt is split by chunked prefill
        # crashes the engine ("CPU Generator does not use offset", when it rewinds the
        # request's generator). Whole-prompt scheduling avoids the split.
        args["enable_chunked_prefill"] = False
        args["kv_cache_memory_bytes"] = kv_cache_bytes(
            model.config, dtype, args["max_model_len"], max_num_seqs, args["gpu_memory_utilization"]
        )
        if args["kv_cache_memory_bytes"] is None:
            del args["kv_cache_memory_bytes"]
    return args, bucket_mb


def start_engine(
    model, tokenizer, cfg, dtype: str, seed: int, max_model_len: int | None, max_num_seqs: int, engine_kwargs: dict
) -> Engine:
    """The policy saved to a temp folder and vllm.LLM started on it (engine_kwargs override the arguments);
    the folder is removed again when the start fails."""
    for k, v in ENGINE_ENV.items():
        os.environ.setdefault(k, v)
    from vllm import LLM  # heavy: vLLM loads only where an engine starts

    folder = tempfile.mkdtemp(prefix="harness-vllm-")
    try:
        save_plain(model, folder)  # a LoRA policy: its base with the adapters merged
        tokenizer.save_pretrained(folder)
        args, bucket_mb = resolved_args(model, cfg, folder, dtype, seed, max_model_len, max_num_seqs)
        args.update(engine_kwargs)
        with preserved_process_state():
            llm = LLM(**args)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    from vllm.v1.engine.core_client import InprocClient

    in_process = isinstance(llm.llm_engine.engine_core, InprocClient)
    return Engine(llm, folder, bucket_mb, in_process, bool(args.get("enable_sleep_mode")))
