"""The vLLM engine's weight sync and its check: the trainer's weights pushed into the engine, then verified.

    backend.sync_weights(model)   # push, reset the prefix cache, verify on schedule (WeightSyncError on a mismatch)

sync_weights(model): `llm.collective_rpc("harness_reload_weights", ...)` (vLLM's in-place layerwise reload + a
CPU MoE fix, vllm_worker.py), or, with `rollout.sync_bucket_mb` > 0 (auto: 512 on CUDA) in-process, the weights
in buckets of that many MB, each one `collective_rpc("harness_load_weights")` (the model's own `load_weights`,
as TRL and verl sync a GPU engine; `weight_buckets`); out of process, a safetensors file under /dev/shm. Then
`llm.reset_prefix_cache()`; then, on the first `verify_first` syncs and every `verify_every`-th one,
`verify_sync`: log-probs of a fixed probe sequence in the engine (`prompt_logprobs`) vs the trainer
(`harness.models.logprobs.response_logprobs`), `WeightSyncError` when max |dlogp| > tol (DEFAULT_TOL by dtype).
Its seconds are apart (`last_verify_seconds`, not in `last_sync_seconds`).

`WeightSync` is the part of VLLMBackend (vllm_backend.py) that does this; it reads the backend's llm,
in_process, sync_bucket_mb, dtype, pad_id, probe_ids, verify_first / verify_every / verify_tol and its
`_wake` and `_engine_threads`, and keeps num_syncs, last_sync_seconds, last_verify_seconds, last_probe_delta.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence

import torch

from harness.models.logprobs import response_logprobs
from harness.models.lora import base_of, merged_state_dict
from harness.parallel import full_params, full_state

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


def default_probe(tokenizer) -> list[int]:
    """[bos] + the tokenised PROBE_TEXT, at most 64 tokens."""
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    return (bos + tokenizer.encode(PROBE_TEXT, add_special_tokens=False))[:64]


class WeightSyncError(RuntimeError):
    """The engine's log-probs on the probe differ from the trainer's: weights not in use."""


class WeightSync:
    """sync_weights, push_weights and verify_sync of VLLMBackend (the attributes they use: the module doc)."""

    def _set_verify(self, cfg, first: int | None, every: int | None, tol: float | None) -> None:
        """The weight-sync check's schedule and tolerance: the arguments, else the rollout config's, else defaults."""
        self.verify_first = first if first is not None else getattr(cfg, "verify_first", 3)
        self.verify_every = every if every is not None else getattr(cfg, "verify_every", 10)
        self.verify_tol = (tol if tol is not None else getattr(cfg, "verify_tol", None)) or DEFAULT_TOL[self.dtype]

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
            self._push_through_file(state)
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights

    def _push_through_file(self, state: dict[str, torch.Tensor]) -> None:
        """An out-of-process engine: the weights as one safetensors file under /dev/shm, reloaded from there."""
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
