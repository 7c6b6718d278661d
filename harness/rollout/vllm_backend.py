"""`rollout.backend=vllm`: a vLLM engine on the policy's weights, synced in place after every update.

Lifecycle:
- init: the policy (model + tokenizer) is written once with `save_pretrained` to a temp
  folder and `vllm.LLM` is started on it (dtype from `rollout.dtype`, small `max_model_len`,
  prefix caching on; `engine_args`): eager on a CPU, CUDA graphs on a GPU, where with
  `rollout.vllm_sleep` (auto: on CUDA) the engine also gets vLLM's sleep mode. The engine runs IN-PROCESS
  (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, set unless the user set it): the model lives in the
  trainer's process, so a weight sync passes the trainer's tensors by reference.
- generate: `TokensPrompt(prompt_token_ids=...)` (no re-tokenisation), one request per
  prompt with `n=G`, per-request seeds derived from `SamplingParams.seed`. Stop strings
  (`rollout.stop`): vLLM's `stop` with the stop string kept in the output (detokenizing only
  then); the row ends with the token that completes it and counts as finished, as in hf.
- sleep (rollout.vllm_sleep, CUDA): after each generate the engine sleeps (`llm.sleep(level=1)`: its KV
  cache freed, its weights moved to host memory), so the update that follows has the GPU's memory; the
  next sync or generate wakes it first (`llm.wake_up()`). Tested with a fake engine (the call order);
  not run here (no GPU, vLLM's CPU engine has no sleep mode).
- sync_weights(model): `llm.collective_rpc("harness_reload_weights", ...)` (vLLM's in-place
  layerwise reload + a CPU MoE fix, see vllm_worker.py), or, with `rollout.sync_bucket_mb` > 0 (auto:
  512 on CUDA) in-process, the weights in buckets of that many MB, each one
  `collective_rpc("harness_load_weights")` (the model's own `load_weights`, as TRL and verl sync a GPU
  engine; `weight_buckets`); then `llm.reset_prefix_cache()`; then, on the first `verify_first` syncs and
  every `verify_every`-th one, `verify_sync` (its seconds apart: `last_verify_seconds`, not in
  `last_sync_seconds`). The bucketed path is written for CUDA, where vLLM keeps unquantised weights in
  their checkpoint layout; on a CPU the packed GEMM layout needs the layerwise reload, which stays.
- verify_sync(model): log-probs of a fixed probe sequence in the engine
  (`prompt_logprobs`) vs the trainer (`harness.models.logprobs.response_logprobs`); raises
  `WeightSyncError` when max |dlogp| > tol.

Sampler log-probs: vLLM returns, by default, log-probs of the RAW logits (before
temperature / top-p). The engine is started with `logprobs_mode="processed_logprobs"`:
log_softmax of the logits after temperature and top-p masking, i.e. the distribution the
token was drawn from, exactly what the hf backend returns (its processed `scores`). With
top_p=1 this equals the trainer's `log_softmax(logits / T)`.

Process-global side effects of an in-process vLLM and how they are contained:
- vLLM seeds the global torch / numpy / random RNGs at start: their states are restored.
- vLLM's CPU worker replaces `torch.set_num_threads` by a no-op that only warns: the
  original function is put back. Generation runs on the trainer's torch threads as they
  are at the call (train.threads, lowered by the thread governor while other processes hold
  a core: harness/threads.py), or on `engine_threads` when given, restored afterwards. (The
  default was cpu_count - 1 before the governor existed, against the 5-7x slowdown of 2
  spinning threads on a loaded 2-core machine; on a quiet one it left a core idle: the
  SmolLM2 bench's bf16 generate call took 10.4-11.0 s on 1 thread against 6.5-7.1 s on 2,
  benchmarks/README.md.) The thread count moves the engine's log-probs by rounding, as it
  does the trainer's.
- vLLM's CPU OpenMP auto-binding would pin the process to cores: it is disabled
  (`VLLM_CPU_OMP_THREADS_BIND=nobind`) unless the user set it.
- On CPU the KV cache is sized explicitly (`kv_cache_bytes`: max_num_seqs full sequences,
  capped at vLLM's budget = gpu_memory_utilization x RAM - resident memory of this process),
  not vLLM's default (the whole budget plus a warm-up forward).

vLLM 0.32 CPU quirks handled here (each one measured, each one covered by a test):
- in-place reload leaves MoE expert weights unpacked -> re-pack (vllm_worker.py);
- a tied lm_head keeps a packed copy refreshed only by "lm_head.weight" -> always sent;
- seeded requests crash when chunked prefill splits a prompt -> chunked prefill off.

rollout.router_noise > 0 (MoE): N(0, sigma^2) noise on every router's logits in the engine
only (forward hooks on vLLM's gates), a controlled rollout/train mismatch.

Out-of-process engine (`VLLM_ENABLE_V1_MULTIPROCESSING=1` set by the user) also works:
weights then travel as a safetensors file under /dev/shm (one write + one read per sync).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence

import numpy as np
import psutil
import torch

from harness import device_defaults
from harness.models.logprobs import response_logprobs
from harness.models.lora import base_of, merged_state_dict, save_plain
from harness.parallel import full_params, full_state
from harness.rollout.base import RolloutBackend, RolloutBatch, SamplingParams, cut_at_stop, stop_index

# Set before vLLM is imported (its env reads are cached once an engine has started).
ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
WORKER_EXTENSION = "harness.rollout.vllm_worker.HarnessWorkerExtension"
PROBE_TEXT = "Probe 12+34=46; 7*8=56. The quick brown fox jumps over the lazy dog."
# Default max |dlogp| allowed between engine and (fp32) trainer on the probe. Measured on
# CPU, right after a sync: fp32 5e-7 (tiny-dense, tiny-moe), 3-4e-5 (SmolLM2-135M), while ONE
# unsynced Adam step (lr 1e-4) moves it by 0.06 (tiny-dense) and 0.45 (SmolLM2): fp32 catches
# a single missed sync. A bf16 engine differs from the fp32 trainer by rounding alone by
# 0.004-0.012 (tiny) and 0.15-0.42 (SmolLM2), so in bf16 the check only catches gross failures
# (a broken reload, many missed steps); pass verify_tol to tighten it for a given model.
DEFAULT_TOL = {"float32": 1e-3, "bfloat16": 1.0}


def weight_buckets(
    items: Sequence[tuple[str, torch.Tensor]], bucket_bytes: int
) -> list[list[tuple[str, torch.Tensor]]]:
    """(name, tensor) pairs in order, cut into consecutive buckets of at most `bucket_bytes` each (a tensor larger
    than that alone in its own); bucket_bytes <= 0: one bucket of everything."""
    if bucket_bytes <= 0:
        return [list(items)] if items else []
    buckets, current, size = [], [], 0
    for name, t in items:
        n = t.numel() * t.element_size()
        if current and size + n > bucket_bytes:
            buckets.append(current)
            current, size = [], 0
        current.append((name, t))
        size += n
    if current:
        buckets.append(current)
    return buckets


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
        logprobs_mode="processed_logprobs",  # the sampler's distribution, see module doc
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


def checkpoint_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trainer's weights under checkpoint names, as vLLM's loader expects them.

    - transformers 5 fuses MoE experts into (E, 2I, H) tensors: `revert_weight_conversion`
      (what save_pretrained uses) gives back the per-expert checkpoint keys.
    - tied embeddings: vLLM's CPU lm_head GEMM keeps its own packed copy of the embedding
      matrix, refreshed by the reload only when "lm_head.weight" is in the stream
      (measured: without it the probe is off by ~0.5-0.9), so the key is always sent.
    - a LoRA policy (model.lora): the base's weights with W + (alpha/r) B A in place of each adapted
      W (harness/models/lora.py merged_state_dict), so the engine runs plain weights.
    - a sharded policy (train.parallel=fsdp): the whole tensors, all-gathered (every process syncs its
      engine at the same time: harness/parallel.py full_state).
    """
    from transformers.core_model_loading import revert_weight_conversion

    plain = base_of(model)  # a LoRA policy (model.lora): its base, with the adapters merged into new tensors
    whole = full_state(merged_state_dict(model))
    state = revert_weight_conversion(plain, whole)
    if "lm_head.weight" not in state and getattr(plain.config, "tie_word_embeddings", False):
        embed = next(n for n, m in plain.named_modules() if m is plain.get_input_embeddings())
        state["lm_head.weight"] = whole[f"{embed}.weight"]
    return state


