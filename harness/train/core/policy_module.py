"""The policy module a run trains, made ready in one place (docs/scale.md), and what follows from it.

    prepare_policy(model, cfg)      activation checkpointing (train.gradient_checkpointing), then LoRA
                                    adapters (model.lora); a data-parallel / FSDP wrapper goes around
                                    what this returns
    compute_precision(cfg, device)  the context of the trainer's forwards: torch.autocast in bf16
                                    (train.autocast) or nothing; weights and optimizer state stay fp32
    reference_of(model)             pi_ref = pi_0: a frozen copy of the policy, or, with LoRA, the
                                    policy itself with its adapters disabled (no copy)
    read/load_policy_weights, policy_checkpoint_state, check_resumed_base
                                    a checkpoint's policy: the whole model, or the adapters plus the
                                    digest of the base they were trained on
    (a checkpoint's policy for `harness eval`: harness/train/run/final_eval.py load_trained_policy)

With every knob off (model.lora null, gradient_checkpointing false, autocast null) nothing here
changes what a run computes: the model is returned as it is, the context is empty, the reference
and the checkpoint are those of full fine-tuning.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from pathlib import Path

import torch
from torch import nn

from harness.faults import RunFault
from harness.models.lm_head import lm_head_fp32
from harness.models.lora import AdaptersOff, add_lora, base_digest, is_lora, load_adapter, read_adapter

AUTOCAST_DTYPES = {"bf16": torch.bfloat16}
BASE_KEY = "lora_base_digest"  # trainer_state.pt: the digest of the base the adapters were trained on


class BaseMismatch(RunFault):
    """A LoRA checkpoint's adapters were trained on a base with other weights than the one built now."""


def prepare_policy(model: nn.Module, cfg) -> nn.Module:
    """The module the run trains, from the initial policy (harness/train/run/warmstart.py):
    train.gradient_checkpointing -> transformers' gradient_checkpointing_enable (use_reentrant=False: no
    input needs requires_grad, frozen embeddings included; active in train mode); model.lora -> a peft
    PeftModel with adapters on model.lora.target_modules (the base frozen); model.lm_head_fp32 -> the head's
    forward in fp32 (harness/models/lm_head.py). Returns `model` itself when LoRA is off."""
    if cfg.model.lm_head_fp32:  # model.lm_head_fp32: fp32 logits in the trainer and the hf sampler (ScaleRL)
        lm_head_fp32(model)
    if cfg.train.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    lora = cfg.model.lora
    if lora is not None:
        model = add_lora(model, lora.r, lora.alpha, lora.dropout, lora.target_modules, seed=cfg.seed)
        model._harness_base_digest = base_digest(model)  # once: the base is frozen
    return model


def compute_precision(cfg, device: torch.device):
    """The context of the trainer's own forwards (the update, pi_old, pi_ref, the components):
    torch.autocast to train.autocast's dtype, or a no-op. The rollout engine is not in it."""
    dtype = AUTOCAST_DTYPES.get(cfg.train.autocast) if cfg.train.autocast else None
    return torch.autocast(device_type=device.type, dtype=dtype) if dtype is not None else nullcontext()


def matmul_precision(tf32: bool) -> None:
    """train.tf32: fp32 matrix products (and cuDNN convolutions) on TF32 tensor cores, process-wide; false leaves
    torch's settings as they are (a CPU's auto: its products untouched)."""
    if tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("high")


def reference_of(model: nn.Module, dtype: torch.dtype | None = None):
    """pi_ref = the initial policy, frozen: a LoRA policy with its adapters off (B starts at zero, so the base
    is pi_0; no second copy of the weights), else a deep copy in eval mode without gradients, stored in `dtype`
    when given (train.ref_compute_dtype: the compute dtype, not re-cast by autocast in every forward)."""
    if is_lora(model):
        return AdaptersOff(model)
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    return ref.to(dtype) if dtype is not None and dtype != model.dtype else ref


# ---------------------------------------------------------------------------------- checkpoints
def read_policy_weights(policy: nn.Module, ckpt: Path) -> dict[str, torch.Tensor]:
    """The policy's saved tensors in `ckpt` (raises if unreadable: run/setup.py falls back to the checkpoint
    before). Full fine-tuning: the saved model's state dict; LoRA: the adapters."""
    if is_lora(policy):
        return read_adapter(ckpt)
    return type(policy).from_pretrained(ckpt, dtype=policy.dtype).state_dict()


def load_policy_weights(policy: nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Copy read_policy_weights' tensors into the policy in place (its optimizer keeps its parameters)."""
    if is_lora(policy):
        load_adapter(policy, weights)
    else:
        policy.load_state_dict(weights)


def policy_checkpoint_state(policy: nn.Module) -> dict:
    """What trainer_state.pt keeps about the policy besides its saved weights: with LoRA, the digest of the
    base (the adapters are only meaningful on it); nothing otherwise."""
    return {BASE_KEY: policy._harness_base_digest} if is_lora(policy) else {}


def check_resumed_base(policy: nn.Module, state: dict, ckpt: str) -> None:
    """BaseMismatch when a LoRA checkpoint's base digest differs from the base built now (e.g. a warm start
    rebuilt by other code or on another kernel path: harness/train/run/warmstart.py)."""
    if not is_lora(policy):
        return
    saved, now = state.get(BASE_KEY), policy._harness_base_digest
    if saved != now:
        raise BaseMismatch(
            f"checkpoint {ckpt} holds LoRA adapters trained on a base whose weights digest to {saved}, but the base "
            f"built from this config now digests to {now} (a warm start rebuilt by other code or on another CPU "
            "kernel path, or another model folder); the adapters would be applied to other weights. Resume where "
            "the base was built (or restore its warm-start folder), or start afresh with another --out."
        )
