"""The lever sets of `harness bench --lever-sets`: what each trainer runs with, in one place.

The fair protocol (benchmarks/README.md, "The fair protocol") matches, in every case, what is not a lever but a
choice of the experiment, whatever the lever set: the workload (model, prompts, N x G x T, steps, lr, clip, KL,
the micro-batch, which TRL takes from ours), the memory policy (TRL's gradient checkpointing follows
`train.gradient_checkpointing`: TRL 1.16 turns it on by default, ours is off), the generation engine (hf against
TRL's hf `generate`; vLLM only against TRL's vLLM), the precision (TRL's `bf16` follows `train.autocast`: TRL
1.16 turns bf16 on by default) and the attention implementation (TRL loads the policy with ours). The rollout's
precision cannot be matched exactly: TRL generates with its trained model (under bf16 autocast when bf16=True), ours
with `rollout.dtype`'s weights (fp32, or a bf16 copy); each case records it (`rollout_precision`), and `levers`
puts both on bf16. On top of that:

- `defaults`: each trainer as it comes: ours with the run YAML's settings, TRL with GRPOConfig's defaults.
- `levers`: every lever of each side on: ours with OURS_LEVERS of the device, TRL with TRL_LEVERS of the
  device. A lever that moves a number (bf16) is on for both sides at once, so that the precision stays matched.

A lever goes in here after it was measured on that device (docs/speed.md, "The levers"). TRL_NOT_LEVERS says
which of TRL's speed options stay off, and why.
"""

from __future__ import annotations

LEVER_SETS = ("defaults", "levers")

# Ours, per device: `--set` overrides of the run config. {micro16}: the largest divisor of the step's rows up to 16.
OURS_LEVERS: dict[str, tuple[str, ...]] = {
    "cpu": (
        "train.micro_batch_size={micro16}",  # 16 rows a micro-batch for both trainers (TRL takes ours)
        "train.share_prefix=true",  # the prompt once per group in the trainer (a CPU lever: 2x slower on an H200)
        "rollout.share_prefix=true",  # one prefill per prompt
        "rollout.seeding=prompt",  # per-row inverse-CDF draws instead of the multinomial's exponential draw
        "train.autocast=bf16",  # bf16 compute over fp32 weights (TRL: bf16=True)
        "rollout.dtype=bfloat16",  # a bf16 rollout engine
        "rollout.decode_attention=matmul",  # one-row decoding attention as products, not torch's fused CPU kernel
    ),
    "cuda": (
        "train.micro_batch_size=null",  # the whole batch in one micro-batch: a GPU holds 64 rows (TRL takes ours)
        "rollout.seeding=prompt",
        "train.autocast=bf16",
        "rollout.dtype=bfloat16",
    ),
}

# TRL, per device: GRPOConfig keyword arguments on top of the matched settings (benchmarks/trl_grpo.py).
TRL_LEVERS: dict[str, dict] = {
    "cpu": {},
    # TRL's own option for what ours does by default on CUDA (train.pad_to_multiple_of: auto = 64): its prompts and
    # completions padded to a multiple of 64, so that its forwards too meet a few widths (TRL's auto pads on Neuron only)
    "cuda": {"pad_to_multiple_of": 64},
}

TRL_NOT_LEVERS = {
    "use_vllm": "another engine: compared only against ours on vLLM (the engine is matched, never a lever)",
    "use_transformers_continuous_batching": "transformers' paged continuous batching: another engine than generate",
    "use_liger_kernel": "liger-kernel is not installed (TRL 1.16 deprecates it for Hub kernels, which need a network)",
    "gradient_checkpointing": "the memory policy: matched to ours, never a lever",
    "bf16": "the precision: matched to ours (train.autocast), never a lever alone",
}


def ours_levers(lever_set: str, device: str, rows: int = 16) -> tuple[str, ...]:
    """Our `--set` overrides of a lever set on `device` ("cpu" | "cuda") for a step of `rows` rows (N x G)."""
    _check(lever_set, device)
    micro16 = max(d for d in range(1, min(rows, 16) + 1) if rows % d == 0)
    return tuple(o.format(micro16=micro16) for o in OURS_LEVERS[device]) if lever_set == "levers" else ()


def trl_levers(lever_set: str, device: str) -> dict:
    """TRL's GRPOConfig keyword arguments of a lever set on `device`, beyond the matched settings."""
    _check(lever_set, device)
    return dict(TRL_LEVERS[device]) if lever_set == "levers" else {}


def _check(lever_set: str, device: str) -> None:
    if lever_set not in LEVER_SETS:
        raise ValueError(f"--lever-sets: {lever_set!r} is unknown; allowed: {list(LEVER_SETS)}")
    if device not in OURS_LEVERS:
        raise ValueError(f"device {device!r} is unknown; allowed: {sorted(OURS_LEVERS)}")
