"""Section `rollout` and the rules that constrain it: whether the sampler's log-probs are the policy's
(train.old_logp reads the answer), rollout.staleness under a trainer other than the RL loop, and
rollout.overlong_prompts without the bound it acts on."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, model_validator

from harness.config.base import _Section, field_default
from harness.objective.batch_correction import old_policy_readers


class RolloutSection(_Section):
    backend: Literal["hf", "vllm"] = Field("hf", description="generation engine: hf (transformers generate) or vllm")
    temperature: float = Field(1.0, gt=0, description="sampling temperature of the training rollouts")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling of the training rollouts (1 = all tokens)")
    max_new_tokens: int = Field(64, ge=1, description="response length cap; a response hitting it is truncated")
    gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="vllm only (on CPU it is a share of RAM)")
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32", description="precision of the rollout engine (bf16 vs fp32 training = mismatch)"
    )
    router_noise: float = Field(
        0.0, ge=0, description="MoE: std of Gaussian noise added to router logits at rollout only"
    )
    seeding: Literal["batch", "prompt"] = Field(
        "batch",
        description="hf: how sampling is seeded. batch: one seed per generate call (a prompt's samples depend on "
        "the other prompts of the batch); prompt: each row from its own seed (run seed, step, the prompt's index "
        "in the batch, its sample number), so a prompt samples the same on any number of processes "
        "(needed by train.nproc > 1; docs/scale.md). vllm always seeds per prompt",
    )
    share_prefix: StrictBool | Literal["auto"] = Field(
        "auto",
        description="hf: prefill each prompt once and copy its KV cache to its group_size rows (G x fewer "
        "prefill rows; the prefill rounds as a batch of other width, so a sampled token may differ at a "
        "near-tie: off by default, so runs and reports keep their numbers). vllm shares prefixes always. "
        "Not with an MoE (its routing record reads generate's own prefill). auto = false on a CPU and on CUDA "
        "(a CPU lever: its 4-D masks keep SDPA off the flash kernel on a GPU)",
    )
    compile: StrictBool | Literal["auto"] = Field(
        "auto",
        description="hf: generate with a static KV cache and the decoding forward under torch.compile (CUDA "
        "graphs); not with an MoE, rollout.share_prefix or router noise. auto = true on CUDA, false on a CPU "
        "(measured not to pay there: docs/speed.md)",
    )
    vllm_sleep: StrictBool | Literal["auto"] = Field(
        "auto",
        description="vllm on CUDA: the engine sleeps (its KV cache freed, weights released) between rollouts, "
        "so the update has the GPU's memory; woken before the next generate. auto = true on CUDA, false on a CPU "
        "(vLLM's CPU engine has no sleep mode)",
    )
    sync_bucket_mb: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        "auto",
        description="vllm: the weight sync loads the weights in buckets of this many MB (model.load_weights per "
        "bucket); 0 = one layerwise in-place reload of every weight (the CPU's: its packed GEMM layout needs it). "
        "auto = 0 on a CPU, 512 on CUDA",
    )
    decode_attention: Literal["model", "matmul"] = Field(
        "model",
        description="hf on a CPU: model = the model's attention in every forward of generate; matmul = the "
        "one-token decoding steps of an sdpa model compute attention as two products and a softmax in fp32 "
        "(harness/models/decode_attention.py: 3-5x faster a call than torch's fused CPU kernel for one query row, "
        "a third off a bf16 generate on SmolLM2; the prefill and the trainer keep sdpa). Equal up to rounding, so a sampled token can flip at a near-tie: off "
        "by default, so runs and reports keep their numbers. No effect on a GPU; not with vllm",
    )
    min_new_tokens: int = Field(
        0,
        ge=0,
        description="hf and vllm: EOS cannot end a response before this many tokens (transformers' min_new_tokens, "
        "vLLM's min_tokens); 0 = off. `harness bench --fixed-length` sets it to max_new_tokens, so that every "
        "response is exactly max_new_tokens long and two trainers generate the same tokens. Stop strings still end "
        "a response",
    )
    stop: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        description="stop strings: a response ends after the first one it writes (kept in its "
        "text; the response counts as finished, not truncated), as at EOS; hf and vllm",
    )
    max_turns: int = Field(
        4,
        ge=1,
        description="task.tools / task.environment: the model's turns in one trajectory at most (each up to "
        "max_new_tokens); a row also ends when its turn calls no tool or its environment says done (TRL: "
        "max_tool_calling_iterations; verl: multi_turn.max_assistant_turns)",
    )
    max_tool_tokens: int = Field(
        256,
        ge=1,
        description="task.tools / task.environment: a tool's answer or an observation longer than this many tokens "
        "is cut there and says so ('[truncated: N tokens, M kept]'; verl: multi_turn.max_tool_response_length)",
    )
    max_prompt_tokens: int | None = Field(
        None,
        ge=1,
        description="dataset tasks: prompts longer than this many tokens "
        "(chat template included) are dropped or refused (overlong_prompts); "
        "verl: data.max_prompt_length",
    )
    overlong_prompts: Literal["drop", "error"] = Field(
        "drop",
        description="a prompt over max_prompt_tokens, or over the model's positions less max_new_tokens: drop it "
        "(the count per split is printed and logged) or stop with an error naming the longest "
        "(verl: data.filter_overlong_prompts)",
    )
    staleness: int = Field(
        0,
        ge=0,
        description="the batch of step t is generated by the weights of step t - k (PipelineRL 2509.19128, "
        "ScaleRL 2510.13786: the engine syncs k updates late; the first k steps sample with the initial "
        "weights); pi_old is that sampler's policy, so the importance ratio carries the staleness (the sampler's "
        "log-probs where train.old_logp may reuse them, else a forward with the stale weights). Logged as "
        "staleness/steps; the mismatch metrics compare the sampler with the current policy. 0 = on-policy "
        "(docs/scale.md)",
    )

    @model_validator(mode="after")
    def _decode_attention_is_hf(self) -> RolloutSection:
        if self.decode_attention != "model" and self.backend != "hf":
            raise ValueError(
                f"rollout.decode_attention={self.decode_attention!r} with rollout.backend={self.backend!r}: the "
                "decoding attention is the hf engine's; allowed with vllm: 'model' (vLLM brings its own kernels)"
            )
        return self

    @model_validator(mode="after")
    def _min_fits_max(self) -> RolloutSection:
        if self.min_new_tokens > self.max_new_tokens:
            raise ValueError(
                f"rollout.min_new_tokens={self.min_new_tokens} exceeds rollout.max_new_tokens={self.max_new_tokens}; "
                "allowed: 0 to max_new_tokens"
            )
        return self


def rollout_logp_inexact(run: Any) -> str | None:
    """Why the sampler's log-probs may differ from the policy's own (None: they are the same
    weights, dtype and distribution, so train.old_logp=rollout/auto may reuse them as pi_old)."""
    r = run.rollout
    if r.backend != "hf":
        return f"rollout.backend={r.backend!r} (another engine's kernels: its log-probs are not the policy's)"
    if r.decode_attention != "model":
        return f"rollout.decode_attention={r.decode_attention!r} (the sampler's attention rounds otherwise than the trainer's)"
    if r.dtype != run.model.dtype:
        return f"rollout.dtype={r.dtype!r} differs from model.dtype={run.model.dtype!r}"
    if r.top_p < 1.0:
        return f"rollout.top_p={r.top_p} (the sampler's log-probs are of the truncated distribution)"
    if r.router_noise:
        return f"rollout.router_noise={r.router_noise} (the sampler routed differently)"
    for key, value, _, does in old_policy_readers(run.objective):
        return f"objective.{key}={value!r} ({does} pi_old / pi_rollout, which this makes 1)"
    if run.train.autocast:
        return f"train.autocast={run.train.autocast} (the trainer computes in bf16, the sampler in rollout.dtype)"
    if run.model.lora is not None and run.model.lora.dropout:
        return f"model.lora.dropout={run.model.lora.dropout} (the trainer's forwards drop adapter inputs, the sampler's do not)"
    return None


def check_staleness(run: Any) -> None:
    """rollout.staleness: the RL loop's (the DPO trainer samples its pairs once a round). What a loss without
    an importance ratio makes of stale samples is its mode's rule (objective/ratios.py, ratio none)."""
    k = run.rollout.staleness
    if k and run.trainer != "rl":
        raise ValueError(
            f"rollout.staleness={k} with trainer={run.trainer!r}: only the RL loop samples with stale weights; "
            "allowed: 0 here"
        )
    if k >= run.train.steps:  # else every batch comes from theta_0, and every step's weights are kept
        raise ValueError(
            f"rollout.staleness={k} with train.steps={run.train.steps}: every batch would be sampled by the "
            f"initial weights and a copy of the trained parameters kept for each step; allowed: "
            f"0 <= rollout.staleness < train.steps"
        )


def overlong_problem(run: Any) -> str | None:
    """rollout.overlong_prompts set while no bound (rollout.max_prompt_tokens, a dataset's positions) applies."""
    r = run.rollout
    if (
        r.max_prompt_tokens is None
        and run.task.name != "dataset"
        and r.overlong_prompts != field_default(RolloutSection, "overlong_prompts")
    ):
        return (
            f"rollout.overlong_prompts={r.overlong_prompts!r} says what to do with prompts over "
            "rollout.max_prompt_tokens, which is not set"
        )
    return None
