"""Generation backends behind `rollout.backend=...`."""

from harness import device_defaults
from harness.rollout.base import RolloutBackend, RolloutBatch, SamplingParams
from harness.rollout.hf import HFBackend
from harness.rollout.vllm_backend import VLLMBackend

BACKENDS = ("hf", "vllm")


def lever(rollout_cfg, name: str, model) -> bool:
    """rollout.NAME as resolved by the run config, or, in a section used alone, its auto for the model's device."""
    device = next(model.parameters()).device.type
    return device_defaults.lever(f"rollout.{name}", getattr(rollout_cfg, name, False), device) is True


def make_backend(rollout_cfg, model, tokenizer) -> RolloutBackend:
    """rollout_cfg: the run config's `rollout` section."""
    if rollout_cfg.backend == "hf":
        return HFBackend(
            model,
            tokenizer,
            dtype=rollout_cfg.dtype,
            router_noise=rollout_cfg.router_noise,
            seeding=rollout_cfg.seeding,
            share_prefix=lever(rollout_cfg, "share_prefix", model),
            compile=lever(rollout_cfg, "compile", model),  # rollout.compile (auto: on CUDA)
            min_new_tokens=rollout_cfg.min_new_tokens,
            decode_attention=rollout_cfg.decode_attention,  # rollout.decode_attention (a CPU lever)
        )
    if rollout_cfg.backend == "vllm":
        return VLLMBackend(model, tokenizer, rollout_cfg)
    raise ValueError(f"rollout.backend={rollout_cfg.backend!r} is unknown; allowed: {list(BACKENDS)}")


__all__ = ["RolloutBackend", "RolloutBatch", "SamplingParams", "make_backend", "BACKENDS"]
