"""Section `train` and the rules that constrain it: the batch's shape (mini-batches and micro-batches divide
it), train.old_logp=rollout only where the sampler's log-probs are the policy's (bypass without a correction
that it would make 1), and the component warm-up
(a component to warm up, named from the modes that declare one, and policy steps left after it). The
scale knobs' rules (LoRA, checkpointing, processes, FSDP, autocast) are scale.py's."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, field_validator

from harness.config.base import _Section
from harness.config.rollout import rollout_logp_inexact
from harness.objective import inputs_needed
from harness.objective.batch_correction import old_policy_readers
from harness.objective.modes import KIND_ORDER, KINDS


class TrainSection(_Section):
    steps: int = Field(30, ge=1, description="policy iterations (rollout + update)")
    prompts_per_step: int = Field(16, ge=1, description="N prompts per iteration")
    group_size: int = Field(8, ge=1, description="G responses per prompt")
    lr: float = Field(1e-4, gt=0, description="policy learning rate (AdamW)")
    critic_lr: float = Field(1e-3, gt=0, description="PPO value model learning rate (objective.baseline=critic)")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay of the policy")
    betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = Field(
        (0.9, 0.999), description="AdamW (beta1, beta2), each in [0, 1) (policy and critic optimizers)"
    )
    inner_epochs: int = Field(1, ge=1, description="K passes over each rollout batch")
    mini_batches: int = Field(1, ge=1, description="optimizer steps per epoch (>1 makes later steps off-policy)")
    micro_batch_size: Annotated[int, Field(ge=1)] | None | Literal["auto"] = Field(
        "auto",
        description="rows per forward/backward; None = whole mini-batch; auto = None on a CPU, on CUDA the largest "
        "divisor of the mini-batch whose rows x (rollout.max_prompt_tokens or 256 + rollout.max_new_tokens) fit "
        "32768 tokens (micro-batches sized by tokens)",
    )
    old_logp: Literal["recompute", "rollout", "auto", "bypass"] = Field(
        "recompute",
        description="pi_old's log-probs for the ratio when mini_batches/inner_epochs > 1: 'recompute' "
        "them with a no-grad forward of the policy; 'rollout' reuses the sampler's (exact only for an hf rollout in "
        "the policy's dtype, top_p 1, no router noise, no TIS; saves one forward per step); 'auto' = rollout where "
        "that is exact, else recompute; 'bypass' takes the sampler's as pi_old on every update, exact or not, so "
        "that the PPO ratio pi_theta/pi_rollout corrects the sampler's mismatch as it clips (verl bypass_mode "
        "with loss_type ppo_clip; no objective.rollout_is, rollout_rs or seq_logprob_error_threshold beside it)",
    )
    grad_clip: float | None = Field(
        1.0,
        gt=0,
        description="clip each trained module's gradient to this global L2 norm before its step; None = no clipping",
    )
    max_refill_rounds: int = Field(
        4, ge=0, description="dynamic sampling: extra sampling rounds to refill dropped groups"
    )
    checkpoint_every: int = Field(5, ge=1, description="checkpoint (and flush metrics) every N steps")
    checkpoint_background: StrictBool = Field(
        False,
        description="write each checkpoint (and then flush its metrics) in a thread while the next steps run: the "
        "step waits only for a copy of the weights and optimizer state (memory for one more copy of them) and for "
        "the previous write. Still atomic and resumable; a write's error surfaces at the next checkpoint. The "
        "same run either way (docs/faults.md)",
    )
    samples_to_log: int = Field(8, ge=0, description="completions written to samples.jsonl per step")
    threads: int | None = Field(None, ge=1, description="torch CPU threads (None = torch default)")
    nan_policy: Literal["stop", "skip_step"] = Field(
        "stop",
        description="NaN or inf in a reward, loss or gradient: 'stop' the run naming the step and the tensor "
        "(checkpoints before it intact), or 'skip_step': skip that step's update and go on (docs/faults.md)",
    )
    grad_share_every: int = Field(
        0,
        ge=0,
        description="every N steps, measure the gradient-norm share of the extreme "
        "groups (p < 0.2 or p > 0.8) with one extra forward/backward (grad/share_extreme, "
        "harness/train/diagnostics/group_stats.py); 0 = off",
    )
    observers: StrictBool = Field(
        True,
        description="the step's measurements beside the loss's own metrics: the rollout/train mismatch and routing, "
        "per-group records (groups.jsonl), the EOS weight shares, the critic's explained variance and the "
        "train.grad_share_every probe (harness/train/rl/observers.py); false takes the same update, bit for bit, "
        "without them",
    )
    component_warmup_steps: int = Field(
        0,
        ge=0,
        description="the first N steps train only the trained components "
        "(PRIME's reward model, PPO's critic) on the initial policy's rollouts; the "
        "policy is not updated (verl's trainer.critic_warmup); its steps count in "
        "train.steps",
    )
    gradient_checkpointing: StrictBool = Field(
        False,
        description="activation checkpointing of the policy (transformers' "
        "gradient_checkpointing_enable, use_reentrant=False): each layer's activations "
        "are recomputed in the backward instead of kept; same gradients, less memory, "
        "one more forward per layer",
    )
    share_prefix: StrictBool | Literal["auto"] = Field(
        "auto",
        description="the trainer's forwards (update, pi_old, pi_ref) run a prompt once for its rows of a "
        "micro-batch (the G samples of a group, contiguous) and the responses on its KV cache, the gradient "
        "flowing back through it (harness/models/prefix_groups.py): (G - 1) x the prompt's tokens less work a "
        "group. The same log-probs and gradients up to rounding (~1e-5: docs/speed.md), so off by default. Not "
        "with an MoE, train.gradient_checkpointing or train.parallel=fsdp. auto = false on a CPU and on CUDA (on "
        "an H200 it doubled the update: its 4-D masks keep SDPA off the flash kernel)",
    )
    pad_to_multiple_of: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto",
        description="the trainer's forwards (update, pi_old, pi_ref, a critic) pack their rows to a width that is a "
        "multiple of this (harness/models/logprobs.py): a run meets a few widths instead of a new one most steps, "
        "so what a GPU does once per new shape (such as building cuDNN's attention graph for a sequence length) "
        "is paid in the first steps. The extra positions come after every row, so no real position attends to "
        "them (the same log-probs up to rounding); the output head skips them. 1 = the longest row's own width. "
        "Not with train.share_prefix. auto = 1 on a CPU, 64 on CUDA (1 there with train.share_prefix)",
    )
    chunked_head: StrictBool = Field(
        False,
        description="the trainer's forwards run the output head on the final hidden states by train.head_chunk_tokens "
        "positions, recomputed in the backward (harness/models/chunked_head.py): memory grows with the hidden states, "
        "not T x V; the same values to rounding, one more head matmul (docs/speed.md, 'The chunked output head')",
    )
    head_chunk_tokens: int = Field(
        512, ge=2, description="train.chunked_head: positions a chunk's logits hold (512 x 151,936 fp32: 311 MB)"
    )
    autocast: Literal["bf16", "auto"] | None = Field(
        "auto",
        description="mixed precision: the trainer's forwards (update, pi_old, pi_ref) under torch.autocast in bf16, "
        "weights and optimizer state in fp32 (model.dtype=float32); null = off. The rollout keeps rollout.dtype: "
        "mismatch/* shows the cost. CPUs without avx512_bf16/amx_bf16 run bf16 matmuls far slower than fp32 (a "
        "warning says so). auto = null on a CPU, bf16 on CUDA (null there when model.dtype is bfloat16)",
    )
    tf32: StrictBool | Literal["auto"] = Field(
        "auto",
        description="CUDA: fp32 matrix products on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32, "
        "set_float32_matmul_precision('high')); no effect on a CPU. auto = false on a CPU, true on CUDA",
    )
    ref_compute_dtype: StrictBool | Literal["auto"] = Field(
        "auto",
        description="the frozen reference pi_ref stored in the compute dtype (bf16 under train.autocast=bf16) "
        "instead of fp32 weights re-cast by autocast in every forward; not with model.lora (pi_ref is the "
        "base). auto = false on a CPU, true on CUDA under bf16 autocast",
    )

    nproc: int = Field(
        1,
        ge=1,
        description="processes of one run (data parallel, torch.distributed: gloo on CPU, nccl on "
        "CUDA); `harness train CONFIG --nproc N` sets it and launches torchrun. Not part of what the "
        "run computes: a run may resume with another count (docs/scale.md). Needs rollout.seeding=prompt",
    )
    parallel: Literal["ddp", "fsdp"] = Field(
        "ddp",
        description="how the processes of train.nproc > 1 hold the models: 'ddp' (each holds them whole; "
        "gradients summed) or 'fsdp' (torch's FSDP2 fully_shard: each holds 1/N of every parameter, gradient "
        "and AdamW moment; the whole weights are gathered for generation and the no-grad forwards). The "
        "same update either way (docs/scale.md); checkpoints hold whole tensors under both. One process: no "
        "difference",
    )

    @field_validator("autocast", mode="before")
    @classmethod
    def _autocast_off(cls, value: Any) -> Any:
        if value is False:  # YAML reads `off`, `no`, `false` as False: off
            return None
        if value is True:
            raise ValueError("name the precision (bf16), or null / false for off")
        return value


# `train` knobs that only the RL loop reads (the DPO trainer uses lr, betas, weight_decay,
# grad_clip, checkpoint_every and threads)
RL_TRAIN_KNOBS = (
    "steps",
    "prompts_per_step",
    "group_size",
    "critic_lr",
    "inner_epochs",
    "mini_batches",
    "micro_batch_size",
    "old_logp",
    "max_refill_rounds",
    "samples_to_log",
    "grad_share_every",
    "observers",
    "component_warmup_steps",
    "share_prefix",
    "pad_to_multiple_of",
    "chunked_head",
    "head_chunk_tokens",
)


def check_batch_shape(run: Any) -> None:
    """train.mini_batches divides the batch (prompts_per_step * group_size), micro_batch_size the mini-batch."""
    t = run.train
    rows = t.prompts_per_step * t.group_size
    if rows % t.mini_batches:
        raise ValueError(f"train.mini_batches={t.mini_batches} must divide prompts_per_step*group_size={rows}")
    mb = rows // t.mini_batches
    if t.micro_batch_size is not None and mb % t.micro_batch_size:
        raise ValueError(f"train.micro_batch_size={t.micro_batch_size} must divide the mini-batch size {mb}")


def check_old_logp(run: Any) -> None:
    """train.old_logp=rollout: the sampler's log-probs must be the policy's (rollout.py rollout_logp_inexact);
    train.old_logp=bypass: no correction that weighs pi_old against the sampler, which bypass makes one."""
    if run.train.old_logp == "rollout" and (why := rollout_logp_inexact(run)):
        raise ValueError(
            f"train.old_logp='rollout' needs the sampler's log-probs to be the policy's, but {why}; "
            "use train.old_logp=recompute (or auto)"
        )
    if run.train.old_logp == "bypass":
        for key, value, off, _ in old_policy_readers(run.objective)[:1]:
            raise ValueError(
                f"objective.{key}={value!r} with train.old_logp='bypass': bypass makes pi_old the sampler's "
                f"log-probs, so {key} would weigh pi_rollout against itself (the PPO ratio pi_theta/pi_rollout "
                f"already corrects the sampler, as in verl's bypass_mode); set objective.{key}={off!r} or "
                "train.old_logp=recompute"
            )


def warmup_modes() -> str:
    """The modes that train a component, from their declarations (`Hooks.component`; a plugin's included), as a
    config selects them: 'objective.baseline=critic (trains values) or prime (trains prm_logp), or agg=...'."""
    parts = []
    for kind in sorted(KINDS, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER)):
        registry = KINDS[kind]
        trains = [(n, m) for n, m in registry.modes.items() if m.hooks is not None and m.hooks.component]
        if kind == "extension":  # no knob selects an extension: its switch does
            parts += [f"{m.when.removeprefix('objective.')} (trains {m.hooks.component})" for _, m in trains]
        elif trains:
            parts.append(f"{kind}=" + " or ".join(f"{n} (trains {m.hooks.component})" for n, m in trains))
    return "objective." + ", or ".join(parts)


def check_warmup(run: Any) -> None:
    """train.component_warmup_steps: a trained component to warm up, and policy steps left after it."""
    n, steps = run.train.component_warmup_steps, run.train.steps
    if not n:
        return
    if not inputs_needed(run.objective).components:
        raise ValueError(
            f"train.component_warmup_steps={n}: this objective trains no component to warm up; "
            f"allowed: 0, or a positive number with {warmup_modes()}"
        )
    if n >= steps:
        raise ValueError(
            f"train.component_warmup_steps={n} leaves no policy update in train.steps={steps}; "
            f"allowed: 0 to {steps - 1} (raise train.steps by the warm-up to keep the policy's steps)"
        )
