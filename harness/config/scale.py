"""The rules of the scale knobs (docs/scale.md), across model, train and rollout: model.lora's targets and
what needs a second copy of the policy, activation checkpointing, several processes, FSDP and autocast.
They live together because each is about how the run is held in memory and split over processes, not
about what any one section means."""

from __future__ import annotations

import warnings
from typing import Any

from harness.config.base import ConfigWarning
from harness.machine import bf16_slow_reason
from harness.models.hub import section_model
from harness.models.lora import check_lora_targets, meta_model


def check_scale(run: Any) -> None:
    """model.lora: its target modules exist on the model (built without weights) and it is not combined with
    what needs a second copy of the policy; train.autocast: fp32 weights, and a warning on a CPU whose bf16
    matmuls are slow (docs/scale.md)."""
    m, t, o = run.model, run.train, run.objective
    if m.lora is not None:
        if o.ref_update_every:
            raise ValueError(
                f"objective.ref_update_every={o.ref_update_every} with model.lora: the reference is the "
                "base with the adapters disabled (no copy of the weights), so it cannot move to the "
                "current policy; set objective.ref_update_every=0, or drop model.lora"
            )
        check_lora_targets(section_model(m), m.overrides, m.lora.target_modules)
    if t.gradient_checkpointing:
        if o.routing_replay:
            raise ValueError(
                "train.gradient_checkpointing=true with objective.routing_replay=true: the replayed "
                "expert choices are forced only during the forward, so the backward's recompute would "
                "route by the router's own choices (torch.utils.checkpoint refuses the mismatch); set "
                "one of them false"
            )
        arch = meta_model(section_model(m), m.overrides)
        if not getattr(arch, "supports_gradient_checkpointing", False):
            raise ValueError(
                f"train.gradient_checkpointing=true: model.name={m.name!r} ({type(arch).__name__}) "
                "does not support activation checkpointing in transformers; set it false"
            )
    if t.nproc > 1 and run.rollout.backend == "hf" and run.rollout.seeding != "prompt":
        raise ValueError(
            f"train.nproc={t.nproc} with rollout.seeding={run.rollout.seeding!r}: batch seeding draws a "
            "prompt's samples from one seed per generate call, so they would depend on which process "
            "drew the prompt; set rollout.seeding=prompt (and the same in the 1-process arm you compare with)"
        )
    if t.share_prefix and t.gradient_checkpointing:
        raise ValueError(
            "train.share_prefix=true with train.gradient_checkpointing=true: transformers turns the KV cache "
            "off under activation checkpointing, and the responses run on their prompt's cache; set one of "
            "them false"
        )
    if t.share_prefix and t.pad_to_multiple_of != 1:
        raise ValueError(
            f"train.pad_to_multiple_of={t.pad_to_multiple_of} with train.share_prefix=true: the shared-prefix "
            "forward lays out its own widths (a prompt once, then the responses on its cache); set "
            "train.pad_to_multiple_of=1 or train.share_prefix=false"
        )
    if t.parallel == "fsdp":
        check_fsdp(run)
    check_chunked_head(run)
    if t.autocast is not None:
        if m.dtype != "float32":
            raise ValueError(
                f"train.autocast={t.autocast!r} keeps fp32 master weights and computes in bf16; "
                f"model.dtype={m.dtype!r} already stores the weights in bf16 (pure bf16): set "
                "model.dtype=float32, or train.autocast=null"
            )
        if why := bf16_slow_reason():
            warnings.warn(f"train.autocast={t.autocast!r}: {why}", ConfigWarning, stacklevel=2)


def check_chunked_head(run: Any) -> None:
    """train.chunked_head never holds the whole logits: refused with a mode that reads them."""
    if run.train.chunked_head and run.objective.baseline == "optimal_token":
        raise ValueError(
            "train.chunked_head=true with objective.baseline='optimal_token': the optimal token baseline sums "
            "pi(v)^2 over the whole vocabulary from pi_old's logits, which the chunked head never holds; set "
            "train.chunked_head=false or another objective.baseline"
        )


def check_fsdp(run: Any) -> None:
    """What train.parallel=fsdp does not combine with (docs/scale.md)."""
    if run.model.lora is not None:
        raise ValueError(
            "train.parallel='fsdp' with model.lora: sharded LoRA adapters are not built; LoRA's frozen base "
            "is what makes the model fit, so run it with train.parallel=ddp (each process holds the base, "
            "the adapters' gradients are summed), or drop model.lora"
        )
    if run.train.share_prefix:
        raise ValueError(
            "train.parallel='fsdp' with train.share_prefix=true: a micro-batch's two forwards (the prompts, "
            "then the responses on their cache) under fully_shard are not tested; set train.share_prefix=false "
            "(or train.parallel=ddp)"
        )
    if run.train.chunked_head:
        raise ValueError(
            "train.parallel='fsdp' with train.chunked_head=true: the chunks run the output head after the sharded "
            "model's forward, on weights it has resharded; set train.chunked_head=false (or train.parallel=ddp)"
        )
    if run.train.grad_share_every:
        raise ValueError(
            f"train.parallel='fsdp' with train.grad_share_every={run.train.grad_share_every}: the "
            "extreme-group gradient diagnostic back-propagates on whole groups outside the update's "
            "lockstep; set train.grad_share_every=0 (or train.parallel=ddp)"
        )
