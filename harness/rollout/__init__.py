"""Generation backends behind `rollout.backend=...`."""

from harness.rollout.base import RolloutBackend, RolloutBatch, SamplingParams
from harness.rollout.hf import HFBackend
from harness.rollout.vllm_backend import VLLMBackend

BACKENDS = ("hf", "vllm")


def make_backend(rollout_cfg, model, tokenizer) -> RolloutBackend:
    """rollout_cfg: the run config's `rollout` section."""
    if rollout_cfg.backend == "hf":
        return HFBackend(
            model,
            tokenizer,
            dtype=rollout_cfg.dtype,
            router_noise=rollout_cfg.router_noise,
            seeding=rollout_cfg.seeding,
            share_prefix=rollout_cfg.share_prefix,
            min_new_tokens=rollout_cfg.min_new_tokens,
        )
    if rollout_cfg.backend == "vllm":
        return VLLMBackend(model, tokenizer, rollout_cfg)
    raise ValueError(f"rollout.backend={rollout_cfg.backend!r} is unknown; allowed: {list(BACKENDS)}")


__all__ = ["RolloutBackend", "RolloutBatch", "SamplingParams", "make_backend", "BACKENDS"]
