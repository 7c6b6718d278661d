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

Where each part lives: vllm_engine.py (the engine's start: its arguments, KV cache, the process state it
restores), vllm_sync.py (sync_weights and verify_sync: `WeightSync`, a base of VLLMBackend), this module
(VLLMBackend: generate, sleep / wake, close; `rollout_batch`: vLLM's outputs as a RolloutBatch).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Sequence

import torch

from harness.rollout.base import RolloutBackend, RolloutBatch, SamplingParams, cut_at_stop, stop_index
from harness.rollout.vllm_engine import ENGINE_ENV, WORKER_EXTENSION, engine_args, kv_cache_bytes, start_engine
from harness.rollout.vllm_sync import (
    DEFAULT_TOL,
    PROBE_TEXT,
    WeightSync,
    WeightSyncError,
    checkpoint_state,
    default_probe,
    weight_buckets,
)

# the names this module held before the engine's start and the weight sync had modules of their own
__all__ = [
    "DEFAULT_TOL",
    "ENGINE_ENV",
    "PROBE_TEXT",
    "WORKER_EXTENSION",
    "VLLMBackend",
    "WeightSyncError",
    "checkpoint_state",
    "engine_args",
    "kv_cache_bytes",
    "rollout_batch",
    "weight_buckets",
]


def _samples(prompts, outs, group_size: int, stop: tuple[str, ...], tokenizer) -> tuple[list, list]:
    """(each sample's prompt, (token ids, sampler log-probs, stopped)) of vLLM's outputs, a prompt's samples in
    order; a stop string ends its row with the token that completes it, as in the hf backend."""
    rows, samples = [], []
    for p, out in zip(prompts, outs):
        comps = sorted(out.outputs, key=lambda c: c.index)
        if len(comps) != group_size:
            raise RuntimeError(f"vLLM returned {len(comps)} samples for a prompt, expected {group_size}")
        for c in comps:
            ids = list(c.token_ids)
            logp = [lp[t].logprob for lp, t in zip(c.logprobs, ids)]
            stopped = c.finish_reason == "stop"  # EOS or a stop string; "length": truncated
            at = stop_index(tokenizer, ids, stop) if stop else None
            if at is not None:  # as the hf backend: the row ends with the token that completes the stop string
                ids, logp, stopped = ids[: at + 1], logp[: at + 1], True
            rows.append(list(p))
            samples.append((ids, logp, stopped))
    return rows, samples


def rollout_batch(
    prompts: list[list[int]], outs, group_size: int, params: SamplingParams, tokenizer, eos_id: int, pad_id: int
) -> RolloutBatch:
    """vLLM's RequestOutputs (one a prompt, group_size samples each) as a RolloutBatch of B = prompts x
    group_size rows: response ids (B, T) right-padded with pad_id, mask (B, T) (EOS included), the sampler's
    log-probs (B, T), truncated (B,) (no EOS and no stop string), the texts cut at a stop string."""
    rows, samples = _samples(prompts, outs, group_size, params.stop, tokenizer)
    B, T = len(samples), max(len(ids) for ids, _, _ in samples)
    response_ids = torch.full((B, T), pad_id, dtype=torch.long)  # (B, T)
    mask = torch.zeros((B, T))
    sampler_logp = torch.zeros((B, T))
    truncated = torch.zeros(B, dtype=torch.bool)
    for i, (ids, logp, stopped) in enumerate(samples):
        n = len(ids)
        response_ids[i, :n] = torch.tensor(ids, dtype=torch.long)
        mask[i, :n] = 1.0  # EOS (the last token when generated) included
        sampler_logp[i, :n] = torch.tensor(logp)
        truncated[i] = n == 0 or not (ids[-1] == eos_id or (params.stop and stopped))
    texts = [cut_at_stop(tokenizer.decode(ids, skip_special_tokens=True), params.stop) for ids, _, _ in samples]
    return RolloutBatch(
        prompt_ids=rows,
        response_ids=response_ids,
        response_mask=mask,
        sampler_logp=sampler_logp,
        truncated=truncated,
        texts=texts,
    )


class VLLMBackend(WeightSync, RolloutBackend):
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
        self.probe_ids = [list(p) for p in probe_ids] if probe_ids is not None else [default_probe(tokenizer)]
        self.num_syncs = 0
        self.last_sync_seconds = float("nan")
        self.last_verify_seconds = 0.0  # the check after the last sync (0: none ran)
        self.sleeping = False
        self.last_probe_delta = float("nan")
        self.llm = None

        self._shm = None  # an out-of-process engine's sync folder (vllm_sync.py)
        engine = start_engine(model, tokenizer, cfg, self.dtype, seed, max_model_len, max_num_seqs, engine_kwargs)
        self.llm, self._folder, self.sync_bucket_mb = engine.llm, engine.folder, engine.sync_bucket_mb
        self.in_process, self.sleep_between = engine.in_process, engine.sleep_between  # vllm_sleep on a GPU
        if self.router_noise > 0:
            self.llm.collective_rpc("harness_set_router_noise", args=(self.router_noise, seed))

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
        return rollout_batch(prompts, outs, group_size, params, self.tokenizer, self.eos_id, self.pad_id)

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
