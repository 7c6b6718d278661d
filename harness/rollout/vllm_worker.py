"""Methods mixed into vLLM's worker (`LLM(worker_extension_cls=...)`), called through
`llm.collective_rpc("harness_...", kwargs=...)`.

They run wherever vLLM runs the model: in the trainer's own process when the engine is
in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, the default of `VLLMBackend`; arguments
are then passed by reference, no copy), or in vLLM's worker process otherwise
(arguments are serialised, so weights travel as a safetensors folder path).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch


class _SkipRotaryReloadWarning(logging.Filter):
    """vLLM's layerwise reload warns "RotaryEmbedding: Failed to load weights" on every
    sync: the rotary cos/sin cache is a buffer, never in a checkpoint, and is put back
    unchanged. Harmless; filtered so real warnings stay visible."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg == "%s: Failed to load weights" and record.args and record.args[0] == "RotaryEmbedding")


logging.getLogger("vllm.model_executor.model_loader.reload.layerwise").addFilter(_SkipRotaryReloadWarning())


def iter_safetensors(folder: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) of every *.safetensors file in `folder` (checkpoint names)."""
    from safetensors import safe_open

    for file in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                yield name, f.get_tensor(name)


def reprocess_cpu_moe_experts(model: torch.nn.Module) -> int:
    """Re-pack MoE expert weights into the CPU kernel layout after a reload.

    vLLM 0.32 bug (CPU only): on a weight update `UnquantizedFusedMoEMethod._setup_kernel`
    copies the new expert weights in but skips `fused_experts.process_weights_after_loading`
    (it runs only on the first load), so `CPUUnquantizedExperts` keeps the raw checkpoint
    layout while its kernel expects the prepacked one: the MoE output is silently wrong
    (probe |dlogp| ~0.2-1 on tiny-moe). Calling the experts' own post-load step again
    restores the packed layout. Returns the number of MoE layers re-packed.
    """
    try:
        from vllm.model_executor.layers.fused_moe.experts.cpu_moe import CPUUnquantizedExperts
    except ImportError:  # a build without the CPU MoE kernels
        return 0
    n = 0
    for module in model.modules():
        kernel = getattr(getattr(module, "quant_method", None), "moe_kernel", None)
        experts = getattr(kernel, "fused_experts", None)
        if isinstance(experts, CPUUnquantizedExperts):
            experts.process_weights_after_loading(module)
            n += 1
    return n


class HarnessWorkerExtension:
    """Extra worker methods (prefixed `harness_` so they never shadow vLLM's own)."""

    def harness_reload_weights(
        self, weights: Iterable[tuple[str, torch.Tensor]] | None = None, folder: str | None = None
    ) -> int:
        """Load new weights in place: `weights` (checkpoint-format (name, tensor) pairs, as
        `save_pretrained` would write them) or the safetensors files in `folder`.

        Uses vLLM's own in-place reload (`Worker.reload_weights`, layerwise: restores the
        checkpoint layout of each layer, loads, re-runs the kernel post-processing such
        as the CPU GEMM weight packing), then fixes the CPU MoE layout (see
        `reprocess_cpu_moe_experts`). The KV/prefix cache is NOT reset here: the caller
        does `llm.reset_prefix_cache()`. Returns the number of MoE layers re-packed.
        """
        if (weights is None) == (folder is None):
            raise ValueError("pass exactly one of weights= or folder=")
        it = iter_safetensors(folder) if folder is not None else iter(weights)
        self.reload_weights(weights_iterator=it, is_checkpoint_format=True)
        return reprocess_cpu_moe_experts(self.model_runner.model)

    def harness_load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        """One bucket of a bucketed sync (rollout.sync_bucket_mb > 0, CUDA): checkpoint-format (name, tensor) pairs
        through the model's own `load_weights` (stacked q/k/v and gate/up parameters filled from their parts),
        copied onto the engine's device. Right where vLLM keeps the weights in their checkpoint layout (unquantised
        on a GPU); a CPU engine packs its GEMM weights and syncs with harness_reload_weights. Returns the number of
        tensors given."""
        device = next(self.model_runner.model.parameters()).device
        pairs = [(name, t.to(device, non_blocking=True)) for name, t in weights]
        self.model_runner.model.load_weights(weights=pairs)
        return len(pairs)

    def harness_set_router_noise(self, std: float, seed: int = 0) -> int:
        """Add N(0, std^2) noise to every MoE router's logits (vLLM `GateLinear` outputs)
        from now on; std=0 removes it. The noise comes from a dedicated generator seeded
        with `seed` (reproducible for the same sequence of forwards). Returns the number of
        routers hooked."""
        for h in getattr(self, "_harness_noise_handles", []):
            h.remove()
        self._harness_noise_handles = []
        if std <= 0:
            return 0
        from vllm.model_executor.layers.fused_moe.router.gate_linear import GateLinear

        gens: dict[torch.device, torch.Generator] = {}

        def hook(module, args, out):
            logits = out[0] if isinstance(out, tuple) else out
            gen = gens.get(logits.device)
            if gen is None:
                gen = gens[logits.device] = torch.Generator(device=logits.device).manual_seed(seed)
            noise = torch.randn(logits.shape, generator=gen, device=logits.device, dtype=torch.float32)
            noisy = logits + (std * noise).to(logits.dtype)
            return (noisy, *out[1:]) if isinstance(out, tuple) else noisy

        gates = [m for m in self.model_runner.model.modules() if isinstance(m, GateLinear)]
        self._harness_noise_handles = [g.register_forward_hook(hook) for g in gates]
        return len(gates)
