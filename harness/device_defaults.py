"""The `auto` value of the levers whose best setting depends on the device a run computes on (docs/speed.md,
"Per device"). Every lever's `auto` resolves on a CPU to the value the knob had before it could be `auto`, so no
CPU run, golden record or report moves; on CUDA to the setting a GPU user expects, each with the measurement or
the argument that justifies it (docs/speed.md). An explicit value is kept on every device.

    lever                       cpu      cuda
    train.share_prefix          false    false  (H200: the split forward doubled the update; 4-D masks keep
                                                 SDPA off its flash kernel)
    rollout.share_prefix        false    false  (the same 4-D-mask prefill; vLLM shares prefixes itself)
    train.micro_batch_size      null     rows by tokens: the largest divisor of the mini-batch whose rows x
                                         (prompt + response) fit MICRO_BATCH_TOKENS
    train.pad_to_multiple_of    1        64    (rows packed to a multiple of 64 tokens: a few widths a run, not a
                                                new one most steps: what a GPU does once per shape is done early.
                                                1 under train.share_prefix)
    train.autocast              null     bf16 (fp32 weights; null when model.dtype is already bfloat16)
    train.tf32                  false    true  (fp32 matmuls on TF32 tensor cores)
    train.ref_compute_dtype     false    true under bf16 autocast (pi_ref stored in bf16, not re-cast per call)
    model.attn_implementation   null     sdpa  (null: transformers' own choice)
    rollout.compile             false    true  (hf: a static KV cache, the decoding forward under torch.compile
                                                with CUDA graphs; measured not to pay on a CPU)
    rollout.vllm_sleep          false    true  (vLLM's KV cache and weights released during the update)
    rollout.sync_bucket_mb      0        512   (vLLM weight sync in 512 MB buckets; 0: one layerwise reload)

This module knows values, not configs: `resolve(values, device)` maps the dotted keys a config holds to what each
`auto` among them becomes on `device` ("cpu" or "cuda"); harness/config/ applies it when a config is validated.
"""

from __future__ import annotations

import math
from typing import Any

import torch

AUTO = "auto"
MICRO_BATCH_TOKENS = 32768  # CUDA: tokens (rows x (prompt + response)) of one update micro-batch
CUDA_PAD_TO = 64  # CUDA: the trainer's packed widths a multiple of this (as the compiled rollout's prompts)
PROMPT_TOKENS_GUESS = 256  # a prompt's length where rollout.max_prompt_tokens is not set
CUDA_SYNC_BUCKET_MB = 512

# the levers, in the order they resolve (train.ref_compute_dtype after train.autocast, train.pad_to_multiple_of
# after train.share_prefix)
LEVERS = (
    "train.share_prefix",
    "rollout.share_prefix",
    "train.micro_batch_size",
    "train.pad_to_multiple_of",
    "train.autocast",
    "train.tf32",
    "train.ref_compute_dtype",
    "model.attn_implementation",
    "rollout.compile",
    "rollout.vllm_sleep",
    "rollout.sync_bucket_mb",
)


def run_device() -> str:
    """The kind of device this process's run computes on (harness/train/run/setup.py: cuda when there is one)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def micro_batch_rows(mini_batch: int, seq_tokens: int, budget: int = MICRO_BATCH_TOKENS) -> int:
    """The largest divisor of `mini_batch` rows whose rows x seq_tokens fit `budget` tokens (at least 1)."""
    fit = max(1, budget // max(seq_tokens, 1))
    return max(d for d in range(1, mini_batch + 1) if mini_batch % d == 0 and d <= fit)


def _cuda_value(key: str, values: dict[str, Any], resolved: dict[str, Any]) -> Any:
    """What `auto` of `key` becomes on CUDA (values: the config's dotted keys; resolved: the levers so far)."""
    if key == "train.micro_batch_size":
        rows = values["train.prompts_per_step"] * values["train.group_size"] // values["train.mini_batches"]
        prompt = values.get("rollout.max_prompt_tokens") or PROMPT_TOKENS_GUESS
        return micro_batch_rows(rows, prompt + values["rollout.max_new_tokens"])
    if key == "train.pad_to_multiple_of":  # the shared-prefix forward lays out its own widths
        return 1 if resolved.get("train.share_prefix", values.get("train.share_prefix")) is True else CUDA_PAD_TO
    if key == "train.autocast":
        return "bf16" if values.get("model.dtype", "float32") == "float32" else None
    if key == "train.ref_compute_dtype":
        autocast = resolved.get("train.autocast", values.get("train.autocast"))
        return autocast == "bf16" and values.get("model.lora") is None
    if key == "model.attn_implementation":
        return None if "attn_implementation" in (values.get("model.overrides") or {}) else "sdpa"
    if key == "rollout.sync_bucket_mb":
        return CUDA_SYNC_BUCKET_MB
    return {
        "train.share_prefix": False,
        "rollout.share_prefix": False,
        "train.tf32": True,
        "rollout.compile": True,
        "rollout.vllm_sleep": True,
    }[key]


CPU_VALUES: dict[str, Any] = {  # each the knob's value before it could be `auto`: CPU runs do not move
    "train.share_prefix": False,
    "rollout.share_prefix": False,
    "train.micro_batch_size": None,
    "train.pad_to_multiple_of": 1,
    "train.autocast": None,
    "train.tf32": False,
    "train.ref_compute_dtype": False,
    "model.attn_implementation": None,
    "rollout.compile": False,
    "rollout.vllm_sleep": False,
    "rollout.sync_bucket_mb": 0,
}


def resolve(values: dict[str, Any], device: str) -> dict[str, Any]:
    """{key: value on `device`} for every lever of LEVERS whose value in `values` is `auto` (in LEVERS' order:
    train.ref_compute_dtype reads train.autocast's resolved value). device: "cpu" or "cuda" (any other kind is
    resolved as a CPU)."""
    resolved: dict[str, Any] = {}
    for key in LEVERS:
        if values.get(key) != AUTO:
            continue
        resolved[key] = _cuda_value(key, values, resolved) if device == "cuda" else CPU_VALUES[key]
    return resolved


def lever(key: str, value: Any, device: str) -> Any:
    """`value` of one lever, resolved on `device` if it is still `auto` (a section used outside a validated run
    config, e.g. a backend built from RolloutSection() alone). Only for the levers that read nothing else."""
    if value != AUTO:
        return value
    return resolve({key: AUTO}, device)[key]


def describe(resolved: dict[str, Any], device: str) -> str:
    """One line naming the device and what each `auto` became (printed once at a run's start)."""
    parts = ", ".join(f"{k}={_show(v)}" for k, v in resolved.items())
    return f"auto levers on {device}: {parts}" if parts else f"no auto lever (device {device})"


def _show(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and math.isfinite(v):
        return repr(v)
    return str(v)