class WeightSyncError(RuntimeError):
    """The engine's log-probs on the probe differ from the trainer's: weights not in use."""


@contextlib.contextmanager
def _preserved_process_state() -> Iterator[None]:
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


class VLLMBackend(RolloutBackend):
    """vLLM rollouts from the policy's current weights.

    rollout_cfg: the run config's `rollout` section (backend, temperature, top_p,
        max_new_tokens, gpu_memory_utilization, dtype, router_noise); optional attributes
        verify_first / verify_every / verify_tol are read when present.
    verify_first, verify_every: `verify_sync` runs after syncs 1..verify_first and then
        after every verify_every-th sync (0 = never after the first ones).
    verify_tol: max |dlogp| allowed on the probe (default by dtype, DEFAULT_TOL).
    probe_ids: token-id sequences the probe scores (every token after the first);
        default: [bos] + the tokenised PROBE_TEXT, at most 64 tokens.
    engine_threads: torch threads while vLLM generates (None: the trainer's, as they are at each call).
    max_model_len: prompt + response budget of a sequence (None: min(model max, 1024)).
    seed: engine seed (sampling itself is seeded per request from SamplingParams.seed).
    engine_kwargs: extra `vllm.LLM(...)` arguments (override the defaults here).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        rollout_cfg=None,
        *,
        verify_first: int | None = None,
        verify_every: int | None = None,
        verify_tol: float | None = None,
        probe_ids: Sequence[Sequence[int]] | None = None,
        engine_threads: int | None = None,
        max_model_len: int | None = None,
        max_num_seqs: int = 256,
        seed: int = 0,
        **engine_kwargs,
    ):
        cfg = rollout_cfg
        self.dtype = getattr(cfg, "dtype", "float32")
        self.min_new_tokens = int(getattr(cfg, "min_new_tokens", 0) or 0)  # vLLM's min_tokens: EOS masked before
        self.router_noise = float(getattr(cfg, "router_noise", 0.0) or 0.0)
        self._set_verify(cfg, verify_first, verify_every, verify_tol)
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos_id = tokenizer.eos_token_id
        self.engine_threads = engine_threads
        self.probe_ids = [list(p) for p in probe_ids] if probe_ids is not None else [self._default_probe(tokenizer)]
        self.num_syncs = 0
        self.last_sync_seconds = float("nan")
        self.last_verify_seconds = 0.0  # the check after the last sync (0: none ran)
        self.sleeping = False
        self.sync_bucket_mb = 0  # rollout.sync_bucket_mb, resolved for the engine's platform in _engine_args
        self.last_probe_delta = float("nan")
        self.llm = None

        for k, v in ENGINE_ENV.items():
            os.environ.setdefault(k, v)
        from vllm import LLM  # heavy: vLLM loads only where an engine starts

        self._folder = tempfile.mkdtemp(prefix="harness-vllm-")
        self._shm = None

        save_plain(model, self._folder)  # a LoRA policy: its base with the adapters merged
        tokenizer.save_pretrained(self._folder)
        args = self._engine_args(model, cfg, seed, max_model_len, max_num_seqs)
        args.update(engine_kwargs)
        try:
            with _preserved_process_state():
                self.llm = LLM(**args)
        except BaseException:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise
        from vllm.v1.engine.core_client import InprocClient

        self.in_process = isinstance(self.llm.llm_engine.engine_core, InprocClient)
        self.sleep_between = bool(args.get("enable_sleep_mode"))  # rollout.vllm_sleep on a GPU
        if self.router_noise > 0:
            self.llm.collective_rpc("harness_set_router_noise", args=(self.router_noise, seed))

    def _set_verify(self, cfg, first: int | None, every: int | None, tol: float | None) -> None:
        """The weight-sync check's schedule and tolerance: the arguments, else the rollout config's, else defaults."""
        self.verify_first = first if first is not None else getattr(cfg, "verify_first", 3)
        self.verify_every = every if every is not None else getattr(cfg, "verify_every", 10)
        self.verify_tol = (tol if tol is not None else getattr(cfg, "verify_tol", None)) or DEFAULT_TOL[self.dtype]

    def _engine_args(self, model, cfg, seed: int, max_model_len: int | None, max_num_seqs: int) -> dict:
        """vllm.LLM's arguments for the model saved in self._folder (CPU: whole-prompt prefill, a sized KV cache)."""
        from vllm.platforms import current_platform  # heavy: vLLM loads only where an engine starts

        max_pos = getattr(model.config, "max_position_embeddings", None) or 1024
        on_cpu = current_platform.is_cpu()
        share = getattr(cfg, "gpu_memory_utilization", 0.3)
        device = "cpu" if on_cpu else "cuda"  # a lever still auto (a section used alone): the engine's platform
        sleep = device_defaults.lever("rollout.vllm_sleep", getattr(cfg, "vllm_sleep", False), device) is True
        self.sync_bucket_mb = device_defaults.lever("rollout.sync_bucket_mb", getattr(cfg, "sync_bucket_mb", 0), device)
        args = engine_args(
            self._folder, self.dtype, seed, max_model_len or min(max_pos, 1024), max_num_seqs, share, on_cpu, sleep
        )
        if on_cpu:
            # vLLM 0.32 CPU bug: a seeded request whose prompt is split by chunked prefill
            # crashes the engine ("CPU Generator does not use offset", when it rewinds the
            # request's generator). Whole-prompt scheduling avoids the split.
            args["enable_chunked_prefill"] = False
            args["kv_cache_memory_bytes"] = kv_cache_bytes(
                model.config, self.dtype, args["max_model_len"], max_num_seqs, args["gpu_memory_utilization"]
            )
            if args["kv_cache_memory_bytes"] is None:
                del args["kv_cache_memory_bytes"]
        return args

    @staticmethod
    def _default_probe(tokenizer) -> list[int]:
        bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
        return (bos + tokenizer.encode(PROBE_TEXT, add_special_tokens=False))[:64]

    @contextlib.contextmanager
    def _engine_threads(self) -> Iterator[None]:
        n = torch.get_num_threads()
        torch.set_num_threads(self.engine_threads or n)
        try:
            yield
        finally:
            torch.set_num_threads(n)

    # ---- generation -------------------------------------------------------------------

    def _request_params(self, group_size: int, params: SamplingParams, seed: int):
        from vllm import SamplingParams as VSamplingParams

        stops = {"stop": list(params.stop), "include_stop_str_in_output": True} if params.stop else {}
        return VSamplingParams(
            n=group_size,
            temperature=params.temperature,  # 0: vLLM's greedy decoding (ReMax's baseline response)
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            min_tokens=min(self.min_new_tokens, params.max_new_tokens),
            logprobs=0,  # 0: the sampled token only
            seed=seed,
            stop_token_ids=[self.eos_id],
            detokenize=bool(params.stop),
            **stops,
        )

    def _wake(self) -> None:
        """rollout.vllm_sleep: the engine back on the GPU (weights and KV cache) before a sync or a generate."""
        if self.sleeping:
            self.llm.wake_up()
            self.sleeping = False

    def _sleep(self) -> None:
        """rollout.vllm_sleep: after a generate, the KV cache freed and the weights moved to host memory (level 1),
        so the trainer's update has the GPU; a sync overwrites the weights after waking anyway."""
        if self.sleep_between and not self.sleeping:
            self.llm.sleep(level=1)
            self.sleeping = True

    def generate(self, prompts: list[list[int]], group_size: int, params: SamplingParams) -> RolloutBatch:
        self._wake()
        try:
            return self._generate(prompts, group_size, params)
        finally:
            self._sleep()

    def _generate(self, prompts: list[list[int]], group_size: int, params: SamplingParams) -> RolloutBatch:
        from vllm.inputs import TokensPrompt

        gen = torch.Generator().manual_seed(params.seed)
        # one seed per prompt, by its index in the whole batch (a shard starts at params.first_prompt);
        # vLLM gives sample j of a request the seed (seed + j)
        n = params.first_prompt + len(prompts)
        seeds = torch.randint(0, 2**31 - 1 - group_size, (n,), generator=gen)[params.first_prompt :].tolist()
        requests = [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]
        with self._engine_threads():
            outs = self.llm.generate(
                requests, [self._request_params(group_size, params, s) for s in seeds], use_tqdm=False
            )
        rows, samples = [], []
        for p, out in zip(prompts, outs):
            comps = sorted(out.outputs, key=lambda c: c.index)
            if len(comps) != group_size:
                raise RuntimeError(f"vLLM returned {len(comps)} samples for a prompt, expected {group_size}")
            for c in comps:
                ids = list(c.token_ids)
                logp = [lp[t].logprob for lp, t in zip(c.logprobs, ids)]
                stopped = c.finish_reason == "stop"  # EOS or a stop string; "length": truncated
                at = stop_index(self.tokenizer, ids, params.stop) if params.stop else None
                if at is not None:  # as the hf backend: the row ends with the token that completes the stop string
                    ids, logp, stopped = ids[: at + 1], logp[: at + 1], True
                rows.append(list(p))
                samples.append((ids, logp, stopped))
        B, T = len(samples), max(len(ids) for ids, _, _ in samples)
        response_ids = torch.full((B, T), self.pad_id, dtype=torch.long)  # (B, T)
        mask = torch.zeros((B, T))
        sampler_logp = torch.zeros((B, T))
        truncated = torch.zeros(B, dtype=torch.bool)
        for i, (ids, logp, stopped) in enumerate(samples):
            n = len(ids)
            response_ids[i, :n] = torch.tensor(ids, dtype=torch.long)
            mask[i, :n] = 1.0  # EOS (the last token when generated) included
            sampler_logp[i, :n] = torch.tensor(logp)
            truncated[i] = n == 0 or not (ids[-1] == self.eos_id or (params.stop and stopped))
        texts = [
            cut_at_stop(self.tokenizer.decode(ids, skip_special_tokens=True), params.stop) for ids, _, _ in samples
        ]
        return RolloutBatch(
            prompt_ids=rows,
            response_ids=response_ids,
            response_mask=mask,
            sampler_logp=sampler_logp,
            truncated=truncated,
            texts=texts,
        )

    # ---- weight sync ------------------------------------------------------------------

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Copy `model`'s current weights into the engine (in place), reset the prefix
        cache, and verify on schedule (raises WeightSyncError on a mismatch)."""
        t0 = time.perf_counter()
        self._wake()
        self.push_weights(model)
        self.num_syncs += 1
        self.last_sync_seconds = time.perf_counter() - t0
        k = self.num_syncs
        self.last_verify_seconds = 0.0
        if k <= self.verify_first or (self.verify_every and k % self.verify_every == 0):
            t1 = time.perf_counter()
            self.verify_sync(model)
            self.last_verify_seconds = time.perf_counter() - t1

    @torch.no_grad()
    def push_weights(self, model: torch.nn.Module) -> None:
        """The sync itself, without the check: checkpoint-format state dict -> engine."""
        state = checkpoint_state(model)
        if self.in_process and self.sync_bucket_mb > 0:  # rollout.sync_bucket_mb: the GPU's bucketed load
            for bucket in weight_buckets(list(state.items()), self.sync_bucket_mb << 20):
                self.llm.collective_rpc("harness_load_weights", kwargs={"weights": bucket})
        elif self.in_process:
            with self._engine_threads():  # the reload re-packs weights with torch ops, in this process
                self.llm.collective_rpc("harness_reload_weights", kwargs={"weights": list(state.items())})
        else:
            from safetensors.torch import save_file

            if self._shm is None:
                base = "/dev/shm" if os.path.isdir("/dev/shm") else None
                self._shm = tempfile.mkdtemp(prefix="harness-vllm-sync-", dir=base)
            seen, flat = set(), {}
            for k, v in state.items():  # safetensors refuses tensors that share storage (ties)
                v = v.detach().to("cpu").contiguous()
                flat[k] = v.clone() if v.untyped_storage().data_ptr() in seen else v
                seen.add(v.untyped_storage().data_ptr())
            save_file(flat, os.path.join(self._shm, "model.safetensors"))
            self.llm.collective_rpc("harness_reload_weights", kwargs={"folder": self._shm})
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights

    def engine_probe_logprobs(self, probe_ids: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """Per sequence, log-probs (len-1,) of tokens 1.. under the engine (temperature 1)."""
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        sp = VSamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0, detokenize=False)
        with self._engine_threads():
            outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(s)) for s in probe_ids], sp, use_tqdm=False)
        return [
            torch.tensor([lp[t].logprob for lp, t in zip(o.prompt_logprobs[1:], s[1:])])
            for s, o in zip(probe_ids, outs)
        ]

    @torch.no_grad()
    def trainer_probe_logprobs(self, model: torch.nn.Module, probe_ids: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """Same as engine_probe_logprobs, computed by the trainer's code path."""
        T = max(len(s) for s in probe_ids) - 1
        resp = torch.full((len(probe_ids), T), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(probe_ids), T))
        for i, s in enumerate(probe_ids):
            resp[i, : len(s) - 1] = torch.tensor(s[1:], dtype=torch.long)
            mask[i, : len(s) - 1] = 1.0
        was_training = model.training
        model.eval()
        try:
            with full_params(model):  # FSDP: the whole weights for the probe's forward
                logp, _, _ = response_logprobs(model, [list(s[:1]) for s in probe_ids], resp, mask, self.pad_id)
        finally:
            model.train(was_training)
        return [logp[i, : len(s) - 1].float().cpu() for i, s in enumerate(probe_ids)]

    def verify_sync(
        self, model: torch.nn.Module, probe_ids: Sequence[Sequence[int]] | None = None, tol: float | None = None
    ) -> float:
        """max |dlogp| between engine and trainer on the probe; raises WeightSyncError above
        `tol` (default self.verify_tol). probe_ids: sequences (prompt + continuation) whose
        every token after the first is scored; a single flat list is one sequence."""
        seqs = self.probe_ids if probe_ids is None else probe_ids
        if seqs and isinstance(seqs[0], int):
            seqs = [seqs]
        seqs = [list(s) for s in seqs]
        if any(len(s) < 2 for s in seqs):
            raise ValueError("each probe sequence needs at least 2 tokens")
        tol = self.verify_tol if tol is None else tol
        eng = self.engine_probe_logprobs(seqs)
        ref = self.trainer_probe_logprobs(model, seqs)
        delta = max(float((a - b).abs().max()) for a, b in zip(eng, ref))
        self.last_probe_delta = delta
        if not delta <= tol:  # also catches NaN
            raise WeightSyncError(
                f"vLLM engine and trainer disagree on the probe: max |dlogp| = {delta:.3g} > "
                f"tol {tol:g} (dtype {self.dtype}, after sync {self.num_syncs})"
            )
        return delta

    # ---- teardown ---------------------------------------------------------------------

    def close(self) -> None:
        if self.llm is not None:
            with contextlib.suppress(Exception):
                self.llm.llm_engine.engine_core.shutdown()
            self.llm = None  # in-process, shutdown also tears down vLLM's distributed state
        for d in (getattr(self, "_folder", None), getattr(self, "_shm", None)):
            if d:
                shutil.rmtree(d, ignore_errors=True)

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()
